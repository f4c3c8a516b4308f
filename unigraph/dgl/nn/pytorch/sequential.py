"""DGL's ``Sequential``: graph modules chained, each called as ``module(graph, *inputs)``.

* one graph: every module runs on it (a stack of layers over the same graph);
* a list of graphs (or blocks, as a sampler yields them), one per module: module ``i`` runs on
  graph ``i`` (mini-batch training over sampled blocks).

The inputs travel as DGL passes them: the first module gets ``(graph, *feats)``; each next one
gets ``(graph, *out)`` when the previous returned a tuple ``out``, else ``(graph, out)``. So a
module returning ``(node_feat, edge_feat)`` hands both on, while one returning a tensor hands on
only that tensor. The result is the last module's return value (the input tuple when empty).
"""
from __future__ import annotations

from typing import Any

from torch import nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.heterograph import DGLHeteroGraph
from unigraph.graph import Graph as CoreGraph

_GRAPHS = (CoreGraph, DGLHeteroGraph)


class Sequential(nn.Sequential):
    """Args: the modules, in order (as :class:`torch.nn.Sequential`; an ``OrderedDict`` names them).

    Shapes: ``forward(graph, *feats)`` with ``graph`` one graph or a list of one graph per module;
    returns what the last module returns.
    """

    def forward(self, graph: Any, *feats: Any) -> Any:
        graphs = self._graph_per_module(graph)
        out: Any = feats
        for graph_i, module in zip(graphs, self):
            out = module(graph_i, *(out if isinstance(out, tuple) else (out,)))
        return out

    def _graph_per_module(self, graph: Any) -> list:
        if isinstance(graph, _GRAPHS):
            return [graph] * len(self)
        if isinstance(graph, list):
            bad = [type(g).__name__ for g in graph if not isinstance(g, _GRAPHS)]
            if bad:
                raise DGLError(f"Sequential: the list must hold graphs or blocks of unigraph.dgl, got {bad}")
            if len(graph) != len(self):   # DGL would quietly run only the first len(graph) modules
                raise DGLError(f"Sequential: {len(graph)} graphs for {len(self)} modules; pass one graph per module "
                               "(or a single graph for all)")
            return graph
        raise DGLError(f"Sequential: the first argument must be a graph or a list of graphs (one per module), got "
                       f"{type(graph).__name__}")
