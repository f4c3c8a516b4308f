"""The numba backend's speed paths change no result: int32 index copies (the dtype rule, the
cache's guards, int32 == int64 bit for bit on every op, forward and backward), int32 max/min
winners of the copy ops (same winners, int64 in traced programs, double backward), the
max/min gradient's column-parallel scatter against torch's, and huge-page-advised outputs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import unigraph
from unigraph import ops

pytest.importorskip("numba")
from unigraph.backends import numba as numba_backend  # noqa: E402
from unigraph.backends.base import scatter_at_rows  # noqa: E402
from unigraph.kernels.cpu import alloc, indices  # noqa: E402


# --------------------------------------------------------------------------- the dtype rule
@pytest.mark.parametrize("bound, dtype", [(0, np.int32), (1, np.int32), (2**31, np.int32),
                                          (2**31 + 1, np.int64), (2**40, np.int64)])
def test_index_dtype_rule(bound, dtype):
    """int32 exactly when the largest index, bound - 1, is at most 2**31 - 1 (no graph with
    2**31 edges is built: the rule is a function of the count alone)."""
    assert indices.index_dtype(bound) == dtype


def test_index_dtype_refuses_negative_bound():
    with pytest.raises(ValueError, match="got -1"):
        indices.index_dtype(-1)


def test_compact_refuses_other_dtypes():
    with pytest.raises(TypeError, match="int32"):
        indices.compact(torch.arange(3, dtype=torch.int32), 3)


def test_compact_copies_once_and_follows_in_place_writes():
    t = torch.tensor([4, 0, 2, 3])
    first = indices.compact(t, 5)
    assert first.dtype == np.int32 and first.tolist() == [4, 0, 2, 3]
    assert indices.compact(t, 5) is first            # cached while unchanged
    t[1] = 1                                         # an in-place write bumps the version
    again = indices.compact(t, 5)
    assert again.tolist() == [4, 1, 2, 3]
    t.set_(torch.tensor([7, 7]))                     # new storage, new shape
    assert indices.compact(t, 8).tolist() == [7, 7]


def test_compact_keeps_int64_past_the_limit():
    t = torch.tensor([0, 5])
    view = indices.compact(t, 2**31 + 1)
    assert view.dtype == np.int64 and np.shares_memory(view, t.numpy())


def test_compact_entry_dies_with_its_tensor():
    t = torch.tensor([1, 2, 3])
    indices.compact(t, 4)
    key = (id(t), "int32")
    assert key in indices._CACHE
    del t
    assert key not in indices._CACHE


def _csr(n: int = 6, edges: int = 20, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return unigraph.Graph(torch.randint(0, n, (2, edges), generator=gen), num_nodes=n).tensors()


def test_a_csr_plan_holds_what_the_kernels_took_before_and_is_made_once_per_thread_count():
    from unigraph.kernels.cpu.schedule import row_blocks
    g = _csr()
    plan = indices.csr_plan(g.in_ptr, g.in_src, g.in_eid, g.num_src, 2)
    blocks, ptr, src, eid = plan
    assert np.array_equal(blocks, row_blocks(g.in_ptr.numpy(), 2)) and np.array_equal(ptr, g.in_ptr.numpy())
    assert src.dtype == eid.dtype == np.int32
    assert src.tolist() == g.in_src.tolist() and eid.tolist() == g.in_eid.tolist()
    assert indices.csr_plan(g.in_ptr, g.in_src, g.in_eid, g.num_src, 2) is plan      # kept while unchanged
    one = indices.csr_plan(g.in_ptr, g.in_src, g.in_eid, g.num_src, 1)
    assert np.array_equal(one[0], row_blocks(g.in_ptr.numpy(), 1)) and one is not plan
    assert indices.csr_plan(g.in_ptr, g.in_src, g.in_eid, g.num_src, 2) is plan      # each count its own entry


@pytest.mark.parametrize("change", ["ptr", "cols", "eid", "other cols", "set_"])
def test_a_csr_plan_follows_every_change_of_its_three_tensors(change):
    g = _csr()
    ptr, cols, eid = g.in_ptr.clone(), g.in_src.clone(), g.in_eid.clone()
    first = indices.csr_plan(ptr, cols, eid, g.num_src, 2)
    if change == "ptr":
        ptr[1:] = ptr[-1]                        # every edge in row 0
    elif change == "cols":
        cols[0] = (cols[0] + 1) % g.num_src
    elif change == "eid":
        eid[:2] = eid[:2].flip(0)
    elif change == "other cols":
        cols = cols.roll(1)                      # another tensor of the same shape
    else:
        cols.set_(cols.flip(0).clone())          # new storage under the same tensor
    blocks, p, c, e = indices.csr_plan(ptr, cols, eid, g.num_src, 2)
    assert (p.tolist(), c.tolist(), e.tolist()) == (ptr.tolist(), cols.tolist(), eid.tolist())
    assert not (first[1] is p and first[2] is c and first[3] is e)


def test_a_csr_plan_dies_with_its_pointer_and_keeps_int64_past_the_limit():
    g = _csr()
    ptr = g.in_ptr.clone()
    indices.csr_plan(ptr, g.in_src, g.in_eid, g.num_src, 2)
    key = (id(ptr), "plan2")
    assert key in indices._CACHE
    del ptr
    assert key not in indices._CACHE
    wide = indices.csr_plan(g.in_ptr, g.in_src, g.in_eid, 2**31 + 1, 2)
    assert wide[2].dtype == np.int64 and wide[3].dtype == np.int32   # each array by its own bound, as compact


def test_in_slots_maps_each_out_slot_to_the_in_slot_of_its_edge():
    g, _ = _hub_graph(num_nodes=50, num_edges=400)
    t = g.tensors()
    slots = indices.in_slots(t.out_eid, t.in_eid)
    assert torch.equal(t.in_eid[torch.from_numpy(slots).long()], t.out_eid)   # same edge at both slots
    assert slots.dtype == np.int32
    assert indices.in_slots(t.out_eid, t.in_eid) is slots                    # cached while unchanged
    in_eid = t.in_eid.clone()
    again = indices.in_slots(t.out_eid, in_eid.flip(0))                      # another in_eid: made again
    assert torch.equal(in_eid.flip(0)[torch.from_numpy(again).long()], t.out_eid)
    with pytest.raises(ValueError, match="out_eid has 3 edges"):
        indices.in_slots(torch.arange(3), torch.arange(4))


# --------------------------------------------------------------------------- int32 == int64
def _hub_graph(seed=0, num_nodes=300, num_edges=4000):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst[: num_edges // 4] = 7                       # a hub: one long row, crosses prefetch windows
    return unigraph.Graph(torch.stack([src, dst]), num_nodes=num_nodes), gen


def _every_op(g, gen):
    """Outputs and input gradients of one call of every op on the numba backend."""
    n, e = g.num_nodes, g.num_edges
    x = torch.randn(n, 37, generator=gen)
    x[3, 5] = float("nan")
    x[9, :] = float("-inf")
    w = torch.rand(e, 1, generator=gen)
    h = torch.randn(n, 4, 8, generator=gen)
    s = torch.randn(e, 4, 1, generator=gen)
    el, er = torch.randn(n, 4, 1, generator=gen), torch.randn(n, 4, 1, generator=gen)
    results = []
    calls = [(lambda a, b, r=r: ops.gspmm(g, "copy_u", r, u=a, backend="numba"), (x,)) for r in ("sum", "max", "min")]
    calls += [(lambda a, b, r=r: ops.gspmm(g, "u_mul_e", r, u=a, e=b, backend="numba"), (x, w))
              for r in ("sum", "mean", "max")]
    calls += [(lambda a, b: ops.gspmm(g, "copy_e", "max", e=b, backend="numba"), (None, torch.randn(e, 6, generator=gen))),
              (lambda a, b: ops.gsddmm(g, "dot", a, a, "u", "v", backend="numba"), (h,)),
              (lambda a, b: ops.gsddmm(g, "add", a, b, "u", "e", backend="numba"), (el, s)),
              (lambda a, b: ops.edge_softmax(g, b, backend="numba"), (None, s)),
              (lambda a, b: ops.gat_attention(g, a, el[..., 0], er[..., 0], 0.2, backend="numba"), (h,))]
    for fn, inputs in calls:
        inputs = tuple(None if t is None else t.clone().requires_grad_() for t in inputs) + (None,) * (2 - len(inputs))
        out = fn(*inputs)
        grad = torch.randn(out.shape, generator=gen)
        torch.where(torch.isfinite(out), out, 0).mul(grad).sum().backward()
        results.append((out, [t.grad for t in inputs if t is not None]))
    return results


def test_int32_indices_give_the_int64_results_bit_for_bit(monkeypatch):
    g, _ = _hub_graph()
    with_int32 = _every_op(g, torch.Generator().manual_seed(1))
    assert indices.compact(g.tensors().in_src, g.num_nodes).dtype == np.int32   # the path under test ran
    monkeypatch.setattr(indices, "INT32_LIMIT", -2)   # the rule now says int64 for every bound
    with_int64 = _every_op(g, torch.Generator().manual_seed(1))
    for (out32, grads32), (out64, grads64) in zip(with_int32, with_int64):
        torch.testing.assert_close(out32, out64, rtol=0, atol=0, equal_nan=True)
        for a, b in zip(grads32, grads64):
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


# --------------------------------------------------------------------------- int32 winners
def _extreme_args(g, x, ex):
    """(op, out, arg) of the numba backend's copy_u/copy_e max and min, called directly."""
    backend, gt = numba_backend.NumbaBackend(), g.tensors()
    found = []
    for reduce in ("max", "min"):
        out, arg, _ = backend.gspmm(gt, "copy_u", reduce, x, None)
        found.append(("copy_u", out, arg))
        out, _, arg = backend.gspmm(gt, "copy_e", reduce, None, ex)
        found.append(("copy_e", out, arg))
    return found


def test_copy_winners_are_int32_where_they_fit_and_the_same_winners(monkeypatch):
    hub, gen = _hub_graph()
    g = unigraph.Graph(hub.edge_index, num_nodes=hub.num_nodes + 2)   # two rows without in-edges: winner -1
    x, ex = torch.randn(g.num_nodes, 37, generator=gen), torch.randn(g.num_edges, 5, generator=gen)
    x[::7, 3] = 0.5                             # ties: the first edge of the row must win
    x[11, 4], x[:, 6] = float("nan"), float("-inf")
    narrow = _extreme_args(g, x, ex)
    monkeypatch.setattr(indices, "INT32_LIMIT", -2)
    wide = _extreme_args(g, x, ex)
    for (op, out32, arg32), (_, out64, arg64) in zip(narrow, wide):
        assert arg32.dtype == torch.int32 and arg64.dtype == torch.int64, op
        assert torch.equal(arg32.long(), arg64), op
        assert (arg32 == -1).any() and (arg32 >= 0).any(), op
        torch.testing.assert_close(out32, out64, rtol=0, atol=0, equal_nan=True)


def test_binary_max_winners_stay_int64():
    g, gen = _hub_graph()
    out, arg_u, arg_e = numba_backend.NumbaBackend().gspmm(
        g.tensors(), "u_mul_e", "max", torch.randn(g.num_nodes, 3, generator=gen),
        torch.randn(g.num_edges, 3, generator=gen))
    assert arg_u.dtype == arg_e.dtype == torch.int64


@pytest.mark.parametrize("op", ["copy_u", "copy_e"])
def test_traced_gspmm_keeps_int64_winners(op):
    """The custom operator (what torch.compile calls) widens the winners; its fake agrees."""
    g, gen = _hub_graph()
    x = torch.randn(g.num_nodes if op == "copy_u" else g.num_edges, 4, dtype=torch.float64, generator=gen)
    u, e = (x, None) if op == "copy_u" else (None, x)
    gt = g.tensors()
    args = (gt.tensor_list(), gt.num_src, gt.num_dst, "numba", op, "max", u, e)
    eager = numba_backend.NumbaBackend().gspmm(gt, op, "max", u, e)
    real = torch.ops.unigraph.gspmm(*args)
    which = 1 if op == "copy_u" else 2
    assert eager[which].dtype == torch.int32 and real[which].dtype == torch.int64
    assert torch.equal(real[which], eager[which].long())
    torch.library.opcheck(torch.ops.unigraph.gspmm, args, test_utils=("test_faketensor",))


def test_double_backward_through_int32_winners():
    g, gen = _hub_graph(num_nodes=40, num_edges=300)
    x = torch.randn(g.num_nodes, 6, dtype=torch.float64, generator=gen, requires_grad=True)
    fn = lambda t: ops.gspmm(g, "copy_u", "max", u=t * t, backend="numba")
    torch.autograd.gradcheck(fn, (x,))
    torch.autograd.gradgradcheck(fn, (x,))


# --------------------------------------------------------------------------- max/min gradient scatter
@pytest.mark.parametrize("rows_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("width", [1, 3, 16, 37, 64])
def test_column_scatter_matches_torch(width, rows_dtype):
    gen = torch.Generator().manual_seed(width)
    values = torch.randn(500, width, dtype=torch.float64, generator=gen)
    rows = torch.randint(-1, 40, (500, width), generator=gen)      # -1: no winner; many duplicates
    backend = numba_backend.NumbaBackend()
    got = backend.scatter_at_rows(values, rows.to(rows_dtype), 40, (width,))
    want = scatter_at_rows(values, rows, 40, (width,))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(scatter_at_rows(values, rows.to(rows_dtype), 40, (width,)), want, rtol=0, atol=0)


@pytest.mark.parametrize("num_values, num_rows", [(1, 3), (3, 1), (5, 0)])
def test_column_scatter_at_the_edges_of_its_prefetch(num_values, num_rows):
    """Fewer rows than the prefetch looks ahead, one target row, none (every winner -1)."""
    gen = torch.Generator().manual_seed(num_values)
    values = torch.randn(num_values, 20, generator=gen)
    rows = torch.randint(-1, num_rows, (num_values, 20), generator=gen, dtype=torch.int64)
    got = numba_backend.NumbaBackend().scatter_at_rows(values, rows.int(), num_rows, (20,))
    assert got.shape == (num_rows, 20)
    torch.testing.assert_close(got, scatter_at_rows(values, rows, num_rows, (20,)), rtol=0, atol=0)


def test_column_scatter_defers_broadcast_to_torch():
    values = torch.randn(6, 2, 3)
    rows = torch.randint(0, 4, (6, 2, 3))
    got = numba_backend.NumbaBackend().scatter_at_rows(values, rows, 4, (2, 1))
    torch.testing.assert_close(got, scatter_at_rows(values, rows, 4, (2, 1)))


# --------------------------------------------------------------------------- huge-page outputs
def test_advised_outputs_are_ordinary_tensors():
    big = alloc.empty((alloc.MIN_BYTES // 4 + 3, 2), torch.float32)
    assert big.shape == (alloc.MIN_BYTES // 4 + 3, 2) and big.dtype == torch.float32 and big.is_contiguous()
    big.fill_(2.5)
    assert float(big.sum()) == 2.5 * big.numel()
    assert alloc.zeros((3, 4), torch.float64).eq(0).all()
