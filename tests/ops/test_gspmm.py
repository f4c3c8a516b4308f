"""``ops.gspmm`` on every CPU backend: equal to a float64 reference and to DGL, forward, backward
and double backward, on drawn graphs with every edge case (no edges, isolated nodes, self-loops,
multi-edges, a hub, bipartite); DGL's broadcasting; NaN and +-inf in max/min; zero-width
features; half precision. (Triton: ``tests/test_triton_kernels.py``.)"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from graph_strategies import graphs
from op_cases import (BINARY_SHAPES, COPY_SHAPES, GSPMM_OP_NAMES, REDUCE_NAMES, SMALL, assert_matches, assert_same,
                      cpu_test_backends, grads_of, gspmm_inputs, positional)
from reference import gspmm_extreme_ref, gspmm_ref
import unigraph
from unigraph import backends as registry
from unigraph import ops
from unigraph.backends import Request

BACKENDS = cpu_test_backends()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", REDUCE_NAMES)
@pytest.mark.parametrize("op", GSPMM_OP_NAMES)
@given(data=st.data())
def test_matches_reference(backend, op, reduce, data):
    drawn = data.draw(graphs(), label="graph")
    shapes = data.draw(st.sampled_from(COPY_SHAPES if op.startswith("copy") else BINARY_SHAPES), label="shapes")
    u, e = gspmm_inputs(drawn, op, shapes)
    out = ops.gspmm(drawn.graph, op, reduce, u, e, backend=backend)
    expected = gspmm_ref(drawn.graph, op, reduce, u, e)
    assert_matches(out, expected, (u, e), "ue", drawn.generator(), drawn.kind)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", REDUCE_NAMES)
@pytest.mark.parametrize("op", GSPMM_OP_NAMES)
@settings(max_examples=3)
@given(data=st.data())
def test_gradcheck_and_gradgradcheck(backend, op, reduce, data):
    """First and second derivatives against finite differences (float64)."""
    drawn = data.draw(graphs(**SMALL), label="graph")
    shapes = data.draw(st.sampled_from(COPY_SHAPES if op.startswith("copy") else BINARY_SHAPES), label="shapes")
    u, e = gspmm_inputs(drawn, op, shapes)
    inputs = tuple(t for t in (u, e) if t is not None)
    fn = positional(lambda a, b: ops.gspmm(drawn.graph, op, reduce, a, b, backend=backend), (u, e))
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5)
    assert torch.autograd.gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5)


# --------------------------------------------------------------------------- broadcasting
def _chain(num_nodes=5):
    src = torch.tensor([0, 1, 2, 3, 4, 0])
    return unigraph.Graph(torch.stack([src, torch.tensor([1, 2, 3, 4, 0, 2])]), num_nodes=num_nodes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_broadcasting_follows_dgl(backend):
    """DGL pads the shorter feature shape with 1s right after the row dimension."""
    g, gen = _chain(), torch.Generator().manual_seed(0)
    u = torch.randn(5, 4, 4, generator=gen, dtype=torch.float64)
    e = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    out = ops.gspmm(g, "u_mul_e", "sum", u, e, backend=backend)  # e read as [E, 1, 4]
    expected = torch.zeros(5, 4, 4, dtype=torch.float64).index_add_(0, g.dst, u[g.src] * e.view(6, 1, 4))
    assert_same(out, expected, "u[N,4,4] * e[E,4]")
    with pytest.raises(ValueError, match=r"gspmm u_mul_e: feature shapes \(3, 4\) and \(3,\) do not broadcast"):
        ops.gspmm(g, "u_mul_e", "sum", torch.randn(5, 3, 4), torch.randn(6, 3), backend=backend)
    u2, e2 = torch.randn(5, 4, generator=gen, dtype=torch.float64), torch.randn(6, 3, 4, generator=gen,
                                                                                   dtype=torch.float64)
    out = ops.gspmm(g, "u_add_e", "max", u2, e2, backend=backend)  # u read as [N, 1, 4]
    assert out.shape == (5, 3, 4)
    assert_same(out, gspmm_ref(g, "u_add_e", "max", u2, e2), "u[N,4] + e[E,3,4]")
    per_head = ops.gspmm(g, "u_mul_e", "sum", u, e.view(6, 4, 1), backend=backend)  # a weight per head
    assert_same(per_head, torch.zeros(5, 4, 4, dtype=torch.float64).index_add_(0, g.dst, u[g.src] * e.view(6, 4, 1)),
                "u[N,H,F] * e[E,H,1]")


# --------------------------------------------------------------------------- NaN and infinities
SPECIALS = st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, 1.0, -1.0, 2.5])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("op", ["copy_u", "copy_e", "u_add_e", "u_mul_e"])
@settings(max_examples=15)
@given(data=st.data())
def test_extremes_with_nan_and_infinities(backend, op, reduce, data):
    """NaN propagates (as torch.amax), a row of -inf (max) / +inf (min) gives -inf / +inf, a row
    without in-edges gives 0, whatever the edge order; the gradient goes to the first NaN edge of a
    NaN row, else to the first extreme edge (edge-id order)."""
    drawn = data.draw(graphs(max_nodes=6, max_edges=14, hub_degree=10), label="graph")
    g = drawn.graph
    width = 2
    rows = {"copy_e": g.num_edges}.get(op, g.num_src_nodes)
    values = data.draw(st.lists(SPECIALS, min_size=rows * width, max_size=rows * width), label="values")
    x = torch.tensor(values, dtype=torch.float64).reshape(rows, width).requires_grad_(True)
    if op == "copy_u":
        u, e = x, None
    elif op == "copy_e":
        u, e = None, x
    else:
        u = x
        e = torch.tensor(data.draw(st.lists(SPECIALS, min_size=g.num_edges, max_size=g.num_edges), label="e"),
                         dtype=torch.float64).reshape(g.num_edges, 1).requires_grad_(True)
    out = ops.gspmm(g, op, reduce, u, e, backend=backend)
    expected = gspmm_extreme_ref(g, op, reduce, u, e)
    assert_matches(out, expected, (u, e), "ue", drawn.generator(), drawn.kind, equal_nan=True)
    if g.num_edges:
        has_edges = (g.in_degrees() > 0).view(-1, 1)
        assert torch.equal(torch.isnan(out), torch.isnan(gspmm_ref(g, op, reduce, u, e))), "NaN as torch.amax"
        assert bool((out[~has_edges.expand_as(out)] == 0).all()), "rows without in-edges give 0"


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_infinite_rows_and_rows_without_edges(backend):
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 0], [1, 1, 2, 2]]), num_nodes=4)  # rows 0 and 3: no in-edges
    x = torch.tensor([[-math.inf, math.inf], [-math.inf, math.inf], [1.0, math.nan], [5.0, 5.0]], dtype=torch.float64)
    top = ops.gspmm(g, "copy_u", "max", x, backend=backend)
    low = ops.gspmm(g, "copy_u", "min", x, backend=backend)
    inf = math.inf
    assert_same(top, torch.tensor([[0, 0], [-inf, inf], [1.0, math.nan], [0, 0]], dtype=torch.float64), "max",
                equal_nan=True)
    assert_same(low, torch.tensor([[0, 0], [-inf, inf], [-inf, math.nan], [0, 0]], dtype=torch.float64), "min",
                equal_nan=True)


# --------------------------------------------------------------------------- zero width
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", REDUCE_NAMES)
@pytest.mark.parametrize("op,shapes", [("copy_u", ((0,), None)), ("copy_e", (None, (0,))),
                                       ("u_mul_e", ((0,), (1,))), ("u_add_e", ((2, 0), (2, 1))),
                                       ("u_sub_e", ((3,), (0, 1)))])
def test_zero_width_features(backend, op, reduce, shapes):
    g = _chain()
    u = torch.randn((5,) + shapes[0], dtype=torch.float64, requires_grad=True) if shapes[0] is not None else None
    e = torch.randn((6,) + shapes[1], dtype=torch.float64, requires_grad=True) if shapes[1] is not None else None
    out = ops.gspmm(g, op, reduce, u, e, backend=backend)
    expected = gspmm_ref(g, op, reduce, u, e)
    assert out.shape == expected.shape and out.numel() == 0
    out.sum().backward()
    for t in (u, e):
        if t is not None:
            assert t.grad is not None and t.grad.shape == t.shape and not bool(t.grad.any())


# --------------------------------------------------------------------------- DGL as the oracle
@pytest.mark.parametrize("reduce", REDUCE_NAMES)
@pytest.mark.parametrize("op", GSPMM_OP_NAMES)
@settings(max_examples=4)
@given(data=st.data())
def test_matches_dgl(dgl, op, reduce, data):
    """unigraph (auto) equals ``dgl.ops.gspmm`` on DGL's documented semantics: rows without
    in-edges are compared as 0 (DGL 2.1 returns -inf/+inf there for max/min and crashes on an
    empty graph, so graphs have edges)."""
    drawn = data.draw(graphs(), label="graph")
    g = drawn.graph
    if g.num_edges == 0:
        return
    shapes = data.draw(st.sampled_from(COPY_SHAPES if op.startswith("copy") else
                                       BINARY_SHAPES + [((4, 4), (4,)), ((4,), (3, 4))]), label="shapes")
    u, e = gspmm_inputs(drawn, op, shapes)
    dg = dgl.heterograph({("n", "e", "m"): (g.src, g.dst)},
                         num_nodes_dict={"n": g.num_src_nodes, "m": g.num_dst_nodes})
    out = ops.gspmm(g, op, reduce, u, e)
    dgl_op = {"copy_u": "copy_lhs", "copy_e": "copy_rhs"}.get(op, op[2:5])  # DGL's names: u_mul_e is "mul"
    expected = dgl.ops.gspmm(dg, dgl_op, reduce, u, e)
    has_edges = (g.in_degrees() > 0).view(-1, *([1] * (out.dim() - 1)))
    expected = torch.where(has_edges, expected, torch.zeros((), dtype=expected.dtype))
    assert_matches(out, expected, (u, e), "ue", drawn.generator(), f"vs DGL, {drawn.kind}")


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
    if registry.get(backend).cannot_run(request) is not None:  # explicit requests fail loudly
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


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "numba"])  # numba: float32/64 only
def test_half_precision_hub_sum_accumulates_in_float32(backend):
    """A hub's sum of 3,000 float16 ones is 3000 (float16 addition stalls at 2048)."""
    n = 3_001
    g = unigraph.Graph(torch.stack([torch.arange(1, n), torch.zeros(n - 1, dtype=torch.int64)]), num_nodes=n)
    out = ops.gspmm(g, "copy_u", "sum", torch.ones(n, 1, dtype=torch.float16), backend=backend)
    assert float(out[0, 0]) == 3000.0


# --------------------------------------------------------------------------- autocast
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "numba"] + [None])  # numba: float32/64 only
def test_autocast_casts_both_operands(backend):
    """Under CPU autocast a bfloat16 u and a float32 e (a projection and a parameter) run together
    in bfloat16; outside autocast mixed dtypes are refused; float64 is left alone, as torch does."""
    g, gen = _chain(), torch.Generator().manual_seed(5)
    u, e = torch.randn(5, 3, generator=gen).bfloat16(), torch.randn(6, 1, generator=gen)
    with pytest.raises(TypeError, match="gspmm: u is torch.bfloat16 but e is torch.float32"):
        ops.gspmm(g, "u_mul_e", "sum", u, e, backend=backend)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ops.gspmm(g, "u_mul_e", "sum", u, e, backend=backend)
        wide = ops.gspmm(g, "copy_u", "sum", u.double(), backend=backend)
    assert out.dtype == torch.bfloat16 and wide.dtype == torch.float64
    expected = gspmm_ref(g, "u_mul_e", "sum", u.double(), e.bfloat16().double())
    torch.testing.assert_close(out.double(), expected, atol=3e-2, rtol=3e-2)
