"""Neighbour sampling over a partitioned graph: :class:`DistNeighborSampler`.

The algorithm is :class:`~unigraph.sampling.NeighborSampler`'s, hop by hop from the seeds
outwards (read its docstring): at hop ``h`` every node found so far draws ``fanouts[-1-h]`` of
its in-edges with pass key ``layer_key(key, h)``, and the sources not yet in the batch get the
next local ids in order of first appearance. What changes is where the rows are drawn:

* **Local first, one request per owner per hop.** The frontier is split by owner machine
  (:meth:`DistGraph.sample_async`): the machine draws the rows of its own nodes and of its halo
  (it holds their in-edges), so with two layers a batch of owned seeds needs no request at all;
  each other owner receives one request with all of its frontier nodes, sent first.
* **The same draws.** Every row is drawn with the same kernel and the same counter-based random
  numbers the single-machine sampler uses for that node (keyed by its global id,
  ``sample_rows``), wherever it is drawn; rows keep their in-edges in the original edge order.
  So for the same seeds and key the blocks are *identical* to ``NeighborSampler``'s on the graph
  renumbered partition-major (``tests/test_dist_sampler.py`` checks it), and hence have the same
  distribution (the chi-square test there checks that too, on the original numbering).
* **No per-graph scratch array.** The single-machine sampler relabels with an array of one int
  per graph node; here the relabelling sorts the hop's ids instead (``O(k log k)`` for ``k``
  sampled edges), so memory does not grow with the whole graph.

Blocks come out exactly as :class:`~unigraph.sampling.Blocks` (``blocks``, ``input_nodes``,
``seeds``, global ids of the partition set), usable by every unigraph layer unchanged.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from unigraph.distributed.store import DistGraph
from unigraph.sampling.batch import Blocks, block_from_csr
from unigraph.sampling.counter_rng import KeySequence, layer_key
from unigraph.sampling.csr_view import relabel_sorted as relabel
from unigraph.sampling.neighbor import check_fanouts


class DistNeighborSampler:
    """Samples ``fanouts[i]`` in-neighbours per node for layer ``i`` of a :class:`DistGraph`.

    Args: as :class:`~unigraph.sampling.NeighborSampler` (``fanouts`` in layer order, ``replace``,
    ``return_eids``: the original graph's edge ids in ``block.edata["eid"]``, which needs the
    partitions loaded with their edge ids; ``seed`` for the keys of calls without ``key``).
    """

    def __init__(self, fanouts: Sequence[int], replace: bool = False, *, return_eids: bool = False, seed: int = 0):
        self.fanouts = check_fanouts(fanouts)
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be a bool, got {type(replace).__name__}")
        self.replace = replace
        self.return_eids = bool(return_eids)
        self._keys = KeySequence(seed)

    def __repr__(self) -> str:
        return f"DistNeighborSampler(fanouts={list(self.fanouts)}, replace={self.replace})"

    def sample(self, graph: DistGraph, seeds, *, key: int | None = None) -> Blocks:
        """The blocks around ``seeds`` (distinct global ids; any partition's)."""
        if not isinstance(graph, DistGraph):
            raise TypeError(f"DistNeighborSampler samples a DistGraph, got {type(graph).__name__}")
        seeds = graph.check_ids("seeds", seeds)
        if torch.unique(seeds).numel() != seeds.numel():
            raise ValueError("seeds hold duplicate node ids; each seed must appear once (torch.unique(seeds))")
        key = self._keys.resolve(key)
        nodes, blocks = [seeds], []
        for hop, fanout in enumerate(reversed(self.fanouts)):
            frontier = torch.cat(nodes) if len(nodes) > 1 else seeds
            counts, found = graph.sample_async(frontier, fanout, self.replace, layer_key(key, hop),
                                               self.return_eids).wait()
            sources, eids = found
            indptr = torch.zeros(frontier.numel() + 1, dtype=torch.int64)
            torch.cumsum(counts, 0, out=indptr[1:])
            local, new_nodes = relabel(frontier, sources)
            nodes.append(new_nodes)
            blocks.append(block_from_csr(indptr, local, frontier.numel() + new_nodes.numel(), eids))
        return Blocks(seeds=seeds, input_nodes=torch.cat(nodes), blocks=blocks[::-1])


# ---------------------------------------------------------------------------------------------- sampler processes
# A sampler process (DGL's "distributed sampler") maps its machine's partition from the graph
# server (no copy), joins the job's RPC group and samples batches on request: the trainer sends the
# seeds and the key of each batch and receives the blocks, while the sampler asks the owners of
# remote rows as any sampler does. Its state is one module-level graph, set by serve_sampling().
_SAMPLING_GRAPH: DistGraph | None = None
_TIMEOUT = 300.0


def serve_sampling(graph: DistGraph | None, timeout: float = 300.0) -> None:
    """Let this process sample batches of ``graph`` for its trainer (``None``: stop)."""
    global _SAMPLING_GRAPH, _TIMEOUT
    _SAMPLING_GRAPH, _TIMEOUT = graph, timeout


def _sample_remote(seeds: Tensor, key: int, fanouts: list[int], replace: bool, return_eids: bool) -> Blocks:
    if _SAMPLING_GRAPH is None:
        raise RuntimeError("this process is not a sampler process, but was asked to sample a batch")
    sampler = DistNeighborSampler(fanouts, replace, return_eids=return_eids)
    return sampler.sample(_SAMPLING_GRAPH, seeds, key=key)


def sample_on(name: str, seeds: Tensor, key: int, sampler: DistNeighborSampler):
    """Ask sampler process ``name`` for the blocks of ``seeds`` with ``sampler``'s settings (a future)."""
    from torch.distributed import rpc  # noqa: PLC0415
    return rpc.rpc_async(name, _sample_remote, args=(seeds, key, list(sampler.fanouts), sampler.replace,
                                                     sampler.return_eids), timeout=_TIMEOUT)
