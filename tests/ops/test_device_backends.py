"""Every backend on the GPU against float64 references, in every dtype a GPU model runs: float64,
float32, float16 and bfloat16, forward and backward, on drawn graphs with every edge case (no
edges, isolated nodes, self-loops, multi-edges, a hub, bipartite) and on three fixed ones (empty,
a hub holding most edges, bipartite).

Backends: scatter, sparse, triton_node, triton_edge and auto. The CPU suites (``tests/ops``,
``tests/test_triton_kernels.py``) check them in float64 on the CPU; this module is what the GPU
run's tests step (``benchmarks/gpu/step_tests.py``) adds on CUDA. Without CUDA it is skipped, unless
``UNIGRAPH_DEVICE_TESTS=1`` (the GPU run's dry run sets it), which runs it on the CPU with the
Triton kernels interpreted: every line here then runs, on small graphs.

References: the inputs are drawn in float64 and rounded to the dtype; the reference is computed in
float64 from the rounded values, so only the backend's own arithmetic differs. Tolerances scale
with the largest reference value: half-precision outputs round to 11 (float16) or 8 (bfloat16)
significant bits, and torch's scatter-add on a GPU accumulates in the input dtype (atomics), so a
hub of 60 edges loses a few more bits there; an indexing or masking bug is off by O(1).

max/min in half precision: a binary message (``u - e``) rounded to the dtype can tie where the
float64 reference does not, and a tie sends the gradient to another edge, so their backward is
compared for ``copy_u`` only, whose messages are the inputs themselves (exact in any dtype).
"""
from __future__ import annotations

import os

import pytest
import torch
from hypothesis import given, strategies as st

import unigraph
from graph_strategies import DrawnGraph, graphs
from op_cases import features, grads_of
from reference import edge_softmax_ref, gat_ref, gsddmm_ref, gspmm_extreme_ref, gspmm_ref
from triton_setup import DEVICE, triton_kernels_here
from unigraph import backends as registry
from unigraph import ops
from unigraph.backends import Request

ON_CPU = os.environ.get("UNIGRAPH_DEVICE_TESTS", "").strip() == "1"
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(DEVICE.type != "cuda" and not ON_CPU,
                                 reason="needs a CUDA GPU (UNIGRAPH_DEVICE_TESTS=1 runs it on the CPU, interpreted)")]

BACKENDS = ["scatter", "sparse", "triton_node", "triton_edge", "auto"]
# (atol, rtol), both relative to max(1, |reference|.max())
TOLERANCE = {torch.float64: (1e-9, 1e-7), torch.float32: (2e-5, 1e-5), torch.float16: (1e-2, 1e-2),
             torch.bfloat16: (6e-2, 6e-2)}
DTYPES = list(TOLERANCE)
GRAPHS = dict(max_nodes=8, max_edges=20, hub_degree=60)


@pytest.fixture(scope="module", autouse=True)
def _triton_device():
    with triton_kernels_here() as device:
        yield device


def rounded(t: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """``t`` rounded to ``dtype`` and back to float64, a leaf requiring grad (the reference's input)."""
    return None if t is None else t.detach().to(dtype).double().requires_grad_(True)


def on_device(t: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    return None if t is None else t.detach().to(dtype).to(DEVICE).requires_grad_(True)


def close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    assert actual.dtype == dtype, f"{what}: dtype {actual.dtype}, expected {dtype}"
    atol, rtol = TOLERANCE[dtype]
    scale = max(1.0, expected.abs().max().item()) if expected.numel() else 1.0
    torch.testing.assert_close(actual.detach().cpu().double(), expected.detach(), atol=atol * scale,
                               rtol=rtol * scale, msg=lambda m: f"{what} ({dtype}): {m}")


def skip_unless_runs(backend: str, request: Request) -> None:
    """A backend that declines the call (e.g. triton_edge's max in half precision) is skipped
    with its reason; one that accepts it must be right."""
    if backend == "auto":
        return
    reason = registry.get(backend).cannot_run(request)
    if reason is not None:
        pytest.skip(f"{backend} declines: {reason}")


def check(backend: str, dtype: torch.dtype, call, reference, inputs: list, drawn_kind: str,
          generator: torch.Generator, backward: bool = True) -> None:
    """``call(*device inputs)`` against ``reference(*rounded inputs)``, forward and (``backward``)
    the gradient of ``(out * upstream).sum()`` for every input."""
    device_inputs = [on_device(t, dtype) for t in inputs]
    ref_inputs = [rounded(t, dtype) for t in inputs]
    out = call(*device_inputs)
    expected = reference(*ref_inputs)
    assert out.shape == expected.shape, f"shape {tuple(out.shape)} != {tuple(expected.shape)}"
    close(out, expected, dtype, f"{backend} forward ({drawn_kind})")
    if not backward:
        return
    upstream = torch.randn(expected.shape, generator=generator, dtype=torch.float64).to(dtype)
    got = grads_of(out, device_inputs, upstream.to(DEVICE))
    want = grads_of(expected, ref_inputs, upstream.double())
    for a, b, t in zip(got, want, [t for t in inputs if t is not None]):
        close(a, b, dtype, f"{backend} gradient of a {tuple(t.shape)} input ({drawn_kind})")


def gspmm_case(backend, dtype, op, reduce, drawn: DrawnGraph):
    g, gen = drawn.graph, drawn.generator()
    skip_unless_runs(backend, Request("gspmm", op, reduce, 3, dtype, DEVICE))
    u = features(gen, g.num_src_nodes, (2, 3))
    e = None if op == "copy_u" else features(gen, g.num_edges, (2, 1))
    extreme = reduce in ("max", "min")
    reference = gspmm_extreme_ref if extreme else gspmm_ref
    gd = g.to(DEVICE)
    check(backend, dtype, lambda a, b: ops.gspmm(gd, op, reduce, a, b, backend=backend),
          lambda a, b: reference(g, op, reduce, a, b), [u, e], drawn.kind, gen,
          backward=not extreme or op == "copy_u" or dtype in (torch.float32, torch.float64))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("op", ["copy_u", "u_mul_e", "u_sub_e"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_gspmm(backend, dtype, op, reduce, data):
    gspmm_case(backend, dtype, op, reduce, data.draw(graphs(**GRAPHS), label="graph"))


@pytest.mark.parametrize("op", ["add", "mul", "dot"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_gsddmm(backend, dtype, op, data):
    drawn = data.draw(graphs(**GRAPHS), label="graph")
    g, gen = drawn.graph, drawn.generator()
    lhs_target, rhs_target = data.draw(st.sampled_from([("u", "v"), ("u", "e"), ("v", "u")]), label="targets")
    skip_unless_runs(backend, Request("gsddmm", op, None, 3, dtype, DEVICE))
    rows = {"u": g.num_src_nodes, "v": g.num_dst_nodes, "e": g.num_edges}
    lhs, rhs = features(gen, rows[lhs_target], (2, 3)), features(gen, rows[rhs_target], (2, 3))
    gd = g.to(DEVICE)
    check(backend, dtype, lambda a, b: ops.gsddmm(gd, op, a, b, lhs_target, rhs_target, backend=backend),
          lambda a, b: gsddmm_ref(g, op, a, b, lhs_target, rhs_target), [lhs, rhs], drawn.kind, gen)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_edge_softmax(backend, dtype, data):
    drawn = data.draw(graphs(**GRAPHS), label="graph")
    g, gen = drawn.graph, drawn.generator()
    skip_unless_runs(backend, Request("edge_softmax", "softmax", None, 2, dtype, DEVICE))
    scores = (features(gen, g.num_edges, (2,)).detach() * 4).requires_grad_(True)
    gd = g.to(DEVICE)
    check(backend, dtype, lambda s: ops.edge_softmax(gd, s, backend=backend), lambda s: edge_softmax_ref(g, s),
          [scores], drawn.kind, gen)


def gat_case(backend, dtype, drawn: DrawnGraph):
    g, gen = drawn.graph, drawn.generator()
    skip_unless_runs(backend, Request("gat_attention", "gat", None, 6, dtype, DEVICE))
    h = features(gen, g.num_src_nodes, (2, 3))
    el, er = features(gen, g.num_src_nodes, (2,)), features(gen, g.num_dst_nodes, (2,))
    gd = g.to(DEVICE)
    check(backend, dtype, lambda a, b, c: ops.gat_attention(gd, a, b, c, 0.2, backend=backend),
          lambda a, b, c: gat_ref(g, a, b, c, None, 0.2, None), [h, el, er], drawn.kind, gen)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_gat_attention(backend, dtype, data):
    gat_case(backend, dtype, data.draw(graphs(**GRAPHS), label="graph"))


# --------------------------------------------------------------------------- fixed edge cases
def fixed_graph(kind: str) -> DrawnGraph:
    """The edge cases every backend must survive, present whatever hypothesis draws."""
    if kind == "empty":
        g = unigraph.Graph(torch.zeros(2, 0, dtype=torch.int64), num_nodes=5)
    elif kind == "hub":  # node 0 receives 200 of 230 edges: many chunks of every block size
        gen = torch.Generator().manual_seed(3)
        src = torch.randint(0, 40, (230,), generator=gen)
        dst = torch.cat([torch.zeros(200, dtype=torch.int64), torch.randint(0, 40, (30,), generator=gen)])
        g = unigraph.Graph(torch.stack([src, dst]), num_nodes=40)
    else:  # bipartite: 7 sources, 4 destinations, one of them without in-edges
        g = unigraph.Graph(torch.tensor([[0, 1, 2, 3, 4, 5, 6, 6], [0, 0, 1, 1, 2, 2, 2, 0]]), num_src_nodes=7,
                           num_dst_nodes=4)
    return DrawnGraph(g, seed=11, kind=kind)


@pytest.mark.parametrize("kind", ["empty", "hub", "bipartite"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backend", BACKENDS)
def test_fixed_graphs(backend, dtype, kind):
    drawn = fixed_graph(kind)
    for op, reduce in (("copy_u", "sum"), ("u_mul_e", "mean"), ("copy_u", "max")):
        try:
            gspmm_case(backend, dtype, op, reduce, drawn)
        except pytest.skip.Exception:
            continue  # this backend declines this call in this dtype (said by the parametrized tests)
    gat_case(backend, dtype, drawn)
