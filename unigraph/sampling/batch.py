"""What samplers return: sampled blocks (:class:`Blocks`) or an induced subgraph (:class:`Subgraph`).

Both carry ``input_nodes`` (global ids of the nodes whose features the model reads) and
``output_nodes`` (global ids of the nodes it predicts), plus the gathered ``x`` / ``y`` once a
loader has filled them. Both pickle compactly: a block travels between processes as its CSR
arrays (as numpy arrays, whose bytes pickle copies directly) and is rebuilt with
``Graph.from_csr`` (no sort, no validation).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch
from torch import Tensor

from unigraph.user_graph import Graph

EID = "eid"  # edata key of the original graph's edge ids, where a sampler records them


def block_from_csr(indptr: Tensor, indices: Tensor, num_src_nodes: int, eids: Tensor | None,
                   bipartite: bool = True) -> Graph:
    """A sampled graph from its in-CSR over local ids (trusted: samplers produce valid arrays);
    a block when ``bipartite``, else an induced subgraph (``num_src_nodes`` nodes)."""
    block = Graph.from_csr(indptr, indices, num_src_nodes, bipartite=bipartite, validate=False)
    if eids is not None:
        block.edata[EID] = eids
    return block


def block_from_expanded_csr(indptr: Tensor, indices: Tensor, dst: Tensor, edge_ids: Tensor, num_src_nodes: int,
                            eids: Tensor | None) -> Graph:
    """:func:`block_from_csr` for a producer that already expanded the CSR (``dst[k]`` the row of
    entry ``k``, ``edge_ids = arange(nnz)``): the same graph, built with no torch operation. The
    numba sampling path uses it because torch's multi-threaded kernels (``Graph.from_csr`` expands
    rows with ``repeat_interleave``) slow down many-fold when the cores are oversubscribed, as
    they are beside a training loop or on a shared machine.
    """
    block = Graph.from_csr(indptr, indices, num_src_nodes, bipartite=True, validate=False, dst=dst, edge_ids=edge_ids)
    if eids is not None:
        block.edata[EID] = eids
    return block


def _block_state(block: Graph) -> tuple:
    indptr, indices, _ = block.in_csr()
    return (indptr, indices, block.num_src_nodes, block.edata[EID] if EID in block.edata else None,
            block.is_bipartite)


def _move(value, device: torch.device):
    return value.to(device) if isinstance(value, Tensor) else value


def _to_wire(value):
    """CPU tensors travel between processes as numpy arrays: pickle copies their bytes in one go
    (a pickled tensor goes through ``torch.save``, about ten times slower to load)."""
    if isinstance(value, Tensor) and value.device.type == "cpu":
        return value.numpy()
    if isinstance(value, tuple):
        return tuple(_to_wire(v) for v in value)
    return value


def _from_wire(value):
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, tuple):
        return tuple(_from_wire(v) for v in value)
    return value


@dataclasses.dataclass
class Blocks:
    """A neighbour-sampled mini-batch (message-flow graphs, DGL's convention).

    Fields:
        seeds: global ids of the nodes to predict (``output_nodes``), in the order given.
        input_nodes: global ids of every node the first layer reads. It starts with ``seeds``;
            each hop appends the nodes it reached first, in order of first appearance.
        blocks: one bipartite :class:`~unigraph.Graph` per layer, **in layer order** (the block
            the first layer runs on first, as in DGL): ``blocks[i]`` has ``num_src_nodes`` source
            nodes ``input_nodes[:num_src_nodes]`` and ``num_dst_nodes`` destination nodes
            ``input_nodes[:num_dst_nodes]`` (destinations first among the sources), and
            ``blocks[i].num_dst_nodes == blocks[i + 1].num_src_nodes``. In sampling (hop) order,
            i.e. ``blocks[::-1]``, the sources of hop ``h`` are the destinations of hop ``h + 1``.
            ``blocks[-1].num_dst_nodes == len(seeds)``.
        x: features of ``input_nodes`` (filled by a loader), y: labels of ``seeds`` (idem).

    A model runs ``h = x; for layer, block in zip(layers, blocks): h = layer(block, h)``.
    """

    seeds: Tensor
    input_nodes: Tensor
    blocks: list[Graph]
    x: Tensor | None = None
    y: Tensor | None = None

    @property
    def output_nodes(self) -> Tensor:
        return self.seeds

    def __iter__(self):
        """DGL's unpacking: ``for input_nodes, output_nodes, blocks in loader`` (the fields stay
        readable by name: ``batch.x``, ``batch.y``, ``batch.blocks``)."""
        return iter((self.input_nodes, self.seeds, self.blocks))

    def to(self, device: torch.device | str) -> "Blocks":
        device = torch.device(device)
        return Blocks(self.seeds.to(device), self.input_nodes.to(device), [b.to(device) for b in self.blocks],
                      _move(self.x, device), _move(self.y, device))

    def __getstate__(self) -> dict:
        state = {key: _to_wire(value) for key, value in self.__dict__.items()}
        state["blocks"] = [_to_wire(_block_state(b)) for b in self.blocks]
        return state

    def __setstate__(self, state: dict) -> None:
        state = {key: _from_wire(value) for key, value in state.items()}
        state["blocks"] = [block_from_csr(*_from_wire(s)) for s in state["blocks"]]
        self.__dict__.update(state)


@dataclasses.dataclass
class Subgraph:
    """A subgraph mini-batch (Cluster-GCN, GraphSAINT): the graph induced by ``nodes``.

    Fields:
        nodes: global ids of the subgraph's nodes; node ``i`` of ``graph`` is ``nodes[i]``.
        graph: a homogeneous :class:`~unigraph.Graph` over local ids (edges grouped by destination,
            in-CSR cached), with the original edge ids in ``graph.edata["eid"]``.
        node_norm, edge_norm: GraphSAINT's normalization coefficients (``None`` for samplers without
            them): weight each node's loss by ``node_norm`` and each edge's message by ``edge_norm``.
        x, y: features and labels of ``nodes`` (filled by a loader).
    """

    nodes: Tensor
    graph: Graph
    node_norm: Tensor | None = None
    edge_norm: Tensor | None = None
    x: Tensor | None = None
    y: Tensor | None = None

    @property
    def input_nodes(self) -> Tensor:
        return self.nodes

    @property
    def output_nodes(self) -> Tensor:
        return self.nodes

    def to(self, device: torch.device | str) -> "Subgraph":
        device = torch.device(device)
        return Subgraph(self.nodes.to(device), self.graph.to(device), _move(self.node_norm, device),
                        _move(self.edge_norm, device), _move(self.x, device), _move(self.y, device))

    def __getstate__(self) -> dict:
        state = {key: _to_wire(value) for key, value in self.__dict__.items()}
        state["graph"] = _to_wire(_block_state(self.graph))
        return state

    def __setstate__(self, state: dict) -> None:
        state = {key: _from_wire(value) for key, value in state.items()}
        state["graph"] = block_from_csr(*state["graph"])
        self.__dict__.update(state)
