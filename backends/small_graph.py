"""The small-graph rule: the g-SpMM sums ``auto`` runs on numba's serial COO kernel, decided from
the call's size alone (no degree statistics, no cost model).

The rule: under ``auto``, a ``copy_u`` or ``u_mul_e`` (one weight per edge) sum or mean on the
CPU, float32/float64, with numba installed, whose work ``E x F`` (edges times feature width) is at
most :data:`SMALL_WORK`, runs ``unigraph.kernels.cpu.coo`` through the native lane
(``unigraph/ops/small_graph_lane.py``): one pass over the edge list, on one thread.

Why a rule and not the cost model: the cost model ranks kernels on a graph whose formats exist.
On a graph that is new every call (a mini-batch of small graphs: PyG's ``DataLoader`` collates a
new ``edge_index`` per batch) the CSR kernels first pay for what the cost model does not see:
both CSRs, their row plans, the degree statistics the model itself reads, a decision per width
(~300 us of a ~2.4 ms GIN batch on the 2-core development machine: docs/performance.md). Below
the bound the COO kernel needs none of them and is also no slower per call on a graph that is
kept: measured there (``/`` = CSR path per call / COO kernel, medians, 2 threads; a new graph
every call, then one built once and kept):

=========  ==========  =================  ===================
edges      width       new graph          kept graph
=========  ==========  =================  ===================
5,000      8 / 32      193/48, 177/65 us  144/33, 120/58 us
5,000      128         217/126 us         161/134 us
13,000     8 / 32      437/139, 461/202   161/75, 121/141
30,000     64          839/499            352/914 (cache misses: past the bound)
=========  ==========  =================  ===================

The bound does not scale with the thread count: what it avoids (building the formats and
deciding) costs the same with more threads. :data:`CSR_FREE_EDGES` is the call forms' side of it:
a layer given a new ``edge_index`` of at most that many edges builds its graph without CSRs (the
rule will take its aggregations unless their width is large; a later call that needs the CSRs
builds them then).
"""
from __future__ import annotations

import torch

from unigraph import backends as registry

SMALL_WORK = 1 << 18       # edges x feature width (262,144)
CSR_FREE_EDGES = 1 << 14   # a new edge_index of at most this many edges gets no CSR up front
BACKEND = "numba"          # whose kernels these are (what explain names)
OPS = ("copy_u", "u_mul_e")
REDUCES = ("sum", "mean")
DTYPES = (torch.float32, torch.float64)


def _numba_ok() -> bool:
    """numba's backend is registered (a test may hold a registry of its own) and can run here."""
    return BACKEND in registry.names() and registry.status_of(BACKEND).ok


def applies(num_edges: int, width: int, device: torch.device) -> bool:
    """Whether the rule takes a call the native lane admitted (a sum or mean of ``copy_u`` or
    ``u_mul_e`` with one weight per edge, ``u`` 2-D float32/float64) under ``auto``."""
    return device.type == "cpu" and num_edges * max(width, 1) <= SMALL_WORK and _numba_ok()


def applies_to_request(num_edges: int, kind: str, op: str, reduce: str | None, width: int,
                       dtype: torch.dtype, device: torch.device) -> bool:
    """:func:`applies` for a request's fields (what ``explain`` asks)."""
    return (kind == "gspmm" and op in OPS and reduce in REDUCES and dtype in DTYPES
            and applies(num_edges, width, device))


def reason(num_edges: int, width: int) -> str:
    """What ``explain`` says when the rule decided."""
    return (f"small-graph rule: {num_edges} edges x {max(width, 1)} features <= {SMALL_WORK:,}: numba's serial "
            "COO kernel, no CSR, no statistics (for u [N, F] and, for u_mul_e, one weight per edge; "
            "other operand shapes go by the cost model)")


def may_skip_csr(num_edges: int, device: torch.device) -> bool:
    """Whether a new graph of ``num_edges`` edges on ``device`` is built without CSRs under ``auto``."""
    return device.type == "cpu" and num_edges <= CSR_FREE_EDGES and _numba_ok()
