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
    are destinations: each destination's sources), edges of a row in edge-id order; in ``g.idtype``.
    For the format a graph was built from without edge ids (``dgl.graph(('csr', (indptr,
    indices, [])))``) ``eids`` is empty, as DGL returns it: the ids are the slot order (DGL's
    empty tensor is float32, left from the ``[]`` it was given; this one is in ``g.idtype``)."""
    if fmt not in TENSOR_FORMATS:
        raise DGLError(f"adj_tensors: fmt must be one of {TENSOR_FORMATS}, got {fmt!r}")
    if fmt == "coo":
        parts = (g.src, g.dst)
    else:
        parts = g.out_csr() if fmt == "csr" else g.in_csr()
        if getattr(g, "_given_format", None) == fmt:   # DGL keeps no edge ids for the CSR it was given
            parts = (parts[0], parts[1], parts[2][:0])
    return tuple(t.to(g.idtype) for t in parts)


INCIDENCE_TYPES = ("in", "out", "both")


def incidence(g, typestr: str, ctx: Any = None):
    """DGL's incidence matrix of one relation ``g``: a float32 torch sparse COO tensor, one column
    per edge (edge-id order). ``"in"``: ``[num_dst, E]``, 1 at (destination, edge); ``"out"``:
    ``[num_src, E]``, 1 at (source, edge); ``"both"`` (a relation within one node type): -1 at
    the source and 1 at the destination, nothing for a self-loop."""
    if typestr not in INCIDENCE_TYPES:
        raise DGLError(f"incidence matrix type must be one of {INCIDENCE_TYPES}, got {typestr!r}")
    src, dst = g._coo()
    eids = torch.arange(src.numel(), device=src.device)
    if typestr == "both":
        if g.is_bipartite:
            raise DGLError("the 'both' incidence matrix needs a relation within one node type; "
                           f"{g.canonical_etypes[0]} is bipartite")
        moving = src != dst
        rows = torch.cat([src[moving], dst[moving]])
        cols = torch.cat([eids[moving], eids[moving]])
        values = torch.cat([-torch.ones(int(moving.sum())), torch.ones(int(moving.sum()))])
        size = g._num_src
    else:
        rows, cols = (dst, eids) if typestr == "in" else (src, eids)
        values = torch.ones(src.numel())
        size = g._num_dst if typestr == "in" else g._num_src
    device = torch.device("cpu") if ctx is None else torch.device(ctx)
    return torch.sparse_coo_tensor(torch.stack([rows, cols]).to(device), values.to(device), (size, src.numel()),
                                   check_invariants=False)
