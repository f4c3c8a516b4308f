"""g-SpMM in float16 and bfloat16 at degrees half precision cannot count to: sums (and a mean's
count) accumulate in float32 on every backend and are rounded once.

One graph holds both kinds of hub, with two features per node (tiny, so the test is cheap):
destination 0 has 70,000 in-edges from sources 1..8 (a float16 in-degree above 65,504 is inf,
and a float16 sum stops growing by 1 at 2,048), and source 9 has 70,000 out-edges to one
destination each (its gradient under every reduce sums 70,000 terms: for max/min it wins every
one of those rows). Every op and reduce is compared with a float64 reference on the same
(half-precision) inputs, forward and backward, to the output dtype's precision: a message, each
intermediate of a gradient formula (``-go * u / e**2`` has three) and the result are each rounded
once, at most four half-ulp roundings, so ``|out - ref| <= 2 eps * ref_abs`` where ``ref_abs``
is the reduce of the magnitudes of the terms (plus the spacing of float16's subnormals, where a
mean's gradient lands). A sum that counted in half precision is off by far more (0, inf, NaN,
or stuck at 2,048 increments). The maxima/minima at the in-hub are made unique (one planted edge), so the
edge the gradient goes to is not a matter of rounding.

The Triton kernels run here too (in Triton's interpreter without a GPU), on eight-edge hubs
whose values show the same faults (see ``BIG``).
"""
from __future__ import annotations

import functools

import pytest
import torch

import unigraph
from unigraph import ops

HUB_DEGREE = 70_000
SOURCES = 8                   # nodes 1..8 feed the in-hub (node 0), 8,750 edges each
OUT_HUB = 9                   # one edge to each of the nodes 16..16 + 70,000
FIRST_LEAF = 16
PLANTED = 12_345              # the in-hub edge whose message is the row's unique max/min
NUM_NODES = FIRST_LEAF + HUB_DEGREE
# per op: the range of e, so that every sum stays below float16's 65,504
E_RANGE = {"copy_e": (0.1, 0.4), "u_add_e": (0.1, 0.4), "u_sub_e": (0.1, 0.4), "u_mul_e": (0.5, 1.5),
           "u_div_e": (1.0, 2.0)}
# per (op, reduce): the planted edge's e, making its message the in-hub's unique max / min
PLANT = {("copy_e", "max"): 3.0, ("copy_e", "min"): -3.0, ("u_add_e", "max"): 3.0, ("u_add_e", "min"): -3.0,
         ("u_sub_e", "max"): -3.0, ("u_sub_e", "min"): 3.0, ("u_mul_e", "max"): 10.0, ("u_mul_e", "min"): 0.01,
         ("u_div_e", "max"): 0.05, ("u_div_e", "min"): 50.0}
OPS = ["copy_u", "copy_e", "u_add_e", "u_sub_e", "u_mul_e", "u_div_e"]
REDUCES = ["sum", "mean", "max", "min"]
DTYPES = [torch.float16, torch.bfloat16]
BACKENDS = ["scatter", "sparse", "auto"]


@functools.lru_cache(maxsize=1)
def hub_graph() -> unigraph.Graph:
    k = torch.arange(HUB_DEGREE)
    src = torch.cat([1 + k % SOURCES, torch.full((HUB_DEGREE,), OUT_HUB)])
    dst = torch.cat([torch.zeros(HUB_DEGREE, dtype=torch.long), FIRST_LEAF + k])
    return unigraph.Graph(torch.stack([src, dst]), num_nodes=NUM_NODES)


def inputs(op: str, reduce: str, dtype: torch.dtype):
    """``(u, e, go)`` in ``dtype``, all positive except a planted negative e (so gradient terms
    share a sign and their sum's magnitude bounds its error); u distinct over the in-hub's sources."""
    gen = torch.Generator().manual_seed(7)
    num_edges = 2 * HUB_DEGREE
    u = torch.rand(NUM_NODES, 2, generator=gen, dtype=torch.float64) * 0.4 + 0.1
    u[1:1 + SOURCES] = 0.1 + 0.05 * torch.stack([torch.randperm(SOURCES, generator=gen) for _ in range(2)], 1)
    low, high = E_RANGE.get(op, (0.1, 0.4))
    e = torch.rand(num_edges, 2, generator=gen, dtype=torch.float64) * (high - low) + low
    if (op, reduce) in PLANT:
        e[PLANTED] = PLANT[op, reduce]
    go = torch.rand(NUM_NODES, 2, generator=gen, dtype=torch.float64) * 0.8 + 0.1
    return u.to(dtype), e.to(dtype), go.to(dtype)


def _messages(op: str, u, e, src):
    if op == "copy_u":
        return u[src]
    if op == "copy_e":
        return e
    return {"u_add_e": torch.add, "u_sub_e": torch.sub, "u_mul_e": torch.mul, "u_div_e": torch.div}[op](u[src], e)


def reference(op: str, reduce: str, u, e, g=None):
    """Plain torch in float64 (index_add_ / scatter_reduce_), differentiable."""
    g = hub_graph() if g is None else g
    src, dst = g.edge_index
    messages = _messages(op, u, e, src)
    rows = (g.num_dst_nodes,) + tuple(messages.shape[1:])
    if reduce in ("sum", "mean"):
        out = messages.new_zeros(rows).index_add(0, dst, messages)
        if reduce == "mean":
            degree = torch.bincount(dst, minlength=g.num_dst_nodes).clamp(min=1).to(out.dtype)
            out = out / degree[:, None]
        return out
    # max/min: the value of the row's first extreme edge, differentiable through that edge alone
    index = dst[:, None].expand_as(messages)
    with torch.no_grad():
        best = messages.new_zeros(rows).scatter_reduce(0, index, messages, "amax" if reduce == "max" else "amin",
                                                       include_self=False)
        ids = torch.arange(messages.shape[0])[:, None].expand_as(messages)
        candidates = torch.where(messages == best[dst], ids, messages.shape[0])
        first = torch.full(rows, messages.shape[0]).scatter_reduce(0, index, candidates, "amin")
    found = first < messages.shape[0]
    picked = messages.gather(0, first.clamp(max=messages.shape[0] - 1))
    return torch.where(found, picked, torch.zeros((), dtype=messages.dtype))


def _leaves(op: str, u, e, dtype):
    uu = u.detach().to(dtype).requires_grad_() if op != "copy_e" else None
    ee = e.detach().to(dtype).requires_grad_() if op != "copy_u" else None
    return uu, ee


def _within(got, want, scale, dtype, what):
    """|got - want| <= 2 eps(dtype) * scale (+ float16's subnormal spacing), elementwise."""
    finfo = torch.finfo(dtype)
    bound = 2 * finfo.eps * scale + finfo.smallest_normal * finfo.eps
    err = (got.double() - want).abs()
    worst = int(torch.argmax(err - bound))
    assert bool((err <= bound).all()), (f"{what}: element {worst} is {got.reshape(-1)[worst].item()}, float64 "
                                        f"reference {want.reshape(-1)[worst].item()} (allowed error "
                                        f"{bound.reshape(-1)[worst].item():.3g})")


@functools.lru_cache(maxsize=None)
def expected(op: str, reduce: str, dtype: torch.dtype):
    """The float64 reference's output and gradients, and their error scales."""
    u, e, go = inputs(op, reduce, dtype)
    u64, e64 = _leaves(op, u, e, torch.float64)
    out = reference(op, reduce, u64, e64)
    out.backward(go.double())
    grads = tuple(t.grad if t is not None else None for t in (u64, e64))
    with torch.no_grad():  # the reduce of the messages' magnitudes
        if reduce in ("sum", "mean"):
            scale = reference(op, reduce, u.double().abs() if u is not None else None, e.double().abs()).abs()
            if op == "u_sub_e":  # |u - e| <= u + e
                scale = reference("u_add_e", reduce, u.double(), e.double())
        else:
            scale = out.abs()
    # inputs and go positive, one planted sign: every gradient sums terms of one sign
    return out.detach(), scale, grads


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_half_precision_hubs_match_float64(backend, reduce, op, dtype):
    u, e, go = inputs(op, reduce, dtype)
    want, scale, want_grads = expected(op, reduce, dtype)
    uu, ee = _leaves(op, u, e, dtype)
    out = ops.gspmm(hub_graph(), op, reduce, uu, ee, backend=backend)
    assert out.dtype == dtype
    _within(out, want, scale, dtype, f"{backend} {op}/{reduce} {dtype} forward")
    out.backward(go)
    for leaf, want_grad, name in zip((uu, ee), want_grads, "ue"):
        if leaf is not None:
            assert leaf.grad.dtype == dtype
            _within(leaf.grad, want_grad, want_grad.abs(), dtype, f"{backend} {op}/{reduce} {dtype} d{name}")


def test_the_hub_mean_is_the_issue_example():
    """float16 copy_u/mean at the 70,000-edge hub: 0 before the fix (inf in-degree), now its mean."""
    u, _, _ = inputs("copy_u", "mean", torch.float16)
    for backend in BACKENDS:
        out = ops.gspmm(hub_graph(), "copy_u", "mean", u, backend=backend)
        true = u[1:1 + SOURCES].double().mean(0)  # every source sends 8,750 edges
        torch.testing.assert_close(out[0].double(), true, rtol=2 ** -10, atol=0)


# ---------------------------------------------------------------------- Triton kernels
# Triton's interpreter is too slow for a 70,000-edge hub; eight edges show the same two faults:
# [big, 1, 1, 1, 1, 1, 1, 1] sums to big + 7 in float32, but a float16 (bfloat16) accumulator
# stays at big = 2,048 (256), where the spacing is 2; and eight values of 20,000 have a float16
# sum of inf and a mean of 20,000.
BIG = {torch.float16: 2048.0, torch.bfloat16: 256.0}


@pytest.fixture(scope="module")
def triton_device():
    from triton_setup import triton_kernels_here
    with triton_kernels_here() as device:
        yield device


def _eight(dtype: torch.dtype, overflow: bool) -> torch.Tensor:
    if overflow:
        return torch.full((8,), 20_000.0, dtype=torch.float64)
    return torch.tensor([BIG[dtype]] + [1.0] * 7, dtype=torch.float64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op,reduce,overflow", [("copy_u", "sum", False), ("u_mul_e", "sum", False),
                                                ("copy_u", "mean", True), ("u_mul_e", "mean", False),
                                                ("copy_u", "max", False), ("u_mul_e", "min", False)])
@pytest.mark.parametrize("backend", ["triton_node", "triton_edge"])
def test_triton_kernels_accumulate_half_precision_in_float32(triton_device, backend, op, reduce, overflow, dtype):
    if backend == "triton_edge" and reduce in ("max", "min"):
        pytest.skip("no half-precision atomic max/min in Triton: triton_edge refuses these (tested elsewhere)")
    if overflow and dtype == torch.bfloat16:
        overflow = False  # bfloat16 sums do not overflow here; its accumulator is tested instead
    # destination 0 <- sources 1..8 (one edge each); source 9 -> destinations 10..17 (its
    # gradient sums eight rows in the backward, a g-SpMM on the reverse graph)
    src = torch.cat([torch.arange(1, 9), torch.full((8,), 9)])
    dst = torch.cat([torch.zeros(8, dtype=torch.long), torch.arange(10, 18)])
    g = unigraph.Graph(torch.stack([src, dst]), num_nodes=18)
    u = torch.ones(18, 1, dtype=torch.float64)
    u[1:9, 0] = _eight(dtype, overflow)
    e = torch.ones(16, 1, dtype=torch.float64)
    go = torch.ones(18, 1, dtype=torch.float64)
    go[10:18, 0] = _eight(dtype, False)
    uu, ee = _leaves(op, u, e, dtype)
    out = ops.gspmm(g.to(triton_device), op, reduce, uu.to(triton_device),
                    ee.to(triton_device) if ee is not None else None, backend=backend)
    u64, e64 = _leaves(op, u, e, torch.float64)
    want = reference(op, reduce, u64, e64, g)
    assert out.dtype == dtype
    _within(out.cpu(), want.detach(), want.detach().abs(), dtype, f"{backend} {op}/{reduce} {dtype} forward")
    out.backward(go.to(dtype).to(triton_device))
    want.backward(go)
    for leaf, ref_leaf, name in zip((uu, ee), (u64, e64), "ue"):
        if leaf is not None:
            _within(leaf.grad.cpu(), ref_leaf.grad, ref_leaf.grad.abs(), dtype, f"{backend} {op}/{reduce} d{name}")
