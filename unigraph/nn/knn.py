"""k-nearest-neighbour graphs over node features, batched: knn_graph (one set, Vision GNN) and knn
(queries against candidates, DynamicEdgeConv)."""
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


def knn(x: Tensor, y: Tensor, k: int, batch_x: Tensor | None = None, batch_y: Tensor | None = None) -> Tensor:
    r"""For every row of ``y``, the ``k`` nearest rows of ``x`` (squared Euclidean distance) of the
    same example: ``[2, M]`` with row 0 the index into ``y`` and row 1 the index into ``x``
    (PyG's ``knn``, whose ``torch_cluster`` kernel is not needed). A row of ``x`` equal to the
    query is a neighbour too (distance 0). Fewer than ``k`` where an example of ``x`` has fewer
    rows; equal distances are ordered as ``torch.topk`` orders them. No gradient flows through the
    choice.

    Args:
        x: candidate rows ``[N, F]``; y: query rows ``[M, F]``.
        k: neighbours per query.
        batch_x, batch_y: example id of each row, sorted ascending (PyG's convention); None means
            one example. Both or neither.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"knn k must be a positive int, got {k!r}")
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, Tensor) or not t.is_floating_point() or t.dim() != 2:
            raise TypeError(f"knn expects floating-point {name} of shape [rows, F], got "
                            f"{getattr(t, 'dtype', type(t).__name__)} {list(getattr(t, 'shape', []))}")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"knn: x has {x.shape[1]} features per row but y has {y.shape[1]}")
    if (batch_x is None) != (batch_y is None):
        raise ValueError("knn takes batch_x and batch_y together (or neither)")
    with torch.no_grad():
        dense_x, valid_x, offsets_x = _batched_layout(x, batch_x)
        dense_y, valid_y, offsets_y = _batched_layout(y, batch_y)
        examples = max(dense_x.shape[0], dense_y.shape[0])
        dense_x, valid_x, offsets_x = _pad_examples(dense_x, valid_x, offsets_x, examples)
        dense_y, valid_y, offsets_y = _pad_examples(dense_y, valid_y, offsets_y, examples)
        distance = ((dense_y * dense_y).sum(-1).unsqueeze(2) - 2 * dense_y @ dense_x.transpose(1, 2)
                    + (dense_x * dense_x).sum(-1).unsqueeze(1))
        distance = distance.clamp(min=0).masked_fill(~valid_x.unsqueeze(1), float("inf"))
        nearest, index = distance.topk(min(k, dense_x.shape[1]), dim=-1, largest=False, sorted=True)
        found = torch.isfinite(nearest) & valid_y.unsqueeze(-1)
        queries = (torch.arange(dense_y.shape[1], device=y.device).view(1, -1, 1) + offsets_y.view(-1, 1, 1))
        queries = queries.expand_as(index)[found]
        neighbours = (index + offsets_x.view(-1, 1, 1))[found]
    return torch.stack([queries, neighbours])


def _pad_examples(dense: Tensor, valid: Tensor, offsets: Tensor, examples: int) -> tuple[Tensor, Tensor, Tensor]:
    """The layout with empty examples appended up to ``examples`` (an id present on one side only)."""
    missing = examples - dense.shape[0]
    if missing <= 0:
        return dense, valid, offsets
    return (torch.cat([dense, dense.new_zeros((missing,) + tuple(dense.shape[1:]))]),
            torch.cat([valid, valid.new_zeros((missing, valid.shape[1]))]),
            torch.cat([offsets, offsets.new_zeros(missing)]))
