r"""The cost model behind ``auto``: the estimated run time of one operator call per backend.

Every estimate, in microseconds, is

.. math::
    T = launch + \big(edge \cdot E F + index \cdot E + node \cdot N F\big) / 1000 \;[+\ skew]

with ``E`` edges, ``N`` the larger node set, ``F`` the output feature width, the three rates in
nanoseconds, and constants per backend, op family (:func:`op_family`) and device. What each
term stands for:

* ``launch``: Python, dispatch, allocation and kernel launches; it decides tiny graphs.
* ``edge``: the E x F work: gathering ``u[src]``, combining, reducing; materializing the
  E x F message tensor (scatter) shows up here, and it decides large graphs.
* ``index``: per-edge work independent of F (index loads, torch-sparse's CSR bookkeeping).
* ``node``: per output element (allocation, zero-fill, the final write, mean's division).
* ``skew`` (GPU only): the degree distribution. A node-parallel program (triton_node; sparse,
  whose cuSPARSE and torch-sparse kernels give each row to one warp) walks its whole row, so the
  largest in-degree bounds the run time from below however many programs run in parallel:
  ``max_in_degree x NODE_SERIAL_NS``. Edge-parallel atomics into one row (triton_edge; scatter,
  whose scatter-add is atomics too) serialize in the L2 cache: ``max_in_degree x
  SAME_ROW_ATOMIC_NS``. On 2 CPU cores neither term shows in the measurements (two threads
  split the rows in large chunks, and there are no atomics), so CPU estimates have none. The
  coefficient of variation of the in-degree is shown by ``explain`` but adds nothing beyond the
  maximum: the skew terms only bite when one row dominates, which the maximum measures directly.

Where the constants come from
-----------------------------
CPU: fitted by least squares (non-negative, relative error) to the forward timings of
``benchmarks/kernels.py --threads 2`` on the 2-core development machine, run when it was quiet
(load average about 1): ``kernels_cpu.json`` (5,000 nodes, uniform and R-MAT graphs of mean
in-degree 1 to 256, F = 16/64/256) for the rates and ``kernels_cpu_tiny.json`` (64 nodes) for
the launch costs, both in ``benchmarks/results``. ``python benchmarks/kernels.py --fit
benchmarks/results/kernels_cpu.json benchmarks/results/kernels_cpu_tiny.json`` prints the fit.
The constants below were fitted to a calibration run of the same command just before the
committed run, whose ``auto`` choices they made; refitting on the committed files lands within
the run-to-run noise (e.g. numba's spmm_sum rate 0.026 vs 0.032 ns, sparse's 0.068 vs 0.074 ns).
Each row says which numbers are fitted and which derived. The fits'
median relative errors (in brackets) are large for the cheap families because tiny and large
calls differ in more than a straight line can say (threads are used only above
``unigraph.kernels.cpu.SERIAL_WORK``, caches); they only need to order the candidates, and
where two are close the wrong pick costs little.

GPU: estimates, not measurements (no GPU was available when this was written), from an
H100-class memory system: about 1 TB/s for random row gathers, which makes a gathered float32
element cost ~0.004 ns of bandwidth, an atomic add about as much again, ~15-35 us of Python and
launch overhead per call, and ~1 us of dependent-load latency per chunk of ~32 edges a
node-parallel program walks. They fix the ordering (Triton's fused kernels beat E x F
materialization; edge-parallel wins once one row holds a large share of the edges), not
absolute times. ``unigraph.set_backend("auto-tune")`` measures instead of estimating.

Triton on the CPU is Triton's interpreter (tests only): its estimate is infinite, so ``auto``
never picks it there.
"""
from __future__ import annotations

import dataclasses
import math

from unigraph.backends.base import Request

FAMILIES = ("spmm_sum", "spmm_binary", "spmm_extreme", "sddmm", "edge_softmax", "gat_attention")


@dataclasses.dataclass(frozen=True)
class LinearCost:
    """``launch_us + (edge_ns * E * F + index_ns * E + node_ns * N * F) / 1000`` microseconds."""

    launch_us: float
    edge_ns: float
    index_ns: float = 0.0
    node_ns: float = 0.0

    def us(self, stats, width: int) -> float:
        nodes = max(stats.num_src_nodes, stats.num_dst_nodes)
        work = self.edge_ns * stats.num_edges * width + self.index_ns * stats.num_edges + self.node_ns * nodes * width
        return self.launch_us + work / 1000.0


def op_family(request: Request) -> str:
    """The row of the cost tables a call belongs to.

    ``spmm_sum``: gspmm copy_u / u_mul_e with sum or mean (true sparse-dense products);
    ``spmm_binary``: the other gspmm ops with sum or mean; ``spmm_extreme``: gspmm max / min;
    ``sddmm``: every gsddmm op; ``edge_softmax``; ``gat_attention`` (F = heads x features).
    """
    if request.kind == "gspmm":
        if request.reduce in ("max", "min"):
            return "spmm_extreme"
        return "spmm_sum" if request.op in ("copy_u", "u_mul_e") else "spmm_binary"
    if request.kind == "gsddmm":
        return "sddmm"
    return request.kind


# ---------------------------------------------------------------------- CPU (fitted, see module docstring)
# "fit" rows: `benchmarks/kernels.py --fit` on kernels_cpu.json + kernels_cpu_tiny.json, rounded
# (median relative error of the fit in brackets). Other rows say what they are derived from.
CPU_COSTS: dict[str, dict[str, LinearCost]] = {
    # torch-scatter installed: gather u[src] into E x F, then scatter-reduce by dst.
    "scatter": {
        "spmm_sum": LinearCost(86.0, 0.46, 6.9, 0.24),        # fit [42%]: copy_u/sum, u_mul_e/sum, mean
        "spmm_binary": LinearCost(86.0, 0.86, 6.9, 0.24),     # spmm_sum + one E x F elementwise pass
        "spmm_extreme": LinearCost(127.0, 7.3, 0.0, 12.2),    # fit [11%]: torch-scatter's scatter_max
        "sddmm": LinearCost(39.0, 0.34, 2.8, 0.0),            # fit [47%]: u_add_v and u_dot_v
        "edge_softmax": LinearCost(161.0, 10.6, 4.4, 12.9),   # fit [14%]
        "gat_attention": LinearCost(215.0, 2.28, 10.2, 0.37), # fit [16%]
    },
    # torch alone: index_add_ / scatter_reduce_ (what PyG does without torch-scatter). Not run
    # here (torch-scatter is installed): scatter's launch costs with the rates fitted to the
    # torch-native peer of the benchmark, which runs the same torch calls minus unigraph's
    # dispatch; max/min and the softmax's maximum add scatter's arg-extreme pass (~3 E x F passes).
    "scatter_native": {
        "spmm_sum": LinearCost(86.0, 0.43, 6.1, 0.27),        # peer fit [41%]
        "spmm_binary": LinearCost(86.0, 0.83, 6.1, 0.27),
        "spmm_extreme": LinearCost(127.0, 2.0, 5.9, 12.2),    # peer fit 0.5 ns x 4 for the arg pass
        "sddmm": LinearCost(39.0, 0.34, 2.8, 0.0),            # the same code as scatter's
        "edge_softmax": LinearCost(161.0, 4.1, 15.0, 12.9),   # peer fit 2.1 ns + the arg pass
        "gat_attention": LinearCost(215.0, 2.9, 21.4, 0.0),   # peer fit 1.4 ns + the arg pass
    },
    # torch.sparse CSR SpMM for copy_u / u_mul_e sums, torch-sparse spmm_max/min, segment
    # reduce for the rest; g-SDDMM gathers exactly as scatter does.
    "sparse": {
        "spmm_sum": LinearCost(117.0, 0.074, 0.03, 0.28),     # fit [26%]
        "spmm_binary": LinearCost(117.0, 0.72, 0.03, 0.28),   # segment path: CSR-order gather (as sddmm) + reduce
        "spmm_extreme": LinearCost(147.0, 1.0, 0.0, 8.4),     # fit [14%]: torch-sparse spmm_max
        "sddmm": LinearCost(38.0, 0.34, 2.7, 0.0),            # fit [47%]: u_add_v and u_dot_v
        "edge_softmax": LinearCost(200.0, 10.2, 13.2, 9.5),   # fit [17%]
        "gat_attention": LinearCost(266.0, 0.65, 20.7, 3.3),  # fit [13%]
    },
    # unigraph's numba kernels (backends/numba.py): node-parallel over CSR rows, no E x F tensor.
    "numba": {
        "spmm_sum": LinearCost(90.0, 0.032, 0.51, 0.125),     # fit [28%]
        "spmm_binary": LinearCost(90.0, 0.12, 0.51, 0.125),   # generic-offset kernel: sddmm's rate
        "spmm_extreme": LinearCost(90.0, 0.137, 2.2, 0.44),   # fit [13%]
        "sddmm": LinearCost(56.0, 0.113, 1.45, 0.0),          # fit [21%]: u_add_v and u_dot_v
        "edge_softmax": LinearCost(73.0, 4.96, 1.37, 1.0),    # fit [14%]
        "gat_attention": LinearCost(90.0, 0.73, 0.0, 0.67),   # fit [18%]
    },
}
# sparse without torch-sparse: max/min take the segment reduce of the other ops plus the
# arg-extreme pass (about 4 E x F passes at the ~0.7 ns of torch's elementwise kernels).
SPARSE_EXTREME_WITHOUT_TORCH_SPARSE = LinearCost(147.0, 2.8, 0.0, 8.4)

# ---------------------------------------------------------------------- GPU (estimates, see module docstring)
GPU_COSTS: dict[str, dict[str, LinearCost]] = {
    # Two or three torch kernels; E x F messages written then read (~3 element transfers + atomics).
    "scatter": {
        "spmm_sum": LinearCost(20.0, 0.016, 0.02),
        "spmm_binary": LinearCost(25.0, 0.020, 0.02),
        "spmm_extreme": LinearCost(30.0, 0.030, 0.02),
        "sddmm": LinearCost(20.0, 0.012, 0.02),
        "edge_softmax": LinearCost(80.0, 0.080, 0.05),
        "gat_attention": LinearCost(120.0, 0.024, 0.05),
    },
    # cuSPARSE CSR SpMM through torch.sparse.mm (plus building the CSR view) for the products,
    # segment reduce (materialized messages) otherwise.
    "sparse": {
        "spmm_sum": LinearCost(35.0, 0.005, 0.02),
        "spmm_binary": LinearCost(35.0, 0.020, 0.02),
        "spmm_extreme": LinearCost(40.0, 0.012, 0.02),
        "sddmm": LinearCost(20.0, 0.012, 0.02),
        "edge_softmax": LinearCost(90.0, 0.060, 0.05),
        "gat_attention": LinearCost(140.0, 0.016, 0.05),
    },
    # Fused node-parallel kernels: one gather per message element, one store per output element.
    "triton_node": {
        "spmm_sum": LinearCost(25.0, 0.004, 0.016, 0.002),
        "spmm_binary": LinearCost(25.0, 0.006, 0.016, 0.002),
        "spmm_extreme": LinearCost(25.0, 0.006, 0.016, 0.004),
        "sddmm": LinearCost(25.0, 0.008, 0.016),
        "edge_softmax": LinearCost(25.0, 0.012, 0.016),
        "gat_attention": LinearCost(30.0, 0.005, 0.03, 0.002),
    },
    # Edge-parallel: the same gathers plus one atomic per message element; max/min take a
    # second pass (recompute and compare) and a torch fix-up. Softmax and GAT compose the
    # edge-parallel primitives (several launches, E x H scores materialized).
    "triton_edge": {
        "spmm_sum": LinearCost(25.0, 0.010, 0.016, 0.002),
        "spmm_binary": LinearCost(25.0, 0.012, 0.016, 0.002),
        "spmm_extreme": LinearCost(55.0, 0.020, 0.032, 0.006),
        "sddmm": LinearCost(25.0, 0.008, 0.016),
        "edge_softmax": LinearCost(150.0, 0.060, 0.06),
        "gat_attention": LinearCost(200.0, 0.020, 0.08),
    },
}
# A node-parallel program walks its row in chunks of ~32 edges at ~1 us of dependent global-load
# latency each (estimate): ~30 ns per edge of the longest row, whatever else runs beside it.
NODE_SERIAL_NS = 30.0
# Same-address float atomics serialize in L2 at roughly one per ns (estimate): the hub's row
# receives max_in_degree of them per feature column, the columns proceed in parallel.
SAME_ROW_ATOMIC_NS = 1.0


# ---------------------------------------------------------------------- estimates per backend
def estimate_scatter(stats, request: Request, torch_scatter_installed: bool) -> float:
    family = op_family(request)
    if request.device.type == "cuda":
        cost = GPU_COSTS["scatter"][family]
        return cost.us(stats, request.feature_width) + _atomic_contention_us(stats, request)
    cost = CPU_COSTS["scatter" if torch_scatter_installed else "scatter_native"][family]
    return cost.us(stats, request.feature_width)


def estimate_sparse(stats, request: Request, torch_sparse_installed: bool) -> float:
    family = op_family(request)
    if request.device.type == "cuda":
        # cuSPARSE's CSR SpMM and torch-sparse's kernels give each row to one warp: node-parallel,
        # with the same longest-row bound as triton_node.
        serial = 0.0 if request.kind == "gsddmm" else stats.max_in_degree * NODE_SERIAL_NS / 1000.0
        return GPU_COSTS["sparse"][family].us(stats, request.feature_width) + serial
    if family == "spmm_extreme" and not torch_sparse_installed:
        return SPARSE_EXTREME_WITHOUT_TORCH_SPARSE.us(stats, request.feature_width)
    return CPU_COSTS["sparse"][family].us(stats, request.feature_width)


def estimate_numba(stats, request: Request) -> float:
    """unigraph's CPU kernels (only offered on the CPU)."""
    return CPU_COSTS["numba"][op_family(request)].us(stats, request.feature_width)


def estimate_triton(stats, request: Request, strategy: str) -> float:
    """``strategy`` "node" or "edge": how g-SpMM (and, composed from it, edge softmax and GAT)
    is parallelized; see the module docstring for the skew terms. g-SDDMM is edge-parallel in
    both and writes each edge once, so it has none. Infinite on the CPU, where Triton means its
    interpreter."""
    if request.device.type != "cuda":
        return math.inf
    base = GPU_COSTS[f"triton_{strategy}"][op_family(request)].us(stats, request.feature_width)
    if request.kind == "gsddmm":
        return base
    per_edge_of_longest_row = NODE_SERIAL_NS if strategy == "node" else SAME_ROW_ATOMIC_NS
    return base + stats.max_in_degree * per_edge_of_longest_row / 1000.0


def _atomic_contention_us(stats, request: Request) -> float:
    """torch's scatter-add on a GPU is atomics too: the same serialization on the hub's row."""
    if request.kind == "gsddmm":
        return 0.0
    return stats.max_in_degree * SAME_ROW_ATOMIC_NS / 1000.0
