"""Bringing a node-to-partition assignment within a balance tolerance by greedy moves.

Why: METIS (through ``pymetis``) balances one vertex weight well, but with several constraints
on a power-law graph it does not balance the in-degree one: on a 100k-node R-MAT graph, 4 parts,
the weights (1, in-degree, training) left the parts' stored edges at 2.5x the mean, and (1,
training) at 3.4x, while nodes and training nodes were within 1.1 (measured here). With the single
weight ``in-degree + 1`` METIS balances edges (1.02) but not nodes (1.65). So the partitioner runs
METIS on ``in-degree + 1`` and then :func:`rebalance` moves nodes until every count is within the
tolerance:

1. **edges** (in-edges stored by a part): nodes of highest in-degree first, each from a part above
   the limit to the part with the fewest edges, if that lowers the larger of the two;
2. **training nodes**: training nodes of lowest in-degree (then fewest neighbours) first, to the
   part with the fewest training nodes;
3. **nodes**: non-training nodes of lowest in-degree (then fewest neighbours) first, to the part
   with the fewest nodes: a node with no in-edges moves no stored edge, and one with few
   neighbours cuts few edges.

Each pass moves what the later ones barely disturb (a training node is one node; a node of in-degree
0 is no edge); the passes repeat (at most ``rounds`` times) until all three counts are within
``tolerance`` x their mean. Moves are O(moves) Python steps over a precomputed order: on that R-MAT
graph, 19k moves in 0.05 s, edge cut unchanged (0.681); on the planted-partition graph METIS is
already within 1.01 and nothing moves.
"""
from __future__ import annotations

import numpy as np

COUNTS = ("edges", "train", "nodes")


def loads(part: np.ndarray, weight: np.ndarray, num_parts: int) -> np.ndarray:
    return np.bincount(part, weights=weight, minlength=num_parts).astype(np.float64)


def balance_of(part: np.ndarray, weight: np.ndarray, num_parts: int) -> float:
    """max / mean of the parts' totals of ``weight`` (1.0 when the total is 0)."""
    totals = loads(part, weight, num_parts)
    mean = totals.mean()
    return float(totals.max() / mean) if mean else 1.0


def _pass(part: np.ndarray, weight: np.ndarray, order: np.ndarray, num_parts: int, tolerance: float,
          only_if_better: bool) -> int:
    """Move nodes in ``order`` out of parts above ``tolerance`` x mean of ``weight`` into the
    lightest part; returns the number of moves."""
    totals = loads(part, weight, num_parts)
    limit = totals.mean() * tolerance
    moves = 0
    for v in order:
        if totals.max() <= limit:
            break
        p, w = part[v], weight[v]
        if totals[p] <= limit or w == 0:
            continue
        q = int(np.argmin(totals))
        if only_if_better and totals[q] + w >= totals[p]:
            continue  # the move would only make the lighter part the heavier one
        part[v] = q
        totals[p] -= w
        totals[q] += w
        moves += 1
    return moves


def rebalance(part: np.ndarray, num_parts: int, *, in_degree: np.ndarray, train: np.ndarray,
              neighbours: np.ndarray, tolerance: float, rounds: int = 3) -> dict:
    """Move nodes of ``part`` (changed in place) until the parts' in-edges, training nodes and
    nodes are within ``tolerance`` x mean (see the module docstring). ``neighbours``: each node's
    degree in the undirected graph (a tie-break: fewer cut edges). Returns the moves per count and
    the balance reached (``balanced`` False if a count is still above the tolerance, e.g. one
    node alone holds more in-edges than a part may)."""
    if not tolerance >= 1.0:
        raise ValueError(f"tolerance must be >= 1.0 (max / mean), got {tolerance!r}")
    in_degree = in_degree.astype(np.int64)
    train = train.astype(np.int64)
    ones = np.ones_like(in_degree)
    weights = {"edges": in_degree, "train": train, "nodes": ones}
    orders = {
        "edges": np.argsort(-in_degree, kind="stable"),
        "train": np.lexsort((neighbours, in_degree, -train)),          # training nodes, fewest in-edges first
        "nodes": np.lexsort((neighbours, in_degree, train)),           # non-training nodes first
    }
    moves = dict.fromkeys(COUNTS, 0)
    for _ in range(rounds):
        for name in COUNTS:
            order = orders[name] if name != "nodes" else orders[name][train[orders[name]] == 0]
            moves[name] += _pass(part, weights[name], order, num_parts, tolerance, only_if_better=name == "edges")
        if all(balance_of(part, weights[name], num_parts) <= tolerance for name in COUNTS):
            break
    reached = {name: balance_of(part, weights[name], num_parts) for name in COUNTS}
    return {"moves": moves, "balance": reached, "tolerance": tolerance,
            "balanced": all(value <= tolerance for value in reached.values())}
