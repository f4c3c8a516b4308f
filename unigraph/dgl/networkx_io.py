"""DGL's views of a graph as networkx objects: ``dgl.to_networkx`` / ``g.to_networkx`` and
``g.metagraph()`` (the graph of types). They read a graph only through its public API, so the
graph classes call them without importing the constructors (``dgl.from_networkx`` and
``dgl.bipartite_from_networkx`` live in :mod:`unigraph.dgl.convert`)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from unigraph._optional import require
from unigraph.dgl.base import DGLError


def networkx():
    return require("networkx", "dgl's networkx conversions", "pip install networkx")


def to_networkx(g: Any, node_attrs: Sequence[str] | None = None, edge_attrs: Sequence[str] | None = None,
                ntype_attr: str = "ntype", etype_attr: str = "etype", eid_attr: str = "id"):
    """DGL's ``to_networkx``: a networkx ``MultiDiGraph``. A homogeneous graph keeps its node
    ids; each edge has its id under ``'id'`` and the ``edge_attrs`` rows. Any other graph is laid
    out as :func:`to_homogeneous` lays it: each node has its type under ``ntype_attr``, each edge
    its homogeneous id under ``eid_attr`` and its canonical type under ``etype_attr``, and the
    listed features where its type has them (a feature row is a tensor, as DGL gives it)."""
    nx = networkx()
    if g.device.type != "cpu":
        raise DGLError("to_networkx needs a CPU graph; call g.cpu() first")
    out = nx.MultiDiGraph()
    if g.is_homogeneous:
        src, dst = (ids.tolist() for ids in g.edges())
        out.add_nodes_from(range(g.num_nodes()))
        for eid, (u, v) in enumerate(zip(src, dst)):
            out.add_edge(u, v, id=eid, **_row(g.edata, edge_attrs, eid))
        for node in range(g.num_nodes()):
            out.nodes[node].update(_row(g.ndata, node_attrs, node))
        return out
    for name, used in ((ntype_attr, node_attrs), (etype_attr, edge_attrs), (eid_attr, edge_attrs)):
        if used is not None and name in used:
            raise DGLError(f"{name!r} already names the type or id attribute; pick another ntype_attr / etype_attr "
                           "/ eid_attr")
    offset = 0
    for ntype in g.ntypes:
        store = g.nodes[ntype].data
        for local in range(g.num_nodes(ntype)):
            out.add_node(offset + local, **{ntype_attr: ntype}, **_row(store, node_attrs, local, only_present=True))
        offset += g.num_nodes(ntype)
    starts = dict(zip(g.ntypes, np.cumsum([0] + [g.num_nodes(t) for t in g.ntypes]).tolist()))
    eid = 0
    for cet in g.canonical_etypes:
        src, dst = g.edges(etype=cet)
        store = g.edges[cet].data
        for local, (u, v) in enumerate(zip(src.tolist(), dst.tolist())):
            out.add_edge(u + starts[cet[0]], v + starts[cet[2]], **{eid_attr: eid, etype_attr: cet},
                         **_row(store, edge_attrs, local, only_present=True))
            eid += 1
    return out


def _row(store, names: Sequence[str] | None, index: int, only_present: bool = False) -> dict:
    """``{name: store[name][index]}`` for the names (those the store has, with ``only_present``)."""
    return {name: store[name][index] for name in names or () if not only_present or name in store}


def metagraph_of(canonical_etypes: Sequence[tuple[str, str, str]]):
    """The networkx ``MultiDiGraph`` of types: an edge ``src -> dst`` keyed by the edge type name."""
    out = networkx().MultiDiGraph()
    for src_type, etype, dst_type in canonical_etypes:
        out.add_edge(src_type, dst_type, key=etype)
    return out
