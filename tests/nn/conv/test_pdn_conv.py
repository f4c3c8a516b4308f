"""PDNConv against PyG's: values and gradients (float64) over its options and call forms, with
self-loops (kept weights for an edge_index, replaced for a SparseTensor, as PyG), PyG's repr and
state_dict, and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def pair(seed: int = 0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.PDNConv(4, 6, edge_dim=3, hidden_channels=5, **options)
    ours = loaded(theirs, U.PDNConv(4, 6, edge_dim=3, hidden_channels=5, **options))
    return theirs, ours


def inputs(num_nodes: int = 9, num_edges: int = 30):
    """Random edges with self-loops, one node with two of them, one node with none at all."""
    edge_index = random_edges(num_nodes - 1, num_edges)
    loops = torch.tensor([[0, 2, 2, 5], [0, 2, 2, 5]])
    edge_index = torch.cat([edge_index, loops], 1)
    x = torch.randn(num_nodes, 4, dtype=torch.float64)
    return x, edge_index, torch.randn(edge_index.shape[1], 3, dtype=torch.float64)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_options_equal_pygs(normalize, add_self_loops, bias):
    theirs, ours = pair(normalize=normalize, add_self_loops=add_self_loops, bias=bias)
    assert_same(theirs, ours, *inputs())


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_without_edge_features_equals_pygs(add_self_loops):
    theirs, ours = pair(add_self_loops=add_self_loops)
    x, edge_index, _ = inputs()
    assert_same(theirs, ours, x, edge_index)


def test_flow_target_to_source_equals_pygs():
    theirs, ours = pair(flow="target_to_source")
    assert_same(theirs, ours, *inputs())


@pytest.mark.parametrize("normalize", [True, False])
def test_sparse_tensor_equals_pygs(normalize):
    """A SparseTensor's values are the edge features (an edge_attr beside it is not read, as in
    PyG), its self-loops replaced by loops of weight 1; without values every weight is 1."""
    from torch_sparse import SparseTensor
    theirs, ours = pair(normalize=normalize)
    x, edge_index, edge_attr = inputs()
    adj = SparseTensor.from_edge_index(edge_index, edge_attr, (9, 9)).t()
    assert_same(theirs, ours, x, adj)
    assert_same(theirs, ours, x, adj, edge_attr)
    if normalize:
        assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, sparse_sizes=(9, 9)).t())


def test_torch_sparse_adjacency_holds_the_edge_features_as_a_sparse_tensor_does():
    """PyG's PDNConv reads a torch sparse adjacency's values as GCN weights and never runs its MLP
    on them; here its [E, D] values are the edge features, as a SparseTensor's are."""
    from torch_sparse import SparseTensor
    theirs, ours = pair()
    x, edge_index, edge_attr = inputs()
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_attr, (9, 9, 3), check_invariants=True).coalesce()
    (dst, src), values = coo.indices(), coo.values()
    expected = theirs(x, SparseTensor(row=dst, col=src, value=values, sparse_sizes=(9, 9)))
    torch.testing.assert_close(ours(x, coo), expected, **TOL)


def test_sparse_node_features_and_graph_form():
    theirs, ours = pair()
    x, edge_index, edge_attr = inputs()
    expected = theirs(x, edge_index, edge_attr)
    torch.testing.assert_close(ours(x.to_sparse(), edge_index, edge_attr), expected, **TOL)
    torch.testing.assert_close(ours(x.to_sparse_csr(), edge_index, edge_attr), expected, **TOL)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=9), x, edge_attr), expected, **TOL)


def test_empty_graph():
    theirs, ours = pair()
    x = torch.randn(4, 4, dtype=torch.float64)
    assert_same(theirs, ours, x, torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 3, dtype=torch.float64))


def test_repr_and_state_dict():
    theirs, ours = pair()
    assert str(ours) == str(theirs) == "PDNConv(4, 6)"
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_refusals():
    from torch_sparse import SparseTensor
    _, ours = pair()
    x, edge_index, edge_attr = inputs()
    with pytest.raises(ValueError, match="edge_attr with 3 features"):
        ours(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match="not a \\(source, destination\\) pair"):
        ours((x, x), edge_index, edge_attr)
    with pytest.raises(ValueError, match="needs a square adjacency"):
        ours(x, SparseTensor.from_edge_index(edge_index, edge_attr, (9, 10)).t())
    with pytest.raises(ValueError, match="without values"):
        ours(x, SparseTensor.from_edge_index(edge_index, sparse_sizes=(9, 9)).t(), edge_attr)
    _, plain = pair(normalize=False)
    with pytest.raises(ValueError, match="normalize=False\\) needs edge_attr"):
        plain(x, edge_index)
    with pytest.raises(ValueError, match="x with 4 features"):
        plain(torch.randn(9, 5, dtype=torch.float64), edge_index, edge_attr)
