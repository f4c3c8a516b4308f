"""The call-form cache (``unigraph/call_forms.py``) and the sparse-input projection's CSR copy
(``unigraph/nn/projection.py``) against the plain path: every change of what they are keyed on
or re-check each call, made between two calls, gives the result of a fresh call (the cache
cleared), in float64, forward and backward. The changes are those docs/call_forms.md ("What the
fast paths assume") says are seen: ``SparseTensor.set_value_``/``fill_value_`` (a new value tensor,
again at version 0), and writes that bypass torch's version counter (``.data``, ``.numpy()``,
DLPack, ``untyped_storage()``) to an ``edge_index``, a sparse adjacency's values, a
``SparseTensor`` and a dense input behind the projection's CSR copy."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import unigraph
from unigraph import call_forms
from unigraph.nn import projection

torch_sparse = pytest.importorskip("torch_sparse", reason="SparseTensor inputs need torch_sparse")

N, IN, OUT, RELATIONS = 14, 5, 4, 3


def _edges(seed: int, num_edges: int = 40) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    pairs = torch.unique(torch.randint(0, N - 1, (2, num_edges), generator=gen), dim=1)  # unique: adjacencies
    return pairs[:, torch.randperm(pairs.shape[1], generator=gen)]


def _weights(num: int, seed: int) -> torch.Tensor:
    return torch.rand(num, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) + 0.5


def _layer(name: str):
    torch.manual_seed(0)
    if name == "RGCNConv":
        return unigraph.RGCNConv(IN, OUT, RELATIONS).double()
    return getattr(unigraph, name)(IN, OUT).double()


def _run(layer, *args):
    """Output and gradients (input, parameters) of one call, from a fresh copy of ``x``."""
    x = args[0].detach().clone().requires_grad_()
    layer.zero_grad()
    out = layer(x, *args[1:])
    out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out))
    return [out.detach(), x.grad] + [p.grad.clone() for p in layer.parameters()]


def _fresh(layer, *args):
    call_forms.clear_cache()
    return _run(layer, *args)


def _assert_same(got, want):
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def _sparse_tensor(edge_index, value):
    return torch_sparse.SparseTensor(row=edge_index[1], col=edge_index[0], value=value, sparse_sizes=(N, N))


# ---------------------------------------------------------------------- item: SparseTensor values replaced
@pytest.mark.parametrize("name", ["GCNConv", "GraphConv"])
@pytest.mark.parametrize("change", ["set_value_", "fill_value_"])
def test_sparse_tensor_values_replaced_are_seen(name, change):
    layer, x = _layer(name), torch.randn(N, IN, dtype=torch.float64)
    edge_index = _edges(1)
    adj = _sparse_tensor(edge_index, _weights(edge_index.shape[1], 2))
    _run(layer, x, adj)
    if change == "set_value_":
        adj.set_value_(_weights(edge_index.shape[1], 3), layout="coo")  # a new tensor, at version 0
    else:
        adj.fill_value_(2.5)
    got = _run(layer, x, adj)
    row, col, value = adj.coo()
    # (a new SparseTensor of the new values: GCNConv treats a SparseTensor's self-loops as PyG does
    # in that form, unlike an edge_index's)
    fresh = torch_sparse.SparseTensor(row=row, col=col, value=value.clone(), sparse_sizes=(N, N))
    _assert_same(got, _fresh(layer, x, fresh))


def test_sparse_tensor_relation_ids_replaced_are_seen():
    layer, x = _layer("RGCNConv"), torch.randn(N, IN, dtype=torch.float64)
    edge_index = _edges(4)
    gen = torch.Generator().manual_seed(5)
    adj = _sparse_tensor(edge_index, torch.randint(0, RELATIONS, (edge_index.shape[1],), generator=gen))
    _run(layer, x, adj)
    adj.set_value_(torch.randint(0, RELATIONS, (edge_index.shape[1],), generator=gen), layout="coo")
    got = _run(layer, x, adj)
    row, col, value = adj.coo()
    _assert_same(got, _fresh(layer, x, torch.stack([col, row]), value))


# ---------------------------------------------------------------------- writes that bypass the version counter
def _write_through(how: str, target: torch.Tensor, source: torch.Tensor) -> None:
    """``target[...] = source`` without bumping ``target._version``."""
    assert target.shape == source.shape and target.is_contiguous()
    before = target._version
    if how == "data":
        target.data.copy_(source)
    elif how == "numpy":
        target.numpy()[...] = source.numpy()
    elif how == "dlpack":
        np.from_dlpack(target)[...] = source.numpy()
    else:
        target.untyped_storage().copy_(source.contiguous().untyped_storage())
    assert target._version == before and torch.equal(target, source)


HOW = ["data", "numpy", "dlpack", "untyped_storage"]


@pytest.mark.parametrize("how", HOW)
def test_edge_index_rewritten_behind_the_version_counter_is_seen(how):
    """A reused edge buffer (a loader copying the next batch in through numpy or DLPack)."""
    layer, x = _layer("GCNConv"), torch.randn(N, IN, dtype=torch.float64)
    first, second = _edges(6), _edges(7)
    size = min(first.shape[1], second.shape[1])
    edge_index = first[:, :size].clone()
    _run(layer, x, edge_index)
    _write_through(how, edge_index, second[:, :size])
    _assert_same(_run(layer, x, edge_index), _fresh(layer, x, second[:, :size].clone()))


@pytest.mark.parametrize("how", HOW)
def test_one_edge_rewritten_behind_the_version_counter_is_seen_in_small_graphs(how):
    """Every edge is sampled while a graph has at most ``call_forms.PROBES`` edges."""
    layer, x = _layer("GCNConv"), torch.randn(N, IN, dtype=torch.float64)
    edge_index = _edges(8)
    assert edge_index.shape[1] <= getattr(call_forms, "PROBES", 40)
    _run(layer, x, edge_index)
    changed = edge_index.clone()
    changed[1, edge_index.shape[1] // 2] = N - 1  # to the isolated node: a new edge
    _write_through(how, edge_index, changed)
    _assert_same(_run(layer, x, edge_index), _fresh(layer, x, changed.clone()))


@pytest.mark.parametrize("form", ["int32", "transposed view", "more edges than PROBES"])
def test_edge_index_rewritten_before_its_first_hit_is_seen_in_any_dtype_or_layout(form):
    """A new ``edge_index``'s probes are read at its first hit, from the graph's own copy of its
    rows (``call_forms._entries_at_build``): a rewrite between the build and that hit is seen
    whatever the index dtype or strides (``torch.take`` reads row-major), and a rewritten buffer
    of a graph bigger than the probes."""
    layer, x = _layer("GCNConv"), torch.randn(N, IN, dtype=torch.float64)
    edge_index = _edges(15)
    if form == "int32":
        edge_index = edge_index.int()
    elif form == "transposed view":
        edge_index = edge_index.t().contiguous().t()
    elif form == "more edges than PROBES":
        edge_index = torch.randint(0, N - 1, (2, 3 * call_forms.PROBES), generator=torch.Generator().manual_seed(16))
    call_forms.clear_cache()
    _run(layer, x, edge_index)
    assert [entry[3] for entry in call_forms._CACHE.values()] == [None]   # no probe read at the build
    changed = edge_index.clone()
    if form == "more edges than PROBES":
        changed = (changed + 1) % (N - 1)                   # the next batch copied into the buffer
    else:
        changed[1, edge_index.shape[1] // 2] = N - 1        # one edge to the isolated node
    before = edge_index._version
    edge_index.data.copy_(changed)
    assert edge_index._version == before and torch.equal(edge_index, changed)
    got, again = _run(layer, x, edge_index), _run(layer, x, edge_index)   # rebuilt, then a hit
    want = _fresh(layer, x, changed.clone())
    _assert_same(got, want)
    _assert_same(again, want)


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
@pytest.mark.parametrize("how", HOW)
def test_sparse_adjacency_values_written_behind_the_version_counter_are_seen(layout, how):
    layer, x = _layer("GCNConv"), torch.randn(N, IN, dtype=torch.float64)
    edge_index = _edges(9)
    weight = _weights(edge_index.shape[1], 10)
    coo = torch.sparse_coo_tensor(torch.stack([edge_index[1], edge_index[0]]), weight, (N, N)).coalesce()
    adj = {"coo": coo, "csr": coo.to_sparse_csr(), "csc": coo.to_sparse_csc()}[layout]
    _run(layer, x, adj)
    # the expected call: a new adjacency of the same layout (GCNConv's self-loops follow PyG's rule
    # for the form) with the new values, built before the write (a CSR copy may share coo's values)
    fresh = torch.sparse_coo_tensor(coo.indices().clone(), coo.values() * 3.0 - 0.25, (N, N)).coalesce()
    fresh = {"coo": fresh, "csr": fresh.to_sparse_csr(), "csc": fresh.to_sparse_csc()}[layout]
    values = adj._values() if layout == "coo" else adj.values()
    _write_through(how, values, values * 3.0 - 0.25)
    _assert_same(_run(layer, x, adj), _fresh(layer, x, fresh))


@pytest.mark.parametrize("part", ["value", "col"])
@pytest.mark.parametrize("how", HOW)
def test_sparse_tensor_written_behind_the_version_counter_is_seen(part, how):
    layer, x = _layer("GCNConv"), torch.randn(N, IN, dtype=torch.float64)
    edge_index = _edges(11)
    adj = _sparse_tensor(edge_index, _weights(edge_index.shape[1], 12))
    _run(layer, x, adj)
    row, col, value = adj.coo()
    if part == "value":
        _write_through(how, adj.storage.value(), value * 2.0 + 0.5)
    else:  # each edge to another source (same row pointer, so still a valid SparseTensor)
        _write_through(how, adj.storage.col(), (col + 1) % N)
    row, col, value = adj.coo()
    fresh = torch_sparse.SparseTensor(row=row.clone(), col=col.clone(), value=value.clone(), sparse_sizes=(N, N))
    _assert_same(_run(layer, x, adj), _fresh(layer, x, fresh))


# ---------------------------------------------------------------------- the sparse-input projection's CSR copy
def _bag_of_words(seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(300, 200, generator=gen, dtype=torch.float64) < 0.02).to(torch.float64)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("change", ["one value", "one new non-zero", "one zeroed", "all rows"])
def test_dense_input_behind_the_sparse_copy_written_behind_the_version_counter_is_seen(how, change):
    x = _bag_of_words(13)
    weight = torch.randn(8, 200, dtype=torch.float64, requires_grad=True)
    assert not projection.is_sparse(projection.sparse_if_mostly_zero(x))  # first use: dense
    assert projection.is_sparse(projection.sparse_if_mostly_zero(x))  # seen again: the sparse path is taken
    projection.linear(x, weight)
    changed = x.clone()
    nonzero = changed.nonzero()
    if change == "one value":
        changed[tuple(nonzero[len(nonzero) // 2])] = 7.0
    elif change == "one new non-zero":
        changed[299, (changed[299] == 0).nonzero()[0, 0]] = 0.5
    elif change == "one zeroed":
        changed[tuple(nonzero[-1])] = 0.0
    else:
        changed = _bag_of_words(14)
    _write_through(how, x, changed)
    got = projection.linear(x, weight)
    (got_grad,) = torch.autograd.grad(got.sum(), weight)
    with projection.sparse_input(False):  # the plain dense product
        want = projection.linear(changed, weight)
    (want_grad,) = torch.autograd.grad(want.sum(), weight)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("part", ["values", "rows", "columns"])
def test_coo_input_behind_its_csr_copy_written_behind_the_version_counter_is_seen(how, part):
    dense = _bag_of_words(15)
    x = dense.to_sparse_coo().coalesce()
    weight = torch.randn(8, 200, dtype=torch.float64, requires_grad=True)
    projection.linear(x, weight)
    if part == "values":
        _write_through(how, x._values(), x._values() * 2.0 - 1.0)
    else:  # every entry one row down or one column right (still coalesced: the order is kept)
        index = x._indices().clone()
        axis, last = (0, 299) if part == "rows" else (1, 199)
        index[axis] = (index[axis] + 1).clamp(max=last)
        assert torch.unique(index[0] * 200 + index[1]).numel() == index.shape[1]
        _write_through(how, x._indices(), index)
    got = projection.linear(x, weight)
    (got_grad,) = torch.autograd.grad(got.sum(), weight)
    want = x.to_dense() @ weight.t()  # the plain dense product of what x holds now
    (want_grad,) = torch.autograd.grad(want.sum(), weight)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("how", ["data", "numpy", "in-place op"])
def test_csr_input_whose_columns_change_gets_the_new_transpose_in_backward(how):
    """The backward's cached transpose (``dW = (X^T dY)^T``) of a CSR input follows its columns."""
    x = _bag_of_words(16).to_sparse_csr()
    weight = torch.randn(8, 200, dtype=torch.float64, requires_grad=True)
    projection.linear(x, weight).sum().backward()
    col = x.col_indices()
    moved = (col + 1).clamp(max=199)
    if how == "in-place op":
        col.copy_(moved)
    else:
        _write_through(how, col, moved)
    weight.grad = None
    projection.linear(x, weight).backward(torch.ones(300, 8, dtype=torch.float64))
    want = x.to_dense().sum(0).expand(8, 200)
    torch.testing.assert_close(weight.grad, want, rtol=1e-12, atol=1e-12)
