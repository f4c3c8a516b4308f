"""``ops.gat_attention`` on every CPU backend: equal to the composite float64 reference, forward,
backward and double backward (a gradient penalty through GATConv equals PyG's); under autocast
its operands are cast together and its statistics stay float32. (Triton:
``tests/test_triton_kernels.py``.)"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from graph_strategies import graphs
from op_cases import SMALL, assert_matches, assert_same, cpu_test_backends, gat_inputs
from reference import gat_ref
import unigraph
from unigraph import ops

BACKENDS = cpu_test_backends()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("with_edge_scores", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
@given(data=st.data())
def test_matches_reference(backend, with_edge_scores, with_mask, data):
    drawn = data.draw(graphs(), label="graph")
    slope = data.draw(st.sampled_from([0.2, 0.0, 1.0]), label="negative_slope")
    h, el, er, edge_scores, mask = gat_inputs(drawn, with_edge_scores, with_mask)
    out = ops.gat_attention(drawn.graph, h, el, er, slope, edge_scores=edge_scores, edge_mask=mask, backend=backend)
    expected = gat_ref(drawn.graph, h, el, er, edge_scores, slope, mask)
    assert_matches(out, expected, (h, el, er, edge_scores), ("h", "el", "er", "edge_scores"), drawn.generator(),
                   drawn.kind)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=3)
@given(data=st.data())
def test_gradcheck_and_gradgradcheck(backend, data):
    """Second derivatives too: the fused backward recomputes attention from saved statistics that
    are not differentiated, so a double backward must take the composite formulas."""
    drawn = data.draw(graphs(**SMALL), label="graph")
    h, el, er, edge_scores, mask = gat_inputs(drawn, True, True)

    def fn(h_, el_, er_, es_):
        return ops.gat_attention(drawn.graph, h_, el_, er_, 0.2, edge_scores=es_, edge_mask=mask, backend=backend)

    assert torch.autograd.gradcheck(fn, (h, el, er, edge_scores), eps=1e-6, atol=1e-5)
    assert torch.autograd.gradgradcheck(fn, (h, el, er, edge_scores), eps=1e-6, atol=1e-5)


def _penalty(conv, call, x):
    """A gradient penalty: ||d sum(out^2) / dx||^2, and its gradient w.r.t. every parameter."""
    out = call()
    (dx,) = torch.autograd.grad(out.square().sum(), x, create_graph=True)
    penalty = dx.square().sum()
    params = [p for _, p in conv.named_parameters()]
    return penalty.detach(), dict(zip([n for n, _ in conv.named_parameters()], torch.autograd.grad(penalty, params)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_penalty_through_gatconv_matches_pyg(backend):
    """What issue 11 observed: a gradient penalty through GATConv differed from PyG (246 vs 588)."""
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    n = 12
    gen = torch.Generator().manual_seed(3)
    edge_index = torch.randint(0, n, (2, 40), generator=gen)
    g = unigraph.Graph(edge_index, num_nodes=n)
    x = torch.randn(n, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    pyg = pyg_nn.GATConv(5, 4, heads=3).double().eval()
    ours = unigraph.GATConv(5, 4, heads=3).double().eval()
    ours.load_state_dict(pyg.state_dict(), strict=True)
    want, want_grads = _penalty(pyg, lambda: pyg(x, edge_index), x)
    with unigraph.use_backend(backend):
        got, got_grads = _penalty(ours, lambda: ours(g, x), x)
    assert_same(got, want, "penalty", atol=1e-8, rtol=1e-8)
    assert got_grads.keys() == want_grads.keys()
    for name, grad in want_grads.items():
        assert_same(got_grads[name], grad, f"d penalty / d {name}", atol=1e-8, rtol=1e-8)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "numba"])  # numba: float32/64 only
def test_autocast_casts_operands_together_and_keeps_float32_statistics(backend):
    """bfloat16 h with float32 scores (what GATConv's projections give under CPU autocast) run in
    bfloat16, close to the float32 result; the statistics the backward reads stay float32."""
    gen = torch.Generator().manual_seed(0)
    g = unigraph.Graph(torch.randint(0, 20, (2, 80), generator=gen), num_nodes=20)
    h = torch.randn(20, 2, 4, generator=gen).to(torch.bfloat16).requires_grad_(True)
    el, er = (torch.randn(20, 2, generator=gen, requires_grad=True) for _ in range(2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ops.gat_attention(g, h, el, er, backend=backend)
    assert out.dtype == torch.bfloat16
    expected = ops.gat_attention(g, h.float(), el.bfloat16().float(), er.bfloat16().float(), backend=backend)
    torch.testing.assert_close(out.float(), expected, atol=3e-2, rtol=3e-2)
    out.float().sum().backward()
    assert el.grad.dtype == torch.float32 and bool(torch.isfinite(el.grad).all())
    stats = unigraph.backends.get(backend).gat_attention(g.tensors(), h.detach(), el.detach().bfloat16(),
                                                         er.detach().bfloat16(), None, 0.2, None)
    assert stats[1].dtype == stats[2].dtype == torch.float32
