"""The part of DGL's graph API that reads a graph only through its public face (types, counts,
edges), shared by :class:`~unigraph.dgl.graph.DGLGraph` and
:class:`~unigraph.dgl.heterograph.DGLHeteroGraph` (a mixin, :class:`GraphAPI`): the subgraph
methods (:mod:`unigraph.dgl.subgraph`), ``metagraph``, ``to_networkx``, the incidence matrix,
``has_nodes``, ``cpu``, pinning (never offered) and the edge-type lookup DGL keeps.

Every module it calls sits below the graph classes (none imports them), so the classes can
inherit this without an import circle.
"""
from __future__ import annotations

from typing import Any

import torch

from unigraph.dgl import adjacency, messages, networkx_io, subgraph
from unigraph.dgl.base import DGLError, is_all
from unigraph.dgl.views import NodeView, as_ids


class GraphAPI:
    """DGL's graph methods written once for both graph classes (see the module docstring)."""

    # ------------------------------------------------------------------ subgraphs
    # (DGL's node views: g.nodes[ids].data, g.srcnodes, g.dstnodes)
    @property
    def nodes(self) -> NodeView:
        return NodeView(self)

    @property
    def srcnodes(self) -> NodeView:
        return NodeView(self, "src")

    @property
    def dstnodes(self) -> NodeView:
        return NodeView(self, "dst")

    def subgraph(self, nodes: Any, *, relabel_nodes: bool = True, store_ids: bool = True, output_device: Any = None):
        """DGL's ``node_subgraph`` (:func:`unigraph.dgl.subgraph.node_subgraph`)."""
        return subgraph.node_subgraph(self, nodes, relabel_nodes=relabel_nodes, store_ids=store_ids,
                                      output_device=output_device)

    node_subgraph = subgraph

    def edge_subgraph(self, edges: Any, *, relabel_nodes: bool = True, store_ids: bool = True,
                      output_device: Any = None):
        """DGL's ``edge_subgraph`` (:func:`unigraph.dgl.subgraph.edge_subgraph`)."""
        return subgraph.edge_subgraph(self, edges, relabel_nodes=relabel_nodes, store_ids=store_ids,
                                      output_device=output_device)

    def in_subgraph(self, nodes: Any, *, relabel_nodes: bool = False, store_ids: bool = True,
                    output_device: Any = None):
        """DGL's ``in_subgraph`` (:func:`unigraph.dgl.subgraph.in_subgraph`)."""
        return subgraph.in_subgraph(self, nodes, relabel_nodes=relabel_nodes, store_ids=store_ids,
                                    output_device=output_device)

    def out_subgraph(self, nodes: Any, *, relabel_nodes: bool = False, store_ids: bool = True,
                     output_device: Any = None):
        """DGL's ``out_subgraph`` (:func:`unigraph.dgl.subgraph.out_subgraph`)."""
        return subgraph.out_subgraph(self, nodes, relabel_nodes=relabel_nodes, store_ids=store_ids,
                                     output_device=output_device)

    def khop_in_subgraph(self, nodes: Any, k: int, *, relabel_nodes: bool = True, store_ids: bool = True,
                         output_device: Any = None):
        """DGL's ``khop_in_subgraph`` (:func:`unigraph.dgl.subgraph.khop_in_subgraph`)."""
        return subgraph.khop_in_subgraph(self, nodes, k, relabel_nodes=relabel_nodes, store_ids=store_ids,
                                         output_device=output_device)

    def khop_out_subgraph(self, nodes: Any, k: int, *, relabel_nodes: bool = True, store_ids: bool = True,
                          output_device: Any = None):
        """DGL's ``khop_out_subgraph`` (:func:`unigraph.dgl.subgraph.khop_out_subgraph`)."""
        return subgraph.khop_out_subgraph(self, nodes, k, relabel_nodes=relabel_nodes, store_ids=store_ids,
                                          output_device=output_device)

    def node_type_subgraph(self, ntypes: Any, output_device: Any = None):
        """DGL's ``node_type_subgraph`` (:func:`unigraph.dgl.subgraph.node_type_subgraph`)."""
        return subgraph.node_type_subgraph(self, ntypes, output_device=output_device)

    def edge_type_subgraph(self, etypes: Any, output_device: Any = None):
        """DGL's ``edge_type_subgraph`` (:func:`unigraph.dgl.subgraph.edge_type_subgraph`)."""
        return subgraph.edge_type_subgraph(self, etypes, output_device=output_device)

    # ------------------------------------------------------------------ types
    def metagraph(self):
        """The graph of types (DGL's ``metagraph``): a networkx ``MultiDiGraph`` with one edge
        ``src_type -> dst_type`` keyed by the edge type name per relation (a node type no
        relation touches is not in it, as in DGL)."""
        return networkx_io.metagraph_of(self.canonical_etypes)

    @property
    def _etype2canonical(self) -> dict[str, tuple]:
        """Each edge type name and its canonical triple, ``()`` where several relations share
        the name (DGL keeps this lookup; its helpers test ``len(...) > 0``)."""
        out: dict[str, tuple] = {}
        for cet in self.canonical_etypes:
            out[cet[1]] = () if cet[1] in out else cet
        return out

    # ------------------------------------------------------------------ queries
    def has_nodes(self, vid: Any, ntype: Any = None):
        """Whether each id of ``vid`` is a node of ``ntype`` (a bool for one id)."""
        ids = torch.as_tensor(vid).reshape(-1).to(torch.int64)
        found = (ids >= 0) & (ids < self._num_nodes_of(ntype))
        scalar = isinstance(vid, int) or (isinstance(vid, torch.Tensor) and vid.dim() == 0)
        return bool(found[0]) if scalar else found.to(self.device)

    def has_node(self, vid: Any, ntype: Any = None) -> bool:
        return bool(self.has_nodes(vid, ntype))

    def inc(self, typestr: str, ctx: Any = torch.device("cpu"), etype: Any = None):
        """DGL's incidence matrix of relation ``etype`` (:func:`unigraph.dgl.adjacency.incidence`)."""
        return adjacency.incidence(self._relation_of(etype), typestr, ctx)

    incidence_matrix = inc

    def filter_nodes(self, predicate: Any, nodes: Any = "__ALL__", ntype: Any = None):
        """The nodes (of ``ntype``; among ``nodes``) for which ``predicate(node batch)`` is
        nonzero (DGL's ``filter_nodes``; ids in the graph's id type)."""
        count = self._num_nodes_of(ntype)
        ids = None if is_all(nodes) else as_ids(nodes, count, "nodes", self.device)
        name = self.ntypes[0] if ntype is None and len(set(self.ntypes)) == 1 else self._check_ntype(ntype)
        batch = messages.node_batch(self, self._node_store(ntype), count, ids, name)
        keep = _mask(predicate(batch), count if ids is None else ids.numel(), "filter_nodes")
        return self._out_ids(keep.nonzero().flatten() if ids is None else ids[keep])

    def filter_edges(self, predicate: Any, edges: Any = "__ALL__", etype: Any = None):
        """The edges (of ``etype``; among ``edges``) for which ``predicate(edge batch)`` is nonzero
        (DGL's ``filter_edges``: every edge's ids come back as int64, chosen ones in the id type)."""
        relation = self._relation_of(etype)
        ids = relation._edge_arg(edges)
        keep = _mask(predicate(messages.edge_batch(relation, ids)), ids.numel(), "filter_edges")
        return keep.nonzero().flatten() if is_all(edges) else self._out_ids(ids[keep])

    # ------------------------------------------------------------------ message passing in steps
    def prop_nodes(self, nodes_generator: Any, message_func: Any, reduce_func: Any, apply_node_func: Any = None,
                   etype: Any = None) -> None:
        """DGL's ``prop_nodes``: :meth:`pull` on each frontier of ``nodes_generator`` in turn."""
        for frontier in nodes_generator:
            self.pull(frontier, message_func, reduce_func, apply_node_func, etype=etype)

    def prop_edges(self, edges_generator: Any, message_func: Any, reduce_func: Any, apply_node_func: Any = None,
                   etype: Any = None) -> None:
        """DGL's ``prop_edges``: :meth:`send_and_recv` on each frontier of ``edges_generator``
        (edge ids or ``(u, v)`` pairs) in turn."""
        for frontier in edges_generator:
            self.send_and_recv(frontier, message_func, reduce_func, apply_node_func, etype=etype)

    def adj(self, etype: Any = None, eweight_name: Any = None):
        """DGL 2's ``adj`` returns a ``dgl.sparse.SparseMatrix``, which unigraph.dgl does not
        offer: refused by name (``adj_external`` gives the torch / SciPy matrix, ``adj_tensors``
        the index tensors)."""
        raise DGLError("g.adj returns a dgl.sparse.SparseMatrix, which unigraph.dgl does not offer; use "
                       "g.adj_external(...) (torch sparse or SciPy) or g.adj_tensors(fmt) instead")

    adjacency_matrix = adj

    # ------------------------------------------------------------------ conversions and devices
    def to_networkx(self, node_attrs: Any = None, edge_attrs: Any = None, ntype_attr: str = "ntype",
                    etype_attr: str = "etype", eid_attr: str = "id"):
        """DGL's ``to_networkx`` (:func:`unigraph.dgl.convert.to_networkx`)."""
        return networkx_io.to_networkx(self, node_attrs, edge_attrs, ntype_attr, etype_attr, eid_attr)

    def cpu(self):
        return self.to("cpu")

    # page-locked structure for GPU sampling (UVA) is not offered: nothing is ever pinned
    def is_pinned(self) -> bool:
        return False

    def pin_memory_(self):
        raise DGLError("pin_memory_: unigraph does not pin a graph's structure (no UVA sampling); move the graph "
                       "to the GPU with g.to('cuda') instead")

    def unpin_memory_(self):
        return self   # (DGL: a no-op on a graph that is not pinned)


def _mask(result: Any, count: int, what: str) -> torch.Tensor:
    """A predicate's answer as a bool mask of ``count`` entries (nonzero: kept), checked."""
    if not isinstance(result, torch.Tensor) or result.reshape(-1).numel() != count:
        raise DGLError(f"the {what} predicate must return a tensor of {count} entries, got "
                       f"{getattr(result, 'shape', type(result).__name__)}")
    return result.reshape(-1) != 0
