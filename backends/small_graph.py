"""The small-graph rule: the g-SpMM sums (and ``copy_u`` maxima and minima) ``auto`` runs on
numba's COO kernels, decided from the call's size and torch's thread count alone (no degree
statistics, no cost model).

The rule: under ``auto``, a ``copy_u`` or ``u_mul_e`` (one weight per edge) sum or mean, or a
``copy_u`` max or min, on the CPU, float32/float64, with numba installed, whose work ``E x F``
(edges times feature width) is at most :data:`SMALL_WORK` divided by ``torch.get_num_threads()``
at the call (524,288 at two threads), runs ``unigraph.kernels.cpu.coo`` through the native lane
(``unigraph/ops/small_graph_lane.py``): each thread owns a range of destination rows and scans the
edge list once, adding (or comparing) in edge order.

Why a rule and not the cost model: the cost model ranks kernels on a graph whose formats exist.
On a graph that is new every call (a mini-batch of small graphs: PyG's ``DataLoader`` collates a
new ``edge_index`` per batch) the CSR kernels first pay for what the cost model does not see:
both CSRs, their row plans, the degree statistics the model itself reads, a decision per width
(~300 us of a ~2.4 ms GIN batch on the 2-core development machine: docs/performance.md). Below
the bound the COO path needs none of them, and it is not slower per call even on a graph that is
kept (full-batch training), where those costs are paid once. Measured there, COO path / CSR path
(``u_mul_e`` sums on a prepared graph, medians of 15 interleaved pairs, forward and forward +
backward, each through ``ops.gspmm``; the COO kernel first on one thread, then with threads owning
row ranges, the committed kernel):

=============  ====================  =========================  ====================
edges x width  2 threads, one-thread  2 threads, row ranges      1 thread
               kernel
=============  ====================  =========================  ====================
160k           0.55, 0.64            0.59, 0.71                 0.51, 0.54
320k           0.57-0.67, 0.79-0.80  0.63-0.75, 0.78-0.84       0.52-0.56, 0.59-0.67
640k           0.67-0.83, 0.79-1.03  0.72-0.82, 0.80-0.95       0.58-0.66, 0.61-0.80
1,280k         0.93-1.02, 0.94-1.25  0.85-1.05, 0.77-0.94       0.62-0.76, 0.76-0.86
2,560k         1.28-1.68, 1.43-1.60  0.98-1.45, 0.95-1.06       0.77-0.94, 0.84-1.09
=============  ====================  =========================  ====================

The CSR kernels divide all their work among the threads; the COO kernels divide the additions but
every thread reads the whole edge list, so the bound falls with the thread count (measured at one
and two threads; beyond, the division is the conservative extrapolation).

A graph with no CSR yet (a layer's new ``edge_index``, the self-looped graph GCNConv builds from
it) has a larger bound, :data:`FRESH_WORK` at any thread count, for its first :data:`FRESH_CALLS`
aggregations: there the CSR path first builds both CSRs (a serial counting pass, ~10 ns an edge),
which the COO path never needs. Measured on new batched graphs (a ``Graph`` built each call as
the call forms build it, then a ``u_mul_e`` sum through ``ops.gspmm``; COO / CSR time, forward and
forward + backward with the weights' gradient, medians of 15 interleaved pairs, 2-core machine):

=============  =========================  =========================
edges x width  2 threads                  1 thread
=============  =========================  =========================
160k-640k      0.36-0.61, 0.46-0.86       0.39-0.71, 0.60-0.86
1,280k         0.50-0.64, 0.50            0.39, 0.86
2,560k         0.61-0.76, 0.73-0.86       0.73-0.89, 0.83-0.99
5,120k         0.83-0.89, 0.89-0.95       0.98, 0.96
10,240k        1.01, 1.08                 1.08, 1.07
=============  =========================  =========================

After :data:`FRESH_CALLS` such calls the graph is taken to be kept (full-batch training on a graph
built without CSRs) and its calls above the kept bound go by the cost model, which builds the CSRs
once: a kept graph pays the COO path's slower steady state (up to ~1.45x at 2.56M) for a few calls
at most. The count lives on the graph, so the choice depends on nothing but the graph's own
history (the same program makes the same choices).

:data:`CSR_FREE_EDGES` is the call forms' side of it: a layer given a new ``edge_index`` of at
most that many edges builds its graph without CSRs (the rule will take its aggregations unless
they are wide; a later call that needs the CSRs builds them then).

On a GPU the rule has a side of its own (:func:`gpu_applies`): under ``auto``, the same calls on
a CUDA tensor with ``E x F`` at most :data:`GPU_WORK` run torch's ``index_select`` +
``index_add_`` (the ``scatter`` backend's ops, what PyG runs) through the native lane, with no
CSR, no degree statistics and no decision. Why: there the decision's statistics and the CSRs its
candidates need cost the host ~1 ms per new graph (two ``bincount``, the ``max``/``std``
reductions read back, a sort per CSR: 2.97 ms a step of three blocks in
``benchmarks/gpu/host_profile.py`` on an H200, 2026-11-27, the mini-batch GraphSAGE step, whose
blocks are new every step), while at that size the scatter
ops are the fastest backend anyway: in the H100 kernel suite of 2026-11-27
(``benchmarks/results/h100_run6``; uniform and R-MAT graphs of 65,536 nodes, ``copy_u`` sum and
mean and ``u_mul_e`` sum, forward and forward + backward) every case at ``E x F`` of 1.0M and 4.2M
had ``scatter`` as the fastest named backend; at 16.8M it was 1.1-4.1x slower than the best, at
67M 3-12x, so the bound stays below those.

Tiny CPU calls run the same torch ops (:func:`tiny_applies`): ``E x F`` at most :data:`TINY_WORK`
and, when autograd records the call, at most :data:`CPU_GRAD_EDGES` edges. There the COO kernel's
autograd Function, its backward in Python and numba's dispatch cost more than the sum itself,
while torch's ``index_select`` + ``index_add_`` have autograd's own nodes. Measured (2026-11-27,
2-core machine, ``ops.gspmm`` copy_u sum with grad, forward + backward, medians of 1,800
interleaved pairs, torch ops / COO kernel): at 2 threads 0.65 at 80 edges x width, 0.67 at 640,
0.84 at 3,200, 1.00 at 8,000, 1.23 at 16,000, 1.54 at 64,000; at 1 thread 0.66, 0.69, 0.73,
0.77, 0.87, 1.10 at 64,000. A GINConv(Identity) call, forward + backward, half of them on a new
``edge_index``: 10 nodes / 20 edges / width 4, 564 -> 443 us at 2 threads (PyG 365), 425 -> 339 at
1 (PyG 258); 26 / 56 / 32, 484 -> 411 (PyG 335). ``copy_u`` gives the COO kernel's bits (sums in
edge order, both directions); ``u_mul_e`` equal within rounding (the kernel may fuse a product into
its addition; the weights' gradient sums its dot over the features in another order).
"""
from __future__ import annotations

import torch

from unigraph import backends as registry

SMALL_WORK = 1 << 20       # edges x feature width on one thread (1,048,576), divided by the thread count
CSR_FREE_EDGES = 1 << 15   # a new edge_index of at most this many edges gets no CSR up front
FRESH_WORK = 1 << 22       # edges x feature width on a graph with no CSR yet (4,194,304), any thread count
FRESH_CALLS = 8            # ... for this many of its aggregations above the kept bound
_FRESH_KEY = ("unigraph.backends.small_graph", "fresh calls")   # the count, kept on the graph
BACKEND = "numba"          # whose kernels these are (what explain names)
GPU_WORK = 1 << 22         # edges x feature width on a GPU (4,194,304): the scatter ops, no decision
OPS_BACKEND = "scatter"    # whose ops the GPU side and the CPU's tiny calls run (torch's index_select + index_add_)
TINY_WORK = 1 << 12        # edges x feature width on the CPU at most which a call runs those ops (4,096)
# On the CPU, autograd's backward of index_select (an index_add_ per row) is slower than the
# reverse scatter of the COO kernel or the scatter backend beyond ~2,000 edges (1 thread: 3,220
# nodes / 7,138 edges at F = 7, 625 vs 426 us forward + backward against the scatter backend's
# Function; 20,000 / 100,000, 8.5 vs 4.2 ms; the forward alone is never slower): a differentiated
# CPU call runs torch's ops only up to this many edges (:func:`ops_backward_too_slow`).
CPU_GRAD_EDGES = 2048
OPS = ("copy_u", "u_mul_e")
REDUCES = ("sum", "mean")
EXTREMES = ("max", "min")   # ... of these ops and copy_e only (COO kernel with winners; CPU side only)
EXTREME_OPS = ("copy_u",)
COPY_E = "copy_e"           # a sum or mean of per-edge values: torch's index_add_ under the rule (CPU and GPU)
DTYPES = (torch.float32, torch.float64)


def _usable(name: str) -> bool:
    """Backend ``name`` is registered (a test may hold a registry of its own) and can run here."""
    return registry.registered(name) and registry.status_of(name).ok


def _threads(threads: int | None) -> int:
    """``threads``, or torch's count now when None or 0 (as ``Request.threads`` 0 means)."""
    return max(threads or torch.get_num_threads(), 1)


def work_bound(threads: int | None = None) -> int:
    """The largest ``E x F`` the rule takes with ``threads`` intra-op threads (:func:`_threads`)."""
    return SMALL_WORK // _threads(threads)


def applies(num_edges: int, width: int, device: torch.device, threads: int | None = None,
            fresh: bool = False) -> bool:
    """Whether the rule takes a call the native lane admitted (a sum or mean of ``copy_u`` or
    ``u_mul_e`` with one weight per edge, ``u`` 2-D float32/float64) under ``auto``; ``fresh``:
    on a graph with no CSR yet, within its first :data:`FRESH_CALLS` such calls."""
    return device.type == "cpu" and num_edges * max(width, 1) <= _bound(threads, fresh) and _usable(BACKEND)


def gpu_applies(num_edges: int, width: int, device: torch.device) -> bool:
    """Whether the GPU side of the rule takes a call the native lane admitted under ``auto``: a
    CUDA tensor and ``E x F`` at most :data:`GPU_WORK` (any graph: the scatter ops need neither
    CSR nor statistics, and are the fastest at that size whether the graph is new or kept)."""
    return device.type == "cuda" and num_edges * max(width, 1) <= GPU_WORK and _usable(OPS_BACKEND)


def ops_backward_too_slow(num_edges: int, device: torch.device, grad: bool) -> bool:
    """Whether torch's ops would be the slower choice for a call only because of their backward:
    a differentiated CPU call of more than :data:`CPU_GRAD_EDGES` edges."""
    return grad and device.type == "cpu" and num_edges > CPU_GRAD_EDGES


def tiny_applies(num_edges: int, width: int, device: torch.device, grad: bool) -> bool:
    """Whether a CPU call the native lane admitted under ``auto`` is tiny: ``E x F`` at most
    :data:`TINY_WORK` and, where autograd records it (``grad``), at most :data:`CPU_GRAD_EDGES`
    edges. It then runs torch's ``index_select`` + ``index_add_`` (autograd's own nodes) instead
    of the COO kernel, whose autograd Function and dispatch cost more than such a sum."""
    return (device.type == "cpu" and num_edges * max(width, 1) <= TINY_WORK
            and not ops_backward_too_slow(num_edges, device, grad) and _usable(OPS_BACKEND))


def ops_apply(num_edges: int, width: int, device: torch.device, grad: bool) -> bool:
    """Whether the rule runs torch's ops (:data:`OPS_BACKEND`'s) for a call the native lane
    admitted under ``auto``: its GPU side (:func:`gpu_applies`) or a tiny CPU call (:func:`tiny_applies`)."""
    return gpu_applies(num_edges, width, device) or tiny_applies(num_edges, width, device, grad)


def takes(g, width: int, device: torch.device) -> bool:
    """:func:`applies` for a call on graph ``g`` (a ``unigraph.Graph``) now, counting on ``g`` a
    call that only the fresh bound admits."""
    num_edges = g._sizes()[2]   # (a plain int: the public count is a Count, built on each read)
    if applies(num_edges, width, device):
        return True
    if not (is_fresh(g) and applies(num_edges, width, device, fresh=True)):
        return False
    g.tally(_FRESH_KEY, 1)
    return True


def is_fresh(g) -> bool:
    """``g`` has no CSR and fewer than :data:`FRESH_CALLS` calls taken by the fresh bound."""
    return not g.has_memo("in_csr") and g.tally(_FRESH_KEY) < FRESH_CALLS


def _bound(threads: int | None, fresh: bool) -> int:
    return max(work_bound(threads), FRESH_WORK) if fresh else work_bound(threads)


def applies_to_request(num_edges: int, kind: str, op: str, reduce: str | None, width: int,
                       dtype: torch.dtype, device: torch.device, threads: int, fresh: bool = False,
                       grad: bool = False) -> bool:
    """:func:`applies` (or :func:`ops_apply`) for a request's fields (what ``explain`` asks)."""
    if kind == "gspmm" and op in EXTREME_OPS + (COPY_E,) and reduce in EXTREMES and dtype in DTYPES:
        return applies(num_edges, width, device, threads, fresh)   # (no torch-ops side for max/min)
    if kind == "gspmm" and op == COPY_E and reduce in REDUCES and dtype in DTYPES:
        return applies(num_edges, width, device, threads, fresh) or gpu_applies(num_edges, width, device)
    return (kind == "gspmm" and op in OPS and reduce in REDUCES and dtype in DTYPES
            and (applies(num_edges, width, device, threads, fresh) or ops_apply(num_edges, width, device, grad)))


def backend_for(num_edges: int, width: int, device: torch.device, grad: bool, extreme: bool = False,
                copy_e: bool = False) -> str:
    """Whose kernels (or ops) the rule runs for such a call (``extreme``: a max/min, always numba's;
    ``copy_e``: always torch's ``index_add_``)."""
    if copy_e and not extreme:
        return OPS_BACKEND
    return OPS_BACKEND if not extreme and ops_apply(num_edges, width, device, grad) else BACKEND


def reason(num_edges: int, width: int, threads: int, fresh: bool = False,
           device: torch.device = torch.device("cpu"), grad: bool = False, extreme: bool = False,
           copy_e: bool = False) -> str:
    """What ``explain`` says when the rule decided (``extreme``: for a max/min)."""
    shapes = "(for u [N, F] and, for u_mul_e, one weight per edge; other operand shapes go by the cost model)"
    if extreme:
        shapes = "(copy_u / copy_e max/min: the COO kernel keeps each element's winner, as every backend does)"
    if copy_e and not extreme:
        return (f"small-graph rule, per-edge values: {num_edges} edges x {max(width, 1)} features: torch's index_add_ "
                "over the edges (the scatter backend's op), no CSR, no statistics (copy_e [E, F] sum or mean)")
    if device.type == "cuda":
        return (f"small-graph rule on a GPU: {num_edges} edges x {max(width, 1)} features <= {GPU_WORK:,}: torch's "
                f"index_select + index_add_ (the scatter backend's ops), no CSR, no statistics {shapes}")
    if tiny_applies(num_edges, width, device, grad) and not extreme:
        edges = f", {num_edges} edges <= {CPU_GRAD_EDGES:,} (differentiated)" if grad else ""
        return (f"small-graph rule, a tiny call: {num_edges} edges x {max(width, 1)} features <= {TINY_WORK:,}{edges}: "
                f"torch's index_select + index_add_ (the scatter backend's ops, autograd's own nodes), no CSR, no "
                f"statistics {shapes}")
    work = num_edges * max(width, 1)
    bound = (f"<= {work_bound(threads):,} ({SMALL_WORK:,} / {_threads(threads)} threads)"
             if work <= work_bound(threads) or not fresh else
             f"<= {FRESH_WORK:,} (a graph with no CSR yet, in its first {FRESH_CALLS} calls above "
             f"{work_bound(threads):,})")
    return (f"small-graph rule: {num_edges} edges x {max(width, 1)} features {bound}: numba's COO kernel, no CSR, "
            f"no statistics {shapes}")


def may_skip_csr(num_edges: int, device: torch.device) -> bool:
    """Whether a new graph of ``num_edges`` edges on ``device`` is built without CSRs under ``auto``."""
    return device.type == "cpu" and num_edges <= CSR_FREE_EDGES and _usable(BACKEND)
