"""DeepGCNLayer: skip-connection wrapper around a conv (DeepGCN / DeeperGCN), PyG's interface."""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Module
from torch.utils.checkpoint import checkpoint

_BLOCKS = ("res+", "res", "dense", "plain")


class DeepGCNLayer(torch.nn.Module):
    r"""Wraps a graph convolution with normalization, activation, dropout and a skip connection,
    as in "DeepGCNs: Can GCNs Go as Deep as CNNs?" and "DeeperGCN: All You Need to Train Deeper
    GCNs". With :math:`f` the conv, :math:`n` the norm, :math:`\sigma` the activation:

    .. math::
        \text{res+}:\; \mathbf{x}' &= \mathbf{x} + f(\mathrm{drop}(\sigma(n(\mathbf{x})))) \\
        \text{res}:\; \mathbf{x}' &= \mathrm{drop}(\mathbf{x} + \sigma(n(f(\mathbf{x})))) \\
        \text{dense}:\; \mathbf{x}' &= \mathrm{drop}(\mathbf{x} \,\Vert\, \sigma(n(f(\mathbf{x})))) \\
        \text{plain}:\; \mathbf{x}' &= \mathrm{drop}(\sigma(n(f(\mathbf{x}))))

    Args:
        conv (torch.nn.Module, optional): the graph convolution; called with the node features
            first, then the other forward arguments unchanged.
        norm (torch.nn.Module, optional): the normalization layer.
        act (torch.nn.Module, optional): the activation module.
        block (str, optional): ``"res+"``, ``"res"``, ``"dense"`` or ``"plain"`` (case-insensitive).
            (default: ``"res+"``)
        dropout (float, optional): dropout probability. (default: ``0.``)
        ckpt_grad (bool, optional): recompute the conv in the backward pass (gradient
            checkpointing) to save memory. (default: ``False``)

    Shapes:
        - **input:** node features :math:`(N, F)`, then the conv's other arguments
        - **output:** :math:`(N, F)`, or :math:`(N, F + F')` for ``"dense"``
    """

    def __init__(self, conv: Optional[Module] = None, norm: Optional[Module] = None,
                 act: Optional[Module] = None, block: str = "res+", dropout: float = 0.,
                 ckpt_grad: bool = False):
        super().__init__()
        if not isinstance(block, str) or block.lower() not in _BLOCKS:
            raise ValueError(f"DeepGCNLayer: block must be one of {_BLOCKS}, got {block!r}")
        self.conv = conv
        self.norm = norm
        self.act = act
        self.block = block.lower()
        self.dropout = dropout
        self.ckpt_grad = ckpt_grad

    def reset_parameters(self):
        """Re-initialise the conv and the norm (those that are set)."""
        for module in (self.conv, self.norm):
            if module is not None and hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def _conv(self, h: Tensor, args, kwargs) -> Tensor:
        if self.conv is None:
            raise ValueError("DeepGCNLayer: no conv was given, forward needs one")
        if self.ckpt_grad and h.requires_grad:
            # Reentrant checkpointing, as PyG does: the conv is re-run during backward.
            return checkpoint(self.conv, h, *args, use_reentrant=True, **kwargs)
        return self.conv(h, *args, **kwargs)

    def _norm_act(self, h: Tensor) -> Tensor:
        if self.norm is not None:
            h = self.norm(h)
        if self.act is not None:
            h = self.act(h)
        return h

    def forward(self, *args, **kwargs) -> Tensor:
        """Forward pass: ``layer(x, *conv_args, **conv_kwargs)``."""
        if not args:
            raise TypeError("DeepGCNLayer: forward needs the node features as first argument")
        x, rest = args[0], args[1:]
        if self.block == "res+":
            h = F.dropout(self._norm_act(x), p=self.dropout, training=self.training)
            return x + self._conv(h, rest, kwargs)
        h = self._norm_act(self._conv(x, rest, kwargs))
        if self.block == "res":
            h = x + h
        elif self.block == "dense":
            h = torch.cat([x, h], dim=-1)
        return F.dropout(h, p=self.dropout, training=self.training)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(block={self.block})"
