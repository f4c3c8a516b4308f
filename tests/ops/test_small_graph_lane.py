"""The native lane's small-graph path (unigraph/ops/small_graph_lane.py): ``copy_u`` and per-edge
``u_mul_e`` sums and means, and ``copy_u`` maxima and minima, that ``auto`` sends to numba's COO
kernels by the small-graph rule. Equal to a float64 reference and to every CPU backend named, forward, backward and double
backward, on drawn graphs with every edge case; it builds no CSR; its guards hold when what it
depends on changes between calls."""
from __future__ import annotations

from unittest import mock

import pytest
import torch
from hypothesis import given, settings, strategies as st

import unigraph
from graph_strategies import graphs
from op_cases import SMALL, assert_matches, coo_kernel_calls, cpu_test_backends, features, grads_of, positional
from reference import gspmm_ref
from unigraph import ops
from unigraph.graph import GraphModifiedError
from unigraph import call_forms

pytest.importorskip("numba")
from unigraph.backends import small_graph  # noqa: E402
from unigraph.ops import small_graph_lane  # noqa: E402

CASES = [("copy_u", "sum", None), ("copy_u", "mean", None), ("u_mul_e", "sum", "[E]"), ("u_mul_e", "mean", "[E]"),
         ("u_mul_e", "sum", "[E, 1]"), ("u_mul_e", "mean", "[E, 1]"), ("copy_u", "max", None), ("copy_u", "min", None)]


@pytest.fixture(autouse=True, scope="module")
def coo_side():
    """The rule's COO side for every call here, tiny ones too (their torch side:
    ``test_small_graph_tiny.py``)."""
    with mock.patch.object(small_graph, "TINY_WORK", -1):
        yield


@pytest.fixture
def lane_calls():
    with coo_kernel_calls() as calls:
        yield calls


def inputs(drawn, op, weights, width=3, dtype=torch.float64):
    g, gen = drawn.graph, drawn.generator()
    u = features(gen, g.num_src_nodes, (width,), dtype=dtype)
    if op == "copy_u":
        return u, None
    return u, features(gen, g.num_edges, () if weights == "[E]" else (1,), dtype=dtype)


@pytest.mark.parametrize("op, reduce, weights", CASES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_matches_the_reference_and_every_backend_forward_and_backward(op, reduce, weights, data):
    drawn = data.draw(graphs(), label="graph")
    dtype = data.draw(st.sampled_from([torch.float32, torch.float64]), label="dtype")
    u, e = inputs(drawn, op, weights, dtype=dtype)
    with coo_kernel_calls() as lane_calls:
        out = ops.gspmm(drawn.graph, op, reduce, u, e)   # auto: the rule takes it
    assert lane_calls and lane_calls[0][2] is (op == "u_mul_e")
    assert out.dtype == dtype
    expected = gspmm_ref(drawn.graph, op, reduce, u.double(), None if e is None else e.double())
    if dtype == torch.float64:
        assert_matches(out, expected, (u, e), "ue", drawn.generator(), drawn.kind)
    else:
        torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)
    out = ops.gspmm(drawn.graph, op, reduce, u, e)   # again: assert_matches used the first one's graph
    upstream = torch.randn(out.shape, generator=drawn.generator(), dtype=dtype)
    mine = grads_of(out, (u, e), upstream)
    for backend in cpu_test_backends():   # the same call on each backend named (the ordinary path)
        other = ops.gspmm(drawn.graph, op, reduce, u, e, backend=backend)
        tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-10, rtol=1e-9)
        torch.testing.assert_close(out, other, **tol, msg=lambda m: f"{backend} forward: {m}")
        for a, b in zip(mine, grads_of(other, (u, e), upstream)):
            torch.testing.assert_close(a, b, **tol, msg=lambda m: f"{backend} gradient: {m}")


@pytest.mark.parametrize("op, reduce, weights", CASES)
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_gradcheck_and_gradgradcheck(op, reduce, weights, data):
    drawn = data.draw(graphs(**SMALL), label="graph")
    u, e = inputs(drawn, op, weights)
    present = tuple(t for t in (u, e) if t is not None)
    fn = positional(lambda a, b: ops.gspmm(drawn.graph, op, reduce, a, b), (u, e))
    with coo_kernel_calls() as lane_calls:
        assert torch.autograd.gradcheck(fn, present, eps=1e-6, atol=1e-5)
        assert torch.autograd.gradgradcheck(fn, present, eps=1e-6, atol=1e-5)
    assert lane_calls


def test_a_layer_on_a_new_edge_index_builds_no_csr_and_matches_the_csr_path(lane_calls, monkeypatch):
    """GINConv given a new edge_index: the graph holds its indices and in-degree counts only, and
    the result equals the same layer's with the rule off (CSR kernels), values and gradients."""
    call_forms.clear_cache()
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 40, (2, 200), generator=gen)
    x = torch.randn(40, 8, generator=gen, requires_grad=True)
    conv = unigraph.nn.GINConv(torch.nn.Linear(8, 8))
    out = conv(x, edge_index)
    graph = call_forms.resolve("t", x, edge_index).graph
    assert not graph.has_memo("in_csr") and not graph.has_memo("out_csr") and not graph.has_memo("stats")
    assert lane_calls == [(200, 8, False)]
    grads = torch.autograd.grad(out.square().sum(), [x, *conv.parameters()])
    assert len(lane_calls) == 2   # the backward: the same kernel, roles swapped
    monkeypatch.setattr(small_graph, "SMALL_WORK", 0)
    monkeypatch.setattr(small_graph, "FRESH_WORK", 0)
    monkeypatch.setattr(small_graph, "CSR_FREE_EDGES", -1)
    call_forms.clear_cache()
    again = conv(x, edge_index.clone())
    assert len(lane_calls) == 2
    torch.testing.assert_close(out, again)
    torch.testing.assert_close(grads, torch.autograd.grad(again.square().sum(), [x, *conv.parameters()]))


@pytest.mark.parametrize("threads", [1, 2])
def test_the_bound_is_the_work_edges_times_width_over_the_thread_count(lane_calls, monkeypatch, threads):
    g = unigraph.Graph(torch.randint(0, 10, (2, 50), generator=torch.Generator().manual_seed(1)), num_nodes=10)
    monkeypatch.setattr(small_graph, "SMALL_WORK", 50 * 4 * threads)
    monkeypatch.setattr(small_graph, "FRESH_WORK", 0)   # the kept bound alone (the new graphs' bound: below)
    at, past = torch.randn(10, 4), torch.randn(10, 5)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ops.gspmm(g, "copy_u", "sum", at)
        assert lane_calls == [(50, 4, False)]
        assert f"<= 200 ({50 * 4 * threads:,} / {threads} threads)" in unigraph.explain(g, "copy_u", "sum", at).reason
        ops.gspmm(g, "copy_u", "sum", past)
        assert len(lane_calls) == 1
        assert "small-graph rule" not in unigraph.explain(g, "copy_u", "sum", past).reason
        if threads == 1:   # the same call with more threads than the bound was measured for: the CSR path
            torch.set_num_threads(2)
            ops.gspmm(g, "copy_u", "sum", at)
            assert len(lane_calls) == 1
    finally:
        torch.set_num_threads(before)


def test_explain_names_the_rule_and_what_runs(lane_calls):
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 4)
    explanation = unigraph.explain(g, "copy_u", "mean", x)
    assert explanation.backend == "numba" and explanation.reason.startswith("small-graph rule: 3 edges x 4 features")
    assert "the cost model's pick otherwise" in explanation.reason
    extreme = unigraph.explain(g, "copy_u", "max", x)
    assert extreme.backend == "numba" and "keeps each element's winner" in extreme.reason
    assert "small-graph rule" not in unigraph.explain(g, "u_mul_e", "max", x).reason
    assert "small-graph rule" not in unigraph.explain(g, "copy_u", "sum", x.half()).reason
    assert "small-graph rule" not in unigraph.explain(g, "copy_u", "sum", x, backend="numba").reason


@pytest.mark.parametrize("choice", ["numba", "scatter", "sparse", "auto-tune"])
def test_a_named_backend_or_auto_tune_is_not_replaced_by_the_rule(lane_calls, choice):
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 4)
    with unigraph.use_backend(choice):
        ops.gspmm(g, "copy_u", "sum", x)
    ops.gspmm(g, "copy_u", "sum", x, backend=choice if choice != "auto-tune" else "numba")
    assert lane_calls == []


def test_shapes_outside_the_lane_go_by_the_cost_model(lane_calls):
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    u = torch.randn(3, 2, 4, dtype=torch.float64)
    out = ops.gspmm(g, "copy_u", "sum", u)                        # [N, H, F]
    per_feature = ops.gspmm(g, "u_mul_e", "sum", u[:, 0], torch.rand(3, 4, dtype=torch.float64))
    assert lane_calls == []
    torch.testing.assert_close(out, gspmm_ref(g, "copy_u", "sum", u, None))
    assert per_feature.shape == (3, 4)


def test_a_graph_changed_in_place_is_refused_before_and_after_the_forward(lane_calls):
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 4, requires_grad=True)
    out = ops.gspmm(g, "copy_u", "sum", x)
    g.src[0] = 2
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    with pytest.raises(GraphModifiedError):
        ops.gspmm(g, "copy_u", "sum", x)
    assert len(lane_calls) == 1


def test_weights_changed_in_place_after_the_forward_are_refused(lane_calls):
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.rand(3)
    out = ops.gspmm(g, "u_mul_e", "sum", x, w)
    w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_changes_between_calls_give_the_plain_paths_results(lane_calls):
    """Width across the bound, dtype, grad mode, inference mode, non-contiguous operands and an
    expanded upstream gradient, on one graph whose CSRs a wide call builds half way."""
    gen = torch.Generator().manual_seed(2)
    g = unigraph.Graph(torch.randint(0, 30, (2, 120), generator=gen), num_nodes=30)
    g.stats()   # CSRs built: the kept bound (a graph without them: test_a_new_graphs_bound_...)
    wide = small_graph.work_bound() // 120 + 1
    for width, dtype in [(4, torch.float32), (wide, torch.float32), (4, torch.float64), (7, torch.float32)]:
        x = torch.randn(width, 30, dtype=dtype, generator=gen).t()   # non-contiguous
        w = torch.rand(120, dtype=dtype, generator=gen)
        for op, e in (("copy_u", None), ("u_mul_e", w)):
            with torch.inference_mode():
                evaluated = ops.gspmm(g, op, "mean", x, e)
            leaf = x.detach().clone().requires_grad_()
            out = ops.gspmm(g, op, "mean", leaf, e)
            (grad,) = torch.autograd.grad(out.sum(), leaf)   # an expanded upstream gradient
            plain_leaf = x.detach().clone().requires_grad_()
            plain = ops.gspmm(g, op, "mean", plain_leaf, e, backend="scatter")
            (plain_grad,) = torch.autograd.grad(plain.sum(), plain_leaf)
            torch.testing.assert_close(evaluated, plain)
            torch.testing.assert_close(out, plain)
            torch.testing.assert_close(grad, plain_grad)
    assert {width for _, width, _ in lane_calls} == {4, 7}
    assert g.has_memo("in_csr")   # the wide calls built them; the narrow ones still take the rule


@pytest.mark.parametrize("threads", [1, 2])
def test_a_new_graphs_bound_holds_for_its_first_calls_then_the_cost_model_builds_its_csrs(lane_calls, monkeypatch,
                                                                                        threads):
    """A graph with no CSR takes calls up to FRESH_WORK (at any thread count) for its first
    FRESH_CALLS of them, then goes by the cost model, which builds its CSRs; explain says which
    bound applied; the values and gradients equal the scatter backend's throughout. A graph whose
    CSRs exist gets the kept bound from its first call."""
    gen = torch.Generator().manual_seed(3)
    edge_index = torch.randint(0, 20, (2, 60), generator=gen)
    monkeypatch.setattr(small_graph, "SMALL_WORK", 60 * 4 * threads)   # kept bound: width 4
    monkeypatch.setattr(small_graph, "FRESH_WORK", 60 * 9)             # new graphs: up to width 9
    monkeypatch.setattr(small_graph, "FRESH_CALLS", 3)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = unigraph.Graph(edge_index, num_nodes=20)
        x = torch.randn(20, 8, generator=gen)
        w = torch.rand(60, generator=gen, requires_grad=True)
        assert "a graph with no CSR yet, in its first 3 calls" in small_graph.reason(60, 8, threads, fresh=True)
        assert unigraph.explain(unigraph.Graph(edge_index, num_nodes=20), "copy_u", "sum", x).backend == "numba"
        for call in range(5):
            leaf = x.clone().requires_grad_()
            out = ops.gspmm(g, "u_mul_e", "mean", leaf, w)
            grads = torch.autograd.grad(out.square().sum(), (leaf, w))
            plain_leaf = x.clone().requires_grad_()
            plain = ops.gspmm(g, "u_mul_e", "mean", plain_leaf, w, backend="scatter")
            torch.testing.assert_close(out, plain)
            torch.testing.assert_close(grads, torch.autograd.grad(plain.square().sum(), (plain_leaf, w)))
            taken = [c for c in lane_calls if c[1] == 8]
            assert len(taken) == 2 * min(call + 1, 3)   # forward and backward, the first three calls
            assert g.has_memo("in_csr") is (call >= 3)
        assert "small-graph rule" not in unigraph.explain(g, "copy_u", "sum", x).reason
        ops.gspmm(g, "copy_u", "sum", x[:, :4])   # within the kept bound: still the rule
        assert lane_calls[-1] == (60, 4, False)
        ops.gspmm(g, "copy_u", "sum", torch.randn(20, 10))   # past the new graphs' bound: never
        assert lane_calls[-1] == (60, 4, False)
        kept = unigraph.Graph(edge_index, num_nodes=20).prepare()
        calls = len(lane_calls)
        ops.gspmm(kept, "copy_u", "sum", x)
        assert len(lane_calls) == calls
    finally:
        torch.set_num_threads(before)


def test_the_weights_gradient_equals_torchs_and_is_differentiable_again(lane_calls):
    """The weights' gradient runs numba's per-edge dot where it need not be differentiated, and
    torch's index ops where it must be (double backward): both equal the plain formula."""
    gen = torch.Generator().manual_seed(4)
    g = unigraph.Graph(torch.randint(0, 25, (2, 90), generator=gen), num_nodes=25)
    for width in (0, 1, 6):
        x = torch.randn(25, width, generator=gen, dtype=torch.float64, requires_grad=True)
        w = torch.rand(90, generator=gen, dtype=torch.float64, requires_grad=True)
        upstream = torch.randn(25, width, generator=gen, dtype=torch.float64)
        out = ops.gspmm(g, "u_mul_e", "sum", x, w)
        (grad_w,) = torch.autograd.grad(out, w, upstream)
        expected = (upstream[g.dst] * x.detach()[g.src]).sum(1)
        torch.testing.assert_close(grad_w, expected)
        out = ops.gspmm(g, "u_mul_e", "sum", x, w)
        (grad_w,) = torch.autograd.grad(out, w, upstream, create_graph=True)
        torch.testing.assert_close(grad_w, expected)
        if width:
            (second,) = torch.autograd.grad(grad_w.sum(), x)
            torch.testing.assert_close(second, torch.zeros_like(x).index_add_(0, g.src, upstream[g.dst]))
    assert lane_calls


@pytest.mark.parametrize("threads", [1, 2])
def test_the_same_bits_at_every_thread_count(threads):
    """Threads own ranges of destination rows and add their edges in edge order: the sums equal the
    one-thread result bit for bit (the thread count itself is checked with every kernel's in
    ``tests/kernels/cpu/test_kernel_threads.py``)."""
    gen = torch.Generator().manual_seed(3)
    src, dst = torch.randint(0, 300, (2, 5000), generator=gen)
    x, w = torch.randn(300, 33, generator=gen), torch.rand(5000, generator=gen)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = [small_graph_lane._sum(src, dst, x, weights, 300) for weights in (None, w)]
        extremes = [small_graph_lane._extreme(src, dst, x.round(), 300, reduce) for reduce in ("max", "min")]  # ties
        torch.set_num_threads(threads)
        assert all(torch.equal(a, small_graph_lane._sum(src, dst, x, weights, 300))
                   for a, weights in zip(one, (None, w)))
        for (out, arg), reduce in zip(extremes, ("max", "min")):
            again, again_arg = small_graph_lane._extreme(src, dst, x.round(), 300, reduce)
            assert torch.equal(out, again) and torch.equal(arg, again_arg)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_extremes_pick_the_csr_kernels_winners_on_ties_and_nan(lane_calls, reduce):
    """Integer-valued features (ties everywhere), a NaN, rows without in-edges: the COO kernel's
    values and gradient equal the CSR kernel's bit for bit (the same winner per element: the first
    edge in edge-id order, the first NaN)."""
    gen = torch.Generator().manual_seed(5)
    edge_index = torch.randint(0, 60, (2, 400), generator=gen)
    edge_index[1] %= 55                                   # rows 55..59 have no in-edges
    g = unigraph.Graph(edge_index, num_nodes=60)
    x = torch.randint(-2, 3, (60, 8), generator=gen).double()
    x[7, 3], x[11, 3] = float("nan"), float("nan")
    x.requires_grad_()
    out = ops.gspmm(g, "copy_u", reduce, x)
    assert lane_calls == [(400, 8, False)]
    plain = ops.gspmm(g, "copy_u", reduce, x, backend="numba")
    assert torch.equal(out.nan_to_num(99.0), plain.nan_to_num(99.0)) and torch.equal(out[55:], torch.zeros(5, 8))
    upstream = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    assert torch.equal(*(torch.autograd.grad(y, x, upstream)[0] for y in (out, plain)))


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_per_edge_values_are_summed_by_index_add_without_csr(reduce):
    """A ``copy_e`` sum or mean (a message tensor's aggregation) under the rule: torch's
    ``index_add_`` over the edges, no CSR, no statistics; equal to every backend named, forward and
    backward; explain names it; a named backend is not replaced."""
    gen = torch.Generator().manual_seed(2)
    edge_index = torch.randint(0, 50, (2, 400), generator=gen)
    edge_index[1] %= 45                               # rows 45..49 have no in-edges
    g = unigraph.Graph(edge_index, num_nodes=50)
    e = torch.randn(400, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    from unigraph.ops import native_lane
    taken = []

    def counted(*args, inner=native_lane.run_copy_e):
        taken.append(inner(*args))
        return taken[-1]
    with mock.patch.object(native_lane, "run_copy_e", counted):
        out = ops.gspmm(g, "copy_e", reduce, e=e)
    assert len(taken) == 1 and taken[0] is out and not g.has_memo("in_csr") and not g.has_memo("stats")
    explanation = unigraph.explain(g, "copy_e", reduce, 6)
    assert explanation.backend == "scatter" and "index_add_" in explanation.reason
    upstream = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    (mine,) = torch.autograd.grad(out, e, upstream)
    torch.testing.assert_close(out, gspmm_ref(g, "copy_e", reduce, None, e.detach()), rtol=1e-12, atol=1e-12)
    for backend in cpu_test_backends():
        other = ops.gspmm(g, "copy_e", reduce, e=e, backend=backend)
        torch.testing.assert_close(out, other, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(mine, torch.autograd.grad(other, e, upstream)[0], rtol=1e-12, atol=1e-12)
    assert g.has_memo("in_csr")   # (a named backend built them: the rule did not replace it)
    assert torch.autograd.gradgradcheck(lambda t: ops.gspmm(g, "copy_e", reduce, e=t), (e[:, :2].detach().requires_grad_(),))


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_per_edge_extremes_run_the_coo_kernel_with_edge_winners(lane_calls, reduce):
    """A ``copy_e`` max or min (EdgeConv's default aggregation) under the rule: the COO kernel with
    the edges as its rows, no CSR; values and gradient bit for bit the CSR kernel's (ties, NaN, rows
    without in-edges)."""
    gen = torch.Generator().manual_seed(9)
    edge_index = torch.randint(0, 40, (2, 300), generator=gen)
    edge_index[1] %= 36
    g = unigraph.Graph(edge_index, num_nodes=40)
    e = torch.randint(-2, 3, (300, 5), generator=gen).double()
    e[4, 1] = float("nan")
    e.requires_grad_()
    out = ops.gspmm(g, "copy_e", reduce, e=e)
    assert lane_calls == [(300, 5, False)] and not g.has_memo("in_csr")
    assert unigraph.explain(g, "copy_e", reduce, 5).backend == "numba"
    plain = ops.gspmm(g, "copy_e", reduce, e=e, backend="numba")
    assert torch.equal(out.nan_to_num(99.0), plain.nan_to_num(99.0))
    upstream = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    assert torch.equal(*(torch.autograd.grad(y, e, upstream)[0] for y in (out, plain)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("op", ["copy_u", "u_mul_e"])
def test_a_mean_has_the_bits_of_the_sum_divided_by_torch(lane_calls, dtype, op):
    """A mean divides inside the COO Function (``coo.divide_rows``), its backward divides the
    gradient there too: the bits of the lane's sum divided by torch's ``max(in_degree, 1)``, forward
    and backward (``u`` and the weights), with rows without in-edges and a NaN."""
    gen = torch.Generator().manual_seed(3)
    n, edges, width = 60, 400, 17
    src = torch.randint(0, n, (edges,), generator=gen)
    dst = torch.randint(0, n - 10, (edges,), generator=gen)   # the last 10 nodes have no in-edge
    g = unigraph.Graph(torch.stack([src, dst]), num_nodes=n)
    u = torch.randn(n, width, generator=gen, dtype=dtype) * 100
    u[5, 3] = float("nan")
    u.requires_grad_()
    w = torch.rand(edges, generator=gen, dtype=dtype).requires_grad_() if op == "u_mul_e" else None
    inputs = [u] + ([w] if w is not None else [])
    out = ops.gspmm(g, op, "mean", u, w)
    assert type(out.grad_fn).__name__ == "CooSumBackward" and lane_calls
    expected = ops.gspmm(g, op, "sum", u, w) / torch.bincount(dst, minlength=n).clamp(min=1).to(dtype).unsqueeze(1)
    bits = torch.int32 if dtype == torch.float32 else torch.int64
    assert torch.equal(out.detach().view(bits), expected.detach().view(bits))
    upstream = torch.randn(n, width, generator=gen, dtype=dtype)
    for got, want in zip(torch.autograd.grad(out, inputs, upstream), torch.autograd.grad(expected, inputs, upstream)):
        assert torch.equal(got.view(bits), want.view(bits))
