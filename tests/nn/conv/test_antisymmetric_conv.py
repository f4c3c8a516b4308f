"""AntiSymmetricConv against PyG's: values and gradients (float64) over its options, the default
phi (unigraph's GCNConv) and a given one (unigraph's or PyG's), its call forms (edge weights,
SparseTensor, torch sparse, the graph form), PyG's repr and state_dict, and the refusals."""
from __future__ import annotations

import warnings

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
SparseTensor = pytest.importorskip("torch_sparse").SparseTensor


def pair(*args, seed: int = 0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.AntiSymmetricConv(*args, **options)
    return theirs, loaded(theirs, U.AntiSymmetricConv(*args, **options))


def inputs():
    edge_index = random_edges(7, 24)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]   # (PyG's self-loop weights differ per form)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(7, 6, dtype=torch.float64, generator=gen)
    return x, edge_index, torch.rand(edge_index.shape[1], dtype=torch.float64, generator=gen)


@pytest.mark.parametrize("options", [
    dict(),
    dict(num_iters=3, epsilon=0.3, gamma=0.2, act="relu", bias=False),
    dict(act=None, num_iters=2),
    dict(act="leaky_relu", act_kwargs=dict(negative_slope=0.3)),
])
def test_options_and_forms_equal_pygs(options):
    theirs, ours = pair(6, **options)
    assert str(ours) == str(theirs)
    x, edge_index, weight = inputs()
    assert_same(theirs, ours, x, edge_index)
    theirs.zero_grad()
    ours.zero_grad()
    expected = assert_same(theirs, ours, x, edge_index, weight)
    theirs.zero_grad()
    ours.zero_grad()
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, weight, (7, 7)).t())
    adj = torch.sparse_coo_tensor(edge_index.flip(0), weight, (7, 7)).to_sparse_csr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(ours(x, adj), theirs(x, adj), **TOL)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=7), x, weight), expected, **TOL)


def test_default_phi_and_repr():
    conv = U.AntiSymmetricConv(8)
    assert isinstance(conv.phi, U.GCNConv) and conv.phi.bias is None
    assert str(conv) == "AntiSymmetricConv(8, phi=GCNConv(8, 8), num_iters=1, epsilon=0.1, gamma=0.1)"
    assert conv.eye.equal(torch.eye(8))


def test_given_phi_equals_pygs():
    torch.manual_seed(0)
    theirs = pyg_nn.AntiSymmetricConv(6, phi=pyg_nn.GraphConv(6, 6, aggr="max"), num_iters=2)
    ours = loaded(theirs, U.AntiSymmetricConv(6, phi=U.GraphConv(6, 6, aggr="max"), num_iters=2))
    assert str(ours) == str(theirs)
    x, edge_index, _ = inputs()
    assert_same(theirs, ours, x, edge_index)
    mixed = U.AntiSymmetricConv(6, phi=pyg_nn.GraphConv(6, 6, aggr="max"), num_iters=2)
    theirs.zero_grad()
    assert_same(theirs, loaded(theirs, mixed), x, edge_index)


def test_refusals():
    with pytest.raises(ValueError, match="in_channels must be a positive int"):
        U.AntiSymmetricConv(0)
    with pytest.raises(ValueError, match="num_iters must be an int >= 0"):
        U.AntiSymmetricConv(6, num_iters=-1)
    with pytest.raises(ValueError, match="unknown activation"):
        U.AntiSymmetricConv(6, act="nope")
    x, edge_index, _ = inputs()
    with pytest.raises(ValueError, match=r"\[num_nodes, 6\]"):
        U.AntiSymmetricConv(6)(x[:, :4].float(), edge_index)
