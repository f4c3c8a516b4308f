"""The fuzzer behind tests/test_fuzz_graphs.py, run as a separate process so that a crash (a
signal) fails the test with the example that caused it instead of killing the test run.

    python -X faulthandler tests/fuzz_graphs_driver.py EXAMPLES [--random]

Hypothesis draws a graph through one of the public constructors (``Graph``, bipartite
``Graph``, ``Graph.from_csr``, ``from_scipy``, ``from_pyg``, ``from_networkx``), with values
that are valid or hostile (negative, out of range, huge, int32 extremes, wrong dtypes and
shapes, non-contiguous views, mismatched lengths, indices changed in place after
construction), and features that are valid, non-finite (NaN, +-inf) or malformed (wrong rows,
integer dtypes, mixed dtypes). Every op (gspmm: every op x reduce; gsddmm: every op; edge
softmax; fused GAT attention) then runs on every CPU backend; the Triton backends (interpreted,
``TRITON_INTERPRET=1``) on tiny inputs only.

Each call must either be refused with a ``ValueError``/``TypeError``/``GraphModifiedError`` (for a
hostile input) or return what a float64 reference written here computes (for a valid one);
anything else fails the example. Before each example the driver prints ``EXAMPLE <what>``, so
the parent can name the input of a crash. The last line is a summary of what was exercised.
"""
from __future__ import annotations

import collections
import math
import os
import sys

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import unigraph
from unigraph import ops
from unigraph import backends as registry
from unigraph.graph import GraphModifiedError
from unigraph.ops.spec import GSDDMM_OPS, GSPMM_OPS, REDUCES

REFUSALS = (ValueError, TypeError, GraphModifiedError)
TRITON = ("triton_node", "triton_edge")
TINY = dict(nodes=5, edges=8, width=2)  # inputs on which the interpreted Triton kernels run
STATS: collections.Counter = collections.Counter()


def cpu_backends() -> list[str]:
    names = [n for n in ("scatter", "sparse", "numba") if registry.status_of(n).ok]
    return names + [n for n in TRITON if n in registry.all_backends() and registry.status_of(n).ok]


BACKENDS = cpu_backends()


# ---------------------------------------------------------------- constructors, valid and hostile

EDGE_INDEX_KINDS = ["valid", "valid int32", "valid uint8", "valid list", "valid numpy", "valid strided",
                    "valid transposed view", "negative", "out of range", "huge", "int64 max", "int32 wraps",
                    "float", "bool", "3 rows", "3-D", "[E, 2]", "num_nodes too small", "num_nodes negative",
                    "num_nodes float", "num_nodes 2**50", "num_nodes 2**63", "bipartite", "bipartite out of range",
                    "bipartite and num_nodes"]
CSR_KINDS = ["valid", "valid with dst", "valid permuted edge_ids", "indptr decreasing", "indptr not from 0",
             "indptr end", "indices out of range", "indices negative", "edge_ids repeated", "edge_ids out of range",
             "edge_ids short", "dst wrong", "dst short", "float indptr", "2-D indices", "bipartite valid"]
OTHER_KINDS = ["scipy valid", "scipy rows out of range", "scipy negative", "pyg valid", "pyg out of range",
               "networkx valid"]


def _valid_pairs(draw, n_src, n_dst, max_edges=12):
    e = draw(st.integers(0, max_edges)) if n_src and n_dst else 0
    src = draw(st.lists(st.integers(0, max(n_src - 1, 0)), min_size=e, max_size=e))
    dst = draw(st.lists(st.integers(0, max(n_dst - 1, 0)), min_size=e, max_size=e))
    return torch.tensor([src, dst], dtype=torch.int64).reshape(2, e)


def _edge_index_case(draw):
    kind = draw(st.sampled_from(EDGE_INDEX_KINDS))
    n = draw(st.integers(1, 6))
    ei = _valid_pairs(draw, n, n)
    kwargs = {"num_nodes": n}
    e = ei.shape[1]
    spot = (draw(st.integers(0, 1)), draw(st.integers(0, max(e - 1, 0))))
    if kind == "valid int32":
        ei = ei.to(torch.int32)
    elif kind == "valid uint8":
        ei = ei.to(torch.uint8)
    elif kind == "valid list":
        ei = ei.tolist()
    elif kind == "valid numpy":
        ei = ei.numpy()
    elif kind == "valid strided":
        ei = torch.stack([ei, ei + 100], dim=2)[..., 0]  # rows with stride 2
    elif kind == "valid transposed view":
        ei = ei.t().contiguous().t()
    elif kind in ("negative", "out of range", "huge", "int64 max", "int32 wraps") and e:
        value = {"negative": -draw(st.integers(1, 2 ** 40)), "out of range": n + draw(st.integers(0, 3)),
                 "huge": 2 ** 40, "int64 max": 2 ** 63 - 1, "int32 wraps": 2 ** 31 - 1}[kind]
        if kind == "int32 wraps":
            ei = ei.to(torch.int32)
        ei = ei.clone()
        ei[spot] = value
    elif kind == "float":
        ei = ei.to(torch.float32) + 0.5
    elif kind == "bool":
        ei = ei > 0
    elif kind == "3 rows":
        ei = torch.cat([ei, ei[:1]])
    elif kind == "3-D":
        ei = ei.unsqueeze(-1)
    elif kind == "[E, 2]":
        ei = ei.t()
    elif kind == "num_nodes too small" and e:
        kwargs["num_nodes"] = int(ei.max())
    elif kind == "num_nodes negative":
        kwargs["num_nodes"] = -1
    elif kind == "num_nodes float":
        kwargs["num_nodes"] = float(n)
    elif kind == "num_nodes 2**50":
        kwargs["num_nodes"] = 2 ** 50
    elif kind == "num_nodes 2**63":
        kwargs["num_nodes"] = 2 ** 63
    elif kind.startswith("bipartite"):
        n_dst = draw(st.integers(1, 6))
        ei = _valid_pairs(draw, n, n_dst)
        kwargs = {"num_src_nodes": n, "num_dst_nodes": n_dst}
        if kind == "bipartite out of range" and ei.shape[1]:
            ei[1, 0] = n_dst
        if kind == "bipartite and num_nodes":
            kwargs["num_nodes"] = n
    return f"Graph({kind}: {ei!r}, {kwargs})", lambda: unigraph.Graph(ei, **kwargs)


def _csr_case(draw):
    kind = draw(st.sampled_from(CSR_KINDS))
    n = draw(st.integers(1, 6))
    bipartite = kind == "bipartite valid"
    n_src = draw(st.integers(1, 6)) if bipartite else n
    degrees = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    indptr = torch.tensor([0] + list(np.cumsum(degrees)), dtype=torch.int64)
    e = int(indptr[-1])
    indices = torch.tensor(draw(st.lists(st.integers(0, n_src - 1), min_size=e, max_size=e)), dtype=torch.int64)
    rows = torch.repeat_interleave(torch.arange(n), torch.tensor(degrees))
    kwargs: dict = {"num_src_nodes": n_src, "bipartite": bipartite}
    at = draw(st.integers(0, max(e - 1, 0)))
    if kind == "valid with dst":
        kwargs["dst"] = rows
    elif kind == "valid permuted edge_ids":
        kwargs["edge_ids"] = torch.tensor(draw(st.permutations(range(e))), dtype=torch.int64)
    elif kind == "indptr decreasing" and n > 1:
        indptr = indptr.clone()
        indptr[1] = e + 1
    elif kind == "indptr not from 0":
        indptr = indptr + 1
    elif kind == "indptr end":
        indptr = torch.cat([indptr[:-1], indptr[-1:] + 2])
    elif kind in ("indices out of range", "indices negative") and e:
        indices = indices.clone()
        indices[at] = n_src + 5 if kind == "indices out of range" else -7
    elif kind == "edge_ids repeated" and e > 1:
        kwargs["edge_ids"] = torch.zeros(e, dtype=torch.int64)
    elif kind == "edge_ids out of range" and e:
        kwargs["edge_ids"] = torch.arange(e) + 2 ** 40
    elif kind == "edge_ids short":
        kwargs["edge_ids"] = torch.arange(max(e - 1, 0))
    elif kind == "dst wrong" and e:
        wrong = rows.clone()
        wrong[at] = (wrong[at] + 1) % (n + 1)
        kwargs["dst"] = wrong
    elif kind == "dst short":
        kwargs["dst"] = rows[:-1]
    elif kind == "float indptr":
        indptr = indptr.to(torch.float64)
    elif kind == "2-D indices":
        indices = indices.unsqueeze(0)
    return (f"Graph.from_csr({kind}: indptr={indptr.tolist()}, indices={indices.tolist()}, {kwargs})",
            lambda: unigraph.Graph.from_csr(indptr, indices, **kwargs))


def _other_case(draw):
    kind = draw(st.sampled_from(OTHER_KINDS))
    n = draw(st.integers(1, 6))
    ei = _valid_pairs(draw, n, n)
    e = ei.shape[1]
    if kind.startswith("scipy"):
        import scipy.sparse as sparse

        def build():
            matrix = sparse.coo_matrix((np.ones(e), (ei[0].numpy(), ei[1].numpy())), shape=(n, n))
            if e and kind != "scipy valid":  # scipy checks at construction; a later change it does not
                matrix.row[0] = n + 3 if kind == "scipy rows out of range" else -2
            return unigraph.Graph.from_scipy(matrix)
    elif kind.startswith("pyg"):
        def build():
            try:
                from torch_geometric.data import Data
            except ImportError:
                return unigraph.Graph.from_pyg(ei, num_nodes=n)
            index = ei.clone()
            if kind == "pyg out of range" and e:
                index[1, 0] = n + 1
            return unigraph.Graph.from_pyg(Data(edge_index=index, num_nodes=n, x=torch.randn(n, 2)))
    else:
        def build():
            import networkx as nx
            graph = nx.MultiDiGraph()
            graph.add_nodes_from(f"node{i}" for i in range(n))
            graph.add_edges_from((f"node{s}", f"node{d}") for s, d in ei.t().tolist())
            return unigraph.Graph.from_networkx(graph)
    return f"{kind}: {ei.tolist()}", build


@st.composite
def graph_cases(draw):
    """(description, build, mutate_after): ``build()`` returns a Graph or raises."""
    maker = draw(st.sampled_from([_edge_index_case, _csr_case, _other_case]))
    description, build = maker(draw)
    mutation = draw(st.sampled_from([None] * 6 + ["src", "dst", "in_csr"]))
    return description + (f", then {mutation} changed in place" if mutation else ""), build, mutation


# ---------------------------------------------------------------- features

FEATURE_KINDS = ["float64", "float32", "non-finite float64", "non-finite float32", "wrong rows", "int64",
                 "mixed dtypes", "non-contiguous"]


@st.composite
def feature_cases(draw):
    return draw(st.sampled_from(FEATURE_KINDS)), draw(st.integers(0, 2 ** 31 - 1)), draw(st.integers(1, 3))


class Features:
    """Random operands of the requested kind for one graph."""

    def __init__(self, kind, seed, width):
        self.kind, self.width = kind, width
        self.gen = torch.Generator().manual_seed(seed)
        self.dtype = torch.float32 if "float32" in kind else torch.float64

    def valid_for(self, *operands) -> bool:
        """Whether a call reading ``operands`` (None for unused ones) is valid: mixed dtypes need two."""
        if self.kind == "mixed dtypes":
            return sum(t is not None for t in operands) < 2
        return self.kind in ("float64", "float32", "non-finite float64", "non-finite float32", "non-contiguous")

    def make(self, rows: int, shape: tuple, *, divisor: bool = False, second: bool = False) -> torch.Tensor:
        x = torch.randn((rows,) + shape, generator=self.gen, dtype=torch.float64) * 3
        if divisor:
            x = torch.sign(x) * (0.5 + x.abs() % 1.5) + (x == 0).double()
        if self.kind.startswith("non-finite") and x.numel():
            specials = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0], dtype=torch.float64)
            where = torch.rand(x.shape, generator=self.gen) < 0.3
            pick = torch.randint(0, 5, x.shape, generator=self.gen)
            x = torch.where(where, specials[pick], x)
        if self.kind == "wrong rows":
            x = x[: max(rows - 1, 0)] if rows else torch.zeros((1,) + shape, dtype=torch.float64)
        x = x.to(self.dtype)
        if self.kind == "int64":
            x = x.nan_to_num().to(torch.int64)
        if self.kind == "mixed dtypes" and second:
            x = x.float()
        if self.kind == "non-contiguous" and x.dim() >= 2:
            x = torch.cat([x, x], dim=-1)[..., ::2]  # same values, stride 2
        return x


# ---------------------------------------------------------------- float64 references (NaN-aware)

def _pad(t, ndim):
    return t.reshape(tuple(t.shape) + (1,) * (ndim - t.dim()))


def _binary(op, a, b):
    if op == "dot":
        return (a * b).sum(-1, keepdim=True)
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](a, b)


def _messages(g, op, u, e):
    src = g.src
    if op == "copy_u":
        return u.double()[src]
    if op == "copy_e":
        return e.double()
    ndim = max(u.dim(), e.dim())
    return _binary(op[2:5], _pad(u.double(), ndim)[src], _pad(e.double(), ndim))


def gspmm_reference(g, op, reduce, u, e):
    """``out[v]`` reduced over v's in-edges, edge by edge (no incidence matrix: 0 * NaN is NaN);
    max/min are ``torch.amax``/``amin`` of the row: a NaN message makes the result NaN, a row of
    only -inf (max) or +inf (min) gives that infinity (docs/ops.md)."""
    messages = _messages(g, op, u, e)
    out = messages.new_zeros((g.num_dst_nodes,) + tuple(messages.shape[1:]))
    for v in range(g.num_dst_nodes):
        rows = messages[g.dst == v]
        if rows.shape[0]:
            out[v] = {"sum": lambda r: r.sum(0), "mean": lambda r: r.sum(0) / r.shape[0],
                      "max": lambda r: r.amax(0), "min": lambda r: r.amin(0)}[reduce](rows)
    return out


def gsddmm_reference(g, op, lhs, rhs, lhs_target, rhs_target):
    def pick(x, target):
        index = {"u": g.src, "v": g.dst, "e": torch.arange(g.num_edges)}[target]
        return x.double()[index]
    if op == "copy_lhs":
        return pick(lhs, lhs_target)
    if op == "copy_rhs":
        return pick(rhs, rhs_target)
    ndim = max(lhs.dim(), rhs.dim())
    return _binary(op, _pad(pick(lhs, lhs_target), ndim), _pad(pick(rhs, rhs_target), ndim))


def softmax_reference(g, scores):
    """Edge softmax per destination; rows with a non-finite score are marked (their result is a
    matter of NaN semantics, defined by the ops, not checked here)."""
    out = torch.zeros_like(scores, dtype=torch.float64)
    finite_rows = torch.ones(g.num_edges, dtype=torch.bool)
    for v in range(g.num_dst_nodes):
        edges = (g.dst == v).nonzero().flatten()
        if edges.numel():
            out[edges] = torch.softmax(scores.double()[edges], dim=0)
            finite_rows[edges] = bool(torch.isfinite(scores[edges]).all())
    return out, finite_rows


def gat_reference(g, h, el, er, slope):
    z = torch.nn.functional.leaky_relu(el.double()[g.src] + er.double()[g.dst], slope)
    alpha, _ = softmax_reference(g, z)
    out = torch.zeros((g.num_dst_nodes,) + tuple(h.shape[1:]), dtype=torch.float64)
    return out.index_add_(0, g.dst, alpha.unsqueeze(-1) * h.double()[g.src])


# ---------------------------------------------------------------- running one example

def _close(what, got, want, rows=None, inputs=()):
    tolerance = dict(rtol=1e-9, atol=1e-9) if got.dtype == torch.float64 else dict(rtol=1e-4, atol=1e-3)
    if rows is not None:
        got, want = got[rows], want[rows]
    torch.testing.assert_close(got.double(), want, equal_nan=True, **tolerance,
                               msg=lambda m: f"{what}: {m}\ngot {got}\nwant {want}\ninputs {inputs}")


def _call(what, thunk, expect_valid):
    """Run one op call: a refusal is fine for a hostile input; a valid one must return."""
    try:
        out = thunk()
    except REFUSALS as err:
        if expect_valid:
            raise AssertionError(f"{what}: a valid input was refused: {type(err).__name__}: {err}") from err
        STATS["op refused " + type(err).__name__] += 1
        return None
    if not expect_valid:
        raise AssertionError(f"{what}: a hostile input was accepted and returned {out!r:.200}")
    STATS["computed"] += 1
    return out


def run_ops(g, features: Features, backends, tiny_only):
    u_shape = (features.width,) if features.width > 1 else ()
    nsrc, ndst, ne = g.num_src_nodes, g.num_dst_nodes, g.num_edges
    for backend in backends:
        gspmm_cases = [(op, reduce) for op in GSPMM_OPS for reduce in REDUCES]
        if backend in TRITON:  # interpreted: one of each kind per example
            gspmm_cases = gspmm_cases[hash((nsrc, ne)) % len(gspmm_cases)::len(gspmm_cases)]
        for op, reduce in gspmm_cases:
            u = features.make(nsrc, u_shape) if op != "copy_e" else None
            e = features.make(ne, (1,) if u_shape else (), divisor=op == "u_div_e", second=True) if op != "copy_u" else None
            what = f"gspmm {op}/{reduce} on {backend}"
            out = _call(what, lambda: ops.gspmm(g, op, reduce, u, e, backend=backend), features.valid_for(u, e))
            if out is not None:
                _close(what, out, gspmm_reference(g, op, reduce, u, e), None, (u, e))
        gsddmm_ops = GSDDMM_OPS if backend not in TRITON else GSDDMM_OPS[ne % len(GSDDMM_OPS):][:1]
        for op in gsddmm_ops:
            targets = (("u", "v"), ("v", "e"), ("e", "u"))[ne % 3]
            rows_of = {"u": nsrc, "v": ndst, "e": ne}
            lhs = features.make(rows_of[targets[0]], u_shape or (1,))
            rhs = features.make(rows_of[targets[1]], u_shape or (1,), divisor=op == "div", second=True)
            what = f"gsddmm {op} {targets} on {backend}"
            operands = (lhs, None) if op == "copy_lhs" else (None, rhs) if op == "copy_rhs" else (lhs, rhs)
            out = _call(what, lambda: ops.gsddmm(g, op, lhs, rhs, *targets, backend=backend),
                        features.valid_for(*operands))
            if out is not None:
                _close(what, out, gsddmm_reference(g, op, lhs, rhs, *targets), None, (lhs, rhs))
        scores = features.make(ne, (2,))
        what = f"edge_softmax on {backend}"
        out = _call(what, lambda: ops.edge_softmax(g, scores, backend=backend), features.valid_for(scores))
        if out is not None:
            want, finite = softmax_reference(g, scores)
            _close(what, out, want, finite, (scores,))
        h, el, er = features.make(nsrc, (2, features.width)), features.make(nsrc, (2,)), features.make(ndst, (2,), second=True)
        what = f"gat_attention on {backend}"
        out = _call(what, lambda: ops.gat_attention(g, h, el, er, 0.2, backend=backend), features.valid_for(h, el, er))
        if out is not None and all(bool(torch.isfinite(t).all()) for t in (h, el, er)):
            _close(what, out, gat_reference(g, h, el, er, 0.2), None, (h, el, er))


def _mutate(g, mutation):
    if mutation == "src":
        g.src.add_(1000)
    elif mutation == "dst":
        g.dst.fill_(-1)
    else:
        g.in_csr()[1].mul_(7).add_(10 ** 6)


@settings(max_examples=int(sys.argv[1]) if len(sys.argv) > 1 else 50, deadline=None, database=None,
          derandomize="--random" not in sys.argv, suppress_health_check=list(HealthCheck))
@given(graph_cases(), feature_cases())
def fuzz(case, feature_case):
    description, build, mutation = case
    features = Features(*feature_case)
    print(f"EXAMPLE {description}; features {feature_case}", flush=True)
    try:
        g = build()
    except REFUSALS as err:
        STATS[f"constructor refused {type(err).__name__}"] += 1
        return
    STATS["graphs built"] += 1
    if max(g.num_src_nodes, g.num_dst_nodes) > 10 ** 6:  # valid, but no features fit in memory: sizes only
        assert g.num_edges <= 12, g
        STATS["huge graphs built lazily"] += 1
        return
    tiny = g.num_src_nodes <= TINY["nodes"] and g.num_dst_nodes <= TINY["nodes"] and g.num_edges <= TINY["edges"] \
        and features.width <= TINY["width"]
    backends = [b for b in BACKENDS if b not in TRITON or tiny]
    if mutation:
        _mutate(g, mutation)
        features = Features("float64", feature_case[1], feature_case[2])
        for backend in backends:
            x = features.make(g.num_src_nodes, ())
            try:
                ops.gspmm(g, "copy_u", "sum", x, backend=backend)
            except GraphModifiedError:
                STATS["mutation refused"] += 1
            else:
                raise AssertionError(f"{backend}: a graph whose indices changed after validation ran a kernel")
        return
    run_ops(g, features, backends, tiny)


if __name__ == "__main__":
    fuzz()
    print(f"EXAMPLES DONE backends={','.join(BACKENDS)} " + " ".join(f"{k.replace(' ', '_')}={v}" for k, v in sorted(STATS.items())),
          flush=True)
    os._exit(0)  # skip interpreter teardown of numba/triton state: the verdict is in
