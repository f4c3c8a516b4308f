"""``ops.gsddmm`` on every CPU backend: equal to a float64 reference and to DGL, forward,
backward and double backward, every op and pair of targets, DGL's broadcasting, zero-width
features. (Triton: ``tests/test_triton_kernels.py``.)"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from graph_strategies import graphs
from op_cases import (BINARY_SHAPES, DOT_SHAPES, GSDDMM_OP_NAMES, SMALL, TARGET_PAIRS, assert_matches, assert_same,
                      cpu_test_backends, features, positional, rows_for)
from reference import gsddmm_ref
import unigraph
from unigraph import ops

BACKENDS = cpu_test_backends()


def operands(drawn, op, targets, shapes):
    g, gen = drawn.graph, drawn.generator()
    (lhs_target, rhs_target), (fl, fr) = targets, shapes
    lhs = features(gen, rows_for(g, lhs_target), fl) if op != "copy_rhs" else None
    rhs = features(gen, rows_for(g, rhs_target), fr, away_from_zero=(op == "div")) if op != "copy_lhs" else None
    return lhs, rhs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", GSDDMM_OP_NAMES)
@given(data=st.data())
def test_matches_reference(backend, op, data):
    drawn = data.draw(graphs(), label="graph")
    targets = data.draw(st.sampled_from(TARGET_PAIRS), label="targets")
    lhs, rhs = operands(drawn, op, targets,
                        data.draw(st.sampled_from(DOT_SHAPES if op == "dot" else BINARY_SHAPES), label="shapes"))
    g = drawn.graph
    out = ops.gsddmm(g, op, lhs, rhs, *targets, backend=backend)
    expected = gsddmm_ref(g, op, lhs, rhs, *targets)
    assert_matches(out, expected, (lhs, rhs), ("lhs", "rhs"), drawn.generator(), drawn.kind)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", GSDDMM_OP_NAMES)
@settings(max_examples=3)
@given(data=st.data())
def test_gradcheck_and_gradgradcheck(backend, op, data):
    drawn = data.draw(graphs(**SMALL), label="graph")
    targets = data.draw(st.sampled_from(TARGET_PAIRS), label="targets")
    lhs, rhs = operands(drawn, op, targets,
                        data.draw(st.sampled_from(DOT_SHAPES if op == "dot" else BINARY_SHAPES), label="shapes"))
    inputs = tuple(t for t in (lhs, rhs) if t is not None)
    fn = positional(lambda a, b: ops.gsddmm(drawn.graph, op, a, b, *targets, backend=backend), (lhs, rhs))
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5)
    assert torch.autograd.gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcasting_follows_dgl(backend):
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, 4, generator=gen, dtype=torch.float64)
    w = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    out = ops.gsddmm(g, "mul", x, w, "u", "v", backend=backend)  # w read as [N, 1, 4]
    assert_same(out, x[g.src] * w[g.dst].view(4, 1, 4), "lhs[N,4,4] * rhs[N,4]")
    with pytest.raises(ValueError, match="gsddmm add: feature shapes"):
        ops.gsddmm(g, "add", torch.randn(3, 3, 4), torch.randn(3, 3), "u", "v", backend=backend)
    dots = ops.gsddmm(g, "dot", torch.randn(3, 4, dtype=torch.float64), x, "u", "v", backend=backend)
    assert dots.shape == (4, 4, 1)  # lhs read as [N, 1, 4]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", GSDDMM_OP_NAMES)
def test_zero_width_features(backend, op):
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    shape = (2, 0) if op != "dot" else (0, 2)
    lhs = torch.randn((3,) + shape, dtype=torch.float64, requires_grad=True)
    rhs = torch.randn((4,) + shape, dtype=torch.float64, requires_grad=True)
    out = ops.gsddmm(g, op, lhs, rhs, "u", "e", backend=backend)
    assert out.shape == gsddmm_ref(g, op, lhs, rhs, "u", "e").shape and out.numel() == 0
    out.sum().backward()
    for t in (lhs, rhs):
        assert t.grad is None or (t.grad.shape == t.shape and not bool(t.grad.any()))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "dot"])
@settings(max_examples=4)
@given(data=st.data())
def test_matches_dgl(dgl, op, data):
    drawn = data.draw(graphs(), label="graph")
    g = drawn.graph
    if g.num_edges == 0:  # DGL 2.1 crashes on a graph without edges
        return
    targets = data.draw(st.sampled_from(TARGET_PAIRS), label="targets")
    shapes = data.draw(st.sampled_from(DOT_SHAPES + [((3,), (2, 3))] if op == "dot" else
                                       BINARY_SHAPES + [((4, 4), (4,))]), label="shapes")
    lhs, rhs = operands(drawn, op, targets, shapes)
    dg = dgl.heterograph({("n", "e", "m"): (g.src, g.dst)},
                         num_nodes_dict={"n": g.num_src_nodes, "m": g.num_dst_nodes})
    out = ops.gsddmm(g, op, lhs, rhs, *targets)
    expected = dgl.ops.gsddmm(dg, op, lhs, rhs, *targets)
    assert_matches(out, expected, (lhs, rhs), ("lhs", "rhs"), drawn.generator(), f"vs DGL, {drawn.kind}")
