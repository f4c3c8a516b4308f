"""DGL's feature initializers (``dgl.init``): what fills the rows of a feature that a partial write
(``g.nodes[ids].data["h"] = ...``) or a message pass created but did not reach.

An initializer is called as ``init(shape, dtype, device, id_range)`` and returns a tensor of that
shape (``id_range`` is the slice of ids being filled, as in DGL)."""
from __future__ import annotations

import torch


def zero_initializer(shape, dtype=torch.float32, ctx=None, id_range=None):
    """Zeros: DGL's default."""
    return torch.zeros(shape, dtype=dtype, device=ctx)
