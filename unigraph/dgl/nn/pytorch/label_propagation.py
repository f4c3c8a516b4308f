r"""DGL's ``LabelPropagation`` (Zhou et al., "Learning with Local and Global Consistency", 2004).

.. math::
    Y^{0} = Y_{mask}, \qquad
    Y^{t+1} = \alpha\, \hat A\, Y^{t} + (1 - \alpha)\, Y^{0}, \qquad
    \hat A = D_{in}^{-1/2} A D_{out}^{-1/2} \;(\text{norm\_type='sym'}), \quad D_{in}^{-1} A \;(\text{'row'})

:math:`Y` holds one-hot rows built from integer labels ``[N]`` (or ``[N, 1]``; the number of
classes is the largest label + 1), or the given ``[N, C]`` label matrix (multi-label or soft
labels). With ``mask``, :math:`Y^0` keeps only the masked nodes' labels (zeros elsewhere). After
each step, in this order: ``clamp`` to [0, 1], ``normalize`` each row to unit L1 norm, ``reset``
the masked nodes to their labels (every node without a mask, as DGL's ``y[None] = labels[None]``
does). Degrees are clamped to at least 1. As in DGL, labels and result are float32 whatever the
input dtype. No parameters.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph

NORM_TYPES = ("sym", "row")


class LabelPropagation(nn.Module):
    """Args (DGL's): ``k`` (steps), ``alpha``, ``norm_type`` (``'sym'`` or ``'row'``), ``clamp``,
    ``normalize``, ``reset`` (see the module docstring).

    Shapes: ``labels`` ``[N]`` / ``[N, 1]`` integers, or ``[N, C]``; ``mask`` a boolean ``[N]`` or
    node ids -> ``[N, C]`` float32. A block or a bipartite graph is refused (DGL fails on them too).
    """

    def __init__(self, k: int, alpha: float, norm_type: str = "sym", clamp: bool = True, normalize: bool = False,
                 reset: bool = False):
        super().__init__()
        if norm_type not in NORM_TYPES:
            raise ValueError(f"LabelPropagation: norm_type must be one of {NORM_TYPES}, got {norm_type!r}")
        if k < 0:
            raise ValueError(f"LabelPropagation: k (the number of steps) must be >= 0, got {k}")
        self.k, self.alpha, self.norm_type = k, alpha, norm_type
        self.clamp, self.normalize, self.reset = clamp, normalize, reset

    def forward(self, g, labels: Tensor, mask: Tensor | None = None) -> Tensor:
        g = check_graph(g, "LabelPropagation")
        if g.is_bipartite:
            raise DGLError("LabelPropagation needs a graph with one node set; got a block or a bipartite graph")
        labels = self._label_matrix(g, labels)
        y = labels
        if mask is not None:
            y = torch.zeros_like(labels)
            y[mask] = labels[mask]
        init = (1 - self.alpha) * y
        in_scale, out_scale = self._degree_scales(g, labels.device)
        for _ in range(self.k):
            h = y * out_scale if out_scale is not None else y
            y = init + self.alpha * ops.gspmm(g, "copy_u", "sum", h) * in_scale
            if self.clamp:
                y = y.clamp_(0.0, 1.0)
            if self.normalize:
                y = F.normalize(y, p=1)
            if self.reset:
                y = self._reset(y, labels, mask)
        return y

    @staticmethod
    def _label_matrix(g, labels: Tensor) -> Tensor:
        """``[N, C]`` float32: the given label matrix, or one-hot rows of integer labels."""
        if not isinstance(labels, Tensor) or labels.dim() == 0 or labels.shape[0] != g.num_nodes:
            shape = tuple(labels.shape) if isinstance(labels, Tensor) else type(labels).__name__
            raise DGLError(f"LabelPropagation: labels must have one row per node ({g.num_nodes}); got {shape}")
        if labels.dim() > 1 and labels.shape[1] > 1:
            return labels.to(torch.float32)
        if labels.is_floating_point() or labels.dtype == torch.bool or labels.is_complex():
            raise TypeError(f"LabelPropagation: labels of shape [N] or [N, 1] must be integer class ids, got "
                            f"{labels.dtype} (a label matrix is [N, C] with C > 1)")
        return F.one_hot(labels.view(-1)).to(torch.float32)

    def _degree_scales(self, g, device) -> tuple[Tensor, Tensor | None]:
        """``(destination scale, source scale or None)``, columns ``[N, 1]`` in float32."""
        in_degrees = g.in_degrees().float().clamp(min=1).to(device)
        if self.norm_type == "row":
            return in_degrees.pow(-1.0).unsqueeze(1), None
        out_degrees = g.out_degrees().float().clamp(min=1).to(device)
        return in_degrees.pow(-0.5).unsqueeze(1), out_degrees.pow(-0.5).unsqueeze(1)

    @staticmethod
    def _reset(y: Tensor, labels: Tensor, mask: Tensor | None) -> Tensor:
        if mask is None:   # DGL's y[None] = labels[None]: every row
            return labels.clone()
        y[mask] = labels[mask]
        return y

    def extra_repr(self) -> str:
        return f"k={self.k}, alpha={self.alpha}, norm_type={self.norm_type}"
