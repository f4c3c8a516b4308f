"""Compile unigraph's CPU kernels now, for the calls most programs make, instead of on first use.

numba compiles a kernel the first time it meets a new combination of argument types (about a
second each, over a hundred combinations in a full training and test run) and keeps the machine
code in its cache (``__pycache__`` beside the kernels, or ``NUMBA_CACHE_DIR``), from which later
processes load it in milliseconds. ``unigraph precompile`` (``./dev.sh setup`` runs it) makes those
first calls on tiny inputs, so that a first training step or a first test does not stall on
them: every g-SpMM op and reduce, g-SDDMM op, edge softmax and fused GAT attention,
forward and backward, in float32 and float64, on the CSR kernels and on the small-graph lane, with
the operand shapes layers pass (``[E]``, ``[E, 1]`` and ``[E, F]`` edge values beside ``[N, F]``
nodes, ``[E, H, 1]`` beside ``[N, H, F]``); the layers (self-loops, normalization, dropout);
neighbour sampling. Whatever it misses compiles on first use, as before (so do the
single-threaded twins a forked child, such as a DataLoader worker, runs:
``unigraph.kernels.cpu.threads``); the results of every call are unchanged. Without numba there
is nothing to compile.
"""
from __future__ import annotations

import time
from typing import Callable

import torch

import unigraph
from unigraph import ops
from unigraph.ops.spec import GSDDMM_OPS, GSPMM_OPS, REDUCES

DTYPES = (torch.float32, torch.float64)
SMALL, LARGE = (40, 200), (3_000, 40_000)   # (nodes, edges): the small-graph lane's size, the CSR kernels'


def precompile(log: Callable[[str], None] = print) -> float:
    """Run every family below once (``log`` says each one's time); returns the seconds taken.
    The caller's random state is left as it was."""
    from unigraph.kernels.cpu import numba_status
    available, detail = numba_status()
    if not available:
        log(f"nothing to compile: numba is not available here ({detail})")
        return 0.0
    began = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        graphs = {"small": _graph(*SMALL), "large": _graph(*LARGE)}
        for name, family in (("g-SpMM", _gspmm), ("g-SDDMM", _gsddmm), ("edge softmax and GAT attention", _attention),
                             ("layers", _layers), ("neighbour sampling", _sampling),
                             ("torch's dropout", _torch_dropout)):
            start = time.perf_counter()
            family(graphs)
            log(f"compiled {name} in {time.perf_counter() - start:.1f} s")
    seconds = time.perf_counter() - began
    log(f"done in {seconds:.1f} s (numba's cache keeps it for later processes)")
    return seconds


def _graph(nodes: int, edges: int) -> unigraph.Graph:
    return unigraph.Graph(torch.randint(0, nodes, (2, edges)), num_nodes=nodes)


def _backends(graph_name: str) -> tuple[str | None, ...]:
    """``auto`` (the small-graph lane on the small graph) and the CSR kernels by name."""
    return (None, "numba") if graph_name == "small" else ("numba",)


def _backward(out: torch.Tensor) -> None:
    out.sum().backward()


def _gspmm(graphs: dict) -> None:
    for graph_name, g in graphs.items():
        n, e = g.num_src_nodes, g.num_edges
        for dtype in DTYPES:
            u = torch.randn(n, 8, dtype=dtype, requires_grad=True)
            heads = torch.randn(n, 2, 4, dtype=dtype, requires_grad=True)
            edge_shapes = ((e,), (e, 1), (e, 8))
            for backend in _backends(graph_name):
                for op in GSPMM_OPS:
                    for reduce in REDUCES:
                        if op == "copy_u":
                            _backward(ops.gspmm(g, op, reduce, u, backend=backend))
                            continue
                        for shape in edge_shapes if op != "copy_e" else edge_shapes[1:]:
                            w = (torch.rand(shape, dtype=dtype) + 0.5).requires_grad_()
                            _backward(ops.gspmm(g, op, reduce, None if op == "copy_e" else u, w, backend=backend))
                        if op != "copy_e":   # one weight per edge and head beside [N, H, F]
                            w = (torch.rand(e, 2, 1, dtype=dtype) + 0.5).requires_grad_()
                            _backward(ops.gspmm(g, op, reduce, heads, w, backend=backend))


def _gsddmm(graphs: dict) -> None:
    for graph_name, g in graphs.items():
        n = g.num_src_nodes
        for dtype in DTYPES:
            pairs = ((torch.randn(n, 8, dtype=dtype), torch.randn(n, 8, dtype=dtype)),
                     (torch.randn(n, 2, 4, dtype=dtype), torch.randn(n, 2, 1, dtype=dtype)))
            for lhs, rhs in pairs:
                lhs, rhs = lhs.requires_grad_(), rhs.requires_grad_()
                for op in GSDDMM_OPS:
                    if op == "dot" and lhs.shape[-1] != rhs.shape[-1]:
                        continue   # (a dot needs equal last dimensions)
                    for backend in _backends(graph_name):
                        _backward(ops.gsddmm(g, op, lhs, rhs, "u", "v", backend=backend))


def _attention(graphs: dict) -> None:
    for graph_name, g in graphs.items():
        n, e = g.num_src_nodes, g.num_edges
        for dtype in DTYPES:
            for backend in _backends(graph_name):
                for shape in ((e,), (e, 2), (e, 2, 1)):
                    _backward(ops.edge_softmax(g, torch.randn(shape, dtype=dtype, requires_grad=True), backend=backend))
                h = torch.randn(n, 2, 4, dtype=dtype, requires_grad=True)
                el, er = (torch.randn(n, 2, dtype=dtype, requires_grad=True) for _ in range(2))
                _backward(ops.gat_attention(g, h, el, er, backend=backend))


def _layers(graphs: dict) -> None:
    from unigraph.nn import GATConv, GCNConv, GINConv, GINEConv, SAGEConv
    from unigraph.nn.dropout import dropout, relu_dropout
    for g in graphs.values():
        n = g.num_src_nodes
        for dtype in DTYPES:
            x = torch.randn(n, 16, dtype=dtype, requires_grad=True)
            _backward(dropout(x, 0.5) + relu_dropout(x, 0.5))
            for layer in (GCNConv(16, 8), GATConv(16, 4, heads=2, dropout=0.5), SAGEConv(16, 8),
                          GINConv(torch.nn.Linear(16, 8))):
                layer = layer.to(dtype)
                _backward(layer(g, x))
                with torch.no_grad():
                    layer.eval()(g, x)
            edge_attr = torch.randn(g.num_edges, 4, dtype=dtype)
            _backward(GINEConv(torch.nn.Linear(16, 8), edge_dim=4).to(dtype)(g, x, edge_attr))   # (its one-pass sum)


def _torch_dropout(graphs: dict) -> None:
    """``unigraph.torch_bernoulli``'s and ``unigraph.torch_dropout``'s kernels, both precisions,
    drawn from a private generator (so whether this process would take them, e.g. with other
    threads alive, does not matter), and the dropout's backward product."""
    import numpy as np
    from unigraph import torch_bernoulli
    from unigraph.kernels.cpu import dropout, mt19937, threads_for
    for dtype in DTYPES:
        n = torch_bernoulli.MIN_ELEMENTS
        torch_bernoulli._draw(torch.empty(n, dtype=dtype), 0.5, torch.Generator())
        src, keep = torch.zeros(n, dtype=dtype).numpy(), np.zeros(n, np.uint8)
        out, value = np.empty_like(src), src.dtype.type(2.0)
        torch_bernoulli.with_state(torch.Generator(), lambda words, left, next_: mt19937.dropout(
            words, left, next_, torch_bernoulli.threshold(0.5), src, out, keep, value))
        with threads_for(n):
            dropout.scale_kept(keep, src, out, value)


def _sampling(graphs: dict) -> None:
    from unigraph.sampling import NeighborSampler
    g = graphs["large"]
    for fanouts in ([5, 5], [64]):
        NeighborSampler(fanouts).sample(g, torch.arange(64))
