"""MaskLabel: label embedding and masking of UniMP (Shi et al., 2021), PyG's interface."""
import torch
from torch import Tensor

_METHODS = ("add", "concat")


class MaskLabel(torch.nn.Module):
    r"""Merges the embedded labels of the nodes in ``mask`` into their features, from "Masked
    Label Prediction: Unified Message Passing Model for Semi-Supervised Classification":

    .. math::
        \mathbf{x}'_i = \mathbf{x}_i + [i \in \mathcal{M}]\,\mathbf{e}_{y_i}
        \quad(\text{add}), \qquad
        \mathbf{x}'_i = \mathbf{x}_i \,\Vert\, [i \in \mathcal{M}]\,\mathbf{e}_{y_i}
        \quad(\text{concat})

    with :math:`\mathbf{e}_c` a learnable embedding per class.

    Args:
        num_classes (int): number of classes.
        out_channels (int): embedding width; for ``"add"`` it must equal the feature width.
        method (str, optional): ``"add"`` or ``"concat"``. (default: ``"add"``)

    Shapes:
        - **input:** node features :math:`(N, F)`, labels :math:`(N)`, boolean mask :math:`(N)`
        - **output:** :math:`(N, F)` for ``"add"``, :math:`(N, F + F_{out})` for ``"concat"``
    """

    def __init__(self, num_classes: int, out_channels: int, method: str = "add"):
        super().__init__()
        if method not in _METHODS:
            raise ValueError(f"'method' must be either 'add' or 'concat' (got '{method}')")
        self.method = method
        self.emb = torch.nn.Embedding(num_classes, out_channels)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draw the label embeddings (standard normal)."""
        self.emb.reset_parameters()

    def forward(self, x: Tensor, y: Tensor, mask: Tensor) -> Tensor:
        """Features with the labels of the masked nodes merged in."""
        if y.size(0) != x.size(0) or mask.size(0) != x.size(0):
            raise ValueError(f"MaskLabel: x, y and mask need one row per node, got "
                             f"{x.size(0)}, {y.size(0)} and {mask.size(0)}")
        label_emb = self.emb(y[mask])
        if self.method == "concat":
            extra = x.new_zeros(x.size(0), self.emb.weight.size(-1))
            extra[mask] = label_emb
            return torch.cat([x, extra], dim=-1)
        if label_emb.size(-1) != x.size(-1):
            raise ValueError(f"MaskLabel: method='add' needs out_channels == feature width, got "
                             f"{label_emb.size(-1)} and {x.size(-1)}")
        out = x.clone()
        out[mask] = out[mask] + label_emb
        return out

    @staticmethod
    def ratio_mask(mask: Tensor, ratio: float) -> Tensor:
        """A copy of ``mask`` in which each ``True`` entry stays ``True`` with probability
        ``ratio``."""
        out = mask.clone()
        out[mask] = torch.rand(int(mask.sum()), device=mask.device) < ratio
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"
