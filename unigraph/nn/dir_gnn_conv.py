"""DirGNNConv: message passing along and against the edge direction (Rossi et al.)."""
from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor

from unigraph.call_forms import is_graph_object, is_sparse_adjacency, resolve
from unigraph.graph import Graph
from unigraph.nn.input_cache import InputCache


class DirGNNConv(torch.nn.Module):
    r"""The directed-graph wrapper from the `"Edge Directionality Improves Learning on
    Heterophilic Graphs" <https://arxiv.org/abs/2305.10498>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \alpha \, \mathrm{conv}_{out}(\mathbf{X}, \mathbf{A}^{\top})_i
        + (1 - \alpha) \, \mathrm{conv}_{in}(\mathbf{X}, \mathbf{A})_i
        + \mathbf{W} \mathbf{x}_i + \mathbf{b}

    where :math:`\mathrm{conv}_{in}` passes messages along the edges and :math:`\mathrm{conv}_{out}`
    against them (both copies of ``conv``, trained separately), and the last term is the root
    weight (``lin``, with ``root_weight``). The copies are built with ``add_self_loops`` and
    ``root_weight`` off where ``conv`` has those attributes (the wrapper adds the root itself).

    ``conv`` may be any layer called as ``conv(x, edge_index)``: unigraph's or PyG's own. The
    reversed ``edge_index`` is kept while the same unchanged tensor comes back, so the inner layer
    sees the same reversed tensor (and unigraph's call-form cache hits) on every call of a
    full-batch loop.

    Args:
        conv (torch.nn.Module): the layer to run in both directions; it needs ``in_channels`` and
            ``out_channels`` attributes (ints) for the root weight.
        alpha (float, optional): the weight :math:`\alpha` of the reversed direction.
            (default: ``0.5``)
        root_weight (bool, optional): add the transformed root features. (default: ``True``)

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (a ``[2, E]`` tensor; here also a ``SparseTensor``
          or torch sparse ``adj_t``, transposed for the reversed direction) or ``(g, x)`` with a
          unigraph ``Graph`` (then ``conv`` must take that form too); node features
          :math:`(|\mathcal{V}|, F_{in})` or whatever ``conv`` takes (:math:`(B, |\mathcal{V}|,
          F_{in})` for a static graph)
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})`
    """

    def __init__(self, conv: torch.nn.Module, alpha: float = 0.5, root_weight: bool = True):
        super().__init__()
        who = "DirGNNConv"
        if not isinstance(conv, torch.nn.Module):
            raise TypeError(f"{who} wraps a layer (a torch.nn.Module), got {type(conv).__name__}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise TypeError(f"{who} alpha must be a number (the weight of the reversed direction), got {alpha!r}")
        self.alpha = alpha
        self.root_weight = root_weight
        self.conv_in = copy.deepcopy(conv)
        self.conv_out = copy.deepcopy(conv)
        for name in ("add_self_loops", "root_weight"):   # the wrapper's own root replaces theirs
            if hasattr(conv, name):
                setattr(self.conv_in, name, False)
                setattr(self.conv_out, name, False)
        self.lin = torch.nn.Linear(*_channels(conv, who)) if root_weight else None
        self._reversed = InputCache()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.conv_in.reset_parameters()
        self.conv_out.reset_parameters()
        if self.lin is not None:
            self.lin.reset_parameters()

    def forward(self, x: Any, edge_index: Any) -> Tensor:
        if is_graph_object(x):   # unigraph's form: conv(g, x)
            g = resolve("DirGNNConv", x, edge_index).graph
            x_in = self.conv_in(g, edge_index)
            x_out = self.conv_out(_reverse(g), edge_index)
            features = edge_index
        else:
            reversed_ = self._reverse_adjacency(edge_index)   # (checks edge_index before any layer runs)
            x_in = self.conv_in(x, edge_index)
            x_out = self.conv_out(x, reversed_)
            features = x
        out = self.alpha * x_out + (1 - self.alpha) * x_in
        if self.lin is not None:
            out = out + self.lin(features)
        return out

    def _reverse_adjacency(self, edge_index: Any) -> Any:
        """``edge_index`` with every edge reversed. A ``[2, E]`` tensor's reversal is kept while the
        same unchanged tensor (the same object, in-place version and storage) comes back; a
        sparse adjacency is transposed on every call (its values may change without a version)."""
        if is_sparse_adjacency(edge_index):   # adj_t[dst, src] -> its transpose
            return edge_index.t()
        if not (isinstance(edge_index, Tensor) and edge_index.dim() == 2 and edge_index.shape[0] == 2):
            got = list(edge_index.shape) if isinstance(edge_index, Tensor) else type(edge_index).__name__
            raise ValueError(f"DirGNNConv expects edge_index of shape [2, E] (or a sparse adjacency), got {got}")
        found = self._reversed.get((edge_index,))
        if found is None:
            found = edge_index.flip([0])
            self._reversed.put((edge_index,), found)
        return found

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.conv_in}, alpha={self.alpha})"


def _channels(conv: torch.nn.Module, who: str) -> tuple[int, int]:
    """``(in_channels, out_channels)`` of ``conv``, for the root weight."""
    widths = (getattr(conv, "in_channels", None), getattr(conv, "out_channels", None))
    if not all(isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in widths):
        raise ValueError(f"{who}(root_weight=True) sizes its root weight from conv.in_channels and conv.out_channels, "
                         f"which must be positive ints; got {widths} from {type(conv).__name__} (pass "
                         "root_weight=False for a layer without them)")
    return widths


def _reverse(g: Graph) -> Graph:
    """``g`` reversed, kept on ``g`` (its formats and caches persist across calls)."""
    return g.memo(("unigraph.nn", "reversed"), g.reverse)
