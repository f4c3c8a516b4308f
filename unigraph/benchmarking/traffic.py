r"""The bytes a graph op must move, forward and backward: a floor time at the machine's measured
bandwidth (:mod:`unigraph.benchmarking.bandwidth`) and the GB/s an implementation achieved.

The floor counts what any implementation has to touch once: **one read of each gathered row**
(per edge, the row its endpoint selects: caches may do better on a graph with locality, which is
why a kernel can beat the floor on small or reordered graphs), the **index arrays** it walks, the
operands it reads in place, and **one write of the output** (plus what the forward must keep for
the backward). Write-allocate traffic is not counted (STREAM does not count it either). Notation:
:math:`N_s, N_d` source / destination nodes, :math:`E` edges, :math:`b` bytes per value
(``value_bytes``, 4 for float32), :math:`i` bytes per index (``index_bytes``, 8 for int64),
:math:`F_u, F_e, F_o` elements per row of ``u``, ``e`` and the output (after broadcasting).

Node-parallel kernels walk a CSR by destination: ``indptr`` :math:`(N_d+1)i`, source ids
:math:`Ei`, and edge ids :math:`Ei` when they read edge data stored in edge order. Gradients for
source rows walk the reverse CSR (by source): :math:`(N_s+1)i + Ei` (+ :math:`Ei` edge ids).

========================  =============================================================================
g-SpMM forward            ``indptr`` + [u] :math:`Ei + EF_ub` + [e] :math:`Ei + EF_eb` + output
                          :math:`N_dF_ob` + [max/min] the arg-extreme record, :math:`N_dF_oi` per
                          operand read (what the backward scatters to)
g-SpMM backward sum/mean  grad_u: reverse CSR + :math:`EF_ob` gathered ``grad_out`` + [op reads e]
                          :math:`Ei + EF_eb` + write :math:`N_sF_ub`; mean also reads the degrees
                          (``indptr``, :math:`(N_d+1)i`). grad_e: :math:`Ei` destination ids +
                          :math:`EF_ob` gathered ``grad_out`` + [u_mul_e, u_div_e] :math:`Ei + EF_ub`
                          gathered u + [u_div_e] :math:`EF_eb` + write :math:`EF_eb`.
g-SpMM backward max/min   per operand: read ``grad_out`` :math:`N_dF_ob` and its arg record
                          :math:`N_dF_oi`, [u_mul_e, u_div_e] the other operand at the arg
                          :math:`N_dF_ob`, write the gradient (zero-filled, :math:`N_sF_ub` or
                          :math:`EF_eb`) and read-modify-write the :math:`N_dF_o` entries it scatters to.
g-SDDMM forward           per operand on a node (u or v): :math:`Ei + EF b` gathered; on edges:
                          :math:`EFb` in place; write :math:`EF_ob`.
g-SDDMM backward          per node operand: its CSR (``indptr`` + edge ids), :math:`EF_ob` ``grad_out``
                          + [mul, div, dot] the other operand (gathered, :math:`Ei + EFb`) + write
                          :math:`NFb`; per edge operand: :math:`EF_ob` + [mul, div, dot] the other
                          operand + write :math:`EFb`.
edge softmax              forward: CSR by destination (``indptr`` + edge ids) + read scores
                          :math:`EHb` + write :math:`EHb`; backward: CSR + read ``y`` and ``grad_y``
                          :math:`2EHb` + write :math:`EHb`.
GAT attention (fused)     forward: CSR + :math:`EHDb` gathered ``h`` + :math:`EHb` gathered ``el`` +
                          :math:`N_dHb` ``er`` + write :math:`N_dHDb` + the softmax statistics
                          :math:`2N_dHb`; backward: two passes, by destination (scores recomputed:
                          ``h``, ``el`` gathered, ``er``, stats, ``grad_out`` read; per-edge
                          ``grad_score`` :math:`EHb` and ``grad_er`` written) and by source
                          (``grad_out``, ``er``, stats and ``grad_score`` gathered; ``grad_h``,
                          ``grad_el`` written).
========================  =============================================================================

``tests/test_benchmark_timing.py`` checks these on a graph small enough to count by hand.
"""
from __future__ import annotations

import dataclasses

GSPMM_OPS = ("copy_u", "copy_e", "u_add_e", "u_sub_e", "u_mul_e", "u_div_e")
GSPMM_REDUCES = ("sum", "mean", "max", "min")
GSDDMM_OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
TARGETS = ("u", "v", "e")


@dataclasses.dataclass(frozen=True)
class Shape:
    """The sizes the byte counts depend on."""

    num_src: int
    num_dst: int
    num_edges: int
    value_bytes: int = 4
    index_bytes: int = 8

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Shape.{field.name} must be an int >= 0, got {value!r}")

    @classmethod
    def of(cls, graph, value_bytes: int = 4, index_bytes: int = 8) -> "Shape":
        """The shape of a :class:`unigraph.Graph`."""
        return cls(graph.num_src_nodes, graph.num_dst_nodes, graph.num_edges, value_bytes, index_bytes)


def _width(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def _check(name: str, value: str, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def _csr(s: Shape, rows: int, edge_ids: bool) -> int:
    """``indptr`` of ``rows`` rows, plus the edge ids when the kernel reads edge-ordered data."""
    return (rows + 1) * s.index_bytes + (s.num_edges * s.index_bytes if edge_ids else 0)


def gspmm(s: Shape, op: str, reduce: str, *, u_width: int = 1, e_width: int = 1, out_width: int | None = None,
          backward: bool = False) -> dict[str, int]:
    """Bytes of one g-SpMM (see the module table), labelled by what they are."""
    _check("op", op, GSPMM_OPS)
    _check("reduce", reduce, GSPMM_REDUCES)
    reads_u, reads_e = op != "copy_e", op != "copy_u"
    fu, fe = _width("u_width", u_width), _width("e_width", e_width)
    fo = _width("out_width", out_width if out_width is not None else max(fu if reads_u else 1, fe if reads_e else 1))
    E, b, i = s.num_edges, s.value_bytes, s.index_bytes
    operands = int(reads_u) + int(reads_e)
    if not backward:
        out = {"csr indptr": (s.num_dst + 1) * i, "output": s.num_dst * fo * b}
        if reads_u:
            out["source ids"] = E * i
            out["gathered u rows"] = E * fu * b
        if reads_e:
            out["edge ids"] = E * i
            out["edge values"] = E * fe * b
        if reduce in ("max", "min"):
            out["arg-extreme record"] = operands * s.num_dst * fo * i
        return out
    out: dict[str, int] = {}
    if reduce in ("max", "min"):
        for name, rows, width, other in (("u", s.num_src, fu, reads_e), ("e", E, fe, reads_u)):
            if (name == "u" and not reads_u) or (name == "e" and not reads_e):
                continue
            out[f"grad_{name}: grad_out and arg record"] = s.num_dst * fo * (b + i)
            if other and op in ("u_mul_e", "u_div_e"):
                out[f"grad_{name}: other operand at the arg"] = s.num_dst * fo * b
            out[f"grad_{name}: written (zero-filled)"] = rows * width * b
            out[f"grad_{name}: scattered read-modify-write"] = 2 * s.num_dst * fo * b
        return out
    if reads_u:
        out["grad_u: reverse csr"] = _csr(s, s.num_src, edge_ids=reads_e and op in ("u_mul_e", "u_div_e")) + E * i
        out["grad_u: gathered grad_out rows"] = E * fo * b
        if op in ("u_mul_e", "u_div_e"):
            out["grad_u: edge values"] = E * fe * b
        if reduce == "mean":
            out["grad_u: degrees"] = (s.num_dst + 1) * i
        out["grad_u: written"] = s.num_src * fu * b
    if reads_e:
        out["grad_e: destination ids"] = E * i
        out["grad_e: gathered grad_out rows"] = E * fo * b
        if op in ("u_mul_e", "u_div_e"):
            out["grad_e: gathered u rows"] = E * (i + fu * b)
        if op == "u_div_e":
            out["grad_e: edge values"] = E * fe * b
        if reduce == "mean":
            out["grad_e: degrees"] = (s.num_dst + 1) * i
        out["grad_e: written"] = E * fe * b
    return out


def gsddmm(s: Shape, op: str, *, lhs_width: int, rhs_width: int, out_width: int, lhs_target: str = "u",
           rhs_target: str = "v", backward: bool = False) -> dict[str, int]:
    """Bytes of one g-SDDMM (see the module table), labelled by what they are."""
    _check("op", op, GSDDMM_OPS)
    _check("lhs_target", lhs_target, TARGETS)
    _check("rhs_target", rhs_target, TARGETS)
    fl, fr, fo = _width("lhs_width", lhs_width), _width("rhs_width", rhs_width), _width("out_width", out_width)
    E, b, i = s.num_edges, s.value_bytes, s.index_bytes
    operands = [("lhs", lhs_target, fl)] * (op != "copy_rhs") + [("rhs", rhs_target, fr)] * (op != "copy_lhs")

    def read(target: str, width: int) -> int:  # one operand's rows as the edges see them
        return E * width * b + (E * i if target != "e" else 0)

    if not backward:
        out = {f"{name} ({target})": read(target, width) for name, target, width in operands}
        out["output"] = E * fo * b
        return out
    out = {}
    for name, target, width in operands:
        others = [(t, w) for n, t, w in operands if n != name]
        out[f"grad_{name}: grad_out"] = E * fo * b
        if op in ("mul", "div", "dot") and others:
            out[f"grad_{name}: other operand"] = read(*others[0])
        if op == "div" and name == "rhs":
            out[f"grad_{name}: own operand"] = read(target, width)
        if target == "e":
            out[f"grad_{name}: written"] = E * width * b
        else:
            rows = s.num_src if target == "u" else s.num_dst
            out[f"grad_{name}: csr"] = _csr(s, rows, edge_ids=True)
            out[f"grad_{name}: written"] = rows * width * b
    return out


def edge_softmax(s: Shape, heads: int, *, backward: bool = False) -> dict[str, int]:
    """Bytes of one edge softmax over the in-edges of each destination, ``heads`` scores per edge."""
    h, E, b = _width("heads", heads), s.num_edges, s.value_bytes
    out = {"csr by destination": _csr(s, s.num_dst, edge_ids=True)}
    if backward:
        out["y and grad_y"] = 2 * E * h * b
    else:
        out["scores"] = E * h * b
    out["written"] = E * h * b
    return out


def gat_attention(s: Shape, heads: int, head_width: int, *, backward: bool = False) -> dict[str, int]:
    """Bytes of one fused GAT aggregation (``h`` of ``heads x head_width`` per source node)."""
    h, d = _width("heads", heads), _width("head_width", head_width)
    E, b, i = s.num_edges, s.value_bytes, s.index_bytes
    if not backward:
        return {"csr by destination": (s.num_dst + 1) * i, "source ids": E * i, "gathered h rows": E * h * d * b,
                "gathered el": E * h * b, "er": s.num_dst * h * b, "output": s.num_dst * h * d * b,
                "softmax statistics": 2 * s.num_dst * h * b}
    by_dst = (_csr(s, s.num_dst, edge_ids=True) + E * i + E * h * (d + 1) * b
              + s.num_dst * h * (1 + 2 + d) * b + E * h * b + s.num_dst * h * b)
    by_src = (_csr(s, s.num_src, edge_ids=True) + E * i + E * h * (d + 1 + 2 + 1) * b
              + s.num_src * h * b + s.num_src * h * (d + 1) * b)
    return {"pass by destination": by_dst, "pass by source": by_src}


def total(traffic: dict[str, int]) -> int:
    return sum(traffic.values())


def floor_ms(nbytes: int, gbps: float) -> float:
    """The time moving ``nbytes`` takes at ``gbps`` (10^9 bytes/s)."""
    if gbps <= 0:
        raise ValueError(f"bandwidth must be > 0 GB/s, got {gbps}")
    return nbytes / (gbps * 1e9) * 1e3


def achieved_gbps(nbytes: int, ms: float) -> float:
    """The bandwidth an implementation achieved moving ``nbytes`` in ``ms``."""
    if ms <= 0:
        raise ValueError(f"time must be > 0 ms, got {ms}")
    return nbytes / (ms / 1e3) / 1e9
