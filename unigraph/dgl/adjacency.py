"""A relation's adjacency in the external formats DGL hands out: ``g.adj_external`` (a torch sparse
COO tensor, or a SciPy matrix) and ``g.adj_tensors`` (the index tensors of COO, CSR or CSC).

Orientation, as DGL's: row = source, column = destination (``[num_src, num_dst]``); ``transpose``
swaps them (row = destination: the matrix that multiplies source features into destinations,
``A^T X``). Every edge is one entry, in edge-id order: the torch tensor (and SciPy's COO and CSR) are left
uncoalesced, so parallel edges add up wherever the matrix is used (a product, ``to_dense``). The CSR/CSC index tensors are the graph's own sorted formats (built once, kept on the graph).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError

SCIPY_FORMATS = ("coo", "csr")
TENSOR_FORMATS = ("coo", "csr", "csc")


def adj_external(g, transpose: bool = False, ctx: Any = None, scipy_fmt: str | None = None):
    """``g``'s adjacency as DGL's ``adj_external`` returns it: a float32 torch sparse COO tensor of
    ones on ``ctx`` (CPU by default, as DGL's), or with ``scipy_fmt`` (``"coo"`` or ``"csr"``) a SciPy
    matrix of edge counts in ``g.idtype``."""
    if scipy_fmt is not None and scipy_fmt not in SCIPY_FORMATS:
        raise DGLError(f"adj_external: scipy_fmt must be one of {SCIPY_FORMATS} or None, got {scipy_fmt!r}")
    src, dst = g.src, g.dst
    shape = (g.num_src_nodes(), g.num_dst_nodes())
    rows, cols = (dst, src) if transpose else (src, dst)
    shape = shape[::-1] if transpose else shape
    if scipy_fmt is not None:
        import scipy.sparse
        ones = torch.ones(rows.shape[0], dtype=g.idtype).numpy()   # (DGL: counts in the id type)
        if scipy_fmt == "coo":
            return scipy.sparse.coo_matrix((ones, (rows.cpu().numpy(), cols.cpu().numpy())), shape=shape)
        # the graph's own CSR (a row's entries in edge-id order, parallel edges kept apart, as DGL's):
        # what order-sensitive SciPy routines (reverse_cuthill_mckee) read, so they agree with DGL's
        ptr, indices, _ = g.in_csr() if transpose else g.out_csr()
        return scipy.sparse.csr_matrix((ones, indices.cpu().numpy(), ptr.cpu().numpy()), shape=shape)
    device = torch.device("cpu") if ctx is None else torch.device(ctx)
    indices = torch.stack([rows, cols]).to(device)
    return torch.sparse_coo_tensor(indices, torch.ones(rows.shape[0], device=device), shape, check_invariants=False)


def adj_tensors(g, fmt: str) -> tuple[Tensor, ...]:
    """DGL's ``adj_tensors``: ``(src, dst)`` for ``"coo"`` (edge-id order); ``(indptr, indices,
    eids)`` for ``"csr"`` (rows are sources: each source's destinations) and ``"csc"`` (columns
    are destinations: each destination's sources), edges of a row in edge-id order; in ``g.idtype``."""
    if fmt not in TENSOR_FORMATS:
        raise DGLError(f"adj_tensors: fmt must be one of {TENSOR_FORMATS}, got {fmt!r}")
    if fmt == "coo":
        parts = (g.src, g.dst)
    else:
        parts = g.out_csr() if fmt == "csr" else g.in_csr()
    return tuple(t.to(g.idtype) for t in parts)
