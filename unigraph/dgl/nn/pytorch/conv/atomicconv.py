r"""DGL's ``AtomicConv``: atomic convolution (https://arxiv.org/abs/1703.10603).

Radial filters :math:`k = 1..K` turn the distance :math:`r_{ji}` of each edge :math:`j \to i`
into

.. math::
    e_{ji}^k = \exp\big(-\gamma_k (r_{ji} - \mu_k)^2\big) \cdot
               \begin{cases} \tfrac12\big(\cos(\pi r_{ji} / c_k) + 1\big) & r_{ji} \le c_k \\
                             0 & \text{otherwise} \end{cases}

(the authors' implementation, as DGL follows it), and each atom pools them per atom type
:math:`t`:

.. math::
    p_{i}^{t,k} = \sum_{j \in N(i)} z_j^t \, e_{ji}^k, \qquad
    z_j^t = \mathbb{1}[\text{feat}_j = \text{features\_to\_use}_t] \text{ (or } z_j = \text{feat}_j
    \text{ without ``features\_to\_use``)}

output ``[N, T * K]``, type-major (column ``t * K + k``), zero for atoms without in-edges. The
pooling is one broadcast g-SpMM ``u_mul_e`` (``[N, T, 1]`` by ``[E, 1, K]``).

Parameters as DGL's: ``radial_pooling.interaction_cutoffs`` (:math:`c`),
``radial_pooling.rbf_kernel_means`` (:math:`\mu`), ``radial_pooling.rbf_kernel_scaling``
(:math:`\gamma`), each ``[K, 1, 1]`` and learnable, initialised from the constructor's tensors;
``features_to_use`` a frozen parameter ``[T]``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_homogeneous


class RadialPooling(nn.Module):
    """The :math:`K` radial filters: distances ``[E, 1]`` -> ``[K, E, 1]``."""

    def __init__(self, interaction_cutoffs: Tensor, rbf_kernel_means: Tensor, rbf_kernel_scaling: Tensor):
        super().__init__()
        sizes = [t.numel() for t in (interaction_cutoffs, rbf_kernel_means, rbf_kernel_scaling)]
        if len(set(sizes)) != 1:
            raise DGLError("AtomicConv: interaction_cutoffs, rbf_kernel_means and rbf_kernel_scaling must hold one "
                           f"value per radial filter each; got {sizes} values")
        self.interaction_cutoffs = nn.Parameter(interaction_cutoffs.reshape(-1, 1, 1))
        self.rbf_kernel_means = nn.Parameter(rbf_kernel_means.reshape(-1, 1, 1))
        self.rbf_kernel_scaling = nn.Parameter(rbf_kernel_scaling.reshape(-1, 1, 1))

    def forward(self, distances: Tensor) -> Tensor:
        gaussian = torch.exp(-self.rbf_kernel_scaling * (distances - self.rbf_kernel_means) ** 2)
        smooth = 0.5 * (torch.cos(math.pi * distances / self.interaction_cutoffs) + 1)
        cutoff = torch.where(distances <= self.interaction_cutoffs, smooth, torch.zeros_like(smooth))
        return gaussian * cutoff


class AtomicConv(nn.Module):
    """Args (DGL's): ``interaction_cutoffs``, ``rbf_kernel_means``, ``rbf_kernel_scaling``
    (tensors ``[K]``: :math:`c`, :math:`\\mu`, :math:`\\gamma`), ``features_to_use`` (None or a
    tensor ``[T]`` of atom types, e.g. atomic numbers).

    Shapes: ``feat`` ``[N, 1]`` (the atom types; any ``[N, F]`` without ``features_to_use``),
    ``distances`` ``[E, 1]`` -> ``[N, T * K]`` (``T`` = 1, or ``F``, without ``features_to_use``).
    One node set (a block or a bipartite graph is refused, as DGL's layer fails on them).
    """

    def __init__(self, interaction_cutoffs: Tensor, rbf_kernel_means: Tensor, rbf_kernel_scaling: Tensor,
                 features_to_use: Tensor | None = None):
        super().__init__()
        self.radial_pooling = RadialPooling(interaction_cutoffs, rbf_kernel_means, rbf_kernel_scaling)
        if features_to_use is None:
            self.num_channels, self.features_to_use = 1, None
        else:
            if not isinstance(features_to_use, Tensor) or features_to_use.dim() != 1:
                raise DGLError("AtomicConv: features_to_use must be None or a 1-D tensor of atom types")
            self.num_channels = len(features_to_use)
            self.features_to_use = nn.Parameter(features_to_use, requires_grad=False)

    def _check_inputs(self, graph, feat: Tensor, distances) -> None:
        if not feat.is_floating_point():
            raise TypeError(f"AtomicConv: feat must be a floating-point tensor (as DGL documents), got {feat.dtype}")
        if self.features_to_use is not None and feat.shape[1] != 1:
            raise DGLError(f"AtomicConv with features_to_use takes one atom type per node, feat [N, 1]; got "
                           f"{list(feat.shape)}")
        if not isinstance(distances, Tensor) or distances.shape != (graph.num_edges, 1):
            raise DGLError(f"AtomicConv: distances must be [num_edges={graph.num_edges}, 1], got "
                           f"{list(distances.shape) if isinstance(distances, Tensor) else type(distances).__name__}")

    def forward(self, graph, feat: Tensor, distances: Tensor) -> Tensor:
        graph = check_homogeneous(graph, feat, "AtomicConv", min_dim=2, max_dim=2)
        self._check_inputs(graph, feat, distances)
        filters = self.radial_pooling(distances).to(feat)             # [K, E, 1]
        if self.features_to_use is not None:
            feat = (feat == self.features_to_use).to(feat)            # [N, T] one-hot types
        edge = filters.squeeze(-1).t().unsqueeze(1)                   # [E, 1, K]
        pooled = ops.gspmm(graph, "u_mul_e", "sum", feat.unsqueeze(-1), edge)   # [N, T, K]
        return pooled.reshape(graph.num_nodes, -1)
