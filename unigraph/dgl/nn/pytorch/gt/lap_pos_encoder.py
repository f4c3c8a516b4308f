r"""DGL's ``LapPosEncoder``: learned Laplacian positional encoding (GraphGPS,
https://arxiv.org/abs/2205.12454).

For node :math:`i` and each of its :math:`k` eigenpairs :math:`(\lambda_j, u_j)` (padding pairs
are NaN eigenvalues):

.. math::
    p_{ij} = W\,\mathrm{BN}\big([u_j(i), \lambda_j]\big) + b, \qquad
    z_i = \mathrm{MLP}_{post}\Big(\sum_{j \text{ not padding}} \mathrm{Enc}(p_{i\cdot})_j\Big)

``Enc`` is a ``Transformer`` encoder over the :math:`k` pairs (padding pairs masked out of the
attention) or a ``DeepSet`` (the same MLP on every pair); the optional batch norm (``batch_norm``)
is over the raw pairs, the optional MLP (``num_post_layer`` layers) after the sum. NaNs in the input
are read as 0. Parameters as DGL's: ``linear``, ``pe_encoder``, ``raw_norm``, ``post_mlp``; PyTorch's
default initialisation drawn in DGL's order. DGL casts the input to float32; here it is cast to
the parameters' dtype (the same for a float32 model; a float64 model also works).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

MODEL_TYPES = ("Transformer", "DeepSet")


def _widening_tail(dim: int, num_layers: int) -> list[nn.Module]:
    """What follows the first ``linear -> 2 dim`` and its ReLU in DGL's MLPs of ``num_layers``
    (>= 2) layers: ``2 dim -> 2 dim`` linears, then ``2 dim -> dim``, each followed by a ReLU."""
    layers: list[nn.Module] = []
    for _ in range(num_layers - 2):
        layers += [nn.Linear(2 * dim, 2 * dim), nn.ReLU()]
    return layers + [nn.Linear(2 * dim, dim), nn.ReLU()]


def _post_mlp(dim: int, num_layers: int) -> nn.Sequential:
    if num_layers == 1:
        return nn.Sequential(nn.Linear(dim, dim), nn.ReLU())
    return nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), *_widening_tail(dim, num_layers))


class LapPosEncoder(nn.Module):
    """Args (DGL's): ``model_type`` (``"Transformer"`` or ``"DeepSet"``), ``num_layer``, ``k``
    (eigenpairs per node), ``dim`` (output width), ``n_head`` (Transformer heads),
    ``batch_norm``, ``num_post_layer`` (0: no MLP after the sum).

    Shapes: ``eigvals`` ``[N, k]`` (the graph's eigenvalues repeated per node, NaN for padding),
    ``eigvecs`` ``[N, k]`` -> ``[N, dim]``.
    """

    def __init__(self, model_type: str, num_layer: int, k: int, dim: int, n_head: int = 1,
                 batch_norm: bool = False, num_post_layer: int = 0):
        super().__init__()
        if model_type not in MODEL_TYPES:
            raise ValueError(f"LapPosEncoder: model_type must be one of {MODEL_TYPES}, got {model_type!r}")
        if num_layer < 1:
            raise ValueError(f"LapPosEncoder: num_layer must be >= 1, got {num_layer}")
        self.model_type, self.k = model_type, k
        # DGL draws this layer first in every case (then replaces it for a deep DeepSet); drawing it
        # too keeps a seeded model equal to DGL's
        self.linear = nn.Linear(2, dim)
        if model_type == "Transformer":
            layer = nn.TransformerEncoderLayer(d_model=dim, nhead=n_head, batch_first=True)
            self.pe_encoder = nn.TransformerEncoder(layer, num_layers=num_layer)
        elif num_layer == 1:
            self.pe_encoder = nn.Sequential(nn.ReLU())
        else:
            self.linear = nn.Linear(2, 2 * dim)
            self.pe_encoder = nn.Sequential(nn.ReLU(), *_widening_tail(dim, num_layer))
        self.raw_norm = nn.BatchNorm1d(k) if batch_norm else None
        self.post_mlp = _post_mlp(dim, num_post_layer) if num_post_layer > 0 else None

    def forward(self, eigvals: Tensor, eigvecs: Tensor) -> Tensor:
        if eigvals.dim() != 2 or eigvals.shape != eigvecs.shape or eigvals.shape[1] != self.k:
            raise ValueError(f"LapPosEncoder: eigvals and eigvecs must both be [N, k={self.k}], got "
                             f"{list(eigvals.shape)} and {list(eigvecs.shape)}")
        pairs = torch.stack((eigvecs, eigvals), dim=2).to(self.linear.weight.dtype)   # [N, k, 2]
        empty = torch.isnan(pairs)
        pairs = pairs.masked_fill(empty, 0)
        padding = empty[:, :, 1]                                   # the NaN eigenvalues
        if self.raw_norm is not None:
            pairs = self.raw_norm(pairs)
        pairs = self.linear(pairs)
        if self.model_type == "Transformer":
            pairs = self.pe_encoder(src=pairs, src_key_padding_mask=padding)
        else:
            pairs = self.pe_encoder(pairs)
        encoding = pairs.masked_fill(padding.unsqueeze(2), 0).sum(dim=1)
        return self.post_mlp(encoding) if self.post_mlp is not None else encoding
