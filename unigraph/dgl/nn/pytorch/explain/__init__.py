"""DGL's explainers (``dgl.nn.pytorch.explain``)."""
from unigraph.dgl.nn.pytorch.explain.gnnexplainer import GNNExplainer, HeteroGNNExplainer
from unigraph.dgl.nn.pytorch.explain.pgexplainer import HeteroPGExplainer, PGExplainer
from unigraph.dgl.nn.pytorch.explain.subgraphx import HeteroSubgraphX, SubgraphX

__all__ = ['GNNExplainer', 'HeteroGNNExplainer', 'PGExplainer', 'HeteroPGExplainer', 'SubgraphX', 'HeteroSubgraphX']
