"""SAGEConv: GraphSAGE's neighbourhood aggregation."""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor
from torch.nn import Linear

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import channels_pair, check_positive, node_inputs
from unigraph.nn.projection import dense, linear


class SAGEConv(MessagePassing):
    r"""The GraphSAGE operator from the `"Inductive Representation Learning on Large Graphs"
    <https://arxiv.org/abs/1706.02216>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \mathbf{X}_{dst} \mathbf{W}_2^{\top} +
        \operatorname{AGG}(\mathbf{A}, \mathbf{X}) \mathbf{W}_1^{\top} + \mathbf{b}

    per node:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{W}_2 \mathbf{x}_i + \mathbf{W}_1 \cdot
        \bigoplus_{j \in \mathcal{N}(i)} \mathbf{x}_j + \mathbf{b}

    with :math:`\bigoplus` the mean, sum, max or min. With ``project=True`` the neighbours are first
    projected, :math:`\mathbf{x}_j \leftarrow \mathrm{ReLU}(\mathbf{W}_3 \mathbf{x}_j + \mathbf{b}_3)`;
    ``aggr="max", project=True`` is the paper's max-pooling aggregator. With ``normalize=True`` the
    output is :math:`\ell_2`-normalized, :math:`\mathbf{x}^{\prime}_i / \| \mathbf{x}^{\prime}_i \|_2`.

    For sum and mean (linear aggregations) with ``in_channels > out_channels`` the projection
    :math:`\mathbf{W}_1` runs before the aggregation, on N rows of the narrower width (the same
    function; DGL does the same).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes.
        out_channels (int): size of each output sample.
        aggr (str, optional): ``"mean"``, ``"sum"`` (``"add"``), ``"max"`` or ``"min"``. (default: ``"mean"``)
        normalize (bool, optional): :math:`\ell_2`-normalize the output. (default: ``False``)
        root_weight (bool, optional): add the transformed destination features
            :math:`\mathbf{W}_2 \mathbf{x}_i`. (default: ``True``)
        project (bool, optional): project neighbours first (see above). (default: ``False``)
        bias (bool, optional): learn an additive bias. (default: ``True``)

    Shapes:
        - **input:** graph ``g``, node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_{src}|, F_{s}), (|\mathcal{V}_{dst}|, F_{t}))` for a block
        - **output:** node features :math:`(|\mathcal{V}_{dst}|, F_{out})`
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, aggr: str = "mean",
                 normalize: bool = False, root_weight: bool = True, project: bool = False, bias: bool = True):
        super().__init__(aggr=aggr)
        self.in_channels = in_channels
        self.out_channels = check_positive(out_channels, "out_channels", "SAGEConv")
        self._widths = channels_pair(in_channels, "SAGEConv")
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        if project:
            self.lin = Linear(self._widths[0], self._widths[0], bias=True)
        self.lin_l = Linear(self._widths[0], out_channels, bias=bias)
        if root_weight:
            self.lin_r = Linear(self._widths[1], out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.project:
            self.lin.reset_parameters()
        self.lin_l.reset_parameters()
        if self.root_weight:
            self.lin_r.reset_parameters()

    def forward(self, g: Graph, x: Tensor | tuple[Tensor, Tensor | None]) -> Tensor:
        g, x_src, x_dst = node_inputs(g, x, "SAGEConv", self._widths)
        if self.project:
            x_src = F.relu(linear(x_src, self.lin.weight, self.lin.bias))
        if self.aggr in ("sum", "mean") and self._widths[0] > self.out_channels:
            out = self.propagate(g, x=linear(x_src, self.lin_l.weight))
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
        else:
            out = self.lin_l(self.propagate(g, x=dense(x_src)))
        if self.root_weight and x_dst is not None:
            out = out + linear(x_dst, self.lin_r.weight)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggr={self.aggr})"
