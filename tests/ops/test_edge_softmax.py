"""``ops.edge_softmax`` on every CPU backend: equal to a float64 reference and to DGL, forward,
backward and double backward; statistics in float32 for half precision. (Triton:
``tests/test_triton_kernels.py``.)"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from graph_strategies import graphs
from op_cases import SMALL, TARGET_PAIRS, assert_matches, assert_same, cpu_test_backends, features, grads_of, rows_for
from reference import edge_softmax_ref
import unigraph
from unigraph import ops

BACKENDS = cpu_test_backends()


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_matches_reference(backend, data):
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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["add", "mul", "div", "dot"])
@settings(max_examples=3)
@given(data=st.data())
def test_gradcheck_and_gradgradcheck_after_gsddmm(backend, op, data):
    drawn = data.draw(graphs(**SMALL), label="graph")
    g, gen = drawn.graph, drawn.generator()
    lhs_target, rhs_target = data.draw(st.sampled_from(TARGET_PAIRS), label="targets")
    fl, fr = ((2, 3), (2, 3)) if op == "dot" else ((2, 3), (2, 1))
    lhs = features(gen, rows_for(g, lhs_target), fl)
    rhs = features(gen, rows_for(g, rhs_target), fr, away_from_zero=(op == "div"))

    def fn(a, b):
        return ops.edge_softmax(g, ops.gsddmm(g, op, a, b, lhs_target, rhs_target, backend=backend), backend=backend)

    assert torch.autograd.gradcheck(fn, (lhs, rhs), eps=1e-6, atol=1e-5)
    assert torch.autograd.gradgradcheck(fn, (lhs, rhs), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_width_scores(backend):
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    scores = torch.randn(4, 0, dtype=torch.float64, requires_grad=True)
    out = ops.edge_softmax(g, scores, backend=backend)
    assert out.shape == (4, 0)
    out.sum().backward()
    assert scores.grad.shape == (4, 0)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "numba"])  # numba: float32/64 only
def test_half_precision_hub_keeps_float32_statistics(backend):
    """70,000 equal float16 scores into one node: each weight is 1/70000, though the row's sum of
    exponentials (70000) exceeds float16's largest value (65504)."""
    n = 70_001
    g = unigraph.Graph(torch.stack([torch.arange(1, n), torch.zeros(n - 1, dtype=torch.int64)]), num_nodes=n)
    out = ops.edge_softmax(g, torch.zeros(n - 1, 1, dtype=torch.float16), backend=backend)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.float(), torch.full((n - 1, 1), 1 / (n - 1)), rtol=2e-3, atol=0)


@settings(max_examples=8)
@given(data=st.data())
def test_matches_dgl(dgl, data):
    drawn = data.draw(graphs(), label="graph")
    g = drawn.graph
    if g.num_edges == 0:  # DGL 2.1 crashes on a graph without edges
        return
    shape = data.draw(st.sampled_from([(), (1,), (3,), (2, 1)]), label="shape")
    scores = features(drawn.generator(), g.num_edges, shape)
    dg = dgl.heterograph({("n", "e", "m"): (g.src, g.dst)},
                         num_nodes_dict={"n": g.num_src_nodes, "m": g.num_dst_nodes})
    out = ops.edge_softmax(g, scores)
    assert_matches(out, dgl.ops.edge_softmax(dg, scores), (scores,), ("scores",), drawn.generator(),
                   f"vs DGL, {drawn.kind}")
