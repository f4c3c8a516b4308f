"""PANConv: path integral based convolution (Ma et al.), with its maximal entropy transition matrix."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.call_forms import resolve
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_width, edge_input
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.projection import dense


class PANConv(MessagePassing):
    r"""The path integral based convolutional operator from the `"Path Integral Based Convolution
    and Pooling for Graph Neural Networks" <https://arxiv.org/abs/2006.16811>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \mathbf{M} \mathbf{X} \mathbf{W} + \mathbf{b}, \qquad
        \mathbf{M} = \mathbf{Z}^{-1/2} \Big( \sum_{n=0}^{L} c_n \mathbf{A}^n \Big) \mathbf{Z}^{-1/2},
        \qquad c_n = \prod_{k=0}^{n} w_k

    per node:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{W}^{\top} \sum_{j} \frac{\sum_{n} c_n (\mathbf{A}^n)_{ij}}
        {\sqrt{z_i z_j}} \mathbf{x}_j + \mathbf{b}

    with :math:`\mathbf{A}` the adjacency ``adj_t[dst, src]`` (1 per edge, repeated edges counted;
    a torch sparse adjacency's values as PyG keeps them; a ``SparseTensor``'s values are dropped, as
    PyG drops them), :math:`w` the learned path weights (``weight``, :math:`L + 1` of them, all 0.5
    at reset: PyG scales the running power by each in turn, so path length :math:`n` carries their
    product), and :math:`z_i` the number of nodes :math:`j` that reach :math:`i` in at most
    :math:`L` steps (the stored entries of row :math:`i`, whatever their value).

    How it runs: the powers :math:`\mathbf{A}^n` are sparse products computed once per graph
    (kept on it; with a torch sparse adjacency's values, on every call), each spread over the
    union of their patterns as one row of an :math:`(L + 1) \times \mathrm{nnz}` table, so
    :math:`\mathbf{M}`'s values are one product ``c @ table`` (differentiable in :math:`w`) and
    :math:`\mathbf{M} \mathbf{X}` one ``u_mul_e`` g-SpMM over that pattern. Values equal PyG's;
    so do the gradients of ``x`` and of ``lin``. The path weights get the true gradient (checked
    against dense matrices), which PyG's do not: its sparse-sparse products pass no gradient back
    through the earlier powers, so only the last entry of PyG's ``weight.grad`` is right.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        filter_size (int): the largest path length :math:`L` (``>= 0``).
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, default
            ``"add"``, as PyG's). ``flow="target_to_source"`` is refused, as PyG refuses it for the
            sparse matrix it propagates over.

    Returns ``(out, M)``: ``M`` a ``torch_sparse.SparseTensor`` ``[N, N]`` (coalesced, rows sorted)
    as PyG's, or, where torch_sparse is not installed, the same matrix as a coalesced torch sparse
    COO tensor.

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` (a tensor, a ``SparseTensor`` or a
          torch sparse ``adj_t``), node features :math:`(|\mathcal{V}|, F_{in})`
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})` and :math:`\mathbf{M}`
          :math:`(|\mathcal{V}|, |\mathcal{V}|)`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, filter_size: int, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        who = "PANConv"
        if in_channels != LAZY and (isinstance(in_channels, bool) or not isinstance(in_channels, int)
                                    or in_channels <= 0):
            raise ValueError(f"{who} in_channels must be a positive int or -1 (inferred on the first call), "
                             f"got {in_channels!r}")
        if isinstance(out_channels, bool) or not isinstance(out_channels, int) or out_channels <= 0:
            raise ValueError(f"{who} out_channels must be a positive int, got {out_channels!r}")
        if isinstance(filter_size, bool) or not isinstance(filter_size, int) or filter_size < 0:
            raise ValueError(f"{who} filter_size must be an int >= 0, got {filter_size!r}")
        self.in_channels, self.out_channels, self.filter_size = in_channels, out_channels, filter_size
        self.lin = make_linear(in_channels, out_channels)
        self.weight = Parameter(torch.empty(filter_size + 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()   # (torch's Linear initialization, which is PyG's Linear's)
        with torch.no_grad():
            self.weight.fill_(0.5)

    def forward(self, x: Tensor | Any, edge_index: Any) -> tuple[Tensor, Any]:
        who = "PANConv"
        if self.flow != "source_to_target":
            raise ValueError(f"{who} propagates over the sparse matrix M, for which PyG refuses "
                             "flow='target_to_source'; pass the reversed edge_index instead")
        if isinstance(x, (tuple, list)) or isinstance(edge_index, (tuple, list)):
            raise ValueError(f"{who} expects node features as one tensor [num_nodes, F], not a (source, "
                             "destination) pair: M is square")
        call = resolve(who, x, edge_index)
        g, x = call.graph, call.x
        if not isinstance(x, Tensor) or x.dim() != 2:
            raise ValueError(f"{who} expects node features of shape [num_nodes, F] (one tensor), got "
                             f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
        if g.is_bipartite or x.shape[0] != g.num_src_nodes:
            raise ValueError(f"{who} needs a square adjacency over the rows of x, got {g.num_src_nodes} source and "
                             f"{g.num_dst_nodes} destination nodes for {x.shape[0]} rows")
        if self.in_channels != LAZY:
            check_width(x, self.in_channels, who)
        x = dense(x)
        # the values PyG keeps: a torch sparse adjacency's (as weights of A); a SparseTensor's are dropped
        values = call.edge_weight if call.form in ("torch_sparse", "graph", "edge_index") else None
        values = edge_input(g, values, who, "edge_weight", vector=True)
        paths, table, scale = self._paths(g, values, x.dtype)
        m_values = (torch.cumprod(self.weight, 0).to(x.dtype) @ table) * scale
        out = self.lin(self.propagate(paths, x=x, edge_weight=m_values))
        return out, _matrix(paths, m_values)

    def _paths(self, g: Graph, values: Tensor | None, dtype: torch.dtype) -> tuple[Graph, Tensor, Tensor]:
        """``(graph of M's pattern, table [L + 1, nnz], 1 / sqrt(z_i z_j) per entry)``; a function of
        the structure alone without values: kept on the graph (not while compiling, as GCNConv)."""
        if values is None and not torch.compiler.is_compiling():
            key = ("unigraph.nn", "pan_paths", self.filter_size, dtype)
            def build():
                with torch.inference_mode(False):   # kept on the graph: a normal tensor whatever mode asked first
                    return _path_table(g, None, self.filter_size, dtype)
            return g.memo(key, build)
        return _path_table(g, values, self.filter_size, dtype)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, filter_size={self.filter_size})"


def _path_table(g: Graph, values: Tensor | None, filter_size: int, dtype: torch.dtype) -> tuple[Graph, Tensor, Tensor]:
    """The powers ``A^0 .. A^L`` of ``adj_t`` (sparse products: their patterns are symbolic, so an
    entry that sums to 0 stays stored, as in PyG's products), spread over the union of their
    patterns (rows sorted, then columns)."""
    n = g.num_src_nodes
    if values is None:
        values = torch.ones(g.num_edges, dtype=dtype, device=g.device)
    adj = torch.sparse_coo_tensor(torch.stack([g.dst, g.src]), values.to(dtype), (n, n)).coalesce()
    loops = torch.arange(n, device=g.device)
    power = torch.sparse_coo_tensor(torch.stack([loops, loops]), torch.ones(n, dtype=dtype, device=g.device),
                                    (n, n)).coalesce()
    keys, entries, levels = [], [], []
    for level in range(filter_size + 1):   # (a loop over path lengths)
        if level:
            power = torch.sparse.mm(power, adj).coalesce()
        index = power.indices()
        keys.append(index[0] * n + index[1])
        entries.append(power.values())
        levels.append(torch.full_like(index[0], level))
    unique, slot = torch.unique(torch.cat(keys), return_inverse=True)
    entries = torch.cat(entries)
    table = entries.new_zeros((filter_size + 1, unique.numel()))
    table = table.index_put((torch.cat(levels), slot), entries, accumulate=True)
    row, col = unique // n, unique % n
    inverse_sqrt = torch.bincount(row, minlength=n).to(dtype).pow(-0.5)
    inverse_sqrt = inverse_sqrt.masked_fill(torch.isinf(inverse_sqrt), 0.0)
    scale = inverse_sqrt[col] * inverse_sqrt[row]
    return Graph._trusted(col, row, n, n, False), table, scale


def _matrix(paths: Graph, values: Tensor) -> Any:
    """``M`` as PyG returns it: a ``SparseTensor`` (rows are the destinations), or a torch sparse
    COO tensor without torch_sparse."""
    n = paths.num_src_nodes
    try:
        from torch_sparse import SparseTensor
    except ImportError:
        return torch.sparse_coo_tensor(torch.stack([paths.dst, paths.src]), values, (n, n), is_coalesced=True)
    return SparseTensor(row=paths.dst, col=paths.src, value=values, sparse_sizes=(n, n), is_sorted=True,
                        trust_data=True)
