r"""DGL's ``EGNNConv``: the E(n)-equivariant graph layer (https://arxiv.org/abs/2102.09844).

.. math::
    m_{ji} = \phi_e\big(h_j \,\Vert\, h_i \,\Vert\, \lVert x_j - x_i \rVert^2 \,\Vert\, a_{ji}\big), \qquad
    x_i' = x_i + \frac{1}{|N(i)|} \sum_{j \in N(i)} \frac{x_j - x_i}{\lVert x_j - x_i \rVert + 10^{-30}}
           \, \phi_x(m_{ji}), \qquad
    h_i' = \phi_h\Big(h_i \,\Vert\, \sum_{j \in N(i)} m_{ji}\Big)

(:math:`x_j - x_i` is DGL's ``u_sub_v`` on the edge :math:`j \to i`; a node without in-edges
keeps :math:`x_i`). :math:`\phi_e` = Linear, SiLU, Linear, SiLU; :math:`\phi_h` = Linear, SiLU,
Linear; :math:`\phi_x` = Linear, SiLU, Linear without bias. The edge MLP runs once over all
edges; the two neighbourhood reductions are g-SpMMs over the edge results.

One difference from DGL, on purpose: where :math:`x_j = x_i` (a self-loop, or two points at one
place) DGL's backward through :math:`\sqrt{0}` gives NaN gradients for every coordinate; ours
takes that edge's direction as 0 with zero gradient (its value, 0, is DGL's too), so the outputs
are the same and the gradients finite (equal to DGL's wherever DGL's are finite; on a self-loop
the difference is identically 0, so 0 is its exact derivative).

Parameters as DGL's: ``edge_mlp``, ``node_mlp``, ``coord_mlp`` (``nn.Sequential``), PyTorch's
default initialisation drawn in DGL's order.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_homogeneous

_TINY = 1e-30  # DGL's guard under the coordinate difference's norm


class EGNNConv(nn.Module):
    """Args (DGL's): ``in_size`` (width of :math:`h`), ``hidden_size`` (the MLPs' hidden width),
    ``out_size`` (width of :math:`h'`), ``edge_feat_size`` (width of :math:`a`; 0: none).

    Shapes: ``node_feat`` ``[N, in_size]``, ``coord_feat`` ``[N, D]`` (any D), ``edge_feat``
    ``[E, edge_feat_size]`` -> ``(h' [N, out_size], x' [N, D])``. One node set (a block or a
    bipartite graph is refused, as DGL's layer fails on them).
    """

    def __init__(self, in_size: int, hidden_size: int, out_size: int, edge_feat_size: int = 0):
        super().__init__()
        if edge_feat_size < 0:
            raise DGLError(f"EGNNConv: edge_feat_size must be >= 0, got {edge_feat_size}")
        self.in_size, self.hidden_size, self.out_size = in_size, hidden_size, out_size
        self.edge_feat_size = edge_feat_size
        act_fn = nn.SiLU()
        self.edge_mlp = nn.Sequential(nn.Linear(2 * in_size + edge_feat_size + 1, hidden_size), act_fn,
                                      nn.Linear(hidden_size, hidden_size), act_fn)
        self.node_mlp = nn.Sequential(nn.Linear(in_size + hidden_size, hidden_size), act_fn,
                                      nn.Linear(hidden_size, out_size))
        self.coord_mlp = nn.Sequential(nn.Linear(hidden_size, hidden_size), act_fn,
                                       nn.Linear(hidden_size, 1, bias=False))

    def _check_inputs(self, graph, node_feat, coord_feat, edge_feat) -> None:
        if node_feat.shape[1] != self.in_size:
            raise DGLError(f"EGNNConv: node_feat has {node_feat.shape[1]} features; the layer was built for "
                           f"in_size={self.in_size}")
        if not isinstance(coord_feat, Tensor) or coord_feat.dim() != 2 or coord_feat.shape[0] != graph.num_nodes:
            raise DGLError(f"EGNNConv: coord_feat must be [num_nodes={graph.num_nodes}, D], got "
                           f"{list(coord_feat.shape) if isinstance(coord_feat, Tensor) else type(coord_feat).__name__}")
        if self.edge_feat_size > 0:
            if edge_feat is None:
                raise DGLError(f"EGNNConv was built with edge_feat_size={self.edge_feat_size}: pass edge_feat")
            if edge_feat.dim() != 2 or edge_feat.shape != (graph.num_edges, self.edge_feat_size):
                raise DGLError(f"EGNNConv: edge_feat must be [num_edges={graph.num_edges}, edge_feat_size="
                               f"{self.edge_feat_size}], got {list(edge_feat.shape)}")
        elif edge_feat is not None and edge_feat.numel() > 0:   # DGL's own test passes an empty [E, 0]
            raise DGLError("EGNNConv got edge_feat but was built with edge_feat_size=0; pass edge_feat_size")

    @staticmethod
    def _unit_differences(coord_feat: Tensor, graph) -> tuple[Tensor, Tensor]:
        """``(radial [E, 1], direction [E, D])``: the squared length of :math:`x_j - x_i` on each
        edge and the difference over (its length + 1e-30). On an edge of length 0 the direction is
        0 with gradient 0: DGL's ``sqrt(0)`` there makes every gradient NaN, and its finite part
        (``1e30`` times the upstream gradient, once per end of the edge) would swamp the other
        edges' contributions when summed into the node."""
        diff = coord_feat.index_select(0, graph.src) - coord_feat.index_select(0, graph.dst)
        radial = diff.square().sum(dim=1, keepdim=True)
        positive = radial > 0
        length = torch.where(positive, radial, torch.ones_like(radial)).sqrt()
        return radial, torch.where(positive, diff / (length + _TINY), torch.zeros_like(diff))

    def forward(self, graph, node_feat: Tensor, coord_feat: Tensor, edge_feat: Tensor | None = None):
        graph = check_homogeneous(graph, node_feat, "EGNNConv", min_dim=2, max_dim=2)
        self._check_inputs(graph, node_feat, coord_feat, edge_feat)
        radial, direction = self._unit_differences(coord_feat, graph)
        parts = [node_feat.index_select(0, graph.src), node_feat.index_select(0, graph.dst), radial]
        if self.edge_feat_size > 0:
            parts.append(edge_feat)
        msg_h = self.edge_mlp(torch.cat(parts, dim=-1))              # [E, hidden]
        msg_x = self.coord_mlp(msg_h) * direction                      # [E, D]
        x_neigh = ops.gspmm(graph, "copy_e", "mean", None, msg_x)
        h_neigh = ops.gspmm(graph, "copy_e", "sum", None, msg_h)
        h = self.node_mlp(torch.cat([node_feat, h_neigh], dim=-1))
        return h, coord_feat + x_neigh
