"""Which path a graph operation takes to its kernel: the registered custom operator (while
compiling or tracing) or the autograd Function directly (eager), see :mod:`unigraph.ops.custom`.
Below both the forward calls and the backward formulas (:mod:`unigraph.ops.gradients`), which
ask the same question."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

_EAGER_TYPES = (torch.Tensor, torch.nn.Parameter)


def traced(*tensors: Optional[Tensor]) -> bool:
    """Whether to dispatch through the custom operator: while compiling, and whenever an input is
    a tracing tensor (fake or functional tensors of AOTAutograd, export or opcheck), whose data a
    kernel cannot read."""
    if torch.compiler.is_compiling():
        return True
    for t in tensors:   # (a loop, not a generator: every op call reads it)
        if t is not None and t.__class__ not in _EAGER_TYPES:
            return True
    return False
