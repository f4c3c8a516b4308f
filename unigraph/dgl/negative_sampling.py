r"""DGL's :func:`global_uniform_negative_sampling`: node pairs :math:`(u, v)` of a relation that
are not edges of it, drawn uniformly over all pairs.

DGL's procedure, reproduced step by step: it makes :math:`\lfloor n (1 + r) \rfloor` attempts for
``num_samples`` :math:`= n`; each attempt draws up to 3 pairs uniformly (source among the
relation's source nodes, destination among its destination nodes) and keeps the first that is
not an edge (nor a self-loop with ``exclude_self_loops``, on a relation from a node type to
itself); attempts that fail 3 times give nothing. Without ``replace`` the kept pairs are sorted
by :math:`(u, v)` and made unique; the first :math:`n` are returned (so a short result, or one
leaning to small :math:`u`, is DGL's behaviour). The redundancy :math:`r` is DGL's: with
:math:`p = |E| / (N_u N_v)` the edge density and :math:`q = 1 - p`, the largest root :math:`N`
of :math:`q^2 N^2 - q(2n + 9p) N + n^2 = 0` (three standard deviations of the number of
successes above :math:`n`), :math:`r = N / n - 1`; DGL ignores the ``redundancy`` argument in
favour of it, and so does this function.

How it computes: all attempts at once (``[attempts, 3]`` random pairs; edge membership by a
sorted search of the pair keys :math:`u N_v + v` among the relation's, which the graph keeps), no
loop over pairs.
Draws use torch's generator on the graph's device: DGL's distribution, not its draws.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError

__all__ = ["global_uniform_negative_sampling"]

TRIALS = 3   # DGL's tries per attempt


def _redundancy(num_samples: int, num_edges: int, num_pairs: int, spread: float = 3.0) -> float:
    """DGL's extra fraction of attempts (module docstring); 0 where the equation degenerates."""
    density = num_edges / num_pairs
    free = 1.0 - density
    a, b, c = free ** 2, -free * (2 * num_samples + spread ** 2 * density), float(num_samples) ** 2
    if a == 0 or num_samples == 0:
        return 0.0
    root = (-b + math.sqrt(max(b * b - 4 * a * c, 0.0))) / (2 * a)
    return root / num_samples - 1.0


def _pair_keys(u: Tensor, v: Tensor, width: int, exact_in_float: bool) -> Tensor:
    """One number per pair ``u * width + v``; float64 where that is exact (torch sorts and searches
    float64 several times faster than int64 on the CPU), int64 otherwise."""
    return u.double() * width + v.double() if exact_in_float else u.long() * width + v.long()


def _is_edge(rel, u: Tensor, v: Tensor, exact_in_float: bool) -> Tensor:
    """Whether each pair ``(u[i], v[i])`` is an edge of ``rel``: a search among the relation's
    sorted pair keys (kept on the graph, they depend on its structure alone)."""
    width = rel.num_dst_nodes()
    keys = rel.memo(("unigraph.dgl.negative_sampling", "sorted pair keys", exact_in_float),
                    lambda: torch.sort(_pair_keys(*rel.all_edges(order="eid"), width, exact_in_float)).values)
    wanted = _pair_keys(u, v, width, exact_in_float)
    if keys.numel() == 0:
        return torch.zeros(wanted.shape, dtype=torch.bool, device=wanted.device)
    at = torch.searchsorted(keys, wanted).clamp(max=keys.numel() - 1)
    return keys[at] == wanted


def global_uniform_negative_sampling(g, num_samples: int, exclude_self_loops: bool = True, replace: bool = False,
                                     etype=None, redundancy=None) -> tuple[Tensor, Tensor]:
    """DGL's ``global_uniform_negative_sampling``: up to ``num_samples`` non-edges ``(src, dst)``
    of relation ``etype`` (default: the first), by DGL's procedure (module docstring).

    Args:
        g: a ``DGLGraph`` or ``DGLHeteroGraph``.
        num_samples: how many pairs to return at most.
        exclude_self_loops: never return ``(v, v)`` (only on a relation from a type to itself).
        replace: allow a pair several times (without: unique pairs, sorted).
        etype: the relation.
        redundancy: ignored, as DGL ignores it (the redundancy is computed).

    Returns:
        ``(src, dst)`` in the graph's ``idtype``, on its device.
    """
    from unigraph.dgl.graph import DGLGraph
    from unigraph.dgl.heterograph import DGLHeteroGraph
    if not isinstance(g, (DGLGraph, DGLHeteroGraph)):
        raise DGLError(f"global_uniform_negative_sampling needs a unigraph.dgl graph, got {type(g).__name__}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 0:
        raise DGLError(f"num_samples must be a non-negative int, got {num_samples!r}")
    cet = g.to_canonical_etype(etype if etype is not None else g.canonical_etypes[0])
    rel = g[cet] if isinstance(g, DGLHeteroGraph) else g
    num_src, num_dst = rel.num_src_nodes(), rel.num_dst_nodes()
    empty = torch.zeros(0, dtype=g.idtype, device=g.device)
    if num_src == 0 or num_dst == 0 or num_samples == 0:
        return empty, empty.clone()
    attempts = int(num_samples * (1 + _redundancy(num_samples, rel.num_edges(), num_src * num_dst)))
    u = torch.randint(num_src, (attempts, TRIALS), device=g.device)
    v = torch.randint(num_dst, (attempts, TRIALS), device=g.device)
    exact_in_float = num_src * num_dst < 2 ** 53
    good = ~_is_edge(rel, u.flatten(), v.flatten(), exact_in_float).view(attempts, TRIALS)
    if exclude_self_loops and cet[0] == cet[2]:
        good &= u != v
    found = good.any(1)
    first = good.int().argmax(1)                 # the first good trial of each attempt
    pick = torch.arange(attempts, device=g.device)[found]
    u, v = u[pick, first[found]], v[pick, first[found]]
    if not replace:
        pairs = torch.unique(_pair_keys(u, v, num_dst, exact_in_float)).long()    # sorted by (u, v), unique
        u, v = pairs // num_dst, pairs % num_dst
    return u[:num_samples].to(g.idtype), v[:num_samples].to(g.idtype)
