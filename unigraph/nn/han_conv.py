"""HANConv: the heterogeneous graph attention network layer (Wang et al.)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from unigraph import ops
from unigraph.hetero.graph import HeteroGraph, Relation, check_relation, check_type_name
from unigraph.message_passing import MessagePassing
from unigraph.nn import hetero_forms
from unigraph.nn.checks import check_positive, check_probability, check_width, glorot_
from unigraph.nn.gat_conv import attention_dropout_mask
from unigraph.nn.lazy import LAZY, make_linear


class HANConv(MessagePassing):
    r"""The heterogeneous graph attention operator from the `"Heterogenous Graph Attention Network"
    <https://arxiv.org/abs/1903.07293>`_ paper: GAT attention within each relation (metapath),
    then a learned attention over the relations that end in a node type.

    Node-level, for relation :math:`r = (s, \cdot, t)` and every node :math:`i` of type :math:`t`
    (per head, heads concatenated):

    .. math::
        \mathbf{h}_i = \mathbf{W}_{\tau(i)} \mathbf{x}_i + \mathbf{b}_{\tau(i)}, \qquad
        \mathbf{z}^{r}_i = \mathrm{ReLU}\Big(\sum_{j \in \mathcal{N}_r(i)} \alpha^{r}_{ji}
        \mathbf{h}_j\Big), \qquad
        \alpha^{r}_{ji} = \operatorname{softmax}_{j \in \mathcal{N}_r(i)}\big(\mathrm{LeakyReLU}(
        \mathbf{a}_{r,s}^{\top} \mathbf{h}_j + \mathbf{a}_{r,t}^{\top} \mathbf{h}_i)\big)

    Semantic-level, over the relations :math:`r_1, \dots, r_R` that end in type :math:`t`:

    .. math::
        \beta_r = \operatorname{softmax}_r\Big(\mathbf{q}^{\top} \frac{1}{N_t} \sum_{i}
        \tanh(\mathbf{K} \mathbf{z}^{r}_i + \mathbf{b}_K)\Big), \qquad
        \mathbf{x}^{\prime}_i = \sum_{r} \beta_r \mathbf{z}^{r}_i

    A node type in ``x_dict`` that no relation ends in gets ``None`` (as in PyG).

    How it runs: one projection per node type, then per relation one ``ops.gat_attention`` call
    (scores, edge softmax, attention dropout and the weighted sum, fused where a backend can:
    no ``[E, H, F]`` messages); the semantic attention is a few dense ops over ``[R, N_t, F]``.

    Args:
        in_channels (int or dict): input width of every node type, or ``{type: width}``; ``-1``
            infers it on the first call.
        out_channels (int): output width (divisible by ``heads``).
        metadata (tuple): ``(node_types, relations)``, as ``HeteroData.metadata()``.
        heads (int, optional): attention heads. (default: ``1``)
        negative_slope (float, optional): LeakyReLU slope. (default: ``0.2``)
        dropout (float, optional): dropout of the node-level attention coefficients. (default: ``0``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments. The aggregation is
            always the sum (PyG passes ``aggr="add"`` itself); ``flow="target_to_source"`` is
            refused (it would swap the node types of every relation).

    Call forms: PyG's ``conv(x_dict, edge_index_dict)`` (each adjacency a ``[2, E]`` tensor, a
    ``SparseTensor`` or a torch sparse ``adj_t``; values ignored) or ``conv(hg, x_dict)`` with a
    :class:`~unigraph.HeteroGraph` (a typed block too: the destinations are the first rows of their
    type). ``return_semantic_attention_weights=True`` also returns ``{type: beta [R]}`` (``None``
    for a type without relations or without nodes).

    Shapes:
        - **input:** ``{type: [N_t, in_t]}`` and ``{(s, name, t): adjacency}``
        - **output:** ``{type: [N_t, out_channels]}`` (or ``None``)
    """

    resolves_flow = True

    def __init__(self, in_channels: int | Mapping[str, int], out_channels: int,
                 metadata: tuple[Sequence[str], Sequence[Relation]], heads: int = 1, negative_slope: float = 0.2,
                 dropout: float = 0.0, **kwargs: Any):
        who = "HANConv"
        if "aggr" in kwargs:
            raise TypeError(f"{who} always sums within a relation (PyG passes aggr='add' itself); do not pass aggr")
        super().__init__(aggr="add", node_dim=0, **kwargs)
        if self.flow != "source_to_target":
            raise ValueError(f"{who} does not support flow='target_to_source' (it would swap the node types of "
                             "every relation); add the reversed relations to the graph instead")
        if not isinstance(metadata, (tuple, list)) or len(metadata) != 2:
            raise TypeError(f"{who} metadata must be (node_types, relations), got {metadata!r}")
        node_types = [check_type_name(t, "a node type") for t in metadata[0]]
        relations = [check_relation(r) for r in metadata[1]]
        check_positive(out_channels, "out_channels", who)
        check_positive(heads, "heads", who)
        if out_channels % heads:
            raise ValueError(f"{who} out_channels ({out_channels}) must be divisible by heads ({heads})")
        if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)):
            raise ValueError(f"{who} negative_slope must be a number, got {negative_slope!r}")
        if not isinstance(in_channels, Mapping):
            in_channels = {t: in_channels for t in node_types}
        for t, width in in_channels.items():
            if width != LAZY:
                check_positive(width, f"in_channels[{t!r}]", who)
        self.heads, self.in_channels, self.out_channels = heads, dict(in_channels), out_channels
        self.negative_slope, self.metadata = negative_slope, metadata
        self.dropout = check_probability(dropout, "dropout", who)
        self.k_lin = torch.nn.Linear(out_channels, out_channels)
        self.q = Parameter(torch.empty(1, out_channels))
        self.proj = torch.nn.ModuleDict({t: make_linear(width, out_channels) for t, width in self.in_channels.items()})
        dim = out_channels // heads
        self.lin_src = torch.nn.ParameterDict({_key(r): Parameter(torch.empty(1, heads, dim)) for r in relations})
        self.lin_dst = torch.nn.ParameterDict({_key(r): Parameter(torch.empty(1, heads, dim)) for r in relations})
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.proj.values():
            lin.reset_parameters()   # (torch's Linear initialization is PyG's Linear's)
        for att in list(self.lin_src.values()) + list(self.lin_dst.values()):
            glorot_(att)
        self.k_lin.reset_parameters()
        glorot_(self.q)

    def forward(self, x_dict: Any, edge_index_dict: Any, return_semantic_attention_weights: bool = False):
        who = "HANConv"
        if hetero_forms.hetero_form(who, x_dict, edge_index_dict) == "graph":
            hg, x_dict = x_dict, edge_index_dict
            if not isinstance(x_dict, Mapping):
                raise TypeError(f"{who}(hg, x_dict) expects x_dict as {{node_type: tensor}}, got "
                                f"{type(x_dict).__name__}")
        else:
            hg = hetero_forms.hetero_graph(who, x_dict, edge_index_dict)
        projected = self._project(who, hg, x_dict)
        outputs: dict[str, list[Tensor]] = {t: [] for t in x_dict}
        for relation, graph in hg.items():
            outputs[relation[2]].append(self._relation(who, relation, graph, projected))
        out_dict, semantic = {}, {}
        for t, outs in outputs.items():
            out_dict[t], semantic[t] = self._semantic(outs)
        return (out_dict, semantic) if return_semantic_attention_weights else out_dict

    def _project(self, who: str, hg: HeteroGraph, x_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """``{type: [N_t, H, F / H]}``: every node type's features through its own projection."""
        heads = self.heads
        unknown = [t for t in x_dict if t not in self.proj]
        if unknown:
            raise ValueError(f"{who} has no projection for node types {unknown}; its metadata has {list(self.proj)}")
        missing = [t for relation in hg.relations for t in (relation[0], relation[2]) if t not in x_dict]
        if missing:
            raise ValueError(f"{who}: x_dict has no features for node types {sorted(set(missing))} of the graph's "
                             "relations")
        projected = {}
        for t, x in x_dict.items():
            if not isinstance(x, Tensor) or x.dim() != 2:
                raise ValueError(f"{who} expects x_dict[{t!r}] of shape [num_nodes, F], got "
                                 f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
            if self.in_channels[t] != LAZY:
                check_width(x, self.in_channels[t], who, f"x_dict[{t!r}]")
            projected[t] = self.proj[t](x).view(x.shape[0], heads, self.out_channels // heads)
        return projected

    def _relation(self, who: str, relation: Relation, graph: Any, projected: dict[str, Tensor]) -> Tensor:
        """``ReLU`` of one relation's node-level attention: ``[N_dst, F]``."""
        key = _key(relation)
        if key not in self.lin_src:
            raise ValueError(f"{who} has no attention weights for relation {relation}; its metadata has "
                             f"{[tuple(k.split('__')) for k in self.lin_src]}")
        h_src = projected[relation[0]]
        h_dst = projected[relation[2]][: graph.num_dst_nodes]   # (a block's destinations: the first rows)
        el = (h_src * self.lin_src[key]).sum(-1)
        er = (h_dst * self.lin_dst[key]).sum(-1)
        mask = None
        if self.training and self.dropout > 0.0:
            mask = attention_dropout_mask(graph.num_edges, self.heads, self.dropout, h_src)
        out = ops.gat_attention(graph, h_src, el, er, self.negative_slope, edge_mask=mask)
        return F.relu(out.reshape(-1, self.out_channels))

    def _semantic(self, outs: list[Tensor]) -> tuple[Tensor | None, Tensor | None]:
        """The relations' outputs of one node type combined by the semantic attention."""
        if not outs:
            return None, None
        stacked = torch.stack(outs)                                              # [R, N, F]
        if stacked.numel() == 0:
            return stacked.view(0, self.out_channels), None
        scores = (self.q * torch.tanh(self.k_lin(stacked)).mean(1)).sum(-1)       # [R]
        beta = torch.softmax(scores, dim=0)
        return (beta.view(-1, 1, 1) * stacked).sum(0), beta

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.out_channels}, heads={self.heads})"


def _key(relation: Relation) -> str:
    """PyG's ParameterDict key of a relation (so a PyG state_dict loads)."""
    return "__".join(relation)
