"""What the explainers share: checks of their graph and feature arguments, the k-hop
in-neighbourhood subgraph of DGL's ``khop_in_subgraph`` (homogeneous and typed), an induced
subgraph of a heterograph, and the optional tqdm progress bar.

``khop_in_subgraph`` lives here because unigraph.dgl does not export it (yet); the explainers only
need the relabelled form with the ids stored (``ndata[dgl.NID]`` / ``edata[dgl.EID]``).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl.base import EID, NID, DGLError
from unigraph.dgl.convert import heterograph

try:  # the progress bar is a nicety: without tqdm the explainers stay silent
    from tqdm.auto import tqdm as _tqdm
except ImportError:  # pragma: no cover - depends on the environment
    _tqdm = None


class _NoBar:
    def update(self, _n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress(enabled: bool, total: int, description: str):
    """A tqdm bar over ``total`` steps when ``enabled`` and tqdm is installed, else a silent stand-in."""
    if not enabled or _tqdm is None:
        return _NoBar()
    bar = _tqdm(total=total)
    bar.set_description(description)
    return bar


# ---------------------------------------------------------------------- argument checks
def check_homogeneous_graph(graph: Any, who: str) -> None:
    """One node type and one edge type, not a block (the homogeneous explainers' graphs)."""
    if not hasattr(graph, "canonical_etypes") or not hasattr(graph, "ntypes"):
        raise TypeError(f"{who} takes a unigraph.dgl graph, got {type(graph).__name__}")
    if graph.is_block or len(graph.ntypes) != 1 or len(graph.canonical_etypes) != 1:
        raise DGLError(f"{who} needs a homogeneous graph (one node and one edge type, not a block); got node types "
                       f"{graph.ntypes} and edge types {graph.canonical_etypes}: use the Hetero* explainer")


def check_node_features(graph: Any, feat: Any, who: str) -> None:
    if not isinstance(feat, Tensor):
        raise TypeError(f"{who}: feat must be one node feature tensor [N, D], got {type(feat).__name__}")
    if feat.dim() != 2 or feat.shape[0] != graph.num_nodes():
        raise DGLError(f"{who}: feat must have shape [num_nodes, D] = [{graph.num_nodes()}, D]; "
                       f"got {tuple(feat.shape)}")


def check_typed_graph(graph: Any, who: str) -> None:
    if not hasattr(graph, "canonical_etypes") or not hasattr(graph, "ntypes"):
        raise TypeError(f"{who} takes a unigraph.dgl graph, got {type(graph).__name__}")
    if graph.is_block:
        raise DGLError(f"{who} needs a graph, not a block")


def check_typed_features(graph: Any, feat: Any, who: str, every_type: bool) -> None:
    """``feat``: ``{ntype: [N_t, D_t]}``; with ``every_type``, one entry for each node type."""
    if not isinstance(feat, Mapping):
        raise TypeError(f"{who}: feat must be a dict {{node type: features [N_t, D_t]}}, got {type(feat).__name__}")
    unknown = [t for t in feat if t not in graph.ntypes]
    missing = [t for t in graph.ntypes if t not in feat] if every_type else []
    if unknown or missing:
        raise DGLError(f"{who}: feat has node types {list(feat)}; the graph has {graph.ntypes}"
                       + (f" (unknown: {unknown})" if unknown else "") + (f" (missing: {missing})" if missing else ""))
    for ntype, value in feat.items():
        if not isinstance(value, Tensor) or value.dim() != 2 or value.shape[0] != graph.num_nodes(ntype):
            shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
            raise DGLError(f"{who}: feat[{ntype!r}] must have shape [{graph.num_nodes(ntype)}, D]; got {shape}")


def node_list(nodes: Any, count: int, what: str) -> list[int]:
    """Node ids given as an int, a 0-d or 1-d tensor or an iterable of ints, as a list, in range."""
    if isinstance(nodes, Tensor):
        if nodes.is_floating_point() or nodes.dtype == torch.bool or nodes.dim() > 1:
            raise TypeError(f"{what} must be integer node ids, got a {nodes.dtype} tensor of shape "
                            f"{tuple(nodes.shape)}")
        nodes = nodes.tolist()
    if isinstance(nodes, (int, np.integer)) and not isinstance(nodes, bool):
        nodes = [nodes]
    try:
        ids = [int(n) for n in nodes]
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an int, a list or a tensor of node ids, got {nodes!r}") from None
    bad = [n for n in ids if not 0 <= n < count]
    if bad:
        raise DGLError(f"{what}: node ids {bad} are outside 0..{count - 1}")
    return ids


def one_node(node_id: Any, count: int, what: str) -> Tensor:
    """GNNExplainer's center: exactly one node id (its loss is that node's log-probability)."""
    ids = node_list(node_id, count, what)
    if len(ids) != 1:
        raise DGLError(f"{what}: explains one node at a time, got {len(ids)} ids")
    return torch.tensor(ids, dtype=torch.int64)


def check_count(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return int(value)


# ---------------------------------------------------------------------- subgraphs
def khop_in_subgraph(graph: Any, seeds: Tensor, num_hops: int):
    """DGL's ``khop_in_subgraph`` of a homogeneous graph: the subgraph induced by the seeds and
    every node with a path of at most ``num_hops`` edges into one of them (nodes in id order,
    ids stored), and the seeds' positions in it."""
    hops, frontier = [seeds], seeds
    for _ in range(num_hops):
        frontier = torch.unique(graph.in_edges(frontier)[0].long())
        hops.append(frontier.to(seeds.device))
    nodes, inverse = torch.unique(torch.cat(hops), return_inverse=True)
    return graph.subgraph(nodes), inverse[: seeds.numel()]


def typed_khop_in_subgraph(graph: Any, seeds: Mapping[str, Tensor], num_hops: int):
    """The same on a typed graph: hop by hop, every relation carries the frontier of its
    destination type to its source type; ``seeds`` and the returned positions are per type."""
    device = graph.device
    empty = torch.zeros(0, dtype=torch.int64, device=device)
    hops, frontier = [dict(seeds)], dict(seeds)
    for _ in range(num_hops):
        found: dict[str, list[Tensor]] = {ntype: [] for ntype in graph.ntypes}
        for cet in graph.canonical_etypes:
            src_type, _, dst_type = cet
            found[src_type].append(graph.in_edges(frontier.get(dst_type, empty), etype=cet)[0].long())
        frontier = {ntype: torch.unique(torch.cat(parts)) if parts else empty for ntype, parts in found.items()}
        hops.append(frontier)
    nodes, inverse = {}, {}
    for ntype in graph.ntypes:
        nodes[ntype], inverse[ntype] = torch.unique(torch.cat([hop.get(ntype, empty) for hop in hops]),
                                                    return_inverse=True)
    return typed_node_subgraph(graph, nodes), {ntype: inverse[ntype][: ids.numel()] for ntype, ids in seeds.items()}


def typed_node_subgraph(graph: Any, nodes: Mapping[str, Tensor]):
    """DGL's ``node_subgraph`` of a typed graph with ``{ntype: ids}`` (every type, ids in the
    order they are to take): every relation keeps its edges between kept nodes, ordered by new
    source id then edge id (DGL's order); all features follow, the old ids are stored."""
    device, idtype = graph.device, graph.idtype
    position = {}
    for ntype in graph.ntypes:
        position[ntype] = torch.full((graph.num_nodes(ntype),), -1, dtype=torch.int64, device=device)
        position[ntype][nodes[ntype]] = torch.arange(nodes[ntype].numel(), device=device)
    data, kept = {}, {}
    for cet in graph.canonical_etypes:
        src, dst = (ids.long() for ids in graph.all_edges(etype=cet))
        new_src, new_dst = position[cet[0]][src], position[cet[2]][dst]
        eids = ((new_src >= 0) & (new_dst >= 0)).nonzero().flatten()
        eids = eids[torch.sort(new_src[eids], stable=True).indices]
        data[cet], kept[cet] = (new_src[eids], new_dst[eids]), eids
    out = heterograph(data, {ntype: int(ids.numel()) for ntype, ids in nodes.items()}, idtype=idtype, device=device)
    for ntype in graph.ntypes:
        for key, value in graph.nodes[ntype].data.items():
            out.nodes[ntype].data[key] = value[nodes[ntype].to(value.device)]
        out.nodes[ntype].data[NID] = nodes[ntype].to(idtype)
    for cet in graph.canonical_etypes:
        for key, value in graph.edges[cet].data.items():
            out.edges[cet].data[key] = value[kept[cet].to(value.device)]
        out.edges[cet].data[EID] = kept[cet].to(idtype)
    return out


def slice_node_edge_kwargs(kwargs: dict, num_nodes: int, num_edges: int, nodes: Tensor, edges: Tensor) -> dict:
    """DGL's rule for the extra model arguments of a node explanation: a tensor with one row per
    node (checked first) or per edge of the graph is cut to the subgraph's rows."""
    out = {}
    for key, value in kwargs.items():
        if isinstance(value, Tensor) and value.dim() > 0:
            if value.shape[0] == num_nodes:
                value = value[nodes.to(value.device)]
            elif value.shape[0] == num_edges:
                value = value[edges.to(value.device)]
        out[key] = value
    return out
