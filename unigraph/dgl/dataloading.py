"""``dgl.dataloading`` on unigraph's samplers: :class:`NeighborSampler`,
:class:`MultiLayerFullNeighborSampler` and :class:`DataLoader` yield ``(input_nodes,
output_nodes, blocks)`` whose blocks are :class:`~unigraph.dgl.graph.DGLGraph` blocks, with
``srcdata[dgl.NID]`` / ``dstdata[dgl.NID]`` and ``edata[dgl.EID]`` as DGL's.

Sampling is unigraph's (:class:`unigraph.sampling.NeighborSampler` through
:class:`unigraph.dataloading.DataLoader`, whose docstring lists what it refuses: weighted or
masked sampling, ``edge_dir='out'``, UVA).
"""
from __future__ import annotations

from typing import Iterator

from torch import Tensor

from unigraph import dataloading as _loading
from unigraph.dgl.base import EID, NID
from unigraph.dgl.graph import DGLGraph

NeighborSampler = _loading.NeighborSampler
MultiLayerFullNeighborSampler = _loading.MultiLayerFullNeighborSampler


class DataLoader(_loading.DataLoader):
    """DGL's ``DataLoader(graph, indices, graph_sampler, device=None, batch_size=1, shuffle=False,
    drop_last=False, num_workers=0, use_ddp=False)`` for node-wise mini-batches; every block
    carries ``edata[dgl.EID]``, as DGL's."""

    records_edge_ids = True

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor, list[DGLGraph]]]:
        for input_nodes, output_nodes, blocks in super().__iter__():
            dgl_blocks = []
            for block in blocks:
                block = DGLGraph.view(block)
                block._idtype = getattr(self.graph, "idtype", block._idtype)
                block.srcdata[NID] = input_nodes[: block.num_src_nodes]
                block.dstdata[NID] = input_nodes[: block.num_dst_nodes]
                if "eid" in block.edata:
                    block.edata[EID] = block.edata["eid"]
                dgl_blocks.append(block)
            yield input_nodes, output_nodes, dgl_blocks


__all__ = ["NeighborSampler", "MultiLayerFullNeighborSampler", "DataLoader"]
