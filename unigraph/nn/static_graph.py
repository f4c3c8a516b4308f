"""Static graphs: one graph shared by a batch of feature sets, ``x`` of shape ``[B, N, F]``
(PyG's layers with ``node_dim=-2`` accept it: nodes are the second-to-last dimension).

The layers run such a call on the node-major view ``[N, B * F]``: every aggregation is linear
in the rows and acts on each column alike, so aggregating the ``B`` feature sets side by side
is aggregating each one (the same numbers as ``B`` separate calls), and the graph is read once.
"""
from __future__ import annotations

import torch
from torch import Tensor


def is_static(x) -> bool:
    """Whether ``x`` is a dense ``[B, N, F]`` batch of feature sets over one graph."""
    return isinstance(x, Tensor) and x.layout == torch.strided and x.dim() == 3


def node_major(x: Tensor) -> Tensor:
    """``[B, N, F]`` -> ``[N, B * F]``."""
    batch, nodes, width = x.shape
    return x.transpose(0, 1).reshape(nodes, batch * width)


def batch_major(out: Tensor, batch: int) -> Tensor:
    """``[N, B * F]`` -> ``[B, N, F]``."""
    return out.reshape(out.shape[0], batch, -1).transpose(0, 1)
