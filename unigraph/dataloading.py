"""``dgl.dataloading`` spelled for unigraph: a DGL mini-batch script changes its import, not its loop.

    from unigraph import dataloading                      # was: import dgl.dataloading as dataloading
    sampler = dataloading.NeighborSampler([10, 25], prefetch_node_feats=["feat"], prefetch_labels=["label"])
    loader = dataloading.DataLoader(g, train_nids, sampler, batch_size=1024, shuffle=True)
    for input_nodes, output_nodes, blocks in loader:
        x = blocks[0].srcdata["feat"]; y = blocks[-1].dstdata["label"]

Underneath, :class:`DataLoader` is a :class:`unigraph.sampling.NodeLoader` (workers, seeds,
data-parallel shares) whose batches unpack as DGL's tuples; the sampler is unigraph's
:class:`~unigraph.sampling.NeighborSampler`, whose fanouts are in DGL's order (``fanouts[i]``
feeds ``blocks[i]``). What DGL offers and this does not (``prob``/``mask`` weighted sampling,
``edge_dir="out"``, UVA) is refused with a message, never ignored. See docs/porting_from_dgl.md.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.sampling import NeighborSampler as _NeighborSampler
from unigraph.sampling import NodeLoader

ALL = -1  # DGL's fanout for "every in-neighbour"


class NeighborSampler:
    """DGL's ``dgl.dataloading.NeighborSampler(fanouts, ...)``: ``fanouts[i]`` neighbours for layer
    ``i`` (``-1``: all of them). ``prefetch_node_feats`` names ``g.ndata`` entries copied into
    ``blocks[0].srcdata``; ``prefetch_labels`` names entries copied into ``blocks[-1].dstdata``;
    ``prefetch_edge_feats`` names ``g.edata`` entries copied into every block's ``edata``."""

    def __init__(self, fanouts: Sequence[int], edge_dir: str = "in", prob: str | None = None,
                 mask: str | None = None, replace: bool = False, prefetch_node_feats: Sequence[str] | None = None,
                 prefetch_labels: Sequence[str] | None = None, prefetch_edge_feats: Sequence[str] | None = None,
                 output_device=None):
        if edge_dir != "in":
            raise ValueError(f"only edge_dir='in' (messages flow along in-edges) is supported, got {edge_dir!r}; "
                             "for out-edges sample on g.reverse()")
        if prob is not None or mask is not None:
            raise ValueError("weighted or masked neighbour sampling (prob=, mask=) is not supported by unigraph's "
                             "NeighborSampler; drop the argument to sample uniformly")
        if output_device is not None:
            raise ValueError("pass device= to DataLoader instead of output_device= to the sampler")
        self.fanouts = list(fanouts)
        self.replace = replace
        self.prefetch_node_feats = list(prefetch_node_feats or [])
        self.prefetch_labels = list(prefetch_labels or [])
        self.prefetch_edge_feats = list(prefetch_edge_feats or [])

    def for_graph(self, graph: Graph, seed: int, edge_ids: bool = False) -> _NeighborSampler:
        """unigraph's sampler for ``graph`` (``-1`` becomes the largest in-degree: every in-edge);
        its blocks record their edges' ids in ``graph`` with ``edge_ids`` or prefetched edge features."""
        everything = max(1, graph.stats().max_in_degree)
        fanouts = [everything if f == ALL else f for f in self.fanouts]
        return _NeighborSampler(fanouts, replace=self.replace, return_eids=edge_ids or bool(self.prefetch_edge_feats),
                                seed=seed)


class MultiLayerFullNeighborSampler(NeighborSampler):
    """Every in-neighbour at each of ``num_layers`` layers (DGL's class of the same name)."""

    def __init__(self, num_layers: int, **kwargs):
        super().__init__([ALL] * num_layers, **kwargs)


class DataLoader:
    """DGL's ``dgl.dataloading.DataLoader(graph, indices, graph_sampler, ...)`` for node-wise
    mini-batches; yields ``(input_nodes, output_nodes, blocks)``.

    Args mirror DGL's: ``indices`` (seed node ids, or a bool mask), ``device``, ``batch_size``,
    ``shuffle``, ``drop_last``, ``num_workers``; ``use_ddp=True`` gives each rank of the
    initialized process group its share of the seeds. ``seed`` fixes shuffling and sampling
    (default: drawn from torch's generator, so ``torch.manual_seed`` makes runs repeat).
    """

    records_edge_ids = False   # blocks carry edata["eid"] only for prefetched edge features (DGL's loader: always)

    def __init__(self, graph: Graph, indices: Tensor, graph_sampler: NeighborSampler, device=None, *,
                 batch_size: int = 1, shuffle: bool = False, drop_last: bool = False, num_workers: int = 0,
                 use_ddp: bool = False, seed: int | None = None, use_uva: bool = False, **unsupported):
        if unsupported:
            raise TypeError(f"DataLoader got arguments unigraph does not support: {sorted(unsupported)}")
        if use_uva:
            raise ValueError("use_uva=True is not supported; keep the graph on the CPU and pass device=")
        if not isinstance(graph_sampler, NeighborSampler):
            raise TypeError(f"graph_sampler must be unigraph.dataloading.NeighborSampler (or "
                            f"MultiLayerFullNeighborSampler), got {type(graph_sampler).__name__}")
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a unigraph.Graph (convert a DGL graph with unigraph.Graph.from_dgl), "
                            f"got {type(graph).__name__}")
        indices = torch.as_tensor(indices)
        if indices.dtype == torch.bool:
            indices = indices.nonzero().flatten()
        if seed is None:
            seed = int(torch.randint(0, 2 ** 62, ()))
        replicas, rank = 1, 0
        if use_ddp:
            import torch.distributed as dist  # noqa: PLC0415
            if not dist.is_initialized():
                raise ValueError("use_ddp=True needs an initialized process group (torch.distributed.init_process_group)")
            replicas, rank = dist.get_world_size(), dist.get_rank()
        self.graph = graph
        self.sampler = graph_sampler
        self.device = None if device is None else torch.device(device)
        sampler = graph_sampler.for_graph(graph, seed, edge_ids=self.records_edge_ids)
        self._loader = NodeLoader(graph, indices, sampler, batch_size=batch_size,
                                  shuffle=shuffle, drop_last=drop_last, num_workers=num_workers, seed=seed,
                                  num_replicas=replicas, rank=rank)

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor, list[Graph]]]:
        sampler, graph = self.sampler, self.graph
        for batch in self._loader:
            blocks = batch.blocks
            for name in sampler.prefetch_node_feats:
                blocks[0].srcdata[name] = graph.ndata[name][batch.input_nodes]
            for name in sampler.prefetch_labels:
                blocks[-1].dstdata[name] = graph.ndata[name][batch.output_nodes]
            for name in sampler.prefetch_edge_feats:
                for block in blocks:
                    block.edata[name] = graph.edata[name][block.edata["eid"]]
            if self.device is not None:
                batch = batch.to(self.device)
            yield batch.input_nodes, batch.output_nodes, batch.blocks

    def close(self) -> None:
        self._loader.close()

    def __enter__(self) -> "DataLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
