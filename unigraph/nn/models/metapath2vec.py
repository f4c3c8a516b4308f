r"""metapath2vec (`"metapath2vec: Scalable Representation Learning for Heterogeneous Networks"
<https://ericdongyx.github.io/papers/KDD17-dong-chawla-swami-metapath2vec.pdf>`_): embeddings of the
nodes of a heterogeneous graph trained with skip-gram and negative sampling on metapath-guided walks.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import Embedding
from torch.utils.data import DataLoader

from unigraph.nn.models.skip_gram import SkipGram

WHO = "MetaPath2Vec"


class MetaPath2Vec(SkipGram, torch.nn.Module):
    r"""One embedding per node of the node types the metapath visits, in one table (the types in
    sorted order, each a block of rows) plus a last row for the "dummy" node that a walk reaches
    once it meets a node without an edge of the next relation. Step :math:`t` of a walk follows a
    uniformly drawn edge of relation ``metapath[t mod len(metapath)]``. Windows of ``context_size``
    consecutive nodes are the positive samples; windows over uniformly drawn nodes of the same
    types, from the same first nodes, the negatives:

    .. math::
        \mathcal{L} = -\operatorname{mean}_{(v, c)^+} \log(\sigma(\mathbf{z}_v^{\top}\mathbf{z}_c) + \epsilon)
                      -\operatorname{mean}_{(v, c)^-} \log(1 - \sigma(\mathbf{z}_v^{\top}\mathbf{z}_c) + \epsilon)

    The random draws are PyG's, call for call (the same walks for the same torch seed).

    Args:
        edge_index_dict (dict): ``(src_type, relation, dst_type) -> [2, E]`` edges.
        embedding_dim (int): size of each embedding.
        metapath (list): the relations (keys of ``edge_index_dict``) a walk follows, in order.
        walk_length (int): steps per walk (``walk_length + 1`` nodes, at least ``context_size``).
        context_size (int): nodes per window.
        walks_per_node (int, optional): walks per start node. (default: ``1``)
        num_negative_samples (int, optional): negative walks per positive one. (default: ``1``)
        num_nodes_dict (dict, optional): nodes per type (default: from the edges).
        sparse (bool, optional): sparse gradients for the embedding. (default: ``False``)

    Shapes:
        - **forward:** ``node_type``, ``batch`` :math:`(B)` *(optional)* -> :math:`(B, F)`
        - **loss:** windows :math:`(W, \text{context\_size})` of global rows
    """

    def __init__(self, edge_index_dict: dict, embedding_dim: int, metapath: list, walk_length: int,
                 context_size: int, walks_per_node: int = 1, num_negative_samples: int = 1,
                 num_nodes_dict: dict | None = None, sparse: bool = False):
        super().__init__()
        _check_arguments(edge_index_dict, metapath, walk_length, context_size,
                         embedding_dim, walks_per_node, num_negative_samples)
        if num_nodes_dict is None:
            num_nodes_dict = _count_nodes(edge_index_dict)
        self.rowptr_dict, self.col_dict, self.rowcount_dict = {}, {}, {}
        for key, edge_index in edge_index_dict.items():
            rowptr, col = _csr(edge_index.cpu(), num_nodes_dict[key[0]], num_nodes_dict[key[-1]])
            self.rowptr_dict[key], self.col_dict[key] = rowptr, col
            self.rowcount_dict[key] = rowptr[1:] - rowptr[:-1]
        self.embedding_dim = embedding_dim
        self.metapath = metapath
        self.walk_length = walk_length
        self.context_size = context_size
        self.walks_per_node = walks_per_node
        self.num_negative_samples = num_negative_samples
        self.num_nodes_dict = num_nodes_dict

        # each visited type's block of rows, the types in sorted order
        self.start, self.end, count = {}, {}, 0
        for node_type in sorted({k[0] for k in metapath} | {k[-1] for k in metapath}):
            self.start[node_type] = count
            count += num_nodes_dict[node_type]
            self.end[node_type] = count
        # the block of the node type at each position of a walk
        types = [metapath[0][0]] + [metapath[t % len(metapath)][-1] for t in range(walk_length)]
        self.offset = torch.tensor([self.start[t] for t in types])
        self.embedding = Embedding(count + 1, embedding_dim, sparse=sparse)
        self.dummy_idx = count
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.embedding.reset_parameters()

    def forward(self, node_type: str, batch: Tensor | None = None) -> Tensor:
        """The embeddings of ``node_type``'s nodes in ``batch`` (all of them without it)."""
        if node_type not in self.start:
            raise KeyError(f"{WHO}: node type {node_type!r} is not on the metapath (types: {sorted(self.start)})")
        rows = self.embedding.weight[self.start[node_type]:self.end[node_type]]
        return rows if batch is None else rows.index_select(0, batch)

    def loader(self, **kwargs: Any) -> DataLoader:
        """A ``DataLoader`` over the metapath's first node type whose batches are ``(pos_rw, neg_rw)``."""
        return DataLoader(range(self.num_nodes_dict[self.metapath[0][0]]), collate_fn=self._sample, **kwargs)

    def _sample(self, batch: Any) -> tuple[Tensor, Tensor]:
        if not isinstance(batch, Tensor):
            batch = torch.tensor(batch, dtype=torch.long)
        return self._pos_sample(batch), self._neg_sample(batch)

    def _pos_sample(self, batch: Tensor) -> Tensor:
        """Windows of the metapath walks from ``batch`` (nodes of the first type)."""
        current = batch.repeat(self.walks_per_node)
        steps = [current]
        for t in range(self.walk_length):  # (over steps; every walker moves at once)
            relation = self.metapath[t % len(self.metapath)]
            current = self._step(relation, current)
            steps.append(current)
        walks = torch.stack(steps, dim=-1) + self.offset.view(1, -1)
        walks[walks > self.dummy_idx] = self.dummy_idx   # a dummy stays the dummy whatever its block
        return self._windows(walks)

    def _step(self, relation: tuple, current: Tensor) -> Tensor:
        """One uniformly drawn ``relation`` edge from each walker; ``dummy_idx`` for a walker that
        is the dummy already or has no such edge."""
        rowptr, col, count = self.rowptr_dict[relation], self.col_dict[relation], self.rowcount_dict[relation]
        lost = current >= self.dummy_idx
        node = current.clamp(min=0, max=rowptr.numel() - 2)
        degree = count[node]
        draw = torch.rand((node.numel(), 1), device=node.device)
        slot = (draw * degree.to(draw.dtype).view(-1, 1)).long() + rowptr[node].view(-1, 1)
        slot = slot.clamp(max=col.numel() - 1)            # (a last row without edges)
        following = col[slot] if col.numel() else slot
        following[lost.view(-1, 1) | (degree == 0).view(-1, 1)] = self.dummy_idx
        return following.view(-1)

    def _neg_sample(self, batch: Tensor) -> Tensor:
        """Windows of walks from ``batch`` over uniformly drawn nodes of the metapath's types."""
        start = batch.repeat(self.walks_per_node * self.num_negative_samples)
        steps = [start]
        for t in range(self.walk_length):
            node_type = self.metapath[t % len(self.metapath)][-1]
            steps.append(torch.randint(0, self.num_nodes_dict[node_type], (start.numel(),), dtype=torch.long))
        return self._windows(torch.stack(steps, dim=-1) + self.offset.view(1, -1))

    def _windows(self, walks: Tensor) -> Tensor:
        """Every run of ``context_size`` consecutive nodes: all walks' first window, then their second..."""
        return walks.unfold(1, self.context_size, 1).transpose(0, 1).reshape(-1, self.context_size)

    def __repr__(self) -> str:
        rows, width = self.embedding.weight.shape
        return f"{type(self).__name__}({rows - 1}, {width})"


def _check_arguments(edge_index_dict: Any, metapath: Any, walk_length: Any, context_size: Any,
                     *positive: Any) -> None:
    if not isinstance(edge_index_dict, dict) or not edge_index_dict:
        raise TypeError(f"{WHO} expects edge_index_dict as a non-empty dict of edge types to [2, E] tensors")
    for key, edge_index in edge_index_dict.items():
        if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2 \
                or edge_index.is_floating_point():
            raise ValueError(f"{WHO}: edge_index_dict[{key!r}] must be a [2, E] integer tensor")
    if not isinstance(metapath, (list, tuple)) or not metapath:
        raise ValueError(f"{WHO} expects a non-empty metapath (a list of edge types)")
    missing = [k for k in metapath if k not in edge_index_dict]
    if missing:
        raise ValueError(f"{WHO}: metapath relations {missing} are not in edge_index_dict")
    if any(a[-1] != b[0] for a, b in zip(metapath[:-1], metapath[1:])):
        raise ValueError(f"{WHO}: invalid metapath; each relation must start at the node type the previous one "
                         "ends at")
    for value in (walk_length, context_size, *positive):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{WHO}: walk_length, context_size, embedding_dim, walks_per_node and "
                             f"num_negative_samples must be positive ints, got {value!r}")
    if walk_length + 1 < context_size:
        raise ValueError(f"{WHO}: a walk has walk_length + 1 = {walk_length + 1} nodes, fewer than "
                         f"context_size={context_size}")
    if walk_length > len(metapath) and metapath[0][0] != metapath[-1][-1]:
        raise AttributeError(f"{WHO}: walk_length ({walk_length}) exceeds the metapath ({len(metapath)} "
                             "relations), which would have to repeat, but it does not end where it starts")


def _count_nodes(edge_index_dict: dict) -> dict:
    """Nodes per type: one more than the largest id of that type in any relation."""
    counts: dict = {}
    for key, edge_index in edge_index_dict.items():
        for node_type, ids in ((key[0], edge_index[0]), (key[-1], edge_index[1])):
            needed = int(ids.max()) + 1 if ids.numel() else 0
            counts[node_type] = max(needed, counts.get(node_type, needed))
    return counts


def _csr(edge_index: Tensor, num_src: int, num_dst: int) -> tuple[Tensor, Tensor]:
    """Out-edge CSR of one relation, each row's columns ascending."""
    row, col = edge_index[0].long(), edge_index[1].long()
    order = torch.argsort(row * max(num_src, num_dst, 1) + col, stable=True)
    rowptr = torch.zeros(num_src + 1, dtype=torch.long)
    rowptr[1:] = torch.bincount(row, minlength=num_src)[:num_src].cumsum(0)
    return rowptr, col[order]
