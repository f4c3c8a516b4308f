"""The native lane (unigraph/ops/native_lane.py): copy_u and per-edge-weight u_mul_e sums/means
sent to the scatter backend run as torch's index_select (times the weights) + index_add_. Same values and gradients as the GSpMM Function path and
float64; taken only where its conditions hold; guards hold when what it depends on changes
between calls."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import unigraph
from unigraph import ops
from unigraph.backends import selector, small_graph
from unigraph.graph import GraphModifiedError
from unigraph.ops import custom, native_lane
from unigraph.structure import degree_stats

from unigraph.backends import scatter as scatter_backend

from reference import gspmm_ref


@pytest.fixture
def function_calls(monkeypatch):
    """How many g-SpMMs went through a g-SpMM Function (the ordinary path: ``GSpMM``, or
    ``GSpMMSum`` for sum and mean)."""
    calls = []
    for function in (custom.GSpMM, custom.GSpMMSum):
        def counted(*args, forward=function.forward):
            calls.append(args[1].name)
            return forward(*args)
        monkeypatch.setattr(function, "forward", staticmethod(counted))
    return calls


def graph(num_src=9, num_dst=7, edges=30, seed=0, bipartite=True):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (edges,), generator=gen)
    dst = torch.randint(0, num_dst - 2, (edges,), generator=gen)  # the last two rows have no in-edges
    if not bipartite:
        return unigraph.Graph(torch.stack([src % num_dst, dst]), num_nodes=num_dst)
    return unigraph.Graph(torch.stack([src, dst]), num_src_nodes=num_src, num_dst_nodes=num_dst)


def function_path(g, x, reduce, op="copy_u", e=None):
    """The same call through the GSpMM Function on the scatter backend (the lane switched off)."""
    return custom.call_gspmm(g.tensors(), unigraph.backends.get("scatter"), op, reduce, x, e)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bipartite", [True, False])
def test_lane_matches_the_function_path_and_float64(function_calls, reduce, dtype, bipartite):
    g = graph(bipartite=bipartite)
    x = torch.randn(g.num_src_nodes, 5, dtype=dtype, requires_grad=True)
    out = ops.gspmm(g, "copy_u", reduce, u=x, backend="scatter")
    assert function_calls == []  # the lane ran it
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(out.double(), gspmm_ref(g, "copy_u", reduce, x.detach().double(), None), **tol)
    assert out.dtype == dtype and out.shape == (g.num_dst_nodes, 5)
    assert torch.equal(out[-2:], torch.zeros_like(out[-2:]))  # no in-edges: 0
    grad = torch.randn_like(out)
    (dx,) = torch.autograd.grad(out, x, grad)
    x2 = x.detach().clone().requires_grad_()
    expected = function_path(g, x2, reduce)
    (dx2,) = torch.autograd.grad(expected, x2, grad)
    torch.testing.assert_close(out, expected, **tol)
    torch.testing.assert_close(dx, dx2, **tol)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("weight_shape", ["[E]", "[E, 1]"])
def test_weighted_sums_match_the_function_path_in_both_gradients(function_calls, reduce, weight_shape):
    g = graph()
    x = torch.randn(g.num_src_nodes, 5, dtype=torch.float64, requires_grad=True)
    w = torch.rand(g.num_edges, dtype=torch.float64)
    w = (w if weight_shape == "[E]" else w.unsqueeze(1)).requires_grad_()
    out = ops.gspmm(g, "u_mul_e", reduce, u=x, e=w, backend="scatter")
    assert function_calls == []
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    expected = function_path(g, x2, reduce, "u_mul_e", w2.view(-1, 1))
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, (x, w), grad),
                               torch.autograd.grad(expected, (x2, w2), grad))


def test_a_mean_first_run_under_inference_mode_then_differentiated():
    """The in-degree divisor is kept on the graph: built under inference mode it must still be a
    tensor autograd can save when a later call is differentiated."""
    g = graph()
    x = torch.randn(g.num_src_nodes, 3, requires_grad=True)
    with torch.inference_mode():
        ops.gspmm(g, "copy_u", "mean", u=x.detach(), backend="scatter")
    out = ops.gspmm(g, "copy_u", "mean", u=x, backend="scatter")
    (dx,) = torch.autograd.grad(out.sum(), x)
    x2 = x.detach().clone().requires_grad_()
    (dx2,) = torch.autograd.grad(function_path(g, x2, "mean").sum(), x2)
    torch.testing.assert_close(dx, dx2)


def test_double_backward_through_the_lane():
    g = graph()
    x = torch.randn(g.num_src_nodes, 3, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(g.num_dst_nodes, 3, dtype=torch.float64)

    def f(x):
        return (ops.gspmm(g, "copy_u", "mean", u=x, backend="scatter") ** 2 * weights).sum()
    torch.autograd.gradgradcheck(f, (x,))


@pytest.mark.usefixtures("no_small_graph_rule")  # the cost model's path on a small graph
def test_auto_takes_the_lane_only_where_it_picks_scatter(function_calls, monkeypatch):
    g = graph()
    x = torch.randn(g.num_src_nodes, 4)
    with selector.use_backend("auto"):
        picked = unigraph.explain(g, "copy_u", "sum", x).backend
        ops.gspmm(g, "copy_u", "sum", u=x)
    assert function_calls == ([] if picked == "scatter" else [picked])
    # another decision for the same request: the Function path on that backend
    monkeypatch.setattr(selector, "_pick_name", lambda stats, request: "sparse")
    fresh = graph(seed=1)
    ops.gspmm(fresh, "copy_u", "sum", u=x)
    assert function_calls[-1] == "sparse"


def test_named_backends_and_contexts_are_obeyed_between_calls(function_calls):
    g = graph()
    x = torch.randn(g.num_src_nodes, 4)
    lane = ops.gspmm(g, "copy_u", "sum", u=x, backend="scatter")
    with selector.use_backend("sparse"):
        other = ops.gspmm(g, "copy_u", "sum", u=x)
    assert function_calls == ["sparse"]
    ops.gspmm(g, "copy_u", "sum", u=x, backend="scatter")
    assert function_calls == ["sparse"]
    torch.testing.assert_close(lane, other)


@pytest.mark.usefixtures("no_small_graph_rule")  # the cost model's path on a small graph
def test_the_decision_is_kept_per_request(monkeypatch):
    """The lane asks the selector with the request the front door would build, whose auto decision
    is memoised on every field: a change of width, dtype, grad or thread count between calls
    decides again."""
    g = graph()
    asked = []
    pick = selector._pick_name

    def counted(stats, request):
        asked.append((request.feature_width, request.dtype, request.grad, request.threads))
        return pick(stats, request)
    monkeypatch.setattr(selector, "_pick_name", counted)
    x = torch.randn(g.num_src_nodes, 4)
    threads = torch.get_num_threads()
    with selector.use_backend("auto"):
        for _ in range(2):
            native_lane.run(g, "copy_u", "sum", x, None, None)
        native_lane.run(g, "copy_u", "sum", torch.randn(g.num_src_nodes, 6), None, None)
        native_lane.run(g, "copy_u", "sum", x.double(), None, None)
        native_lane.run(g, "copy_u", "sum", x.clone().requires_grad_(), None, None)
        with torch.no_grad():
            native_lane.run(g, "copy_u", "sum", x.clone().requires_grad_(), None, None)
        torch.set_num_threads(1)
        try:
            native_lane.run(g, "copy_u", "sum", x, None, None)
        finally:
            torch.set_num_threads(threads)
    assert asked == [(4, torch.float32, False, threads), (6, torch.float32, False, threads),
                     (4, torch.float64, False, threads), (4, torch.float32, True, threads),
                     (4, torch.float32, False, 1)]


def test_where_the_lane_does_not_apply_the_ordinary_path_runs(function_calls):
    g = graph()
    x = torch.randn(g.num_src_nodes, 4)
    assert native_lane.run(g, "copy_u", "max", x, None, "scatter") is None
    assert native_lane.run(g, "copy_u", "sum", x.half(), None, "scatter") is None
    assert native_lane.run(g, "copy_u", "sum", x.unsqueeze(1), None, "scatter") is None  # [N, H, F]
    assert native_lane.run(g, "copy_u", "sum", x[:-1], None, "scatter") is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert native_lane.run(g, "copy_u", "sum", x, None, "scatter") is None
    assert native_lane.run(g, "copy_u", "sum", x, None, "sparse") is None
    weights = torch.rand(g.num_edges, 4)
    assert native_lane.run(g, "u_mul_e", "sum", x, weights, "scatter") is None  # a weight per feature
    assert native_lane.run(g, "u_mul_e", "sum", x, weights[:, 0].double(), "scatter") is None
    assert native_lane.run(g, "u_add_e", "sum", x, weights[:, :1], "scatter") is None
    with pytest.raises(ValueError, match="rows"):  # the ordinary path's error for the wrong row count
        ops.gspmm(g, "copy_u", "sum", u=x[:-1], backend="scatter")


def test_large_differentiated_cpu_calls_keep_the_function_path(function_calls):
    """Beyond CPU_GRAD_EDGES edges torch's CPU backward of the lane is slower than the scatter
    backend's: differentiated calls there take the Function, evaluation calls the lane."""
    g = graph(num_src=200, num_dst=150, edges=small_graph.CPU_GRAD_EDGES + 1)
    x = torch.randn(g.num_src_nodes, 4, requires_grad=True)
    with torch.no_grad():
        lane = ops.gspmm(g, "copy_u", "sum", u=x, backend="scatter")
    assert function_calls == []
    out = ops.gspmm(g, "copy_u", "sum", u=x, backend="scatter")
    assert function_calls == ["scatter"]
    torch.testing.assert_close(out, lane)


def test_a_graph_changed_in_place_is_refused_before_and_after_the_forward():
    g = graph()
    x = torch.randn(g.num_src_nodes, 4, requires_grad=True)
    out = ops.gspmm(g, "copy_u", "sum", u=x, backend="scatter")
    g.dst[0] = (g.dst[0] + 1) % g.num_dst_nodes
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()  # autograd's saved index guards the backward
    with pytest.raises(GraphModifiedError):
        ops.gspmm(g, "copy_u", "sum", u=x, backend="scatter")


@pytest.mark.parametrize("counting_kernel", [True, False])
def test_statistics_agree_and_without_the_counting_kernel_a_lane_graph_builds_no_csr(monkeypatch, counting_kernel):
    """Where the counting kernel runs (CPU, numba) the statistics come with both CSRs from one call;
    where it cannot (a GPU, no numba) they are counted from the indices and the lane builds no CSR."""
    from unigraph import structure
    if not counting_kernel:
        monkeypatch.setattr(structure, "_counting_runs", lambda rows, cols: False)
    for seed in range(5):
        g = graph(num_src=50, num_dst=40, edges=300, seed=seed)
        x = torch.randn(g.num_src_nodes, 8)
        with selector.use_backend("auto"):
            ops.gspmm(g, "copy_u", "mean", u=x)
        lane = unigraph.explain(g, "copy_u", "mean", x).backend == "scatter"
        if lane and not counting_kernel:
            assert not g.has_memo("in_csr") and not g.has_memo("out_csr")
        counted, from_csr = dataclasses.asdict(g.stats()), dataclasses.asdict(degree_stats(g.in_csr()[0], g.out_csr()[0]))
        assert counted == pytest.approx(from_csr, rel=1e-12)  # (moments vs torch.std: the last bits)
        assert torch.equal(g.in_degree_counts(), g.in_degrees())


@pytest.mark.usefixtures("no_small_graph_rule")  # the cost model's path on a small graph
@pytest.mark.parametrize("op, reduce", [("copy_u", "sum"), ("copy_u", "mean"), ("u_mul_e", "sum"), ("u_mul_e", "mean")])
@pytest.mark.parametrize("weights_shape", ["[E]", "[E, 1]"])
def test_a_call_auto_sends_elsewhere_skips_the_front_door_and_gives_the_ordinary_paths_result(
        function_calls, monkeypatch, op, reduce, weights_shape):
    """Where the index-op lane does not run a call auto decided (another backend: numba for the
    copies here; scatter for the differentiated products beyond CPU_GRAD_EDGES), the lane hands it
    straight to that backend's Function: the same Function, the same decision, the same values and
    gradients, bit for bit, as the ordinary path with that backend named."""
    pytest.importorskip("numba")
    g = graph(num_src=60, num_dst=50, edges=small_graph.CPU_GRAD_EDGES + 100)
    x = torch.randn(g.num_src_nodes, 8, requires_grad=True)
    w = torch.rand(g.num_edges, requires_grad=True) if op == "u_mul_e" else None
    if w is not None and weights_shape == "[E, 1]":
        w = w.detach().view(-1, 1).requires_grad_()
    checks = []
    monkeypatch.setattr("unigraph.ops.check_gspmm", lambda *a: checks.append(a) or (8,))
    with selector.use_backend("auto"):
        decided = selector.choose(g, unigraph.backends.Request("gspmm", op, reduce, 8, x.dtype, x.device, True,
                                                         torch.get_num_threads())).name
        out = ops.gspmm(g, op, reduce, u=x, e=w)
    assert function_calls == [decided] and checks == []           # the Function ran; the front door did not
    # the cost model prices the scatter backend by the kernels it will run: torch-scatter's (when
    # installed) lose these copies to numba; torch's own index_add_ wins them, and then the lane
    # still hands them on (its ops' backward is too slow at this size)
    assert op == "u_mul_e" or decided == ("numba" if scatter_backend._torch_scatter() is not None else "scatter")
    monkeypatch.undo()
    ordinary = ops.gspmm(g, op, reduce, u=x, e=w, backend=decided)  # a named backend: the ordinary path
    assert torch.equal(out, ordinary)
    grads = torch.autograd.grad(out.square().sum(), [t for t in (x, w) if t is not None])
    ordinary_grads = torch.autograd.grad(ordinary.square().sum(), [t for t in (x, w) if t is not None])
    assert all(torch.equal(a, b) for a, b in zip(grads, ordinary_grads))
    assert native_lane.run(g, op, reduce, x, w, decided) is None    # named: the lane leaves it to the front door


@pytest.mark.usefixtures("no_small_graph_rule")
def test_a_decision_for_numba_goes_to_numbas_function_whatever_the_wheels_installed(function_calls, monkeypatch):
    """The hand-off above when auto's decision is another backend, whichever the cost model would
    pick on this machine (with or without torch-scatter): numba's Function, numba's values."""
    pytest.importorskip("numba")
    g = graph(num_src=60, num_dst=50, edges=small_graph.CPU_GRAD_EDGES + 100)
    x = torch.randn(g.num_src_nodes, 8, requires_grad=True)
    monkeypatch.setattr(native_lane, "_auto_choice", lambda *args: unigraph.backends.get("numba"))
    with selector.use_backend("auto"):
        out = ops.gspmm(g, "copy_u", "sum", u=x)
    assert function_calls == ["numba"]
    monkeypatch.undo()
    ordinary = ops.gspmm(g, "copy_u", "sum", u=x, backend="numba")
    assert torch.equal(out, ordinary)
    assert torch.equal(*(torch.autograd.grad(y.square().sum(), x)[0] for y in (out, ordinary)))


def test_the_gpu_rule_runs_the_lane_without_a_decision(function_calls, monkeypatch):
    """The small-graph rule's GPU side, wired as on a GPU (here its device test answers yes for
    the CPU, and the CPU side is off): auto's call runs this lane's ops with no decision asked
    and no CSR built, and gives the Function path's values and gradients."""
    monkeypatch.setattr(small_graph, "takes", lambda *args: False)
    monkeypatch.setattr(small_graph, "TINY_WORK", -1)
    monkeypatch.setattr(small_graph, "gpu_applies", lambda num_edges, width, device: num_edges * width <= 400)
    monkeypatch.setattr(native_lane, "_auto_choice", lambda *args: pytest.fail("a decision was asked for"))
    for reduce, op in (("sum", "copy_u"), ("mean", "copy_u"), ("sum", "u_mul_e")):
        g = graph(edges=60, seed=3)
        x = torch.randn(g.num_src_nodes, 5, dtype=torch.float64, requires_grad=True)
        w = torch.rand(g.num_edges, 1, dtype=torch.float64, requires_grad=True) if op == "u_mul_e" else None
        before = len(function_calls)   # (the reference below counts its own)
        with selector.use_backend("auto"):
            out = ops.gspmm(g, op, reduce, u=x, e=w)
        assert len(function_calls) == before and not g.has_memo("in_csr") and not g.has_memo("stats")
        leaves = [x] + ([w] if w is not None else [])
        twins = [t.detach().clone().requires_grad_() for t in leaves]
        expected = function_path(g, twins[0], reduce, op, twins[1] if w is not None else None)
        torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
        grad = torch.randn_like(out)
        for mine, theirs in zip(torch.autograd.grad(out, leaves, grad), torch.autograd.grad(expected, twins, grad)):
            torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)
    # above the rule's bound: the decision is asked for again
    g = graph(edges=90, seed=4)
    with selector.use_backend("auto"), pytest.raises(pytest.fail.Exception, match="a decision"):
        ops.gspmm(g, "copy_u", "sum", u=torch.randn(g.num_src_nodes, 5))
