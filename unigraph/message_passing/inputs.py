"""Node-feature inputs of a layer: one tensor, or a (source, destination) pair for bipartite blocks.

DGL's block convention: the first ``num_dst_nodes`` source nodes are the destination nodes, so a
single tensor ``x`` for a block means ``x_src = x`` and ``x_dst = x[:num_dst_nodes]``.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.graph import Graph


def check_graph(g: Any, who: str) -> Graph:
    if not isinstance(g, Graph):
        hint = (" (wrap an edge_index once: g = unigraph.Graph(edge_index, num_nodes=N); its formats are "
                "cached on the Graph, so reuse it across calls)") if isinstance(g, Tensor) else ""
        raise TypeError(f"{who} expects a unigraph.Graph as its graph argument, got {type(g).__name__}{hint}")
    return g


def check_rows(x: Tensor, rows: int, name: str, rows_are: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0 or x.shape[0] != rows:
        got = "a scalar" if x.dim() == 0 else f"{x.shape[0]} rows"
        raise ValueError(f"{name} has {got} but the graph has {rows} {rows_are}")


def rows_prefix(x: Tensor, n: int) -> Tensor:
    """The first ``n`` rows of ``x`` (dense, sparse CSR or sparse COO)."""
    if x.layout == torch.sparse_csr:
        crow = x.crow_indices()
        end = int(crow[n])
        return torch.sparse_csr_tensor(crow[: n + 1], x.col_indices()[:end], x.values()[:end], (n,) + tuple(x.shape[1:]))
    if x.layout == torch.sparse_coo:
        x = x.coalesce()
        keep = x.indices()[0] < n
        return torch.sparse_coo_tensor(x.indices()[:, keep], x.values()[keep], (n,) + tuple(x.shape[1:]))
    return x[:n]


def split_pair(g: Graph, x: Any, name: str = "x") -> tuple[Tensor, Tensor | None]:
    """``(x_src, x_dst)`` for graph ``g``, with row counts checked (``x_dst`` may be None when the
    caller passed ``(x_src, None)``)."""
    if isinstance(x, (tuple, list)):
        if len(x) != 2:
            raise ValueError(f"{name} must be one tensor or a (source, destination) pair, got a sequence of {len(x)}")
        x_src, x_dst = x
        check_rows(x_src, g.num_src_nodes, f"{name}[0] (source features)", "source nodes")
        if x_dst is not None:
            check_rows(x_dst, g.num_dst_nodes, f"{name}[1] (destination features)", "destination nodes")
        return x_src, x_dst
    if not g.is_bipartite:
        check_rows(x, g._sizes()[0], name, "nodes")
        return x, x
    check_rows(x, g.num_src_nodes, name, "source nodes")
    if g.num_src_nodes < g.num_dst_nodes:
        raise ValueError(f"a single {name} for a bipartite graph means its first num_dst_nodes rows are the "
                         f"destination nodes, but num_src_nodes={g.num_src_nodes} < num_dst_nodes="
                         f"{g.num_dst_nodes}; pass a (source, destination) pair")
    return x, rows_prefix(x, g.num_dst_nodes)
