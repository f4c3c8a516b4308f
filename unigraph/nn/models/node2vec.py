r"""node2vec (`"node2vec: Scalable Feature Learning for Networks" <https://arxiv.org/abs/1607.00653>`_):
node embeddings trained with skip-gram and negative sampling on biased second-order random walks.
"""
from __future__ import annotations

import numbers
from typing import Any

import torch
from torch import Tensor
from torch.nn import Embedding
from torch.utils.data import DataLoader

from unigraph.nn.models.skip_gram import EPS, SkipGram

WHO = "Node2Vec"


class Node2Vec(SkipGram, torch.nn.Module):
    r"""One embedding :math:`\mathbf{z}_v` per node. A walk of ``walk_length`` nodes moves from
    :math:`v` (reached from :math:`t`) to an out-neighbour :math:`x` with probability proportional to

    .. math::
        \alpha_{pq}(t, x) = \begin{cases} 1/p & x = t \\ 1 & t \to x \in \mathcal{E} \\
        1/q & \text{else} \end{cases}

    (the first step uniform; a node without out-edges repeats itself). Every window of
    ``context_size`` consecutive nodes :math:`(v, c_1, \ldots)` is a positive sample; windows
    starting at the same nodes over uniformly drawn nodes are the negatives:

    .. math::
        \mathcal{L} = -\operatorname{mean}_{(v, c)^+} \log(\sigma(\mathbf{z}_v^{\top}\mathbf{z}_c) + \epsilon)
                      -\operatorname{mean}_{(v, c)^-} \log(1 - \sigma(\mathbf{z}_v^{\top}\mathbf{z}_c) + \epsilon)

    The walks follow PyG's (pyg-lib's) rules in distribution, drawn with torch's generator (not
    draw for draw), by rejection one step for all walkers at a time.

    Args:
        edge_index (torch.Tensor): ``[2, E]`` edges.
        embedding_dim (int): size of each embedding.
        walk_length (int): nodes per walk (at least ``context_size``).
        context_size (int): nodes per positive window.
        walks_per_node (int, optional): walks started at each node of a batch. (default: ``1``)
        p (float, optional): return parameter. (default: ``1.0``)
        q (float, optional): in-out parameter. (default: ``1.0``)
        num_negative_samples (int, optional): negative walks per positive one. (default: ``1``)
        num_nodes (int, optional): number of nodes (default: ``edge_index.max() + 1``).
        sparse (bool, optional): sparse gradients for the embedding. (default: ``False``)

    Shapes:
        - **forward:** ``batch`` :math:`(B)` *(optional)* -> :math:`(B, F)` (all nodes without it)
        - **sample / loss:** walks :math:`(W, \text{context\_size})`
    """

    def __init__(self, edge_index: Tensor, embedding_dim: int, walk_length: int, context_size: int,
                 walks_per_node: int = 1, p: float = 1.0, q: float = 1.0, num_negative_samples: int = 1,
                 num_nodes: int | None = None, sparse: bool = False):
        super().__init__()
        _check_edges(edge_index)
        for name, value in (("embedding_dim", embedding_dim), ("walk_length", walk_length),
                            ("context_size", context_size), ("walks_per_node", walks_per_node),
                            ("num_negative_samples", num_negative_samples)):
            _check_positive_int(name, value)
        if walk_length < context_size:
            raise ValueError(f"{WHO}: walk_length ({walk_length}) must be at least context_size ({context_size})")
        for name, value in (("p", p), ("q", q)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < float("inf"):
                raise ValueError(f"{WHO}: {name} must be a positive number, got {value!r}")
        self.num_nodes = _num_nodes(edge_index, num_nodes)
        self.rowptr, self.col = _csr(edge_index.cpu(), self.num_nodes)
        self.EPS = EPS
        self.embedding_dim = embedding_dim
        self.walk_length = walk_length - 1  # steps per walk
        self.context_size = context_size
        self.walks_per_node = walks_per_node
        self.p, self.q = p, q
        self.num_negative_samples = num_negative_samples
        self.embedding = Embedding(self.num_nodes, embedding_dim, sparse=sparse)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.embedding.reset_parameters()

    def forward(self, batch: Tensor | None = None) -> Tensor:
        """The embeddings of the nodes in ``batch`` (all of them without it)."""
        weight = self.embedding.weight
        return weight if batch is None else weight[batch]

    def loader(self, **kwargs: Any) -> DataLoader:
        """A ``DataLoader`` over the nodes whose batches are :meth:`sample`'s ``(pos_rw, neg_rw)``."""
        return DataLoader(range(self.num_nodes), collate_fn=self.sample, **kwargs)

    def pos_sample(self, batch: Tensor) -> Tensor:
        """The windows of ``walks_per_node`` biased walks from each node of ``batch``."""
        walks = self.random_walk(batch.repeat(self.walks_per_node))
        return self._windows(walks)

    def neg_sample(self, batch: Tensor) -> Tensor:
        """The windows of walks that start at ``batch``'s nodes and go on at uniformly drawn nodes."""
        start = batch.repeat(self.walks_per_node * self.num_negative_samples)
        rest = torch.randint(self.num_nodes, (start.numel(), self.walk_length), dtype=start.dtype,
                             device=start.device)
        return self._windows(torch.cat([start.view(-1, 1), rest], dim=-1))

    def sample(self, batch: Any) -> tuple[Tensor, Tensor]:
        """``(pos_sample(batch), neg_sample(batch))``; ``batch`` a tensor or a list of node ids."""
        if not isinstance(batch, Tensor):
            batch = torch.tensor(batch)
        if batch.dim() != 1 or batch.is_floating_point():
            raise ValueError(f"{WHO} expects a 1-D integer batch of node ids, got {batch.dtype} {list(batch.shape)}")
        if batch.numel() and (int(batch.min()) < 0 or int(batch.max()) >= self.num_nodes):
            raise ValueError(f"{WHO}: batch node ids must lie in [0, {self.num_nodes})")
        return self.pos_sample(batch), self.neg_sample(batch)

    def _windows(self, walks: Tensor) -> Tensor:
        """Every run of ``context_size`` consecutive nodes, window after window (all walks of the
        first window, then all of the second, ...)."""
        windows = walks.unfold(1, self.context_size, 1)          # [W, num_windows, context]
        return windows.transpose(0, 1).reshape(-1, self.context_size)

    def random_walk(self, start: Tensor) -> Tensor:
        """``[len(start), walk_length + 1]`` node2vec walks (module docstring)."""
        rowptr, col = self.rowptr.to(start.device), self.col.to(start.device)
        degree = rowptr[1:] - rowptr[:-1]
        edge_keys = _edge_keys(rowptr, col, self.num_nodes)
        previous, current = start, start
        trace = [start]
        for step in range(self.walk_length):  # (over steps; every walker moves at once)
            following = _uniform_step(current, rowptr, col, degree) if step == 0 else self._biased_step(
                previous, current, rowptr, col, degree, edge_keys)
            previous, current = current, following
            trace.append(current)
        return torch.stack(trace, dim=1)

    def _biased_step(self, previous: Tensor, current: Tensor, rowptr: Tensor, col: Tensor, degree: Tensor,
                     edge_keys: Tensor) -> Tensor:
        """One node2vec step by rejection: draw a neighbour uniformly, keep it with probability
        :math:`\\alpha_{pq} / \\max \\alpha`, draw again for the walkers that did not."""
        bias = torch.tensor([1.0 / self.p, 1.0, 1.0 / self.q], dtype=torch.float64, device=current.device)
        top = bias.max()
        out = current.clone()              # a node without out-edges stays where it is
        pending = (degree[current] > 0).nonzero().view(-1)
        while pending.numel():
            here, came_from = current[pending], previous[pending]
            x = _uniform_step(here, rowptr, col, degree)
            keys = came_from * self.num_nodes + x
            found = torch.searchsorted(edge_keys, keys).clamp(max=max(edge_keys.numel() - 1, 0))
            linked = (edge_keys[found] == keys) if edge_keys.numel() else torch.zeros_like(keys, dtype=torch.bool)
            kind = torch.where(x == came_from, 0, torch.where(linked, 1, 2))
            accepted = torch.rand(pending.numel(), dtype=torch.float64, device=current.device) < bias[kind] / top
            out[pending[accepted]] = x[accepted]
            pending = pending[~accepted]
        return out

    def __repr__(self) -> str:
        rows, width = self.embedding.weight.shape
        return f"{type(self).__name__}({rows}, {width})"


def _check_edges(edge_index: Any) -> None:
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"{WHO} expects edge_index as a [2, E] tensor, got "
                         f"{list(edge_index.shape) if isinstance(edge_index, Tensor) else type(edge_index).__name__}")
    if edge_index.is_floating_point() or edge_index.dtype == torch.bool:
        raise TypeError(f"{WHO} expects integer edge_index, got {edge_index.dtype}")
    if edge_index.numel() and int(edge_index.min()) < 0:
        raise ValueError(f"{WHO}: edge_index holds negative node ids")


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{WHO}: {name} must be a positive int, got {value!r}")


def _num_nodes(edge_index: Tensor, num_nodes: int | None) -> int:
    needed = int(edge_index.max()) + 1 if edge_index.numel() else 0
    if num_nodes is None:
        return needed
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < needed:
        raise ValueError(f"{WHO}: num_nodes={num_nodes!r} is fewer than the nodes edge_index names ({needed})")
    return num_nodes


def _csr(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """Out-edge CSR (``rowptr``, ``col``), each row's columns sorted (so a key search finds edges)."""
    row, col = edge_index[0].long(), edge_index[1].long()
    order = torch.argsort(row * max(num_nodes, 1) + col, stable=True)
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    rowptr[1:] = torch.bincount(row, minlength=num_nodes).cumsum(0)
    return rowptr, col[order]


def _edge_keys(rowptr: Tensor, col: Tensor, num_nodes: int) -> Tensor:
    """``row * num_nodes + col`` of every edge, ascending (the CSR's order)."""
    row = torch.repeat_interleave(torch.arange(num_nodes, device=col.device), rowptr[1:] - rowptr[:-1])
    return row * num_nodes + col


def _uniform_step(current: Tensor, rowptr: Tensor, col: Tensor, degree: Tensor) -> Tensor:
    """A uniformly drawn out-neighbour of each walker (the walker itself at a node without any)."""
    deg = degree[current]
    offset = (torch.rand(current.numel(), dtype=torch.float64, device=current.device) * deg).long()
    slot = (rowptr[current] + offset).clamp(max=max(col.numel() - 1, 0))
    return torch.where(deg > 0, col[slot] if col.numel() else current, current).to(current.dtype)
