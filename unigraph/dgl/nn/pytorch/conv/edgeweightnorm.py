r"""DGL's ``EdgeWeightNorm``: GCN's normalisation applied to scalar edge weights.

.. math::
    \tilde e_{ji} = \frac{e_{ji}}{c_{ji}}, \qquad
    c_{ji} = \sqrt{\textstyle\sum_{k} e_{jk} + \varepsilon}\;\sqrt{\textstyle\sum_{k} e_{ki} + \varepsilon}
    \;(\text{norm='both'}), \qquad
    c_{ji} = \textstyle\sum_{k} e_{ki} + \varepsilon \;(\text{'right'}), \qquad c_{ji} = 1 \;(\text{'none'})

where :math:`\sum_k e_{jk}` sums the weights leaving the source :math:`j` and :math:`\sum_k e_{ki}`
those entering the destination :math:`i`. ``norm='left'`` is accepted as DGL 2.1 accepts it, and
computes what DGL 2.1 computes for it: the same as ``'right'`` (DGL only special-cases
``'both'`` and ``'none'``). The result feeds ``GraphConv(norm='none')`` as ``edge_weight``.
"""
from __future__ import annotations

from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_edge_weight, check_graph

NORMS = ("both", "right", "left", "none")


class EdgeWeightNorm(nn.Module):
    """Args (DGL's): ``norm`` (see the module docstring), ``eps`` (added to every weight sum).

    Shapes: ``edge_weight`` ``[E]`` -> ``[E]``. On a block or a bipartite graph the sums run over
    its own sources and destinations. ``norm='both'`` refuses a non-positive weight (its square
    root), as DGL does.
    """

    def __init__(self, norm: str = "both", eps: float = 0.0):
        super().__init__()
        if norm not in NORMS:
            raise DGLError(f"EdgeWeightNorm: norm must be one of {NORMS}, got {norm!r}")
        self._norm, self._eps = norm, eps

    def forward(self, graph, edge_weight: Tensor) -> Tensor:
        graph = check_graph(graph, "EdgeWeightNorm")
        check_edge_weight(graph, edge_weight, "EdgeWeightNorm")
        if self._norm == "both" and bool((edge_weight <= 0).any()):
            raise DGLError("EdgeWeightNorm: norm='both' needs positive edge weights (it takes the square root "
                           "of their sums); got a weight <= 0")
        if self._norm == "none":
            return edge_weight.clone()
        src, dst = graph.edges()
        in_sum = ops.gspmm(graph, "copy_e", "sum", None, edge_weight) + self._eps       # [N_dst]
        if self._norm != "both":
            return (1.0 / in_sum)[dst] * edge_weight
        out_sum = ops.gspmm(graph.reverse(), "copy_e", "sum", None, edge_weight) + self._eps  # [N_src]
        return out_sum.pow(-0.5)[src] * in_sum.pow(-0.5)[dst] * edge_weight

    def extra_repr(self) -> str:
        return f"norm={self._norm}, eps={self._eps}"
