"""Greedy neighbour matching (the edge coarsening of Metis and Graclus): the loops of
``unigraph.dgl.geometry.neighbor_matching``, written once, compiled by numba where it is installed
(``unigraph.dgl.geometry``) and run as they are otherwise.

Nodes are visited in ``order``; an unmatched node ``u`` takes one unmatched neighbour ``v`` (not
itself) and both get the label ``min(u, v)``; a node left without one is labelled itself.
``ptr``/``nbr``/``slot_values`` are a CSR of the graph (``nbr[ptr[u]:ptr[u+1]]`` the neighbours of
``u``) with one value per slot; ``labels`` (int64, -1 for unmatched) is filled in place.
"""
from __future__ import annotations


def heaviest_neighbour_matching(ptr, nbr, weight, order, labels):
    """Each visited node takes the unmatched neighbour of the largest weight (>= 0; the last slot
    of the row on ties), as DGL's CPU kernel chooses."""
    for n in range(order.shape[0]):
        u = order[n]
        if labels[u] >= 0:
            continue
        best, best_weight = u, 0.0
        for e in range(ptr[u], ptr[u + 1]):
            v = nbr[e]
            if v == u or labels[v] >= 0:
                continue
            if weight[e] >= best_weight:
                best, best_weight = v, weight[e]
        labels[u] = min(u, best)
        labels[best] = labels[u]


def random_neighbour_matching(ptr, nbr, key, order, labels):
    """Each visited node takes the unmatched neighbour of the smallest ``key`` (one uniform draw
    per slot: the first unmatched one of a uniformly random order of the row, as DGL draws it)."""
    for n in range(order.shape[0]):
        u = order[n]
        if labels[u] >= 0:
            continue
        best, best_key = u, 2.0
        for e in range(ptr[u], ptr[u + 1]):
            v = nbr[e]
            if v == u or labels[v] >= 0:
                continue
            if key[e] < best_key:
                best, best_key = v, key[e]
        labels[u] = min(u, best)
        labels[best] = labels[u]
