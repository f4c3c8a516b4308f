"""The cost model's decisions at its ends: skewed vs balanced degrees on a GPU, tiny vs large
graphs, what is installed, and that auto never runs Triton's interpreter.

GPU requests are explained without a GPU: ``explain_request`` takes the statistics and a
request for any device, and the ``pretend_available`` fixture marks every backend available.
"""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph import backends as registry
from unigraph.backends import Availability, Request, _STATUS, cost_model, selector
from unigraph.graph import DegreeStats

CUDA = torch.device("cuda")
CPU = torch.device("cpu")


def stats(nodes: int, edges: int, max_in: int, cv: float = 1.0) -> DegreeStats:
    return DegreeStats(num_src_nodes=nodes, num_dst_nodes=nodes, num_edges=edges, mean_in_degree=edges / nodes,
                       max_in_degree=max_in, cv_in_degree=cv, max_out_degree=max(1, edges // nodes * 3))


def request(kind="gspmm", op="copy_u", reduce="sum", width=64, dtype=torch.float32, device=CUDA) -> Request:
    return Request(kind, op, reduce, width, dtype, device)


# A power-law graph whose hub holds a third of the edges, and a balanced one of the same size.
HUB = stats(200_000, 3_000_000, max_in=1_000_000, cv=40.0)
BALANCED = stats(200_000, 3_000_000, max_in=35, cv=0.25)
TINY = stats(12, 30, max_in=5)


@pytest.fixture
def pretend_available(monkeypatch):
    """Every registered backend reports itself available (as on a GPU machine with all extras)."""
    for name in registry.names():
        monkeypatch.setitem(_STATUS, name, Availability(True, "pretend"))


@pytest.mark.parametrize("op,reduce", [("copy_u", "sum"), ("u_mul_e", "sum"), ("u_add_e", "max")])
def test_gpu_hub_graph_never_walks_the_hub_row_alone_balanced_goes_row_parallel(pretend_available, op, reduce):
    # with the committed H200 constants a hub's forward sum goes to cuSPARSE (measured faster than
    # triton_edge on R-MAT), with the estimates to triton_edge: either way not node-parallel, where
    # one program walks the hub's row (7-21x slower on the H200's R-MAT graphs)
    assert selector.explain_request(HUB, request(op=op, reduce=reduce)).backend in ("triton_edge", "sparse")
    # balanced rows: a row-parallel kernel (measured on the H200 within 5% of each other at d=16)
    assert selector.explain_request(BALANCED, request(op=op, reduce=reduce)).backend in ("triton_node", "sparse")


@pytest.mark.parametrize("op,reduce", [("copy_u", "sum"), ("u_mul_e", "sum"), ("u_add_e", "max")])
def test_gpu_estimates_send_a_hub_edge_parallel(pretend_available, monkeypatch, op, reduce):
    estimates = cost_model._estimated_tables()  # what auto uses without a committed GPU run
    monkeypatch.setattr(cost_model, "GPU_COSTS", estimates)
    monkeypatch.setattr(cost_model, "GPU_GRAD_COSTS", estimates)
    assert selector.explain_request(HUB, request(op=op, reduce=reduce)).backend == "triton_edge"
    assert selector.explain_request(BALANCED, request(op=op, reduce=reduce)).backend == "triton_node"


def test_gpu_fused_attention_stays_node_parallel_unless_one_row_dominates(pretend_available):
    # widths as the GPU suite measured them: GAT's 64 features, edge_softmax's width is its heads
    # (4 = 64 features / 16 per head; the suite never timed a 64-head softmax)
    for kind, op, width in (("gat_attention", "gat", 64), ("edge_softmax", "softmax", 4)):
        assert selector.explain_request(BALANCED, request(kind, op, None, width)).backend == "triton_node"
        assert selector.explain_request(HUB, request(kind, op, None, width)).backend == "triton_edge"


@pytest.mark.usefixtures("no_small_graph_rule")  # the cost model's own pick (the rule takes tiny sums first)
def test_gpu_tiny_graph_goes_to_the_lowest_launch_cost(pretend_available):
    chosen = selector.explain_request(TINY, request(width=8))
    family = cost_model.op_family(request())
    cheapest_launch = min(cost_model.GPU_COSTS, key=lambda name: cost_model.GPU_COSTS[name][family].launch_us)
    assert chosen.backend == cheapest_launch


def test_gpu_half_precision_extremes_cannot_go_edge_parallel(pretend_available):
    bf16_max = request(reduce="max", dtype=torch.bfloat16)
    explanation = selector.explain_request(HUB, bf16_max)
    assert explanation.backend != "triton_edge"
    edge = next(c for c in explanation.candidates if c.name == "triton_edge")
    assert edge.estimate_us is None and "atomic max/min" in edge.note
    # asked for by family name, the call still runs: on the node-parallel variant
    assert selector.explain_request(HUB, bf16_max, "triton", "argument").backend == "triton_node"
    assert selector.explain_request(HUB, request(reduce="max"), "triton", "argument").backend == "triton_edge"


def test_family_name_is_never_an_auto_candidate(pretend_available):
    explanation = selector.explain_request(BALANCED, request())
    assert "triton" not in [c.name for c in explanation.candidates]  # auto weighs the variants themselves
    assert {"triton_node", "triton_edge"} <= {c.name for c in explanation.candidates}
    assert registry.family("triton").variants == ("triton_node", "triton_edge")


def test_auto_never_picks_triton_for_cpu_calls(pretend_available):
    for graph_stats in (HUB, BALANCED, TINY):
        for kind, op, reduce in (("gspmm", "copy_u", "sum"), ("gspmm", "u_mul_e", "max"), ("gsddmm", "dot", None),
                                 ("gat_attention", "gat", None)):
            chosen = selector.explain_request(graph_stats, request(kind, op, reduce, device=CPU)).backend
            assert not chosen.startswith("triton"), (graph_stats, kind, op)


def test_cpu_ends_of_the_measured_model():
    """Launch overhead decides tiny graphs, E x F traffic large ones (benchmarks/kernels.py):
    between the torch backends, scatter's fewer launches win a 30-edge graph and the CSR
    products win copy_u/sum at N = 20,000, degree 32."""
    torch_only = ["scatter", "sparse"]
    large = stats(20_000, 640_000, max_in=60, cv=0.18)
    tiny_choice = selector._cheapest(selector._candidates(TINY, request(width=8, device=CPU), torch_only),
                                     request(device=CPU), "backend")[0]
    large_choice = selector._cheapest(selector._candidates(large, request(device=CPU), torch_only),
                                      request(device=CPU), "backend")[0]
    assert (tiny_choice, large_choice) == ("scatter", "sparse")


def test_what_is_installed_changes_the_estimate():
    large = stats(20_000, 640_000, max_in=60)
    cpu_sum = request(device=CPU)
    # the fitted rates differ with and without torch-scatter (on the 2-core machine torch's own
    # index_add_ was measured as fast as torch-scatter for sums, so only inequality is asserted)
    assert cost_model.estimate_scatter(large, cpu_sum, True) != cost_model.estimate_scatter(large, cpu_sum, False)
    cpu_max = request(reduce="max", device=CPU)
    assert cost_model.estimate_sparse(large, cpu_max, True) < cost_model.estimate_sparse(large, cpu_max, False)


def test_node_parallel_estimate_grows_with_the_largest_row_only():
    """Same edges and nodes: the longest row bounds node-parallel time, not edge-parallel's."""
    node = [cost_model.estimate_triton(s, request(), "node") for s in (BALANCED, HUB)]
    edge = [cost_model.estimate_triton(s, request(), "edge") for s in (BALANCED, HUB)]
    assert node[1] - node[0] > 10 * (edge[1] - edge[0]) > 0


def test_explain_prints_statistics_candidates_and_reason(pretend_available):
    text = str(selector.explain_request(HUB, request()))
    for expected in ("in-degree mean 15.00 max 1000000 cv 40.00", "candidates:", "reason:", "triton_node",
                     "triton_edge", "scatter", "sparse", "lowest estimated time"):
        assert expected in text, expected


def test_explicit_triton_without_gpu_or_interpreter_fails_loudly():
    if registry.status_of("triton_node").ok:
        pytest.skip("Triton can run here (a GPU, or TRITON_INTERPRET=1 in the environment)")
    g = unigraph.Graph(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    with pytest.raises(RuntimeError, match="'triton_node' was requested but cannot run here: .*TRITON_INTERPRET=1"):
        unigraph.ops.gspmm(g, "copy_u", "sum", torch.ones(2, 3), backend="triton_node")


def test_every_cost_table_covers_every_op_family():
    for table in (cost_model.CPU_COSTS, cost_model.CPU_GRAD_COSTS, cost_model.GPU_COSTS):
        for backend, rows in table.items():
            assert set(rows) == set(cost_model.FAMILIES), backend
    requests = [request("gspmm", op, reduce) for op in ("copy_u", "u_mul_e", "u_add_e") for reduce in ("sum", "max")]
    requests += [request("gsddmm", "dot", None), request("edge_softmax", "softmax", None),
                 request("gat_attention", "gat", None)]
    assert {cost_model.op_family(r) for r in requests} == set(cost_model.FAMILIES)


# ---------------------------------------------------------------------- forward vs forward + backward
@pytest.fixture
def tables_that_disagree(monkeypatch):
    """CPU tables where forward alone favours scatter and forward + backward favours sparse."""
    dear = cost_model.LinearCost(10_000.0, 0.0)
    fwd = {name: {family: dear for family in cost_model.FAMILIES} for name in cost_model.CPU_COSTS}
    grad = {name: dict(rows) for name, rows in fwd.items()}
    fwd["scatter"] = {family: cost_model.LinearCost(1.0, 0.0) for family in cost_model.FAMILIES}
    grad["sparse"] = {family: cost_model.LinearCost(1.0, 0.0) for family in cost_model.FAMILIES}
    monkeypatch.setattr(cost_model, "CPU_COSTS", fwd)
    monkeypatch.setattr(cost_model, "CPU_GRAD_COSTS", grad)


@pytest.mark.usefixtures("no_small_graph_rule")  # the cost model's path on a small graph
def test_differentiated_calls_are_ranked_by_forward_plus_backward(tables_that_disagree, monkeypatch):
    seen = []
    choose = selector.choose

    def spy(graph, req, *args, **kwargs):
        chosen = choose(graph, req, *args, **kwargs)
        seen.append((req.kind, req.grad, chosen.name))
        return chosen
    monkeypatch.setattr(selector, "choose", spy)
    auto_backend = selector.auto_backend

    def lane_spy(graph, kind, op, reduce, width, dtype, device, grad, threads):  # the native lane's lookup
        chosen = auto_backend(graph, kind, op, reduce, width, dtype, device, grad, threads)
        seen.append((kind, grad, chosen.name))
        return chosen
    monkeypatch.setattr(selector, "auto_backend", lane_spy)
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    x = torch.randn(3, 4, requires_grad=True)
    h, el, er = torch.randn(3, 2, 4), torch.randn(3, 2, requires_grad=True), torch.randn(3, 2)

    def first(call):  # (kind, grad, backend) of the call's own choice (its backward may choose too)
        seen.clear()
        call()
        return seen[0]
    with unigraph.use_backend("auto"):
        assert first(lambda: unigraph.ops.gspmm(g, "copy_u", "sum", x)) == ("gspmm", True, "sparse")
        with torch.no_grad():   # grad mode off
            assert first(lambda: unigraph.ops.gspmm(g, "copy_u", "sum", x)) == ("gspmm", False, "scatter")
        # nothing requires grad
        assert first(lambda: unigraph.ops.gspmm(g, "copy_u", "sum", x.detach())) == ("gspmm", False, "scatter")
        # one operand of several requires grad
        assert first(lambda: unigraph.ops.gat_attention(g, h, el, er)) == ("gat_attention", True, "sparse")
        assert first(lambda: unigraph.ops.gat_attention(g, h, el.detach(), er)) == ("gat_attention", False, "scatter")
        assert first(lambda: unigraph.ops.gsddmm(g, "dot", x.detach(), x, "u", "v")) == ("gsddmm", True, "sparse")
        assert first(lambda: unigraph.ops.edge_softmax(g, torch.randn(4, 2, requires_grad=True))) == (
            "edge_softmax", True, "sparse")
        out = unigraph.ops.gspmm(g, "copy_u", "sum", x)    # the memoized choice keeps the two apart
        with torch.no_grad():
            plain = unigraph.ops.gspmm(g, "copy_u", "sum", x)
        torch.testing.assert_close(out.detach(), plain)


@pytest.mark.usefixtures("no_small_graph_rule")  # the cost model's path on a small graph
def test_explain_says_which_time_it_ranks(tables_that_disagree):
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 4, requires_grad=True)
    with unigraph.use_backend("auto"):
        differentiated = unigraph.explain(g, "copy_u", "sum", x)
        with torch.no_grad():
            forward = unigraph.explain(g, "copy_u", "sum", x)
        assert unigraph.explain(g, "copy_u", "sum", 4, grad=True).backend == "sparse"
    assert differentiated.backend == "sparse" and "ranked by forward + backward" in str(differentiated)
    assert forward.backend == "scatter" and "(forward only)" in str(forward)


# ---------------------------------------------------------------------- threads
def test_cpu_estimates_know_the_thread_count_of_the_call():
    """The CPU tables hold times at MEASURED_THREADS; a call at another count scales each backend's
    per-element work by its parallel share (launch costs stay): numba's all of it, scatter's half."""
    big = stats(100_000, 2_000_000, max_in=300)
    measured = cost_model.MEASURED_THREADS
    for threads in (0, measured):   # 0 (not known) reads as measured: the fitted estimates as they are
        r = Request("gspmm", "copy_u", "sum", 64, torch.float32, CPU, False, threads)
        row = cost_model.cpu_cost("numba", r)
        assert cost_model.estimate_numba(big, r) == pytest.approx(row.us(big, 64))
    one = Request("gspmm", "copy_u", "sum", 64, torch.float32, CPU, False, 1)
    at = Request("gspmm", "copy_u", "sum", 64, torch.float32, CPU, False, measured)
    for backend, estimate in (("numba", lambda r: cost_model.estimate_numba(big, r)),
                              ("sparse", lambda r: cost_model.estimate_sparse(big, r, True)),
                              ("scatter", lambda r: cost_model.estimate_scatter(big, r, True))):
        launch = cost_model.cpu_cost(backend, one).launch_us
        share = cost_model.PARALLEL_SHARE[backend]
        expected = share * measured + (1 - share)
        assert (estimate(one) - launch) / (estimate(at) - launch) == pytest.approx(expected, rel=1e-9), backend
    assert cost_model.thread_scale("numba", 2 * measured) == pytest.approx(0.5)


@pytest.mark.usefixtures("no_small_graph_rule")  # the cost model's path on a small graph
def test_the_ops_ask_with_torchs_thread_count_and_decisions_are_kept_per_count(monkeypatch):
    g = unigraph.Graph(torch.randint(0, 50, (2, 300), generator=torch.Generator().manual_seed(0)), num_nodes=50)
    x = torch.randn(50, 8)
    picked = []
    original = selector._pick_name

    def spy(stats, request):
        picked.append(request.threads)
        return original(stats, request)
    monkeypatch.setattr(selector, "_pick_name", spy)
    before = torch.get_num_threads()
    try:
        for threads in (1, 2, 1, 2):   # a decision per count, made once and kept on the graph
            torch.set_num_threads(threads)
            unigraph.ops.gspmm(g, "copy_u", "sum", u=x)
        assert picked == [1, 2]
        assert "threads=2" in str(selector.explain(g, "copy_u", "sum", x))
    finally:
        torch.set_num_threads(before)


def test_gpu_small_sums_go_by_the_small_graph_rule_without_a_decision(pretend_available):
    """The small-graph rule's GPU side (``backends/small_graph.py``): copy_u / u_mul_e sums and
    means on a CUDA tensor with E x F <= GPU_WORK run the scatter ops; explain says so and names
    what the cost model would have picked; above the bound, other ops, half precision and the
    CPU go by the cost model (or the CPU side of the rule) as before."""
    from unigraph.backends import small_graph
    within = stats(20_000, small_graph.GPU_WORK // 64, max_in=40)
    above = stats(20_000, small_graph.GPU_WORK // 64 + 1, max_in=40)
    for op, reduce in (("copy_u", "sum"), ("copy_u", "mean"), ("u_mul_e", "sum")):
        explanation = selector.explain_request(within, request(op=op, reduce=reduce, width=64))
        assert explanation.backend == "scatter" and "small-graph rule on a GPU" in explanation.reason
        assert "the cost model's pick otherwise" in explanation.reason
        assert "small-graph rule" not in selector.explain_request(above, request(op=op, reduce=reduce,
                                                                                  width=64)).reason
    for other in (request(op="u_add_e", reduce="max", width=64), request(width=64, dtype=torch.float16),
                  request(kind="gsddmm", op="dot", reduce=None, width=64)):
        assert "small-graph rule" not in selector.explain_request(within, other).reason
    assert small_graph.gpu_applies(within.num_edges, 64, CUDA)
    assert not small_graph.gpu_applies(above.num_edges, 64, CUDA)
    assert not small_graph.gpu_applies(within.num_edges, 64, CPU)
