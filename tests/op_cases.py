"""Inputs for operator tests: feature shapes per op (with DGL broadcasting) and tensor makers."""
from __future__ import annotations

import contextlib
from unittest import mock

import torch

from unigraph import backends as registry

# (u feature shape, e feature shape) pairs: equal, per-head broadcast both ways, scalar edge
# weights, 1-D tensors, and DGL's rank padding right after the row dimension: (2, 3) with (3,)
# reads e as (1, 3); (3,) with (2, 3) reads u as (1, 3).
BINARY_SHAPES = [((3,), (3,)), ((3,), (1,)), ((2, 3), (2, 1)), ((2, 1), (2, 3)), ((3,), ()), ((), ()),
                 ((2, 3), (3,)), ((3,), (2, 3))]
COPY_SHAPES = [(3,), (2, 3), ()]
DOT_SHAPES = [((3,), (3,)), ((2, 3), (2, 3)), ((2, 3), (1, 3))]
TARGET_PAIRS = [("u", "v"), ("v", "u"), ("u", "e"), ("e", "v"), ("u", "u"), ("e", "e"), ("v", "v")]


def cpu_test_backends() -> list[str]:
    """Backends that run here at normal test sizes (interpreted kernels have their own tests)."""
    return [name for name, backend in registry.all_backends().items()
            if registry.status_of(name).ok and not backend.contract.interpreted_on_cpu]


def rows_for(graph, target: str) -> int:
    return {"u": graph.num_src_nodes, "v": graph.num_dst_nodes, "e": graph.num_edges}[target]


def features(gen: torch.Generator, rows: int, shape: tuple, *, away_from_zero: bool = False,
             dtype=torch.float64) -> torch.Tensor:
    """Random features; ``away_from_zero`` keeps |x| in [0.5, 1.5] (divisors)."""
    x = torch.randn((rows,) + tuple(shape), generator=gen, dtype=torch.float64)
    if away_from_zero:
        x = torch.sign(x) * (0.5 + torch.rand(x.shape, generator=gen, dtype=torch.float64))
        x = torch.where(x == 0, torch.ones((), dtype=x.dtype), x)
    return x.to(dtype).requires_grad_(True)


GSPMM_OP_NAMES = ["copy_u", "copy_e", "u_add_e", "u_sub_e", "u_mul_e", "u_div_e"]
REDUCE_NAMES = ["sum", "mean", "max", "min"]
GSDDMM_OP_NAMES = ["add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs"]
SMALL = dict(max_nodes=5, max_edges=8, hub_degree=8)  # graphs for gradcheck and gradgradcheck


def gspmm_inputs(drawn, op, shapes, dtype=torch.float64):
    """(u, e) leaves for gspmm ``op`` on a drawn graph; ``shapes`` is one feature shape for the
    copy ops, a (u, e) pair otherwise."""
    g, gen = drawn.graph, drawn.generator()
    if op == "copy_u":
        return features(gen, g.num_src_nodes, shapes, dtype=dtype), None
    if op == "copy_e":
        return None, features(gen, g.num_edges, shapes, dtype=dtype)
    fu, fe = shapes
    return (features(gen, g.num_src_nodes, fu, dtype=dtype),
            features(gen, g.num_edges, fe, away_from_zero=(op == "u_div_e"), dtype=dtype))


def gat_inputs(drawn, with_edge_scores, with_mask, heads=2, width=3):
    """(h, el, er, edge_scores, mask) for gat_attention on a drawn graph."""
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


def grads_of(out, inputs, upstream):
    """Gradients of ``(out * upstream).sum()`` w.r.t. the non-None ``inputs`` (zeros where unused)."""
    leaves = [t for t in inputs if t is not None]
    if not leaves or out.numel() == 0 or not out.requires_grad:
        return [torch.zeros_like(t) for t in leaves]
    grads = torch.autograd.grad((out * upstream).sum(), leaves, allow_unused=True)
    return [torch.zeros_like(t) if grad is None else grad for t, grad in zip(leaves, grads)]


def assert_same(actual, expected, what, atol=1e-9, rtol=1e-7, equal_nan=False):
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=equal_nan,
                               msg=lambda m: f"{what}: {m}")


def positional(fn, present):
    """``fn`` of the present (non-None) inputs only, as gradcheck calls it."""
    def call(*args):
        it = iter(args)
        return fn(*[next(it) if p is not None else None for p in present])
    return call


def assert_matches(out, expected, inputs, names, generator, what, equal_nan=False):
    """``out`` equals ``expected`` in shape and value, and so do the gradients of
    ``(out * upstream).sum()`` w.r.t. ``inputs`` (named ``names``) for a random ``upstream``."""
    assert out.shape == expected.shape, f"{what}: shape {tuple(out.shape)} != {tuple(expected.shape)}"
    assert_same(out, expected, f"forward ({what})", equal_nan=equal_nan)
    upstream = torch.randn(expected.shape, generator=generator, dtype=torch.float64)
    for got, want, name in zip(grads_of(out, inputs, upstream), grads_of(expected, inputs, upstream), names):
        assert_same(got, want, f"d{name} ({what})", equal_nan=equal_nan)


@contextlib.contextmanager
def coo_kernel_calls():
    """Every call of the small-graph rule's COO kernels (``unigraph/ops/small_graph_lane.py``: sums
    and max/min) inside the block, as ``(edges, width, weighted)``."""
    from unigraph.ops import small_graph_lane
    calls = []

    def counted(src, dst, u, w, num_dst, counts=None, inner=small_graph_lane._sum):
        calls.append((src.numel(), u.shape[1], w is not None))
        return inner(src, dst, u, w, num_dst, counts)

    def counted_extreme(src, dst, u, num_dst, reduce, inner=small_graph_lane._extreme):
        calls.append((src.numel(), u.shape[1], False))
        return inner(src, dst, u, num_dst, reduce)
    with mock.patch.object(small_graph_lane, "_sum", counted), \
            mock.patch.object(small_graph_lane, "_extreme", counted_extreme):
        yield calls
