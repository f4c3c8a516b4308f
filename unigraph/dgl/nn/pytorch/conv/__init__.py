"""DGL's graph convolutions (``dgl.nn.pytorch.conv``), one layer a file."""
from unigraph.dgl.nn.pytorch.conv.agnnconv import AGNNConv
from unigraph.dgl.nn.pytorch.conv.appnpconv import APPNPConv
from unigraph.dgl.nn.pytorch.conv.atomicconv import AtomicConv
from unigraph.dgl.nn.pytorch.conv.cfconv import CFConv
from unigraph.dgl.nn.pytorch.conv.chebconv import ChebConv
from unigraph.dgl.nn.pytorch.conv.densechebconv import DenseChebConv
from unigraph.dgl.nn.pytorch.conv.densegraphconv import DenseGraphConv
from unigraph.dgl.nn.pytorch.conv.densesageconv import DenseSAGEConv
from unigraph.dgl.nn.pytorch.conv.dgnconv import DGNConv
from unigraph.dgl.nn.pytorch.conv.dotgatconv import DotGatConv
from unigraph.dgl.nn.pytorch.conv.edgeconv import EdgeConv
from unigraph.dgl.nn.pytorch.conv.edgegatconv import EdgeGATConv
from unigraph.dgl.nn.pytorch.conv.edgeweightnorm import EdgeWeightNorm
from unigraph.dgl.nn.pytorch.conv.egatconv import EGATConv
from unigraph.dgl.nn.pytorch.conv.egnnconv import EGNNConv
from unigraph.dgl.nn.pytorch.conv.gatconv import GATConv
from unigraph.dgl.nn.pytorch.conv.gatedgraphconv import GatedGraphConv
from unigraph.dgl.nn.pytorch.conv.gatv2conv import GATv2Conv
from unigraph.dgl.nn.pytorch.conv.gcn2conv import GCN2Conv
from unigraph.dgl.nn.pytorch.conv.ginconv import GINConv
from unigraph.dgl.nn.pytorch.conv.gineconv import GINEConv
from unigraph.dgl.nn.pytorch.conv.gmmconv import GMMConv
from unigraph.dgl.nn.pytorch.conv.graphconv import GraphConv
from unigraph.dgl.nn.pytorch.conv.grouprevres import GroupRevRes
from unigraph.dgl.nn.pytorch.conv.hgtconv import HGTConv
from unigraph.dgl.nn.pytorch.conv.nnconv import NNConv
from unigraph.dgl.nn.pytorch.conv.pnaconv import PNAConv
from unigraph.dgl.nn.pytorch.conv.relgraphconv import RelGraphConv
from unigraph.dgl.nn.pytorch.conv.sageconv import SAGEConv
from unigraph.dgl.nn.pytorch.conv.sgconv import SGConv
from unigraph.dgl.nn.pytorch.conv.tagconv import TAGConv
from unigraph.dgl.nn.pytorch.conv.twirlsconv import TWIRLSConv, TWIRLSUnfoldingAndAttention

__all__ = [
    'AGNNConv', 'APPNPConv', 'AtomicConv', 'CFConv', 'ChebConv', 'DenseChebConv', 'DenseGraphConv',
    'DenseSAGEConv', 'DGNConv', 'DotGatConv', 'EdgeConv', 'EdgeGATConv', 'EdgeWeightNorm', 'EGATConv',
    'EGNNConv', 'GATConv', 'GatedGraphConv', 'GATv2Conv', 'GCN2Conv', 'GINConv', 'GINEConv', 'GMMConv',
    'GraphConv', 'GroupRevRes', 'HGTConv', 'NNConv', 'PNAConv', 'RelGraphConv', 'SAGEConv', 'SGConv',
    'TAGConv', 'TWIRLSConv', 'TWIRLSUnfoldingAndAttention',
]
