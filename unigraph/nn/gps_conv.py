"""GPSConv: the general, powerful, scalable graph transformer layer (Rampasek et al.), and the
Performer's linear attention it may use."""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.call_forms import is_graph_object
from unigraph.nn.checks import check_positive, check_probability, reset_module
from unigraph.nn.resolver import activation_resolver, normalization_resolver

ATTENTION_TYPES = ("multihead", "performer")


# ---------------------------------------------------------------------- Performer attention
def random_orthogonal_rows(num_rows: int, num_cols: int) -> Tensor:
    """``[num_rows, num_cols]``: blocks of ``num_cols`` orthonormal rows (the Q factor of a
    Gaussian matrix, transposed), stacked, the last block cut to size (the Performer's
    orthogonal random features)."""
    blocks = []
    for start in range(0, num_rows, num_cols):
        q, _ = torch.linalg.qr(torch.randn(num_cols, num_cols), mode="reduced")
        blocks.append(q.t()[: num_rows - start])
    return torch.cat(blocks) if blocks else torch.empty(0, num_cols)


class PerformerProjection(torch.nn.Module):
    r"""The Performer's kernel feature map and linear attention: queries and keys go through
    :math:`\phi(\mathbf{x}) = \kappa(\mathbf{x} \mathbf{P}^{\top}) + 10^{-3}` with a fixed random
    orthogonal projection :math:`\mathbf{P}` (``projection_matrix``, ``num_cols * ln(num_cols)``
    features) and a kernel :math:`\kappa` (ReLU by default); then
    :math:`\mathrm{out} = \mathrm{diag}(\phi(Q) \phi(K)^{\top} \mathbf{1})^{-1} \phi(Q) (\phi(K)^{\top} V)`,
    linear in the number of nodes."""

    def __init__(self, num_cols: int, kernel: Callable = torch.nn.ReLU()):
        super().__init__()
        if kernel is None:
            raise ValueError("PerformerProjection needs a kernel (a callable such as torch.nn.ReLU())")
        self.num_rows = int(num_cols * math.log(num_cols))
        self.num_cols = num_cols
        self.register_buffer("projection_matrix", random_orthogonal_rows(self.num_rows, num_cols))
        self.kernel = kernel

    def features(self, x: Tensor) -> Tensor:
        """:math:`\\phi(\\mathbf{x})` of ``[B, H, N, D]`` queries or keys."""
        return self.kernel(x @ self.projection_matrix.t()) + 0.001

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        q, k = self.features(q), self.features(k)
        normalizer = q @ k.sum(dim=-2).unsqueeze(-1)          # [B, H, N, 1]
        return (q @ (k.transpose(-2, -1) @ v)) / normalizer


class PerformerAttention(torch.nn.Module):
    r"""The linear attention of `"Rethinking Attention with Performers"
    <https://arxiv.org/abs/2009.14794>`_ over dense batches ``[B, N, F]``: queries, keys and values
    per head (``q``, ``k``, ``v``: ``heads * head_channels`` wide), the Performer's attention
    (:class:`PerformerProjection`, ``fast_attn``), the heads concatenated and projected back
    (``attn_out``), then dropout. Padding rows (``mask`` False) contribute no values; their
    keys still enter the normalizer, as in PyG. PyG's parameter names, so its ``state_dict`` loads.

    Args:
        channels (int): input and output width.
        heads (int): number of heads (``channels`` must be a multiple).
        head_channels (int, optional): width of each head (``None``: ``channels // heads``).
            (default: ``64``)
        kernel (callable, optional): the kernel of the feature map. (default: ``torch.nn.ReLU()``)
        qkv_bias (bool, optional): biases in ``q``, ``k``, ``v``. (default: ``False``)
        attn_out_bias (bool, optional): bias in ``attn_out``. (default: ``True``)
        dropout (float, optional): dropout of the output. (default: ``0.0``)
    """

    def __init__(self, channels: int, heads: int, head_channels: int | None = 64,
                 kernel: Callable = torch.nn.ReLU(), qkv_bias: bool = False, attn_out_bias: bool = True,
                 dropout: float = 0.0):
        super().__init__()
        who = "PerformerAttention"
        check_positive(channels, "channels", who)
        check_positive(heads, "heads", who)
        if channels % heads != 0:
            raise ValueError(f"{who} channels ({channels}) must be divisible by heads ({heads})")
        if head_channels is None:
            head_channels = channels // heads
        self.heads = heads
        self.head_channels = check_positive(head_channels, "head_channels", who)
        self.kernel = kernel
        self.fast_attn = PerformerProjection(head_channels, kernel)
        inner = heads * head_channels
        self.q = torch.nn.Linear(channels, inner, bias=qkv_bias)
        self.k = torch.nn.Linear(channels, inner, bias=qkv_bias)
        self.v = torch.nn.Linear(channels, inner, bias=qkv_bias)
        self.attn_out = torch.nn.Linear(inner, channels, bias=attn_out_bias)
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        batch, nodes = x.shape[:2]
        split = lambda t: t.reshape(batch, nodes, self.heads, self.head_channels).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))    # [B, H, N, D]
        if mask is not None:
            v = v.masked_fill(~mask[:, None, :, None], 0.0)
        out = self.fast_attn(q, k, v).transpose(1, 2).reshape(batch, nodes, -1)
        return self.dropout(self.attn_out(out))

    @torch.no_grad()
    def redraw_projection_matrix(self) -> None:
        """Draw a new random projection (the paper redraws it now and then during training)."""
        attn = self.fast_attn
        attn.projection_matrix.copy_(random_orthogonal_rows(attn.num_rows, attn.num_cols))

    def _reset_parameters(self) -> None:
        for lin in (self.q, self.k, self.v, self.attn_out):
            lin.reset_parameters()
        self.redraw_projection_matrix()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(heads={self.heads}, head_channels={self.head_channels} "
                f"kernel={self.kernel})")


# ---------------------------------------------------------------------- dense batches
def dense_batch(x: Tensor, batch: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
    """``(dense, mask, slots)``: the nodes of each graph as one row of ``dense``
    (``[num_graphs, max_nodes, F]``, zero padded; ``mask`` marks the real nodes) and ``slots``, each
    node's row in ``dense.view(-1, F)`` (None for one graph). ``batch`` must be sorted (PyG's
    mini-batches are)."""
    if batch is None:
        return x.unsqueeze(0), x.new_ones((1, x.shape[0]), dtype=torch.bool), None
    if not isinstance(batch, Tensor) or batch.shape != (x.shape[0],) or batch.is_floating_point():
        got = list(batch.shape) if isinstance(batch, Tensor) else type(batch).__name__
        raise ValueError(f"GPSConv batch must be an integer tensor of shape [{x.shape[0]}] (the graph of each node), "
                         f"got {got}")
    if batch.numel() and (int(batch[0]) < 0 or bool((batch[1:] < batch[:-1]).any())):
        raise ValueError("GPSConv batch must be sorted and >= 0 (each graph's nodes together, as in a PyG Batch)")
    num_graphs = int(batch[-1]) + 1 if batch.numel() else 0
    counts = torch.bincount(batch, minlength=num_graphs)
    width = int(counts.max()) if num_graphs else 0
    starts = torch.cumsum(counts, 0) - counts
    slots = torch.arange(x.shape[0], device=x.device) - starts[batch] + batch * width
    dense = x.new_zeros((num_graphs * width,) + tuple(x.shape[1:])).index_copy(0, slots, x)
    mask = torch.zeros(num_graphs * width, dtype=torch.bool, device=x.device).index_fill(0, slots, True)
    return dense.view(num_graphs, width, *x.shape[1:]), mask.view(num_graphs, width), slots


# ---------------------------------------------------------------------- GPSConv
class GPSConv(torch.nn.Module):
    r"""The GPS graph transformer layer from the `"Recipe for a General, Powerful, Scalable Graph
    Transformer" <https://arxiv.org/abs/2205.12454>`_ paper.

    .. math::
        \mathbf{h}_L &= \mathrm{N}_1\big(\mathrm{MPNN}(\mathbf{X}, \mathbf{A}) + \mathbf{X}\big),
        \qquad
        \mathbf{h}_G = \mathrm{N}_2\big(\mathrm{Attn}(\mathbf{X}) + \mathbf{X}\big),

        \mathbf{X}^{\prime} &= \mathrm{N}_3\big(\mathbf{h} + \mathrm{MLP}(\mathbf{h})\big),
        \qquad \mathbf{h} = \mathbf{h}_L + \mathbf{h}_G

    with the local layer ``conv`` (MPNN; skipped when ``None``), global attention among the
    nodes of each graph (``attn``: ``torch.nn.MultiheadAttention``, or the linear
    :class:`PerformerAttention`; graphs padded to a dense batch), dropout after both and inside
    the MLP (``Linear(C, 2C)``, activation, ``Linear(2C, C)``), and the norms
    :math:`\mathrm{N}_{1,2,3}` (``norm``; those that take ``batch`` get it).

    Args:
        channels (int): input and output width.
        conv (torch.nn.Module, optional): the local message passing layer, called as
            ``conv(x, edge_index, **kwargs)`` (unigraph's or PyG's), or ``None``.
        heads (int, optional): attention heads. (default: ``1``)
        dropout (float, optional): dropout probability. (default: ``0.0``)
        act (str or callable, optional): the MLP's activation. (default: ``"relu"``)
        act_kwargs (dict, optional): arguments of a named activation. (default: ``None``)
        norm (str or callable, optional): the norm (:mod:`unigraph.nn.norm`: ``"batch_norm"``,
            ``"layer_norm"``, ``"graph_norm"``, ``"instance_norm"``; a module; ``None``).
            (default: ``"batch_norm"``)
        norm_kwargs (dict, optional): arguments of a named norm. (default: ``None``)
        attn_type (str, optional): ``"multihead"`` or ``"performer"``. (default: ``"multihead"``)
        attn_kwargs (dict, optional): arguments of the attention module. (default: ``None``)

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, C)`, the graph as ``conv`` takes it
          (PyG's ``edge_index``/sparse ``adj_t``, or ``(g, x)`` for unigraph's layers), the graph
          of each node :math:`(|\mathcal{V}|)` *(optional, sorted)*
        - **output:** node features :math:`(|\mathcal{V}|, C)`
    """

    def __init__(self, channels: int, conv: torch.nn.Module | None, heads: int = 1, dropout: float = 0.0,
                 act: str | Callable = "relu", act_kwargs: dict[str, Any] | None = None,
                 norm: str | Callable | None = "batch_norm", norm_kwargs: dict[str, Any] | None = None,
                 attn_type: str = "multihead", attn_kwargs: dict[str, Any] | None = None):
        super().__init__()
        who = "GPSConv"
        self.channels = check_positive(channels, "channels", who)
        self.conv = conv
        self.heads = check_positive(heads, "heads", who)
        self.dropout = check_probability(dropout, "dropout", who)
        if attn_type not in ATTENTION_TYPES:
            raise ValueError(f"{who} attn_type must be one of {', '.join(ATTENTION_TYPES)}, got {attn_type!r}")
        if channels % heads != 0:
            raise ValueError(f"{who} channels ({channels}) must be divisible by heads ({heads})")
        self.attn_type = attn_type
        attn_kwargs = attn_kwargs or {}
        if attn_type == "multihead":
            self.attn = torch.nn.MultiheadAttention(channels, heads, batch_first=True, **attn_kwargs)
        else:
            self.attn = PerformerAttention(channels=channels, heads=heads, **attn_kwargs)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(channels, channels * 2),
            activation_resolver(act, **(act_kwargs or {})),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(channels * 2, channels),
            torch.nn.Dropout(dropout),
        )
        norm_kwargs = norm_kwargs or {}
        self.norm1 = normalization_resolver(norm, channels, **norm_kwargs)
        self.norm2 = normalization_resolver(norm, channels, **norm_kwargs)
        self.norm3 = normalization_resolver(norm, channels, **norm_kwargs)
        self.norm_with_batch = (self.norm1 is not None
                                and "batch" in inspect.signature(self.norm1.forward).parameters)

    def reset_parameters(self) -> None:
        if self.conv is not None:
            self.conv.reset_parameters()
        self.attn._reset_parameters()
        reset_module(self.mlp)
        for norm in (self.norm1, self.norm2, self.norm3):
            if norm is not None:
                norm.reset_parameters()

    def forward(self, x: Any, edge_index: Any, batch: Tensor | None = None, **kwargs: Any) -> Tensor:
        who = "GPSConv"
        if is_graph_object(x):   # unigraph's form conv(g, x): the features come second
            g, x = x, edge_index
            local = (lambda: self.conv(g, x, **kwargs)) if self.conv is not None else None
        else:
            local = (lambda: self.conv(x, edge_index, **kwargs)) if self.conv is not None else None
        if not isinstance(x, Tensor) or x.dim() != 2 or x.shape[1] != self.channels:
            got = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"{who} expects node features [num_nodes, {self.channels}] (channels), got {got}")
        parts = []
        if local is not None:
            h = F.dropout(local(), p=self.dropout, training=self.training)
            parts.append(self._norm(self.norm1, h + x, batch))
        h = F.dropout(self._attend(x, batch), p=self.dropout, training=self.training)
        parts.append(self._norm(self.norm2, h + x, batch))
        out = parts[0] if len(parts) == 1 else parts[0] + parts[1]
        return self._norm(self.norm3, out + self.mlp(out), batch)

    def _attend(self, x: Tensor, batch: Tensor | None) -> Tensor:
        """Global attention among the nodes of each graph, back in node order ``[N, C]``."""
        dense, mask, slots = dense_batch(x, batch)
        if isinstance(self.attn, torch.nn.MultiheadAttention):
            h, _ = self.attn(dense, dense, dense, key_padding_mask=~mask, need_weights=False)
        else:
            h = self.attn(dense, mask=mask)
        h = h.reshape(-1, h.shape[-1])
        return h if slots is None else h.index_select(0, slots)

    def _norm(self, norm: Callable | None, h: Tensor, batch: Tensor | None) -> Tensor:
        if norm is None:
            return h
        return norm(h, batch=batch) if self.norm_with_batch else norm(h)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.channels}, conv={self.conv}, heads={self.heads}, "
                f"attn_type={self.attn_type})")
