"""k-nearest-neighbour graphs over node features, batched, for dynamic graph models (Vision GNN)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.user_graph import Graph


def knn_graph(x: Tensor, k: int, batch: Tensor | None = None, *, loop: bool = False, cosine: bool = False,
              dilation: int = 1) -> Graph:
    r"""The k-nearest-neighbour graph of the rows of ``x``: every node receives edges from its ``k``
    nearest nodes of the same example (messages flow neighbour -> centre, PyG's ``knn_graph``).

    .. math::
        \mathcal{N}(i) = \operatorname{top-}k_{\,j \in \mathcal{B}(i)}\; -\lVert \mathbf{x}_i - \mathbf{x}_j \rVert^2

    All examples are handled at once: features are laid out as ``[batch, nodes, F]`` (padded where
    examples differ in size), one batched matrix product gives every pairwise distance, one
    ``topk`` picks the neighbours. Cost is O(B n^2 F) for n nodes per example, which suits
    image-patch graphs (tens to hundreds of nodes per example). No gradient flows through the
    choice of neighbours.

    Args:
        x: node features ``[N, F]``, or ``[B, n, F]`` for B examples of n nodes each.
        k: neighbours per node (fewer where an example has fewer candidates).
        batch: example id of each row of a 2-D ``x``, sorted ascending (PyG's convention); None
            means one example.
        loop: whether a node may be its own neighbour (Vision GNN keeps it; PyG's default does not).
        cosine: rank by cosine similarity (features are L2-normalized first), as Vision GNN does.
        dilation: take every ``dilation``-th of the ``k * dilation`` nearest (dilated kNN of
            DeepGCNs / Vision GNN).

    Returns:
        a :class:`~unigraph.Graph` over all ``N`` (or ``B * n``) nodes, in-edges of each node ordered
        from nearest to farthest.
    """
    for name, value in (("k", k), ("dilation", dilation)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"knn_graph {name} must be a positive int, got {value!r}")
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"knn_graph expects floating-point features, got {type(x).__name__}"
                        + (f" of {x.dtype}" if isinstance(x, Tensor) else ""))
    with torch.no_grad():
        dense, valid, offsets = _batched_layout(x, batch)
        if cosine:
            dense = F.normalize(dense, p=2.0, dim=-1)
        squared = (dense * dense).sum(-1)
        distance = squared.unsqueeze(2) - 2 * dense @ dense.transpose(1, 2) + squared.unsqueeze(1)
        blocked = ~(valid.unsqueeze(1) & valid.unsqueeze(2))  # padding, as neighbour or as centre
        if not loop:
            blocked |= torch.eye(dense.shape[1], dtype=torch.bool, device=x.device)
        distance = distance.masked_fill(blocked, float("inf"))
        candidates = min(k * dilation, dense.shape[1])
        nearest, index = distance.topk(candidates, dim=-1, largest=False)
        nearest, index = nearest[..., ::dilation][..., :k], index[..., ::dilation][..., :k]
        found = torch.isfinite(nearest) & valid.unsqueeze(-1)
        neighbours = (index + offsets.view(-1, 1, 1))[found]
        degrees = found.sum(-1)[valid]
    indptr = torch.zeros(degrees.numel() + 1, dtype=torch.int64, device=x.device)
    torch.cumsum(degrees, 0, out=indptr[1:])
    return Graph.from_csr(indptr, neighbours, num_src_nodes=degrees.numel(), validate=False)


def _batched_layout(x: Tensor, batch: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """``(dense [B, n_max, F], valid [B, n_max], offsets [B])``: each example's rows, padded, and the
    global id of its first row."""
    if x.dim() == 3:
        if batch is not None:
            raise ValueError("knn_graph takes either a 3-D x [B, n, F] or a 2-D x with a batch vector, not both")
        b, n, _ = x.shape
        valid = torch.ones((b, n), dtype=torch.bool, device=x.device)
        return x, valid, torch.arange(b, device=x.device) * n
    if x.dim() != 2:
        raise ValueError(f"knn_graph expects x of shape [N, F] or [B, n, F], got {list(x.shape)}")
    if batch is None:
        return x.unsqueeze(0), torch.ones((1, x.shape[0]), dtype=torch.bool, device=x.device), \
            torch.zeros(1, dtype=torch.int64, device=x.device)
    if batch.dim() != 1 or batch.numel() != x.shape[0]:
        raise ValueError(f"knn_graph batch must have one entry per row of x ({x.shape[0]}), got shape {list(batch.shape)}")
    if batch.dtype in (torch.bool,) or batch.is_floating_point():
        raise TypeError(f"knn_graph batch must hold integer example ids, got {batch.dtype}")
    if batch.numel() and (bool((batch[1:] < batch[:-1]).any()) or int(batch[0]) < 0):
        raise ValueError("knn_graph batch must be sorted ascending with ids >= 0 (PyG's convention)")
    counts = torch.bincount(batch) if batch.numel() else batch.new_zeros(0)
    offsets = torch.cumsum(counts, 0) - counts
    n_max = int(counts.max()) if counts.numel() else 0
    position = torch.arange(x.shape[0], device=x.device) - offsets[batch]
    dense = x.new_zeros((counts.numel(), n_max, x.shape[1]))
    dense[batch, position] = x
    valid = torch.zeros((counts.numel(), n_max), dtype=torch.bool, device=x.device)
    valid[batch, position] = True
    return dense, valid, offsets
