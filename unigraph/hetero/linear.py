"""TypedLinear: one linear projection per node type, run as one grouped product."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter
from torch.nn.parameter import UninitializedParameter

from unigraph.hetero.graph import check_type_name
from unigraph.hetero.grouped import segment_matmul

LAZY = -1


class TypedLinear(torch.nn.Module):
    r"""A linear layer per node type (PyG's ``HeteroDictLinear``):

    .. math::
        \mathbf{y}_i = \mathbf{x}_i \mathbf{W}_{\tau(i)} + \mathbf{b}_{\tau(i)}

    for every node ``i`` of type :math:`\tau(i)`. The inputs of all types are stacked type after
    type and projected by one :func:`~unigraph.hetero.grouped.segment_matmul`, not a loop of small
    products. Types may have different input widths: narrower inputs are padded with zero columns
    to the widest, and the weight rows they never meet stay at zero and get zero gradients.

    Args:
        in_channels (int or dict): input width of every type, or ``{type: width}``.
        out_channels (int): output width.
        types (list of str): the node types, in the order of the weight's groups (required when
            ``in_channels`` is an int; else the dict's order).
        bias (bool): learn a bias per type. (default: ``True``)

    Each type's weight and bias start as ``torch.nn.Linear``'s (uniform in
    :math:`\pm 1/\sqrt{\text{in}_t}`).

    Lazy widths (PyG's ``-1``, for every type or some): the weight is an
    ``UninitializedParameter`` until the first call, which sizes it from the widths it sees and
    initializes those types' rows (an optimizer built before keeps working: the parameter object
    is materialized in place). A type first seen later is initialized then, if it is no wider than
    the weight (else ``ValueError``: the weight's shape is fixed at the first call).

    Shapes:
        - **input:** ``{type: [N_t, in_t]}`` (types may be left out)
        - **output:** ``{type: [N_t, out]}`` for the types given
    """

    def __init__(self, in_channels: int | Mapping[str, int], out_channels: int, types: Sequence[str] | None = None,
                 bias: bool = True):
        super().__init__()
        if isinstance(in_channels, Mapping):
            widths = dict(in_channels)
            if types is not None and list(types) != list(widths):
                raise ValueError(f"types {list(types)} differ from the keys of in_channels {list(widths)}")
        else:
            if types is None:
                raise ValueError("TypedLinear needs types=[...] when in_channels is one int")
            widths = {t: in_channels for t in types}
        if not widths:
            raise ValueError("TypedLinear needs at least one type")
        for t, width in widths.items():
            check_type_name(t, "a node type")
            if isinstance(width, bool) or not isinstance(width, int) or (width <= 0 and width != LAZY):
                raise ValueError(f"TypedLinear in_channels[{t!r}] must be a positive int or -1 (inferred on the "
                                 f"first call), got {width!r}")
        if isinstance(out_channels, bool) or not isinstance(out_channels, int) or out_channels <= 0:
            raise ValueError(f"TypedLinear out_channels must be a positive int, got {out_channels!r}")
        self.in_channels = widths
        self.out_channels = out_channels
        self.types = list(widths)
        if LAZY in widths.values():
            self._max_in = LAZY
            self.weight = UninitializedParameter()
        else:
            self._max_in = max(widths.values())
            self.weight = Parameter(torch.empty(len(self.types), self._max_in, out_channels))
        self.bias = Parameter(torch.empty(len(self.types), out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if isinstance(self.weight, UninitializedParameter):
            return  # sized and initialized by the first call
        with torch.no_grad():
            self.weight.zero_()
            for ntype, width in self.in_channels.items():
                if width != LAZY:
                    self._reset_type(ntype)

    def _reset_type(self, ntype: str) -> None:
        t, width = self.types.index(ntype), self.in_channels[ntype]
        bound = 1.0 / math.sqrt(width)
        with torch.no_grad():
            self.weight[t].zero_()
            self.weight[t, :width].uniform_(-bound, bound)
            if self.bias is not None:
                self.bias[t].uniform_(-bound, bound)

    def infer_widths(self, x_dict: Mapping[str, Tensor]) -> None:
        """Lazy widths from the features (see the class docstring); a no-op once all are known."""
        seen = {t: x.shape[-1] for t, x in x_dict.items()
                if t in self.in_channels and self.in_channels[t] == LAZY and isinstance(x, Tensor) and x.dim() == 2}
        if not seen:
            return
        if isinstance(self.weight, UninitializedParameter):
            known = [w for w in self.in_channels.values() if w != LAZY]
            self._max_in = max(known + list(seen.values()))
            like = next(iter(x_dict.values()))
            self.weight.materialize((len(self.types), self._max_in, self.out_channels), dtype=like.dtype,
                                    device=like.device)
            with torch.no_grad():
                self.weight.zero_()
            for ntype, width in self.in_channels.items():  # types sized up front: initialized with the weight
                if width != LAZY:
                    self._reset_type(ntype)
        for ntype, width in seen.items():
            if width > self._max_in:
                raise ValueError(f"TypedLinear: node type {ntype!r} first seen with {width} features, wider than the "
                                 f"{self._max_in} its weight was sized for on the first call; give in_channels")
            self.in_channels[ntype] = width
            self._reset_type(ntype)

    def forward(self, x_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
        if not isinstance(x_dict, Mapping):
            raise TypeError(f"TypedLinear expects a dict {{node_type: features}}, got {type(x_dict).__name__}")
        self.infer_widths(x_dict)
        unknown = [t for t in x_dict if t not in self.in_channels]
        if unknown:
            raise ValueError(f"TypedLinear has no weights for node types {unknown}; it knows {self.types}")
        parts, counts, present = [], [], set()
        for ntype in self.types:
            x = x_dict.get(ntype)
            if x is None:
                counts.append(0)
                continue
            if not isinstance(x, Tensor) or x.dim() != 2 or x.shape[1] != self.in_channels[ntype]:
                raise ValueError(f"TypedLinear expects features of type {ntype!r} as [N, {self.in_channels[ntype]}], "
                                 f"got {list(getattr(x, 'shape', [])) or type(x).__name__}")
            parts.append(F.pad(x, (0, self._max_in - x.shape[1])) if x.shape[1] < self._max_in else x)
            counts.append(x.shape[0])
            present.add(ntype)
        if not parts:
            return {}
        rows = torch.cat(parts) if len(parts) > 1 else parts[0]
        out = segment_matmul(rows, counts, self.weight)
        if self.bias is not None:
            sizes = torch.tensor(counts, device=out.device)
            out = out + torch.repeat_interleave(self.bias, sizes, dim=0, output_size=out.shape[0])
        pieces = out.split(counts)
        return {ntype: piece for ntype, piece in zip(self.types, pieces) if ntype in present}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"
