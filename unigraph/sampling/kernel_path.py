"""Which implementation of the sampling kernels runs: numba (CPU, fast) or torch (any device).

``path="auto"`` takes numba for a graph on the CPU when numba is installed (the ``cpu`` extra),
torch otherwise. ``path="numba"`` fails loudly when numba is missing or the graph is not on the
CPU; ``path="torch"`` always works. Both compute bit-identical samples.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from unigraph.kernels.cpu import numba_status, start_numba_threads, threads_for
from unigraph.sampling import torch_kernels
from unigraph.sampling.batch import block_from_expanded_csr

PATHS = ("auto", "numba", "torch")


@functools.lru_cache(maxsize=None)
def _numba_status() -> tuple[bool, str]:  # asked on every batch; the answer cannot change
    return numba_status()


def resolve(path: str, device: torch.device) -> tuple[str, str]:
    """``(path, reason)``: the implementation that will run on ``device`` and why."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {', '.join(map(repr, PATHS))}, got {path!r}")
    usable, detail = _numba_status()
    if path == "torch":
        return "torch", "requested"
    if path == "numba":
        if not usable:
            raise ImportError(f"path='numba' was requested but {detail}")
        if device.type != "cpu":
            raise ValueError(f"path='numba' runs on the CPU, but the graph is on {device}; use path='torch'")
        return "numba", f"requested ({detail})"
    if device.type != "cpu":
        return "torch", f"the graph is on {device} (numba kernels run on the CPU only)"
    if not usable:
        return "torch", detail
    return "numba", f"graph on the CPU and {detail}"


def kernels(path: str):
    """The object holding ``sample_layer`` and ``relabel`` (tensor in, tensor out) for ``path``."""
    return NumbaKernels if path == "numba" else torch_kernels


class NumbaKernels:
    """The numba kernels behind the torch kernels' tensor interface (zero-copy numpy views).

    Between kernels only numpy runs (single-threaded), never a torch operation: torch's
    multi-threaded kernels slow down many-fold when cores are oversubscribed (see
    ``unigraph.sampling.batch.block_from_expanded_csr``).
    """

    @staticmethod
    def sample_hops(ptr, indices, eids, seeds, fanouts, replace, keys, local_id, return_eids, num_threads=1):
        # numba's count is per calling thread: set for this call only, never above torch's count
        with threads_for(None, limit=num_threads):
            return NumbaKernels._sample_hops(ptr, indices, eids, seeds, fanouts, replace, keys, local_id, return_eids)

    @staticmethod
    def _sample_hops(ptr, indices, eids, seeds, fanouts, replace, keys, local_id, return_eids):
        from unigraph.kernels import sampling  # noqa: PLC0415
        ptr_np, indices_np, local_np = ptr.numpy(), indices.numpy(), local_id.numpy()
        nodes = [seeds.numpy()]
        blocks = []
        for fanout, key in zip(fanouts, keys):
            frontier = np.concatenate(nodes) if len(nodes) > 1 else nodes[0]
            indptr, local, positions, new_nodes = sampling.sample_hop(
                ptr_np, indices_np, frontier, fanout, replace, np.uint64(key), local_np, frontier.shape[0])
            nodes.append(new_nodes)
            dst, edge_ids = sampling.expand_rows(indptr)
            blocks.append(block_from_expanded_csr(
                torch.from_numpy(indptr), torch.from_numpy(local), torch.from_numpy(dst), torch.from_numpy(edge_ids),
                frontier.shape[0] + new_nodes.shape[0], torch.from_numpy(eids.numpy()[positions]) if return_eids else None))
        return torch.from_numpy(np.concatenate(nodes)), blocks

    @staticmethod
    def mark_seeds(local_id, seeds) -> bool:
        start_numba_threads()
        from unigraph.kernels import sampling  # noqa: PLC0415
        return bool(sampling.mark_seeds(local_id.numpy(), seeds.numpy()))

    @staticmethod
    def unmark(local_id, nodes) -> None:
        start_numba_threads()
        from unigraph.kernels import sampling  # noqa: PLC0415
        sampling.unmark(local_id.numpy(), nodes.numpy())
