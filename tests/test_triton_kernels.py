"""The Triton backends equal the float64 references, forward and backward, on drawn graphs with
every edge case (no edges, isolated nodes, self-loops, multi-edges, a hub, bipartite).

On a CPU-only machine the kernels run in Triton's interpreter (see ``triton_setup``), which
costs tens of milliseconds per launch even on these small graphs: graphs are smaller than in
``test_ops_property`` and the ``ci`` profile draws a few examples per case (``thorough`` many
more). The interpreter runs with small blocks (``unigraph.kernels.triton.runtime``), so these
graphs still cross edge-chunk and feature-block boundaries. On a GPU the same tests run the
compiled kernels.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

import unigraph
from graph_strategies import graphs
from op_cases import BINARY_SHAPES, COPY_SHAPES, DOT_SHAPES, TARGET_PAIRS, features, rows_for
from reference import edge_softmax_ref, gsddmm_ref, gspmm_ref
from test_ops_property import assert_same, gat_inputs, gat_reference, grads_of, gspmm_inputs
from triton_setup import DEVICE, triton_kernels_here
from unigraph import ops
from unigraph.ops import gradients

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
    expected = gat_reference(drawn.graph, *inputs[:4], slope, inputs[4])
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
    composite = gradients.gat_attention_backward(g, "scatter", h, el, er, edge_scores, 0.2, mask, out, row_max,
                                                 row_sum, go, need)
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
                gat_reference(g, x.cpu(), el.cpu(), er.cpu(), None, 0.2, None), "gat")


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
    resolved = [value for key, value in gd._cache.items() if isinstance(key, tuple) and key[:2] == ("family", "triton")]
    assert resolved and resolved[0] in VARIANTS, "the family resolution is cached on the graph"
    half = torch.randn(g.num_nodes, 4, device=DEVICE).to(torch.bfloat16)
    assert unigraph.explain(gd, "copy_u", "max", half, backend="triton").backend == "triton_node"
    with pytest.raises(RuntimeError, match="atomic max/min"):
        ops.gspmm(gd, "copy_u", "max", half, backend="triton_edge")
