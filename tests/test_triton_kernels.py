"""The Triton backends equal the float64 references, forward and backward, on drawn graphs with
every edge case (no edges, isolated nodes, self-loops, multi-edges, a hub, bipartite).

On a CPU-only machine the kernels run in Triton's interpreter (see ``triton_setup``), which
costs tens of milliseconds per launch even on these small graphs: graphs are smaller than in
``tests/ops`` and the ``ci`` profile draws a few examples per case (``thorough`` many
more). The interpreter runs with small blocks (``unigraph.kernels.triton.runtime``), so these
graphs still cross edge-chunk and feature-block boundaries. On a GPU the same tests run the
compiled kernels.
"""
from __future__ import annotations

import inspect

import pytest
import torch
from hypothesis import given, settings, strategies as st

import unigraph
from graph_strategies import graphs
from op_cases import (BINARY_SHAPES, COPY_SHAPES, DOT_SHAPES, TARGET_PAIRS, assert_same, features, gat_inputs,
                      grads_of, gspmm_inputs, rows_for)
from reference import edge_softmax_ref, gat_ref, gspmm_extreme_ref, gsddmm_ref, gspmm_ref
from triton_setup import DEVICE, triton_kernels_here
from unigraph import ops
from unigraph.ops import custom, gradients

VARIANTS = ["triton_node", "triton_edge"]
SMALL_GRAPHS = dict(max_nodes=6, max_edges=12, hub_degree=14)
EXAMPLES = max(3, settings.default.max_examples // 4)  # 6 under ci, 100 under thorough


@pytest.fixture(scope="module", autouse=True)
def _triton_device():
    with triton_kernels_here() as device:
        yield device


def on_device(*tensors):
    """Copies of CPU leaf tensors on the test device, requiring grad as the originals do."""
    return [None if t is None else t.detach().to(DEVICE).requires_grad_(t.requires_grad) for t in tensors]


def cpu(tensors):
    return [t.cpu() for t in tensors]


# --------------------------------------------------------------------------- g-SpMM
@pytest.mark.parametrize("backend", VARIANTS)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("op", ["copy_u", "copy_e", "u_add_e", "u_sub_e", "u_mul_e", "u_div_e"])
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_gspmm_matches_reference(backend, op, reduce, data):
    drawn = data.draw(graphs(**SMALL_GRAPHS), label="graph")
    shapes = data.draw(st.sampled_from(COPY_SHAPES if op.startswith("copy") else BINARY_SHAPES), label="shapes")
    u, e = gspmm_inputs(drawn, op, shapes)
    u_dev, e_dev = on_device(u, e)
    out = ops.gspmm(drawn.graph.to(DEVICE), op, reduce, u_dev, e_dev, backend=backend)
    expected = gspmm_ref(drawn.graph, op, reduce, u, e)
    assert out.shape == expected.shape
    assert_same(out.cpu(), expected, f"forward ({drawn.kind})")
    upstream = torch.randn(expected.shape, generator=drawn.generator(), dtype=torch.float64)
    got = cpu(grads_of(out, (u_dev, e_dev), upstream.to(DEVICE)))
    for g, want, name in zip(got, grads_of(expected, (u, e), upstream), "ue"):
        assert_same(g, want, f"d{name} ({drawn.kind})")


# --------------------------------------------------------------------------- g-SDDMM
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs"])
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_gsddmm_matches_reference(op, data):
    # g-SDDMM is the same edge-parallel kernel in both variants; its backward is g-SpMM, run
    # here on the variant drawn
    backend = data.draw(st.sampled_from(VARIANTS), label="backend")
    drawn = data.draw(graphs(**SMALL_GRAPHS), label="graph")
    g, gen = drawn.graph, drawn.generator()
    lhs_target, rhs_target = data.draw(st.sampled_from(TARGET_PAIRS), label="targets")
    fl, fr = data.draw(st.sampled_from(DOT_SHAPES if op == "dot" else BINARY_SHAPES), label="shapes")
    lhs = features(gen, rows_for(g, lhs_target), fl) if op != "copy_rhs" else None
    rhs = features(gen, rows_for(g, rhs_target), fr, away_from_zero=(op == "div")) if op != "copy_lhs" else None
    lhs_dev, rhs_dev = on_device(lhs, rhs)
    out = ops.gsddmm(g.to(DEVICE), op, lhs_dev, rhs_dev, lhs_target, rhs_target, backend=backend)
    expected = gsddmm_ref(g, op, lhs, rhs, lhs_target, rhs_target)
    assert out.shape == expected.shape
    assert_same(out.cpu(), expected, f"forward ({drawn.kind})")
    upstream = torch.randn(expected.shape, generator=gen, dtype=torch.float64)
    got = cpu(grads_of(out, (lhs_dev, rhs_dev), upstream.to(DEVICE)))
    for a, b, name in zip(got, grads_of(expected, (lhs, rhs), upstream), ("lhs", "rhs")):
        assert_same(a, b, f"d{name} ({drawn.kind})")


# --------------------------------------------------------------------------- edge softmax
@pytest.mark.parametrize("backend", VARIANTS)
@settings(max_examples=2 * EXAMPLES)
@given(data=st.data())
def test_edge_softmax_matches_reference(backend, data):
    drawn = data.draw(graphs(**SMALL_GRAPHS), label="graph")
    g, gen = drawn.graph, drawn.generator()
    shape = data.draw(st.sampled_from([(), (3,), (2, 1), (11,)]), label="shape")
    scale = data.draw(st.sampled_from([1.0, 50.0]), label="scale")  # large scores: exp overflows without the max
    scores = (features(gen, g.num_edges, shape).detach() * scale).requires_grad_(True)
    (scores_dev,) = on_device(scores)
    out = ops.edge_softmax(g.to(DEVICE), scores_dev, backend=backend)
    expected = edge_softmax_ref(g, scores)
    assert_same(out.cpu(), expected, f"forward ({drawn.kind})")
    upstream = torch.randn(expected.shape, generator=gen, dtype=torch.float64)
    got = grads_of(out, (scores_dev,), upstream.to(DEVICE))[0].cpu()
    assert_same(got, grads_of(expected, (scores,), upstream)[0], f"dscores ({drawn.kind})")


# --------------------------------------------------------------------------- GAT attention
@pytest.mark.parametrize("backend", VARIANTS)
@pytest.mark.parametrize("with_edge_scores", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_gat_attention_matches_reference(backend, with_edge_scores, with_mask, data):
    drawn = data.draw(graphs(**SMALL_GRAPHS), label="graph")
    slope = data.draw(st.sampled_from([0.2, 0.0, 1.0]), label="negative_slope")
    heads, width = data.draw(st.sampled_from([(2, 3), (1, 11), (3, 1)]), label="heads x features")
    inputs = gat_inputs(drawn, with_edge_scores, with_mask, heads=heads, width=width)
    h, el, er, edge_scores, mask = on_device(*inputs)
    out = ops.gat_attention(drawn.graph.to(DEVICE), h, el, er, slope, edge_scores=edge_scores, edge_mask=mask,
                            backend=backend)
    expected = gat_ref(drawn.graph, *inputs[:4], slope, inputs[4])
    assert_same(out.cpu(), expected, f"forward ({drawn.kind})")
    upstream = torch.randn(expected.shape, generator=drawn.generator(), dtype=torch.float64)
    got = cpu(grads_of(out, (h, el, er, edge_scores), upstream.to(DEVICE)))
    want = grads_of(expected, inputs[:4], upstream)
    for a, b, name in zip(got, want, ("h", "el", "er", "edge_scores")):
        assert_same(a, b, f"d{name} ({drawn.kind})")


@settings(max_examples=2 * EXAMPLES)
@given(data=st.data())
def test_fused_gat_backward_matches_the_composite_formulas(data):
    """triton_node's fused backward against unigraph.ops.gradients.gat_attention_backward (the
    formulas every other backend runs), for every subset of requested gradients."""
    drawn = data.draw(graphs(**SMALL_GRAPHS), label="graph")
    need = data.draw(st.tuples(*[st.booleans()] * 4), label="need")
    with_edge_scores, with_mask = data.draw(st.booleans(), label="edge scores"), data.draw(st.booleans(), label="mask")
    h, el, er, edge_scores, mask = [None if t is None else t.detach() for t in
                                    on_device(*gat_inputs(drawn, with_edge_scores, with_mask))]
    g = drawn.graph.to(DEVICE).tensors()
    backend = unigraph.backends.get("triton_node")
    out, row_max, row_sum = backend.gat_attention(g, h, el, er, edge_scores, 0.2, mask)
    go = torch.randn(out.shape, generator=drawn.generator(), dtype=torch.float64).to(DEVICE)
    fused = backend.gat_attention_backward(g, h, el, er, edge_scores, 0.2, mask, out, row_max, row_sum, go, need)
    composite = gradients.gat_attention_backward(g, custom.Primitives(unigraph.backends.get("scatter")), h, el, er,
                                                 edge_scores, 0.2, mask, out, row_max, row_sum, go, need)
    for a, b, wanted, name in zip(fused, composite, need, ("dh", "del", "der", "dedge_scores")):
        if not wanted or (name == "dedge_scores" and edge_scores is None and b is None):
            continue
        assert a is not None, f"{name} was requested"
        assert_same(a.cpu(), b.cpu(), f"{name} ({drawn.kind})")


def test_gat_double_backward_takes_the_differentiable_formulas():
    """A fused backward builds no autograd graph; with create_graph=True the composite runs."""
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3).to(DEVICE)
    gen = torch.Generator().manual_seed(0)
    h, el, er = on_device(*(torch.randn(shape, generator=gen, dtype=torch.float64).requires_grad_(True)
                            for shape in ((3, 2, 2), (3, 2), (3, 2))))
    out = ops.gat_attention(g, h, el, er, backend="triton_node")
    (d_el,) = torch.autograd.grad(out.square().sum(), el, create_graph=True)
    (second,) = torch.autograd.grad(d_el.sum(), er)
    ref = ops.gat_attention(g, h, el, er, backend="scatter")
    (d_el_ref,) = torch.autograd.grad(ref.square().sum(), el, create_graph=True)
    (second_ref,) = torch.autograd.grad(d_el_ref.sum(), er)
    assert_same(second.cpu(), second_ref.cpu(), "second derivative")


# --------------------------------------------------------------------------- block boundaries and paths
def hub_graph(sorted_edges: bool, num_nodes: int = 7, degree: int = 29) -> unigraph.Graph:
    """A hub (node 0) with ``degree`` in-edges plus a ring; the hub's edges grouped or interleaved."""
    hub = torch.stack([torch.arange(degree) % num_nodes, torch.zeros(degree, dtype=torch.int64)])
    ring = torch.stack([torch.arange(num_nodes), (torch.arange(num_nodes) + 1) % num_nodes])
    edges = torch.cat([hub, ring], dim=1)
    if not sorted_edges:
        edges = edges[:, torch.randperm(edges.shape[1], generator=torch.Generator().manual_seed(1))]
    return unigraph.Graph(edges, num_nodes=num_nodes)


@pytest.mark.parametrize("sorted_edges", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "max"])
def test_edge_parallel_paths_on_a_hub(sorted_edges, reduce):
    """Destination-sorted hub edges take the one-atomic-per-block path (sum), interleaved ones
    the per-element atomics; wide features span several feature blocks."""
    g = hub_graph(sorted_edges)
    x = torch.randn(g.num_nodes, 19, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    x.requires_grad_(True)
    (x_dev,) = on_device(x)
    out = ops.gspmm(g.to(DEVICE), "copy_u", reduce, x_dev, backend="triton_edge")
    expected = gspmm_ref(g, "copy_u", reduce, x, None)
    assert_same(out.cpu(), expected, "forward")
    got = grads_of(out, (x_dev,), torch.ones(expected.shape, dtype=torch.float64, device=DEVICE))[0]
    assert_same(got.cpu(), grads_of(expected, (x,), torch.ones(expected.shape, dtype=torch.float64))[0], "dx")


def test_int64_address_arithmetic(monkeypatch):
    """Graphs past 2**31 offsets take int64 arithmetic; force that path on a small graph."""
    from unigraph.kernels.triton import gat, sddmm, spmm_edge, spmm_node
    for module in (spmm_node, spmm_edge, sddmm, gat):
        monkeypatch.setattr(module, "needs_int64", lambda *extents: True)
    g = hub_graph(False)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(g.num_nodes, 2, 3, generator=gen, dtype=torch.float64).to(DEVICE)
    w = torch.randn(g.num_edges, 2, 1, generator=gen, dtype=torch.float64).to(DEVICE)
    gd = g.to(DEVICE)
    for backend in VARIANTS:
        for reduce in ("sum", "min"):
            out = ops.gspmm(gd, "u_mul_e", reduce, x, w, backend=backend)
            assert_same(out.cpu(), gspmm_ref(g, "u_mul_e", reduce, x.cpu(), w.cpu()), f"{backend} {reduce}")
    assert_same(ops.gsddmm(gd, "dot", x, x, "u", "v", backend="triton_node").cpu(),
                gsddmm_ref(g, "dot", x.cpu(), x.cpu(), "u", "v"), "dot")
    el, er = x[:, :, 0].contiguous(), x[:, :, 1].contiguous()
    assert_same(ops.gat_attention(gd, x, el, er, backend="triton_node").cpu(),
                gat_ref(g, x.cpu(), el.cpu(), er.cpu(), None, 0.2, None), "gat")


def test_index_width_is_chosen_by_the_largest_offset():
    from unigraph.kernels.triton.runtime import needs_int64
    assert not needs_int64(2**31 - 1, 5)
    assert needs_int64(5, 2**31)
    assert not needs_int64()


def test_float32_matches_float64_reference():
    g = hub_graph(False)
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(g.num_nodes, 2, 5, generator=gen, dtype=torch.float64)
    w = torch.randn(g.num_edges, 2, 1, generator=gen, dtype=torch.float64)
    gd = g.to(DEVICE)
    for backend in VARIANTS:
        out = ops.gspmm(gd, "u_mul_e", "sum", x.float().to(DEVICE), w.float().to(DEVICE), backend=backend)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out.cpu().double(), gspmm_ref(g, "u_mul_e", "sum", x, w), atol=1e-5, rtol=1e-5)


def test_kernels_return_fresh_tensors():
    """Custom operators forbid aliasing: no output may be a view of an input."""
    g = unigraph.Graph(torch.tensor([[0, 1], [1, 0]]), num_nodes=2).to(DEVICE)
    x = torch.randn(2, 3, dtype=torch.float64, device=DEVICE)
    backend = unigraph.backends.get("triton_node")
    outs = [backend.gsddmm(g.tensors(), "copy_lhs", x, None, "e", "v")[0],
            unigraph.backends.get("triton_edge").gspmm(g.tensors(), "copy_u", "sum", x, None)[0]]
    for out in outs:
        assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


# --------------------------------------------------------------------------- selection under the interpreter
def test_auto_never_picks_triton_on_the_cpu():
    src = torch.arange(1, 500)
    hub = unigraph.Graph(torch.stack([src, torch.zeros_like(src)]), num_nodes=500)
    for op, reduce in (("copy_u", "sum"), ("copy_u", "max"), ("dot", None), ("edge_softmax", None)):
        explanation = unigraph.explain(hub, op, reduce, torch.randn(500, 64))
        assert not explanation.backend.startswith("triton"), str(explanation)
        if DEVICE.type == "cpu":  # the interpreter is available yet never an auto candidate
            triton_rows = [c for c in explanation.candidates if c.name.startswith("triton")]
            assert triton_rows and all(not c.auto for c in triton_rows)


def test_explicit_family_name_runs_a_variant_and_half_precision_extremes_go_node_parallel():
    g = hub_graph(True)
    gd = g.to(DEVICE)
    x = torch.randn(g.num_nodes, 4, dtype=torch.float64, device=DEVICE)
    out = ops.gspmm(gd, "copy_u", "max", x, backend="triton")
    assert_same(out.cpu(), gspmm_ref(g, "copy_u", "max", x.cpu(), None), "forward")
    resolved = [value.name for key, value in gd._cache.items()
                if isinstance(key, tuple) and key[:3] == ("unigraph.backends", "family", "triton")]
    assert resolved and resolved[0] in VARIANTS, "the family resolution is kept on the graph"
    half = torch.randn(g.num_nodes, 4, device=DEVICE).to(torch.bfloat16)
    assert unigraph.explain(gd, "copy_u", "max", half, backend="triton").backend == "triton_node"
    with pytest.raises(RuntimeError, match="atomic max/min"):
        ops.gspmm(gd, "copy_u", "max", half, backend="triton_edge")


# --------------------------------------------------------------------------- NaN and infinities
SPECIALS = st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, 1.0, -1.0])


@pytest.mark.parametrize("backend", VARIANTS)
@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_extremes_with_nan_and_infinities(backend, reduce, dtype, data):
    """As on the CPU backends: NaN propagates whatever the edge order (the atomics of triton_edge
    included), rows of -inf/+inf give -inf/+inf, rows without in-edges 0; the gradient goes to
    the first NaN edge, else the first extreme one."""
    drawn = data.draw(graphs(**SMALL_GRAPHS), label="graph")
    g = drawn.graph
    values = data.draw(st.lists(SPECIALS, min_size=g.num_src_nodes * 3, max_size=g.num_src_nodes * 3), label="u")
    u = torch.tensor(values, dtype=torch.float64).reshape(g.num_src_nodes, 3).requires_grad_(True)
    (u_dev,) = on_device(u.to(dtype).requires_grad_(True))
    out = ops.gspmm(g.to(DEVICE), "copy_u", reduce, u_dev, backend=backend)
    expected = gspmm_extreme_ref(g, "copy_u", reduce, u, None)
    assert_same(out.cpu().double(), expected, f"forward ({drawn.kind})", equal_nan=True)
    upstream = torch.randn(expected.shape, generator=drawn.generator(), dtype=torch.float64)
    got = grads_of(out, (u_dev,), upstream.to(dtype).to(DEVICE))[0]
    assert_same(got.cpu().double(), grads_of(expected, (u,), upstream)[0], f"du ({drawn.kind})", atol=1e-6,
                rtol=1e-6)


# --------------------------------------------------------------------------- double backward
# fast_mode: one random direction instead of every input element, so the interpreter runs a few
# dozen kernels rather than thousands (the CPU backends' tests in tests/ops check every element)
@pytest.mark.parametrize("backend", VARIANTS)
@pytest.mark.parametrize("op,reduce", [("u_mul_e", "sum"), ("u_div_e", "max"), ("copy_u", "mean")])
def test_gspmm_gradgradcheck(backend, op, reduce):
    g = hub_graph(False, num_nodes=3, degree=4)
    gen = torch.Generator().manual_seed(5)
    u = torch.randn(3, 2, generator=gen, dtype=torch.float64)
    e = torch.rand(g.num_edges, 1, generator=gen, dtype=torch.float64) + 0.5
    u_dev, e_dev = on_device(u.requires_grad_(True), e.requires_grad_(True))
    gd = g.to(DEVICE)
    if op == "copy_u":
        fn, inputs = (lambda a: ops.gspmm(gd, op, reduce, a, backend=backend)), (u_dev,)
    else:
        fn, inputs = (lambda a, b: ops.gspmm(gd, op, reduce, a, b, backend=backend)), (u_dev, e_dev)
    assert torch.autograd.gradgradcheck(fn, inputs, fast_mode=True)


def test_gat_gradgradcheck():
    """triton_node's fused GAT (triton_edge composes GAT from the primitives checked above, edge
    softmax included: the double backward recomputes the weights with it)."""
    backend = "triton_node"
    graph = hub_graph(False, num_nodes=3, degree=3)
    drawn = type("Drawn", (), {"graph": graph, "generator": lambda self: torch.Generator().manual_seed(6)})()
    h, el, er, edge_scores, mask = on_device(*gat_inputs(drawn, True, True, heads=1, width=2))
    gd = graph.to(DEVICE)
    assert torch.autograd.gradgradcheck(
        lambda *t: ops.gat_attention(gd, t[0], t[1], t[2], 0.2, edge_scores=t[3], edge_mask=mask.detach(),
                                     backend=backend), (h, el, er, edge_scores), fast_mode=True)


# --------------------------------------------------------------------------- half precision statistics
def test_gat_statistics_stay_float32_for_float16():
    """The fused backward recomputes each weight from the saved row maximum: a maximum rounded to
    float16 (spacing 0.5 near 1000) would scale every recomputed weight by up to exp(0.25)."""
    num_src = 6
    g = unigraph.Graph(torch.stack([torch.arange(num_src), torch.zeros(num_src, dtype=torch.int64)]),
                       num_nodes=num_src).to(DEVICE)
    gen = torch.Generator().manual_seed(7)
    el = (1000.5 + torch.arange(num_src, dtype=torch.float64).view(-1, 1) / 2).to(torch.float16)  # exact in fp16
    er = torch.full((num_src, 1), 0.25, dtype=torch.float16)  # z = el + 0.25: not a float16 number
    h = torch.randn(num_src, 1, 4, generator=gen).to(torch.float16)
    h16, el16, er16 = on_device(h.requires_grad_(True), el.requires_grad_(True), er.requires_grad_(True))
    out = ops.gat_attention(g, h16, el16, er16, backend="triton_node")
    _, row_max, row_sum = unigraph.backends.get("triton_node").gat_attention(
        g.tensors(), h16.detach(), el16.detach(), er16.detach(), None, 0.2, None)
    assert row_max.dtype == row_sum.dtype == torch.float32
    assert float(row_max[0, 0]) == 1000.5 + 2.5 + 0.25
    upstream = torch.randn(out.shape, generator=gen).to(torch.float16).to(DEVICE)
    dh = torch.autograd.grad((out * upstream).sum(), h16)[0]
    h64, el64, er64 = (t.detach().double().requires_grad_(True) for t in (h, el, er))
    ref = gat_ref(g.to("cpu"), h64, el64, er64, None, 0.2, None)
    (dh_ref,) = torch.autograd.grad((ref * upstream.cpu().double()).sum(), h64)
    torch.testing.assert_close(dh.cpu().double(), dh_ref, atol=2e-3, rtol=2e-3)


def test_gat_hub_row_sum_beyond_float16(monkeypatch):
    """A hub of 70,000 equal scores: its softmax row sum (70000) exceeds float16's 65504. Under the
    interpreter the forward kernel runs with 1024-edge chunks (its 4-edge chunks would take minutes)."""
    from unigraph.kernels.triton import gat
    if DEVICE.type == "cpu":
        kernel = gat.gat_forward_kernel
        monkeypatch.setattr(gat, "gat_forward_kernel", Autotuner(kernel.fn, kernel.arg_names, [triton_config(BLOCK_E=1024)],
                                                                 kernel.keys, None, None))
    n = 70_000
    g = unigraph.Graph(torch.stack([torch.arange(n), torch.zeros(n, dtype=torch.int64)]), num_src_nodes=n,
                       num_dst_nodes=1).to(DEVICE)
    h = torch.ones(n, 1, 1, dtype=torch.float16, device=DEVICE)
    out, row_max, row_sum = unigraph.backends.get("triton_node").gat_attention(
        g.tensors(), h, torch.zeros(n, 1, dtype=torch.float16, device=DEVICE),
        torch.zeros(1, 1, dtype=torch.float16, device=DEVICE), None, 0.2, None)
    assert row_sum.dtype == torch.float32 and float(row_sum[0, 0]) == n and float(row_max[0, 0]) == 0.0
    assert out.dtype == torch.float16 and float(out[0, 0, 0]) == 1.0


# --------------------------------------------------------------------------- autotuning and launch grids
def _kernels_and_keys():
    from unigraph.kernels.triton import edge_softmax, gat, sddmm, spmm_edge, spmm_node
    return [spmm_node.spmm_node_kernel, spmm_edge.spmm_edge_kernel, sddmm.sddmm_kernel, sddmm.sddmm_dot_kernel,
            edge_softmax.edge_softmax_kernel, gat.gat_forward_kernel, gat.gat_backward_scores_kernel,
            gat.gat_backward_h_kernel]


def test_autotune_keys_name_everything_that_changes_the_kernel():
    """Every compile-time parameter but the tuned block sizes and the accumulator (which follows
    the dtype, which Triton adds to the key itself) is in the key: a kernel tuned for copy_u/sum is
    never reused for u_mul_e/max, nor a u->v g-SDDMM for an e->e one."""
    for kernel in _kernels_and_keys():
        parameters = inspect.signature(kernel.base_fn).parameters.values()
        constexprs = [p.name for p in parameters if "constexpr" in str(p.annotation)]
        tuned = set().union(*(c.kwargs for c in kernel.configs))
        missing = [name for name in constexprs if name not in kernel.keys and name not in tuned
                   and not name.startswith("BLOCK_") and name != "ACC"]
        assert constexprs and not missing, f"{kernel.base_fn.__name__}: {missing} not in the autotune key {kernel.keys}"


def test_launch_grids_respect_cuda_limits():
    from unigraph.kernels.triton.runtime import checked_grid
    assert checked_grid(2**31 - 1, 65535, 3) == (2**31 - 1, 65535, 3)
    with pytest.raises(ValueError, match="70000 programs on grid axis 1, more than CUDA's limit of 65535"):
        checked_grid(10, 70000)


def test_wide_dot_products_run_on_grid_axis_zero():
    """g-SDDMM dot with more output columns than grid axis 1 could hold (65535 on CUDA)."""
    g = unigraph.Graph(torch.tensor([[0], [1]]), num_nodes=2).to(DEVICE)
    columns = 65_540 if DEVICE.type == "cuda" else 40  # the interpreter runs one program at a time
    x = torch.randn(2, columns, 2, dtype=torch.float64, device=DEVICE)
    out = ops.gsddmm(g, "dot", x, x, "u", "v", backend="triton_node")
    assert_same(out.cpu(), (x[0] * x[1]).sum(-1, keepdim=True).unsqueeze(0).cpu(), "dot")


def test_autotuner_restores_the_accumulator_between_trials(monkeypatch):
    """spmm_edge adds into its accumulator, so every timing trial of the autotuner must start from
    the initial values (``restore_value``): with two configurations timed three times each, the
    result is still exact; without the restore it would hold the sum several times over."""
    from unigraph.kernels.triton import spmm_edge
    kernel = spmm_edge.spmm_edge_kernel
    configs = [triton_config(BLOCK_E=2), triton_config(BLOCK_E=4)]

    def timed_three_times(call, quantiles):
        for _ in range(3):
            call()
        return [1.0, 1.0, 1.0]

    g = hub_graph(False)
    x = torch.randn(g.num_nodes, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64).to(DEVICE)
    gd = g.to(DEVICE).tensors()
    expected = gspmm_ref(g, "copy_u", "sum", x.cpu(), None)
    results = {}
    operands = (gd.src, gd.dst, x)
    versions = [t._version for t in operands]
    for restore in (spmm_edge.RESTORE, []):
        tuner = Autotuner(kernel.fn, kernel.arg_names, configs, kernel.keys, None, restore, do_bench=timed_three_times)
        monkeypatch.setattr(spmm_edge, "spmm_edge_kernel", tuner)
        results[bool(restore)] = spmm_edge.spmm_edge(gd.src, gd.dst, gd.num_dst, "copy_u", "sum", x, None, (3,),
                                                     None, None)[0]
    assert_same(results[True].cpu(), expected, "with restore_value")
    # the restore writes only into the kernel's own outputs: a placeholder aliasing src made every
    # trial bump the graph's version (GraphModifiedError on the next call, first seen on an H200)
    assert [t._version for t in operands] == versions
    assert not torch.allclose(results[False].cpu(), expected), "without restore_value the trials accumulate"


def triton_config(**meta):
    import triton
    return triton.Config(meta, num_warps=1)


def Autotuner(*args, **kwargs):  # noqa: N802 - Triton's class, imported on use (it imports triton)
    from triton.runtime.autotuner import Autotuner as TritonAutotuner
    return TritonAutotuner(*args, **kwargs)


@pytest.mark.parametrize("backend", VARIANTS)
def test_zero_width_features(backend):
    g = hub_graph(False, num_nodes=3, degree=3).to(DEVICE)
    u = torch.randn(3, 0, dtype=torch.float64, device=DEVICE, requires_grad=True)
    w = torch.randn(g.num_edges, 1, dtype=torch.float64, device=DEVICE, requires_grad=True)
    h = torch.randn(3, 2, 0, dtype=torch.float64, device=DEVICE, requires_grad=True)
    el = torch.randn(3, 2, dtype=torch.float64, device=DEVICE, requires_grad=True)
    outs = [ops.gspmm(g, "u_mul_e", reduce, u, w, backend=backend) for reduce in ("sum", "max")]
    outs += [ops.gsddmm(g, "add", u, u, "u", "v", backend=backend),
             ops.edge_softmax(g, torch.zeros(g.num_edges, 0, dtype=torch.float64, device=DEVICE), backend=backend),
             ops.gat_attention(g, h, el, el, backend=backend)]
    assert [tuple(o.shape) for o in outs] == [(3, 0), (3, 0), (g.num_edges, 0), (g.num_edges, 0), (3, 2, 0)]
    grads = torch.autograd.grad(sum(o.sum() for o in outs), (u, w, h, el), allow_unused=True)
    for grad, leaf in zip(grads, (u, w, h, el)):
        assert grad is None or (grad.shape == leaf.shape and not bool(grad.any()))
