r"""Correct and Smooth (`"Combining Label Propagation And Simple Models Out-performs Graph Neural
Networks" <https://arxiv.org/abs/2010.13993>`_): post-processing of a base predictor's soft
predictions by two label propagations, one of the training errors, one of the corrected predictions.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.nn.models.label_prop import LabelPropagation, check_mask

WHO = "CorrectAndSmooth"


class CorrectAndSmooth(torch.nn.Module):
    r"""With :math:`\mathbf{Z}` the soft predictions, :math:`\mathbf{Y}` the true labels of the
    training nodes :math:`\mathcal{T}` and :math:`\mathbf{S} = \mathbf{D}^{-1/2}\mathbf{A}\mathbf{D}^{-1/2}`:

    **correct** propagates the training errors,

    .. math::
        \mathbf{e}^{(0)}_i = \begin{cases} \mathbf{y}_i - \mathbf{z}_i & i \in \mathcal{T} \\
        \mathbf{0} & \text{else} \end{cases}, \qquad
        \mathbf{E}^{(\ell)} = \alpha_1 \mathbf{S} \mathbf{E}^{(\ell-1)} + (1 - \alpha_1) \mathbf{E}^{(0)}, \qquad
        \hat{\mathbf{Z}} = \mathbf{Z} + \gamma \, \mathbf{E}^{(L_1)}

    (each step clamped to :math:`[-1, 1]` and :math:`\gamma_i = \sigma / \lVert \mathbf{e}^{(L_1)}_i
    \rVert_1`, :math:`\sigma` the mean training error norm, with ``autoscale``; else the training
    rows reset to :math:`\mathbf{e}^{(0)}` after each step and :math:`\gamma` = ``scale``);

    **smooth** propagates the corrected predictions with the training rows set to their labels,

    .. math::
        \hat{\mathbf{z}}^{(0)}_i = \begin{cases} \mathbf{y}_i & i \in \mathcal{T} \\
        \hat{\mathbf{z}}_i & \text{else} \end{cases}, \qquad
        \hat{\mathbf{Z}}^{(\ell)} = \alpha_2 \mathbf{S} \hat{\mathbf{Z}}^{(\ell-1)}
        + (1 - \alpha_2) \hat{\mathbf{Z}}^{(0)}

    (clamped to :math:`[0, 1]`), giving :math:`\hat{\mathbf{Z}}^{(L_2)}`.

    Args:
        num_correction_layers (int): :math:`L_1`.
        correction_alpha (float): :math:`\alpha_1`.
        num_smoothing_layers (int): :math:`L_2`.
        smoothing_alpha (float): :math:`\alpha_2`.
        autoscale (bool, optional): set :math:`\gamma` per node from the errors. (default: ``True``)
        scale (float, optional): the fixed :math:`\gamma` without ``autoscale``. (default: ``1.0``)

    Shapes:
        - **input:** ``y_soft`` :math:`(|\mathcal{V}|, C)`; ``y_true`` :math:`(|\mathcal{T}|)` class
          ids or :math:`(|\mathcal{T}|, C)`; ``mask`` :math:`(|\mathcal{V}|)` bool or
          :math:`(|\mathcal{T}|)` indices; ``edge_index`` as :class:`LabelPropagation` takes it;
          ``edge_weight`` :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** :math:`(|\mathcal{V}|, C)`
    """

    def __init__(self, num_correction_layers: int, correction_alpha: float, num_smoothing_layers: int,
                 smoothing_alpha: float, autoscale: bool = True, scale: float = 1.0):
        super().__init__()
        self.autoscale = autoscale
        self.scale = scale
        self.prop1 = LabelPropagation(num_correction_layers, correction_alpha)
        self.prop2 = LabelPropagation(num_smoothing_layers, smoothing_alpha)

    def forward(self, y_soft: Tensor, *args: Any) -> Tensor:
        """:meth:`correct`, then :meth:`smooth` of its result (same further arguments)."""
        return self.smooth(self.correct(y_soft, *args), *args)

    def correct(self, y_soft: Tensor, y_true: Tensor, mask: Tensor, edge_index: Any,
                edge_weight: Tensor | None = None) -> Tensor:
        """``y_soft`` plus the propagated training errors (scaled)."""
        y_true, count = _training_labels(y_soft, y_true, mask)
        error = torch.zeros_like(y_soft)
        error[mask] = y_true - y_soft[mask]
        if self.autoscale:
            spread = self.prop1(error, edge_index, edge_weight=edge_weight, post_step=lambda e: e.clamp_(-1.0, 1.0))
            sigma = error[mask].abs().sum() / count
            scale = sigma / spread.abs().sum(dim=1, keepdim=True)
            scale[scale.isinf() | (scale > 1000)] = 1.0  # nodes the errors did not reach
            return y_soft + scale * spread

        def keep_training_errors(e: Tensor) -> Tensor:
            e[mask] = error[mask]
            return e

        spread = self.prop1(error, edge_index, edge_weight=edge_weight, post_step=keep_training_errors)
        return y_soft + self.scale * spread

    def smooth(self, y_soft: Tensor, y_true: Tensor, mask: Tensor, edge_index: Any,
               edge_weight: Tensor | None = None) -> Tensor:
        """The label propagation of ``y_soft`` with the training rows set to ``y_true``."""
        y_true, _ = _training_labels(y_soft, y_true, mask)
        y_soft = y_soft.clone()
        y_soft[mask] = y_true
        return self.prop2(y_soft, edge_index, edge_weight=edge_weight)

    def __repr__(self) -> str:
        correct, smooth = self.prop1, self.prop2
        return (f"{type(self).__name__}(\n"
                f"  correct: num_layers={correct.num_layers}, alpha={correct.alpha}\n"
                f"  smooth:  num_layers={smooth.num_layers}, alpha={smooth.alpha}\n"
                f"  autoscale={self.autoscale}, scale={self.scale}\n"
                ")")


def _training_labels(y_soft: Tensor, y_true: Tensor, mask: Tensor) -> tuple[Tensor, int]:
    """``y_true`` as rows like ``y_soft``'s (class ids one-hot encoded) and the number of training
    nodes, after checking they agree with ``mask``."""
    if not isinstance(y_soft, Tensor) or not y_soft.is_floating_point() or y_soft.dim() != 2:
        got = (f"{y_soft.dtype} of shape {list(y_soft.shape)}" if isinstance(y_soft, Tensor)
               else type(y_soft).__name__)
        raise TypeError(f"{WHO} expects y_soft as floating-point scores [N, C], got {got}")
    check_mask(mask, y_soft.shape[0], WHO)
    count = int(mask.sum()) if mask.dtype == torch.bool else mask.shape[0]
    if not isinstance(y_true, Tensor) or y_true.shape[0] != count:
        raise ValueError(f"{WHO}: y_true must have one row per training node ({count}), got "
                         f"{list(getattr(y_true, 'shape', []))}")
    if y_true.dtype == torch.long and y_true.shape[0] == y_true.numel():
        classes = y_soft.shape[-1]
        y_true = y_true.reshape(-1)
        if y_true.numel() and (int(y_true.min()) < 0 or int(y_true.max()) >= classes):
            raise ValueError(f"{WHO}: class ids in y_true must lie in [0, {classes})")
        return torch.nn.functional.one_hot(y_true, classes).to(y_soft.dtype), count
    return y_true, count
