"""The native lane: a ``copy_u`` sum or mean, or a ``u_mul_e`` one with one weight per edge (GCN's
normalized adjacency), that goes to the ``scatter`` backend, run as torch's own differentiable
``index_select`` (times the weights) + ``index_add_`` (what PyG's default aggregation runs)
instead of the ``GSpMM`` autograd Function. Under ``auto``'s small-graph rule it also runs a
``copy_u`` max or min on numba's COO kernel (:func:`run`), and a ``copy_e`` sum or mean, a message
tensor's aggregation, as torch's ``index_add_``, its max or min on that COO kernel (:func:`run_copy_e`),
and GINEConv's ``relu(u + e)`` message with its sum in one COO pass (:func:`run_add_relu`).

Why: on the small graphs of mini-batches and batched small graphs the Function's bookkeeping,
the front door's checks and the request (~100 us a call on the 2-core machine, where the kernel
takes ~10) were most of a layer's aggregation; autograd's own nodes for these two ops cost
nothing in Python, forward or backward, and need neither CSR nor the reverse graph (on a GPU,
where the counting kernel does not run, ``Graph.stats`` then counts degrees without building one).

Exact: the ``scatter`` backend computes the same messages (``u[src]``, times ``e`` for
``u_mul_e``), the same sums (torch-scatter's or torch's scatter-add over the edges in edge
order, float32/float64 accumulators) and the same mean (the sum divided by
``max(in_degree, 1)``); ``tests/ops/test_native_lane.py`` compares both, forward and backward
(``u`` and ``e``), against the Function path and float64, across changes between calls.

Taken only when every condition below holds, else the call goes the ordinary way (which also
raises the ordinary errors): reduce sum/mean, ``u`` a plain 2-D float32/float64 tensor with one
row per source node on the graph's device, eager (not compiling, tracing or under a functorch
transform), no autocast on that device, and the backend choice (argument, ``use_backend``,
``set_backend``, environment, else ``auto``'s decision for this exact request, which the selector
memoises on the graph) is ``scatter``. The graph's indices are checked intact first, as
every call checks them; autograd's saved-tensor versions guard them until the backward.

Under ``auto``, a call small enough for the small-graph rule (``backends/small_graph.py``: CPU,
numba, edges x width at most ``SMALL_WORK`` over torch's thread count, or ``FRESH_WORK`` on a graph
with no CSR yet for its first few calls) runs numba's COO kernel on
the graph's edge list (``unigraph/ops/small_graph_lane.py``) before any decision is asked for: no
CSR, no degree statistics (a graph that is new every batch needs neither); ``explain`` states the
rule. Its GPU side (a CUDA tensor, ``E x F`` at most ``small_graph.GPU_WORK``) and a tiny CPU
call (``E x F`` at most ``small_graph.TINY_WORK``; differentiated, at most ``small_graph.CPU_GRAD_EDGES``
edges) run this lane's own ops below, likewise without a decision.

Where those conditions hold but ``auto`` decided another backend (numba's CSR kernels on the
CPU, for most graphs), the call goes straight to that backend's g-SpMM Function (``GSpMMSum``,
through ``custom.call_gspmm``): the front door would check what the conditions above already
checked (they imply every check of ``spec.check_gspmm``), build the same request and find the
same memoised decision, so skipping it changes nothing but ~20 us a call. A backend the user *named* still goes the ordinary way,
which refuses a call it cannot run.
"""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.backends import selector, small_graph
from unigraph.backends.base import Backend, differentiated
from unigraph.graph import Graph
from unigraph.ops.broadcast import with_rank
from unigraph.ops.custom import call_gspmm
from unigraph.ops import small_graph_lane
from unigraph.ops.dispatch import traced

BACKEND = "scatter"
OPS = ("copy_u", "u_mul_e")
REDUCES = ("sum", "mean")
DTYPES = (torch.float32, torch.float64)


def run(g: Graph, op: str, reduce: str, u, e, explicit: str | None) -> Tensor | None:
    """``reduce_{(s, v)} u[s] (* e[edge])`` per destination ``v`` on the native lane, or None
    where the lane does not apply (the caller then takes the ordinary path)."""
    extreme = reduce in small_graph.EXTREMES and op in small_graph.EXTREME_OPS
    if (reduce not in REDUCES and not extreme) or not isinstance(g, Graph) or traced(u, e):
        return None  # (the ordinary path names what is wrong, if anything)
    num_src, num_dst, num_edges = g._sizes()
    if not _plain_rows(u, num_src, g.device) or _transformed(u.device):
        return None
    if op == "u_mul_e":
        if (not isinstance(e, Tensor) or e.layout != torch.strided or e.is_nested or e.dtype != u.dtype
                or e.device != u.device or e.shape[0] != num_edges
                or not (e.dim() == 1 or (e.dim() == 2 and e.shape[1] == 1))):
            return None
    elif op != "copy_u" or e is not None:
        return None
    grad = differentiated(u, e)
    src, dst = g._coo()  # checks that no index tensor changed since the graph checked it
    choice, _ = selector.current_choice(explicit)
    if extreme:   # only the small-graph rule's COO kernel here; every other max/min the ordinary way
        if choice == "auto" and small_graph.takes(g, u.shape[1], u.device):
            return small_graph_lane.extreme(src, dst, u, num_dst, reduce, grad)
        return None
    decided = None
    if choice == "auto":
        if small_graph.ops_apply(num_edges, u.shape[1], u.device, grad):
            choice = BACKEND   # the rule's GPU side and tiny CPU calls: this lane's ops, no statistics, no decision
        elif small_graph.takes(g, u.shape[1], u.device):   # (a mean divides in the same Function)
            return small_graph_lane.aggregate(src, dst, u, None if e is None else e.reshape(-1), num_dst, grad,
                                              g.in_degree_counts() if reduce == "mean" else None)
        else:
            decided = _auto_choice(g, op, reduce, u, grad)
    if ((decided.name if decided is not None else choice) != BACKEND
            or small_graph.ops_backward_too_slow(num_edges, u.device, grad)):
        if decided is None:
            return None   # a named backend: the ordinary path checks that it can run the call
        # auto's decision for the very request the front door would build, on operands these checks
        # passed: its checks and decision would change nothing, so straight to the backend's Function
        return call_gspmm(g.tensors(), decided, op, reduce, u, with_rank(e, 2))
    messages = u.index_select(0, src)
    if e is not None:
        messages = messages * e.view(-1, 1)
    return _averaged(g, reduce, u.new_zeros((num_dst, u.shape[1])).index_add_(0, dst, messages))


def run_copy_e(g: Graph, reduce: str, e, explicit: str | None) -> Tensor | None:
    """``reduce_{k: dst_k = v} e[k]`` (a ``copy_e``: a message tensor's aggregation,
    ``MessagePassing.aggregate``) where ``auto``'s small-graph rule takes the call, None elsewhere
    (the ordinary path): a sum or mean as torch's ``index_add_`` over the edges (CPU or GPU side),
    a max or min on numba's COO kernel with the edges as its rows (CPU; the winners are the first
    edge in edge-id order, the first NaN, as on every backend). On a new
    graph every step the ordinary path first builds both CSRs and the degree statistics and asks
    for a decision (~110 us of a GINEConv call on a PyG batch of 128 small graphs); the sum needs
    none of them, and its backward is autograd's ``index_select`` of the gradient."""
    extreme = reduce in small_graph.EXTREMES
    if (reduce not in REDUCES and not extreme) or not isinstance(g, Graph) or traced(e):
        return None
    _, num_dst, num_edges = g._sizes()
    if not _plain_rows(e, num_edges, g.device) or _transformed(e.device) or selector.current_choice(explicit)[0] != "auto":
        return None
    if extreme:   # numba's COO max/min with each edge its own row: the winners are edge ids (arg_e)
        if not small_graph.takes(g, e.shape[1], e.device):
            return None
        _, dst = g._coo()
        rows = torch.arange(num_edges, device=e.device)
        return small_graph_lane.extreme(rows, dst, e, num_dst, reduce, differentiated(e))
    if not (small_graph.takes(g, e.shape[1], e.device) or small_graph.gpu_applies(num_edges, e.shape[1], e.device)):
        return None
    _, dst = g._coo()  # checks that no index tensor changed since the graph checked it
    return _averaged(g, reduce, e.new_zeros((num_dst, e.shape[1])).index_add_(0, dst, e))


def run_add_relu(g: Graph, reduce: str, u, e) -> Tensor | None:
    """``reduce_{k: dst_k = v} relu(u[src_k] + e[k])`` (GINEConv's message and its sum or mean, one
    row of ``e`` per edge, as wide as ``u``, of its dtype) where ``auto``'s small-graph rule takes
    the call on the CPU: numba's one COO pass (``small_graph_lane.add_relu``), no ``[E, F]``
    message, no CSR. None elsewhere: the caller runs the message its ordinary way."""
    if reduce not in REDUCES or not isinstance(g, Graph) or traced(u, e):
        return None
    num_src, num_dst, num_edges = g._sizes()
    if (not _plain_rows(u, num_src, g.device) or not _plain_rows(e, num_edges, g.device) or e.dtype != u.dtype
            or e.shape[1] != u.shape[1] or _transformed(u.device) or selector.current_choice()[0] != "auto"
            or not small_graph.takes(g, u.shape[1], u.device)):
        return None
    src, dst = g._coo()  # checks that no index tensor changed since the graph checked it
    return _averaged(g, reduce, small_graph_lane.add_relu(src, dst, u, e, num_dst, differentiated(u, e)))


def _averaged(g: Graph, reduce: str, out: Tensor) -> Tensor:
    """A lane's sum ``out`` as ``reduce`` asks: the sum itself, or divided by ``max(in_degree, 1)``."""
    return out / _in_degree_divisor(g, out.dtype) if reduce == "mean" else out


def _plain_rows(t, rows: int, device: torch.device) -> bool:
    """``t`` is what the lane's ops take: a plain strided 2-D float32/float64 tensor of ``rows``
    rows on ``device``."""
    return (isinstance(t, Tensor) and t.layout == torch.strided and not t.is_nested and t.dim() == 2
            and t.dtype in DTYPES and t.device == device and t.shape[0] == rows)


def _transformed(device: torch.device) -> bool:
    """A functorch transform or autocast on ``device`` is active: the ordinary path handles those."""
    return torch._C._are_functorch_transforms_active() or torch.is_autocast_enabled(device.type)


def may_avoid_csr(num_edges: int, device: torch.device) -> str | None:
    """Why a new graph of ``num_edges`` edges on ``device`` may be built without CSRs, or None:
    ``"scatter"`` where the current backend choice names this lane's backend (its calls need
    none), ``"small"`` where it is ``auto`` and the graph is small enough for the small-graph
    rule (``backends/small_graph.py``) to take its aggregations (they need only the in-degree
    counts, for a mean). Under any other choice a CPU graph's first call builds both CSRs
    (``auto`` counts its degree statistics with the kernel that builds them)."""
    choice = selector.current_choice()[0]
    if choice == BACKEND:
        return "scatter"
    return "small" if choice == "auto" and small_graph.may_skip_csr(num_edges, device) else None


def _auto_choice(g: Graph, op: str, reduce: str, u: Tensor, grad: bool) -> Backend:
    """``auto``'s backend for the request the front door would build for this call (the selector
    memoises the decision on the graph, under the key the front door's ``choose`` uses)."""
    return selector.auto_backend(g, "gspmm", op, reduce, max(u.shape[1], 1), u.dtype, u.device, grad,
                                 torch.get_num_threads())


def _in_degree_divisor(g: Graph, dtype: torch.dtype) -> Tensor:
    """``max(in_degree, 1)`` as a ``[num_dst, 1]`` column of ``dtype`` (kept on the graph)."""
    def build() -> Tensor:
        with torch.inference_mode(False):  # kept on the graph: a tensor autograd may save, whatever mode built it
            return small_graph_lane.mean_divisor(g.in_degree_counts(), dtype)
    return g.memo(("unigraph.ops.native_lane", "divisor", dtype), build)
