"""Every op on every backend equals a float64 reference, forward and gradients, on drawn graphs
with the edge cases (no edges, isolated nodes, self-loops, multi-edges, a hub, bipartite)."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from graph_strategies import graphs
from op_cases import (BINARY_SHAPES, COPY_SHAPES, DOT_SHAPES, TARGET_PAIRS, cpu_test_backends, features,
                      rows_for)
from reference import edge_softmax_ref, gspmm_ref, gsddmm_ref
from unigraph import backends as registry
from unigraph import ops
from unigraph.backends import Request

BACKENDS = cpu_test_backends()
GSPMM_OPS = ["copy_u", "copy_e", "u_add_e", "u_sub_e", "u_mul_e", "u_div_e"]
REDUCES = ["sum", "mean", "max", "min"]


def gspmm_inputs(drawn, op, shapes, dtype=torch.float64):
    g, gen = drawn.graph, drawn.generator()
    if op == "copy_u":
        return features(gen, g.num_src_nodes, shapes, dtype=dtype), None
    if op == "copy_e":
        return None, features(gen, g.num_edges, shapes, dtype=dtype)
    fu, fe = shapes
    return (features(gen, g.num_src_nodes, fu, dtype=dtype),
            features(gen, g.num_edges, fe, away_from_zero=(op == "u_div_e"), dtype=dtype))


def grads_of(out, inputs, upstream):
    leaves = [t for t in inputs if t is not None]
    if not leaves or out.numel() == 0 or not out.requires_grad:
        return [torch.zeros_like(t) for t in leaves]
    grads = torch.autograd.grad((out * upstream).sum(), leaves, allow_unused=True)
    return [torch.zeros_like(t) if grad is None else grad for t, grad in zip(leaves, grads)]


def assert_same(actual, expected, what, atol=1e-9, rtol=1e-7):
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("op", GSPMM_OPS)
@given(data=st.data())
def test_gspmm_matches_reference(backend, op, reduce, data):
    drawn = data.draw(graphs(), label="graph")
    shapes = data.draw(st.sampled_from(COPY_SHAPES if op.startswith("copy") else BINARY_SHAPES), label="shapes")
    u, e = gspmm_inputs(drawn, op, shapes)
    out = ops.gspmm(drawn.graph, op, reduce, u, e, backend=backend)
    expected = gspmm_ref(drawn.graph, op, reduce, u, e)
    assert out.shape == expected.shape
    assert_same(out, expected, f"forward ({drawn.kind})")
    upstream = torch.randn(expected.shape, generator=drawn.generator(), dtype=torch.float64)
    for got, want, name in zip(grads_of(out, (u, e), upstream), grads_of(expected, (u, e), upstream), "ue"):
        assert_same(got, want, f"d{name} ({drawn.kind})")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs"])
@given(data=st.data())
def test_gsddmm_matches_reference(backend, op, data):
    drawn = data.draw(graphs(), label="graph")
    g, gen = drawn.graph, drawn.generator()
    lhs_target, rhs_target = data.draw(st.sampled_from(TARGET_PAIRS), label="targets")
    fl, fr = data.draw(st.sampled_from(DOT_SHAPES if op == "dot" else BINARY_SHAPES), label="shapes")
    lhs = features(gen, rows_for(g, lhs_target), fl) if op != "copy_rhs" else None
    rhs = features(gen, rows_for(g, rhs_target), fr, away_from_zero=(op == "div")) if op != "copy_lhs" else None
    out = ops.gsddmm(g, op, lhs, rhs, lhs_target, rhs_target, backend=backend)
    expected = gsddmm_ref(g, op, lhs, rhs, lhs_target, rhs_target)
    assert out.shape == expected.shape
    assert_same(out, expected, f"forward ({drawn.kind})")
    upstream = torch.randn(expected.shape, generator=gen, dtype=torch.float64)
    for got, want, name in zip(grads_of(out, (lhs, rhs), upstream), grads_of(expected, (lhs, rhs), upstream),
                               ("lhs", "rhs")):
        assert_same(got, want, f"d{name} ({drawn.kind})")


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_edge_softmax_matches_reference(backend, data):
    drawn = data.draw(graphs(), label="graph")
    g, gen = drawn.graph, drawn.generator()
    shape = data.draw(st.sampled_from([(), (1,), (3,), (2, 1)]), label="shape")
    scale = data.draw(st.sampled_from([1.0, 50.0]), label="scale")  # large scores: exp would overflow naively
    scores = (features(gen, g.num_edges, shape).detach() * scale).requires_grad_(True)
    out = ops.edge_softmax(g, scores, backend=backend)
    expected = edge_softmax_ref(g, scores)
    assert_same(out, expected, f"forward ({drawn.kind})")
    if g.num_edges:
        row_sums = torch.zeros((g.num_dst_nodes,) + tuple(shape), dtype=out.dtype).index_add_(0, g.dst, out.detach())
        has_edges = g.in_degrees() > 0
        assert_same(row_sums[has_edges], torch.ones_like(row_sums[has_edges]), "softmax rows sum to 1")
    upstream = torch.randn(expected.shape, generator=gen, dtype=torch.float64)
    assert_same(grads_of(out, (scores,), upstream)[0], grads_of(expected, (scores,), upstream)[0], "dscores")


# --------------------------------------------------------------------------- gradcheck
SMALL = dict(max_nodes=5, max_edges=8, hub_degree=8)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("op", GSPMM_OPS)
@settings(max_examples=4)
@given(data=st.data())
def test_gspmm_gradcheck(backend, op, reduce, data):
    drawn = data.draw(graphs(**SMALL), label="graph")
    shapes = data.draw(st.sampled_from(COPY_SHAPES if op.startswith("copy") else BINARY_SHAPES), label="shapes")
    u, e = gspmm_inputs(drawn, op, shapes)
    inputs = tuple(t for t in (u, e) if t is not None)

    def fn(*args):
        it = iter(args)
        return ops.gspmm(drawn.graph, op, reduce, next(it) if u is not None else None,
                         next(it) if e is not None else None, backend=backend)

    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["add", "mul", "div", "dot"])
@settings(max_examples=4)
@given(data=st.data())
def test_gsddmm_and_softmax_gradcheck(backend, op, data):
    drawn = data.draw(graphs(**SMALL), label="graph")
    g, gen = drawn.graph, drawn.generator()
    lhs_target, rhs_target = data.draw(st.sampled_from(TARGET_PAIRS), label="targets")
    fl, fr = DOT_SHAPES[1] if op == "dot" else BINARY_SHAPES[2]
    lhs = features(gen, rows_for(g, lhs_target), fl)
    rhs = features(gen, rows_for(g, rhs_target), fr, away_from_zero=(op == "div"))

    def fn(a, b):
        scores = ops.gsddmm(g, op, a, b, lhs_target, rhs_target, backend=backend)
        return ops.edge_softmax(g, scores, backend=backend)

    assert torch.autograd.gradcheck(fn, (lhs, rhs), eps=1e-6, atol=1e-5)


# --------------------------------------------------------------------------- lower precision
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op,reduce", [("copy_u", "sum"), ("u_mul_e", "sum"), ("copy_u", "max"), ("u_add_e", "mean")])
@settings(max_examples=8)
@given(data=st.data())
def test_lower_precision_agrees(backend, dtype, op, reduce, data):
    drawn = data.draw(graphs(), label="graph")
    shapes = (2, 3) if op == "copy_u" else ((2, 3), (2, 1))
    u64, e64 = gspmm_inputs(drawn, op, shapes)
    if reduce in ("max", "min"):  # distinct values that bf16/fp16 represent exactly: no rounding ties
        order = torch.randperm(u64.numel(), generator=drawn.generator()).to(torch.float64)
        u64 = ((order - u64.numel() / 2) / 4).view(u64.shape)
    u = u64.detach().to(dtype).requires_grad_(True)
    e = e64.detach().to(dtype).requires_grad_(True) if e64 is not None else None
    # the reference runs on exactly the rounded inputs
    u_ref = u.detach().double().requires_grad_(True)
    e_ref = e.detach().double().requires_grad_(True) if e is not None else None
    request = Request("gspmm", op, reduce, 6, dtype, torch.device("cpu"))
    if registry.get(backend).unsupported_reason(request) is not None:  # explicit requests fail loudly
        with pytest.raises(RuntimeError, match=f"backend '{backend}' .* cannot run gspmm {op}"):
            ops.gspmm(drawn.graph, op, reduce, u, e, backend=backend)
        return
    out = ops.gspmm(drawn.graph, op, reduce, u, e, backend=backend)
    expected = gspmm_ref(drawn.graph, op, reduce, u_ref, e_ref)
    assert out.dtype == dtype
    tol = {torch.float32: 1e-5, torch.bfloat16: 4e-2, torch.float16: 4e-3}[dtype]
    scale = max(1.0, float(expected.detach().abs().max())) if expected.numel() else 1.0
    torch.testing.assert_close(out.double(), expected, atol=tol * scale, rtol=tol)
    upstream = torch.randn(expected.shape, generator=drawn.generator(), dtype=torch.float64)
    got = grads_of(out, (u, e), upstream.to(dtype))
    want = grads_of(expected, (u_ref, e_ref), upstream)
    for a, b in zip(got, want):
        assert a.dtype == dtype
        bound = max(1.0, float(b.abs().max())) if b.numel() else 1.0
        torch.testing.assert_close(a.double(), b, atol=tol * bound * 4, rtol=tol * 4)


# --------------------------------------------------------------------------- gat_attention
def gat_reference(g, h, el, er, edge_scores, slope, mask):
    z = gsddmm_ref(g, "add", el, er, "u", "v")
    if edge_scores is not None:
        z = z + edge_scores
    weights = edge_softmax_ref(g, torch.nn.functional.leaky_relu(z, slope))
    if mask is not None:
        weights = weights * mask
    return gspmm_ref(g, "u_mul_e", "sum", h, weights.unsqueeze(-1))


def gat_inputs(drawn, with_edge_scores, with_mask, heads=2, width=3):
    g, gen = drawn.graph, drawn.generator()
    h = features(gen, g.num_src_nodes, (heads, width))
    el = features(gen, g.num_src_nodes, (heads,))
    er = features(gen, g.num_dst_nodes, (heads,))
    edge_scores = features(gen, g.num_edges, (heads,)) if with_edge_scores else None
    mask = None
    if with_mask:
        keep = torch.rand((g.num_edges, heads), generator=gen, dtype=torch.float64) > 0.4
        mask = keep.double() / 0.6
    return h, el, er, edge_scores, mask


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("with_edge_scores", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
@given(data=st.data())
def test_gat_attention_matches_reference(backend, with_edge_scores, with_mask, data):
    drawn = data.draw(graphs(), label="graph")
    slope = data.draw(st.sampled_from([0.2, 0.0, 1.0]), label="negative_slope")
    h, el, er, edge_scores, mask = gat_inputs(drawn, with_edge_scores, with_mask)
    out = ops.gat_attention(drawn.graph, h, el, er, slope, edge_scores=edge_scores, edge_mask=mask, backend=backend)
    expected = gat_reference(drawn.graph, h, el, er, edge_scores, slope, mask)
    assert_same(out, expected, f"forward ({drawn.kind})")
    upstream = torch.randn(expected.shape, generator=drawn.generator(), dtype=torch.float64)
    inputs = (h, el, er, edge_scores)
    for got, want, name in zip(grads_of(out, inputs, upstream), grads_of(expected, inputs, upstream),
                               ("h", "el", "er", "edge_scores")):
        assert_same(got, want, f"d{name} ({drawn.kind})")


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=4)
@given(data=st.data())
def test_gat_attention_gradcheck(backend, data):
    drawn = data.draw(graphs(**SMALL), label="graph")
    h, el, er, edge_scores, mask = gat_inputs(drawn, True, True)

    def fn(h_, el_, er_, es_):
        return ops.gat_attention(drawn.graph, h_, el_, er_, 0.2, edge_scores=es_, edge_mask=mask, backend=backend)

    assert torch.autograd.gradcheck(fn, (h, el, er, edge_scores), eps=1e-6, atol=1e-5)
