"""Every layer in every calling convention (unigraph/call_forms.py): PyG's ``conv(x, edge_index)``
with a [2, E] tensor, a torch-sparse SparseTensor or a torch sparse adjacency (COO/CSR), and
``conv(g, x)`` with a unigraph Graph, a PyG Data or a DGL graph. PyG's layers, given the same weights
and the edge_index form, are the oracle for outputs and gradients (float64); the conversion cache
follows in-place changes, holds nothing alive and stays bounded; wrong arguments are refused by name.
"""
from __future__ import annotations

import gc
import re

import pytest
import torch

import unigraph
from unigraph import call_forms

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse", reason="SparseTensor inputs need torch_sparse")
from torch_geometric.data import Data  # noqa: E402

N, IN, OUT = 14, 5, 4
U = unigraph


def graph_edges(seed: int = 0, num_nodes: int = N, num_edges: int = 45):
    """Unique edges (a sparse adjacency cannot hold multi-edges), a few self-loops, isolated node N-1."""
    gen = torch.Generator().manual_seed(seed)
    pairs = torch.randint(0, num_nodes - 1, (2, num_edges), generator=gen)
    pairs = torch.unique(pairs, dim=1)
    return pairs[:, torch.randperm(pairs.shape[1], generator=gen)]  # not sorted: order must not matter


def layer_pair(name: str):
    """(ours, PyG's) with equal weights."""
    torch.manual_seed(1)
    nets = {"GINConv": lambda: torch.nn.Sequential(torch.nn.Linear(IN, 6), torch.nn.ReLU(), torch.nn.Linear(6, OUT)),
            "EdgeConv": lambda: torch.nn.Sequential(torch.nn.Linear(2 * IN, 6), torch.nn.ReLU(), torch.nn.Linear(6, OUT))}
    kwargs = {"GATConv": {"heads": 2}, "GATv2Conv": {"heads": 2}}.get(name, {})
    if name in nets:
        ours, theirs = getattr(U, name)(nets[name]()), getattr(pyg_nn, name)(nets[name]())
    else:
        theirs = getattr(pyg_nn, name)(IN, OUT, **kwargs)
        ours = getattr(U, name)(IN, OUT, **kwargs)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return ours.double().eval(), theirs.double().eval()


def adjacency(form: str, edge_index: torch.Tensor, weight: torch.Tensor | None):
    values = weight if weight is not None else torch.ones(edge_index.shape[1], dtype=torch.float64)
    if form == "edge_index":
        return edge_index
    if form == "sparse_tensor":
        return torch_sparse.SparseTensor(row=edge_index[1], col=edge_index[0], value=weight, sparse_sizes=(N, N))
    coo = torch.sparse_coo_tensor(torch.stack([edge_index[1], edge_index[0]]), values, (N, N)).coalesce()
    return coo if form == "coo" else coo.to_sparse_csr()


LAYERS = ["GCNConv", "GraphConv", "SAGEConv", "GATConv", "GATv2Conv", "GINConv", "EdgeConv"]
WEIGHTED = {"GCNConv", "GraphConv"}


@pytest.mark.parametrize("form", ["edge_index", "sparse_tensor", "coo", "csr"])
@pytest.mark.parametrize("name", LAYERS)
def test_pyg_forms_match_pyg(name, form):
    ours, theirs = layer_pair(name)
    edge_index = graph_edges()
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) + 0.5 if name in WEIGHTED else None
    x = torch.randn(N, IN, dtype=torch.float64)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    adj = adjacency(form, edge_index, weight)
    # weights travel as the adjacency's values in the sparse forms, as edge_weight with edge_index
    extra = (weight,) if weight is not None and form == "edge_index" else ()
    out = ours(x_ours, adj, *extra)
    # PyG in the same form (GCNConv's added self-loops follow a per-form rule in PyG, so each form
    # is compared with PyG's own handling of it)
    expected = theirs(x_theirs, adj, *extra)
    torch.testing.assert_close(out, expected, rtol=1e-7, atol=1e-9)
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, rtol=1e-7, atol=1e-9)
    for (key, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-7, atol=1e-9, msg=f"{name}.{key}")


@pytest.mark.parametrize("name", LAYERS + ["MRConv"])
def test_graph_objects_match_edge_index(name, dgl):
    ours = layer_pair(name)[0] if name != "MRConv" else U.MRConv(IN, OUT).double()
    edge_index = graph_edges(2)
    x = torch.randn(N, IN, dtype=torch.float64)
    expected = ours(x, edge_index)
    dgl_graph = dgl.graph((edge_index[0], edge_index[1]), num_nodes=N)
    for g in (U.Graph(edge_index, num_nodes=N), Data(edge_index=edge_index, num_nodes=N), dgl_graph):
        torch.testing.assert_close(ours(g, x), expected, rtol=1e-10, atol=1e-12, msg=type(g).__name__)


def test_bipartite_pair_and_size_match_pyg():
    ours, theirs = layer_pair("SAGEConv")
    edge_index = torch.stack([torch.randint(0, 9, (30,)), torch.randint(0, 4, (30,))])
    x_src, x_dst = torch.randn(9, IN, dtype=torch.float64), torch.randn(4, IN, dtype=torch.float64)
    torch.testing.assert_close(ours((x_src, x_dst), edge_index), theirs((x_src, x_dst), edge_index))
    torch.testing.assert_close(ours((x_src, None), edge_index, size=(9, 4)), theirs((x_src, None), edge_index, size=(9, 4)))
    adj = torch_sparse.SparseTensor(row=edge_index[1], col=edge_index[0], sparse_sizes=(4, 9))
    torch.testing.assert_close(ours((x_src, x_dst), adj), theirs((x_src, x_dst), edge_index))


# ---------------------------------------------------------------------- the cache
@pytest.mark.parametrize("case", ["int64", "int32", "transposed view", "no edges", "1-d features", "out of range",
                                  "bool", "uint8"])
def test_plain_x_and_edge_index_resolve_as_the_general_path_does(case):
    """``resolve``'s shortcut for plain ``(x, edge_index)`` tensors (no ``size``) gives the Call the
    general path gives (the same cached graph: ``size=(n, n)`` takes the general path to the same
    key), and the same error for indices it cannot take."""
    x, edge_index = torch.randn(6, 3), torch.tensor([[0, 1, 2, 5], [1, 2, 3, 0]])
    if case == "int32":
        edge_index = edge_index.int()
    elif case == "transposed view":
        edge_index = edge_index.t().contiguous().t()
    elif case == "no edges":
        edge_index = edge_index[:, :0]
    elif case == "1-d features":
        x = torch.randn(6)
    elif case == "out of range":
        edge_index = edge_index.clone()
        edge_index[0, 2] = 6
    elif case in ("bool", "uint8"):
        edge_index = (edge_index > 2).to(getattr(torch, case))
    call_forms.clear_cache()
    general = lambda: call_forms.resolve("SAGEConv", x, edge_index, size=(6, 6))  # noqa: E731
    if case in ("out of range", "bool"):
        with pytest.raises((ValueError, TypeError)) as expected:
            general()
        with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
            call_forms.resolve("SAGEConv", x, edge_index)
        return
    want = general()
    got = call_forms.resolve("SAGEConv", x, edge_index)
    assert got == want and got.graph is want.graph and got.form == "edge_index" and got.adjacency is edge_index


def test_edge_index_converted_once_and_again_after_in_place_change():
    conv = U.GCNConv(IN, OUT).double()
    edge_index = graph_edges(3)
    x = torch.randn(N, IN, dtype=torch.float64)
    first = call_forms.resolve("t", x, edge_index).graph
    assert call_forms.resolve("t", x, edge_index).graph is first  # same Graph: its caches are reused too
    conv(x, edge_index)
    edge_index[1, :5] = torch.tensor([N - 1, N - 1, 0, 1, 2])  # in place: the node N-1 now has in-edges
    out = conv(x, edge_index)
    assert call_forms.resolve("t", x, edge_index).graph is not first
    torch.testing.assert_close(out, conv(U.Graph(edge_index.clone(), num_nodes=N), x))
    assert out[N - 1].abs().sum() > 0


def test_sparse_adjacency_values_changed_in_place_are_seen():
    conv = U.GCNConv(IN, OUT).double()
    edge_index = graph_edges(4)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64) + 0.5
    x = torch.randn(N, IN, dtype=torch.float64)
    adj = adjacency("coo", edge_index, weight)
    sparse = adjacency("sparse_tensor", edge_index, weight)
    conv(x, adj), conv(x, sparse)
    adj.values().mul_(3.0)           # same tensor object, new values
    sparse.storage.value().mul_(3.0)
    fresh = (adjacency("coo", edge_index, 3.0 * weight), adjacency("sparse_tensor", edge_index, 3.0 * weight))
    for a, b in zip((adj, sparse), fresh):   # each against a new adjacency of its form (self-loops: PyG's rule per form)
        torch.testing.assert_close(conv(x, a), conv(x, b))


def test_cache_holds_nothing_alive_and_is_bounded():
    call_forms.clear_cache()
    x = torch.randn(N, IN)
    edge_index = graph_edges(5)
    call_forms.resolve("t", x, edge_index)
    assert len(call_forms._CACHE) == 1
    del edge_index
    gc.collect()
    assert len(call_forms._CACHE) == 0  # the entry went with the tensor
    kept = [graph_edges(seed) for seed in range(call_forms.CACHE_SIZE + 10)]
    for edge_index in kept:
        call_forms.resolve("t", x, edge_index)
    assert len(call_forms._CACHE) == call_forms.CACHE_SIZE


@pytest.mark.parametrize("choice", ["auto", "auto, no small-graph rule", "numba", "scatter"])
def test_a_new_edge_index_gets_its_formats_in_one_pass_unless_the_choice_may_avoid_them(choice, request):
    """Under ``auto`` (whose first call counts the degrees with the kernel that builds both CSRs)
    and CSR backends, the graph of a new edge_index is built with its formats in one pass; under
    ``scatter`` a layer's calls may need no CSR (the native lane), and none is built; under
    ``auto`` a graph small enough for the small-graph rule gets its in-degree counts instead."""
    pytest.importorskip("numba")
    if choice.startswith("auto, no"):
        request.getfixturevalue("no_small_graph_rule")
    call_forms.clear_cache()
    x = torch.randn(N, IN)
    with unigraph.use_backend(choice.split(",")[0]):
        graph = call_forms.resolve("t", x, graph_edges(7)).graph
        assert graph.has_memo("in_csr") is (choice not in ("scatter", "auto"))
        assert graph.has_memo("in_degree_counts") is (choice == "auto")
        if choice == "auto":
            assert torch.equal(graph.in_degree_counts(), torch.bincount(graph.dst, minlength=N))
        out = U.GINConv(torch.nn.Identity())(x, graph_edges(7))
    plain = unigraph.Graph(graph_edges(7), num_nodes=N)
    assert torch.equal(out, x + unigraph.ops.gspmm(plain, "copy_u", "sum", x))


def test_dgl_graph_changed_in_place_is_reconverted(dgl):
    conv = U.SAGEConv(IN, OUT).double()
    edge_index = graph_edges(6)
    x = torch.randn(N, IN, dtype=torch.float64)
    g = dgl.graph((edge_index[0], edge_index[1]), num_nodes=N)
    conv(g, x)
    g.add_edges(torch.tensor([0]), torch.tensor([N - 1]))
    expected = conv(x, torch.cat([edge_index, torch.tensor([[0], [N - 1]])], dim=1))
    torch.testing.assert_close(conv(g, x), expected)


# ---------------------------------------------------------------------- refusals
@pytest.mark.parametrize("name", LAYERS)
def test_wrong_arguments_name_the_accepted_forms(name, monkeypatch):
    conv = layer_pair(name)[0]
    edge_index = graph_edges(7)
    x = torch.randn(N, IN, dtype=torch.float64)
    for op in ("gspmm", "gsddmm", "gat_attention", "edge_softmax"):  # nothing may reach a kernel
        monkeypatch.setattr(unigraph.ops, op, lambda *a, **k: pytest.fail("a kernel ran on refused input"))
    with pytest.raises(TypeError, match="swapped.*accepted forms"):
        conv(edge_index, x)
    with pytest.raises(TypeError, match="integer tensor, got torch.float"):
        conv(x, edge_index.double())
    with pytest.raises(TypeError, match=r"shape \[2, E\].*transposed.*accepted forms"):
        conv(x, edge_index.t().contiguous())
    with pytest.raises(TypeError, match="accepted forms"):
        conv(x, "edges")
    bad = edge_index.clone()
    bad[0, 3] = N + 5
    with pytest.raises(ValueError, match=f"{name}: edge_index\\[0\\] holds index {N + 5}.*valid indices are 0..{N - 1}"):
        conv(x, bad)
    bad[0, 3] = -1
    with pytest.raises(ValueError, match="negative index"):
        conv(x, bad)


@pytest.mark.parametrize("name", ["GraphConv", "SAGEConv", "GATConv", "GATv2Conv", "GINConv"])
def test_size_is_checked(name):
    conv = layer_pair(name)[0]
    edge_index = graph_edges(8)
    x = torch.randn(N, IN, dtype=torch.float64)
    with pytest.raises(ValueError, match="size=.*belongs to the conv\\(x, edge_index\\) form"):
        conv(U.Graph(edge_index, num_nodes=N), x, size=(N, N))
    with pytest.raises(ValueError, match="size must be a pair"):
        conv(x, edge_index, size=(N,))
    adj = adjacency("sparse_tensor", edge_index, None)
    with pytest.raises(ValueError, match="contradicts the sparse adjacency"):
        conv(x, adj, size=(N, N + 1))
    with pytest.raises(ValueError, match="x has 12 rows but the graph has 14 nodes"):
        conv(x[:12], edge_index, size=(N, N))


def test_edge_features_from_a_coo_adjacency_get_their_gradient():
    # (a COO matrix's _values() carry no gradient: GATConv's edge features from one got none, silently)
    torch.manual_seed(0)
    edge_index = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]])
    attr = torch.rand(5, 1, dtype=torch.float64)
    x = torch.randn(4, 3, dtype=torch.float64)
    conv = unigraph.nn.GATConv(3, 2, edge_dim=1).double()
    wanted = attr.clone().requires_grad_()
    conv(x, edge_index, wanted).sum().backward()
    order = (edge_index[1] * 4 + edge_index[0]).argsort()   # a coalesced adj_t stores entries in (dst, src) order
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), attr, (4, 4, 1)).coalesce().requires_grad_()
    conv(x, adj_t).sum().backward()
    torch.testing.assert_close(adj_t.grad.coalesce().values(), wanted.grad[order])
