"""Neighbour sampling (GraphSAGE; Hamilton, Ying and Leskovec, NeurIPS 2017) into message-flow blocks."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.sampling.batch import Blocks
from unigraph.sampling.counter_rng import KeySequence, layer_key
from unigraph.sampling.csr_view import InCSR, check_node_ids, in_csr_view
from unigraph.sampling import kernel_path


def check_fanouts(fanouts) -> tuple[int, ...]:
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence) or len(fanouts) == 0:
        raise TypeError(f"fanouts must be a non-empty list of positive ints (one per layer), got {fanouts!r}")
    for i, fanout in enumerate(fanouts):
        if isinstance(fanout, bool) or not isinstance(fanout, int):
            raise TypeError(f"fanouts[{i}] must be a positive int, got {type(fanout).__name__} ({fanout!r})")
        if fanout < 1:
            raise ValueError(f"fanouts[{i}] must be a positive int, got {fanout}")
    return tuple(fanouts)


class NeighborSampler:
    """Samples ``fanouts[h]`` in-neighbours per node at hop ``h`` and returns :class:`Blocks`.

    Args:
        fanouts: neighbours per node, one entry per layer, **in layer order as in DGL**:
            ``fanouts[i]`` is the fanout of ``blocks[i]``. The last layer's block holds the seeds,
            so ``[25, 10]`` takes 10 in-neighbours of each seed, then 25 of each node of that
            block (GraphSAGE's and DGL's reading). PyG's ``num_neighbors`` lists the same numbers
            from the seeds outwards: DGL/unigraph ``[25, 10]`` is PyG ``[10, 25]``.
        replace: sample with replacement (exactly ``fanout`` edges per node with any in-edge) or
            without (``min(fanout, in-degree)`` distinct in-edges; a multi-edge counts as distinct
            edges).
        path: ``"auto"`` (numba on the CPU when installed, else torch), ``"numba"`` or ``"torch"``;
            :attr:`path_used` tells which ran. Samples are bit-identical on both paths.
        return_eids: record the original edge id of every block edge in ``block.edata["eid"]``.
        num_threads: threads of the numba kernels (``None``: ``torch.get_num_threads()`` at the
            time of the call; a larger count is capped at it, as every unigraph kernel is). The
            default 1 is deliberate: with OpenMP-style thread teams, a parallel loop waits for its
            slowest thread, and when the cores are oversubscribed (a training loop beside the
            sampler, other processes) that thread is often descheduled. Measured here on 2 busy
            cores (load average 4): 280 batches/s with 1 thread, 20 with 2. For parallel sampling
            use :class:`NodeLoader` workers (one thread each) or raise this on a quiet machine.
        seed: seeds the keys of calls to :meth:`sample` that pass no ``key``.

    Algorithm, per hop ``h`` from the seeds outwards (fanout ``k = fanouts[-1 - h]``): the frontier
    is every node of the batch so far (the seeds, then what earlier hops added). For each frontier
    node ``v`` of in-degree ``d``, if ``d <= k`` (and no replacement) all in-edges are kept, else
    ``k`` are drawn (Floyd's algorithm without replacement, uniform draws with) from counter-based
    random numbers keyed by ``(key, hop, v)`` (``unigraph.sampling.counter_rng``). The sources not
    yet in the batch get the next local ids in order of first appearance (a scratch array over all
    nodes, reset after each batch), and the hop's block is built directly as an in-CSR from the
    per-node counts and local ids (no sort). The torch path vectorizes every step over all rows
    (no per-node Python loop); the numba path runs one compiled loop over the rows. Cost:
    ``O(sampled edges + fanout^2 per hub)``; memory: one int64 per graph node for the scratch array
    (per process and device).

    Deterministic: the same ``(graph, seeds, key)`` gives the same blocks on every path, thread
    count and process. Runs on any device (the torch path on GPUs). Because draws are keyed by
    node, a seed's sampled computation tree does not depend on the other seeds of its batch:
    sampling parts of a batch with the batch's key (micro-batches for pipeline parallelism, ranks
    for data parallelism) gives every seed exactly the tree it has in the whole batch.
    """

    def __init__(self, fanouts: Sequence[int], replace: bool = False, *, path: str = "auto",
                 return_eids: bool = False, num_threads: int | None = 1, seed: int = 0):
        self.fanouts = check_fanouts(fanouts)
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be a bool, got {type(replace).__name__}")
        if path not in kernel_path.PATHS:
            raise ValueError(f"path must be one of {', '.join(map(repr, kernel_path.PATHS))}, got {path!r}")
        self.replace = replace
        self.path = path
        self.return_eids = return_eids
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1):
            raise ValueError(f"num_threads must be None or an int >= 1, got {num_threads!r}")
        self.num_threads = num_threads
        self.path_used: str | None = None
        self.path_reason: str | None = None
        self._keys = KeySequence(seed)
        self._scratch: dict[tuple[str, int], Tensor] = {}

    def __repr__(self) -> str:
        used = f", path_used={self.path_used!r}" if self.path_used else ""
        return f"NeighborSampler(fanouts={list(self.fanouts)}, replace={self.replace}, path={self.path!r}{used})"

    def __getstate__(self) -> dict:  # scratch arrays belong to one process
        return {**self.__dict__, "_scratch": {}}

    def num_items(self, graph: Graph | InCSR) -> int:
        """Seeds are node ids: ``0..num_nodes-1``."""
        return in_csr_view(graph).num_nodes

    def _local_ids(self, csr: InCSR) -> Tensor:
        slot = (str(csr.device), csr.num_nodes)
        if slot not in self._scratch:
            self._scratch[slot] = torch.full((csr.num_nodes,), -1, dtype=torch.int64, device=csr.device)
        return self._scratch[slot]

    def sample(self, graph: Graph | InCSR, seeds, *, key: int | None = None) -> Blocks:
        """Sample the blocks around ``seeds`` (distinct node ids; any integer tensor or list).

        ``key`` (an int) fixes the random draws; without it the next key of the sampler's ``seed``
        is used (:class:`~unigraph.sampling.counter_rng.KeySequence`).
        """
        csr = in_csr_view(graph)
        seeds = check_node_ids("seeds", seeds, csr.num_nodes, csr.device)
        key = self._keys.resolve(key)
        self.path_used, self.path_reason = kernel_path.resolve(self.path, csr.device)
        kernels = kernel_path.kernels(self.path_used)

        local_id = self._local_ids(csr)
        if not kernels.mark_seeds(local_id, seeds):
            raise ValueError("seeds hold duplicate node ids; each seed must appear once (torch.unique(seeds))")
        fanouts = list(reversed(self.fanouts))                          # hop order: seeds outwards
        keys = [layer_key(key, hop) for hop in range(len(fanouts))]
        try:
            input_nodes, hop_blocks = kernels.sample_hops(csr.ptr, csr.indices, csr.eids, seeds, fanouts,
                                                          self.replace, keys, local_id, self.return_eids,
                                                          self.num_threads)
        except BaseException:
            local_id.fill_(-1)                                          # leave the scratch clean for the next call
            raise
        kernels.unmark(local_id, input_nodes)
        return Blocks(seeds=seeds, input_nodes=input_nodes, blocks=hop_blocks[::-1])
