"""LINKX against PyG's: outputs and gradients in float64, with and without node features, edge
weights, the sparse call forms; str()."""
import pytest
import torch

from pyg_compare import TOL, assert_same, loaded, random_edges
from unigraph.nn.models import LINKX

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")

N = 7


def _pair(num_edge_layers, num_node_layers=1, num_layers=2):
    torch.manual_seed(0)
    args = (N, 5, 8, 3, num_layers)
    kw = dict(num_edge_layers=num_edge_layers, num_node_layers=num_node_layers)
    theirs = pyg_models.LINKX(*args, **kw)
    return theirs, loaded(theirs, LINKX(*args, **kw))


@pytest.mark.parametrize("num_edge_layers", [1, 2, 3])
@pytest.mark.parametrize("num_node_layers,num_layers", [(1, 1), (2, 3)])
@pytest.mark.parametrize("with_x", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_matches_pyg(num_edge_layers, num_node_layers, num_layers, with_x, weighted):
    theirs, ours = _pair(num_edge_layers, num_node_layers, num_layers)
    ei = random_edges(N, 20)
    ew = torch.rand(20, dtype=torch.float64) if weighted else None
    x = torch.randn(N, 5, dtype=torch.float64) if with_x else None
    assert_same(theirs, ours, x, ei, ew)


def test_sparse_forms_match_edge_index():
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = _pair(2)
    ei = random_edges(N, 20, seed=1)
    ew = torch.rand(20, dtype=torch.float64)
    x = torch.randn(N, 5, dtype=torch.float64)
    expected = ours(x, ei, ew)
    adj_t = torch_sparse.SparseTensor.from_edge_index(ei, ew, sparse_sizes=(N, N)).t()
    torch.testing.assert_close(ours(x, adj_t), expected, **TOL)
    coo_t = torch.sparse_coo_tensor(ei.flip(0), ew, (N, N))
    torch.testing.assert_close(ours(x, coo_t), expected, **TOL)
    torch.testing.assert_close(theirs(x, adj_t), expected, **TOL)


def test_str_and_bad_rows():
    theirs, ours = _pair(1)
    assert str(ours) == str(theirs) == "LINKX(num_nodes=7, in_channels=5, out_channels=3)"
    with pytest.raises(ValueError, match="rows"):
        ours(torch.randn(N + 1, 5, dtype=torch.float64), random_edges(N, 5))
