r"""Label propagation (`"Learning from Labeled and Unlabeled Data with Label Propagation"
<http://mlg.eng.cam.ac.uk/zoubin/papers/CMU-CALD-02-107.pdf>`_), in the form of `"Combining Label
Propagation And Simple Models Out-performs Graph Neural Networks" <https://arxiv.org/abs/2010.13993>`_.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

import torch
from torch import Tensor

from unigraph.call_forms import resolve
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import edge_input
from unigraph.nn.gcn_conv import gcn_norm

WHO = "LabelPropagation"


class LabelPropagation(MessagePassing):
    r"""Spreads the known labels over the graph, ``num_layers`` times:

    .. math::
        \mathbf{Y}^{(0)} = \mathbf{M}\mathbf{Y}, \qquad
        \mathbf{Y}^{(\ell)} = f\left(\alpha \, \mathbf{D}^{-1/2} \mathbf{A} \mathbf{D}^{-1/2}
        \mathbf{Y}^{(\ell-1)} + (1 - \alpha) \, \mathbf{Y}^{(0)}\right)

    with :math:`\mathbf{M}` the mask (rows of unlabelled nodes zeroed), :math:`\mathbf{D}` the
    in-degrees (no self-loops are added) and :math:`f` the ``post_step`` (clamping to
    :math:`[0, 1]` by default). Given edge weights (``edge_weight``, or the values of a
    ``SparseTensor``) are used as they are, without the normalization; the values of a torch sparse
    adjacency are normalized. Runs without gradients.

    Args:
        num_layers (int): the number of propagations :math:`L`.
        alpha (float): the coefficient :math:`\alpha`.

    Shapes:
        - **input:** labels ``y`` :math:`(|\mathcal{V}|)` (class ids, one-hot encoded) or
          :math:`(|\mathcal{V}|, C)` floating point; ``edge_index`` (a ``[2, E]`` tensor, a
          ``SparseTensor`` or a torch sparse ``adj_t``, or a graph object); ``mask``
          :math:`(|\mathcal{V}|)` bool or an index vector *(optional)*; ``edge_weight``
          :math:`(|\mathcal{E}|)` *(optional, with an edge_index only)*
        - **output:** :math:`(|\mathcal{V}|, C)`
    """

    def __init__(self, num_layers: int, alpha: float):
        super().__init__(aggr="add")
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0:
            raise ValueError(f"{WHO}: num_layers must be a non-negative int, got {num_layers!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
            raise TypeError(f"{WHO}: alpha must be a real number, got {alpha!r}")
        self.num_layers = num_layers
        self.alpha = alpha

    @torch.no_grad()
    def forward(self, y: Tensor, edge_index: Any, mask: Tensor | None = None, edge_weight: Tensor | None = None,
                post_step: Callable[[Tensor], Tensor] | None = None) -> Tensor:
        y = _labels(y)
        g, weights = self._weighted_graph(y, edge_index, edge_weight)
        out = y if mask is None else _masked(y, mask)
        restart = (1 - self.alpha) * out
        for _ in range(self.num_layers):  # (over layers, not nodes)
            out = self.propagate(g, x=out, edge_weight=weights)
            out.mul_(self.alpha).add_(restart)
            out = out.clamp_(0.0, 1.0) if post_step is None else post_step(out)
        return out

    def _weighted_graph(self, y: Tensor, edge_index: Any, edge_weight: Tensor | None) -> tuple[Any, Tensor]:
        """The graph and the weight of each edge: the given weights, else the symmetric normalization."""
        call = resolve(WHO, y, edge_index)
        g, values = call.graph, call.edge_weight
        if g.is_bipartite or g.num_dst_nodes != y.shape[0]:
            raise ValueError(f"{WHO} needs a square adjacency over the {y.shape[0]} labelled nodes, got "
                             f"{g.num_src_nodes} sources and {g.num_dst_nodes} destinations")
        if call.form in ("sparse_tensor", "torch_sparse"):
            if edge_weight is not None:
                raise ValueError(f"{WHO} got edge_weight with a sparse adjacency; give the weights as the "
                                 "adjacency's values instead")
            if call.form == "sparse_tensor" and values is not None:
                return g, values  # a valued SparseTensor is taken as already normalized
            # unweighted SparseTensor (ones, in the default dtype) or torch sparse values: normalized
            dtype = torch.get_default_dtype() if values is None else values.dtype
            return gcn_norm(g, values, dtype, call.form, add_self_loops=False)
        if edge_weight is not None:
            return g, edge_input(g, edge_weight, WHO, "edge_weight", vector=True)
        # the normalized weights of ones in the default dtype, as PyG (they promote with y's dtype)
        return gcn_norm(g, None, torch.get_default_dtype(), call.form, add_self_loops=False)

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_layers={self.num_layers}, alpha={self.alpha})"


def _labels(y: Tensor) -> Tensor:
    """``y`` as ``[N, C]`` scores: a vector of class ids (int64) is one-hot encoded."""
    if not isinstance(y, Tensor):
        raise TypeError(f"{WHO} expects y to be a tensor, got {type(y).__name__}")
    if y.dtype == torch.long and y.shape[0] == y.numel():
        y = y.reshape(-1)
        if y.numel() and int(y.min()) < 0:
            raise ValueError(f"{WHO}: class ids in y must be non-negative, got {int(y.min())}")
        return torch.nn.functional.one_hot(y, int(y.max()) + 1 if y.numel() else 0).to(torch.get_default_dtype())
    if not y.is_floating_point() or y.dim() != 2:
        raise TypeError(f"{WHO} expects y as int64 class ids [N] or floating-point scores [N, C], got "
                        f"{y.dtype} of shape {list(y.shape)}")
    return y


def _masked(y: Tensor, mask: Tensor) -> Tensor:
    """``y`` with the rows outside ``mask`` (bool [N] or an index vector) zeroed."""
    check_mask(mask, y.shape[0], WHO)
    out = torch.zeros_like(y)
    out[mask] = y[mask]
    return out


def check_mask(mask: Tensor, num_nodes: int, who: str) -> None:
    """A boolean mask over the ``num_nodes`` nodes or a vector of node indices."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"{who} expects mask as a bool mask or index tensor, got {type(mask).__name__}")
    if mask.dim() != 1:
        raise ValueError(f"{who} expects a 1-D mask, got shape {list(mask.shape)}")
    if mask.dtype == torch.bool:
        if mask.numel() != num_nodes:
            raise ValueError(f"{who}: the bool mask has {mask.numel()} entries for {num_nodes} nodes")
    elif mask.is_floating_point() or mask.is_complex():
        raise TypeError(f"{who} expects mask to be bool or integer, got {mask.dtype}")
    elif mask.numel() and (int(mask.min()) < -num_nodes or int(mask.max()) >= num_nodes):
        raise ValueError(f"{who}: mask indices must lie in [0, {num_nodes}), got "
                         f"[{int(mask.min())}, {int(mask.max())}]")
