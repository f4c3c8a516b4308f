"""GINConv and GINEConv against PyG's (same weights, float64, forward and backward), in every
call form PyG's tests use: pairs, SparseTensor values as edge features, static graphs."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse", reason="SparseTensor inputs need torch_sparse")

N, IN, D = 10, 6, 3


def mlp(width_in: int = IN) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(width_in, 8), torch.nn.ReLU(), torch.nn.Linear(8, 5))


@pytest.mark.parametrize("edge_dim", [None, D])
def test_gine_conv_matches_pyg(edge_dim):
    torch.manual_seed(0)
    theirs = pyg_nn.GINEConv(mlp(), train_eps=True, eps=0.3, edge_dim=edge_dim)
    ours = loaded(theirs, U.GINEConv(mlp(), train_eps=True, eps=0.3, edge_dim=edge_dim))
    assert str(ours) == str(theirs)
    edge_index = random_edges(N, 30)
    edge_attr = torch.randn(30, edge_dim or IN, dtype=torch.float64)
    x = torch.randn(N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index, edge_attr)
    x_dst = torch.randn(N - 2, IN, dtype=torch.float64)
    bipartite = random_edges(N, 30, num_dst=N - 2)
    assert_same(theirs, ours, (x, x_dst), bipartite, edge_attr)
    assert_same(theirs, ours, (x, None), bipartite, edge_attr, size=(N, N - 2))
    # a SparseTensor's values are the edge features
    unique = torch.unique(edge_index, dim=1)
    values = torch.randn(unique.shape[1], edge_dim or IN, dtype=torch.float64)
    adj = torch_sparse.SparseTensor.from_edge_index(unique, values, (N, N)).t()
    torch.testing.assert_close(ours(x, adj), ours(x, unique, values), **TOL)
    assert_same(theirs, ours, x, adj)


def test_static_graphs_are_each_feature_set_alone():
    torch.manual_seed(0)
    edge_index, edge_attr = random_edges(N, 30), torch.randn(30, IN, dtype=torch.float64)
    x = torch.randn(3, N, IN, dtype=torch.float64)
    gin = U.GINConv(mlp(), train_eps=True).double()
    gine = U.GINEConv(mlp(), train_eps=True).double()
    torch.testing.assert_close(gin(x, edge_index), torch.stack([gin(x[b], edge_index) for b in range(3)]), **TOL)
    torch.testing.assert_close(gine(x, edge_index, edge_attr),
                               torch.stack([gine(x[b], edge_index, edge_attr) for b in range(3)]), **TOL)
    theirs = pyg_nn.GINEConv(mlp(), train_eps=True)
    assert_same(theirs, loaded(theirs, U.GINEConv(mlp(), train_eps=True)), x, edge_index, edge_attr)


def test_gine_refusals():
    conv = U.GINEConv(mlp())
    x, edge_index = torch.randn(N, IN), random_edges(N, 20)
    with pytest.raises(ValueError, match="needs edge_attr"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match="node features have 6 channels but edge_attr has 2.*edge_dim"):
        conv(x, edge_index, torch.randn(20, 2))
    with pytest.raises(ValueError, match="cannot read it from nn"):
        U.GINEConv(lambda h: h, edge_dim=2)


def test_mutag_gin_recipe_initializes_and_trains_as_pyg():
    """PyG's mutag_gin.py model (GINConv(MLP([in, 32, 32])) layers, ReLU, add pooling, an MLP head
    with dropout) built with either GINConv from one seed: the same initial weights (the layer
    re-initializes its network as PyG's does, drawing the same numbers), and in float64 the same
    outputs and gradients in training mode (same dropout seed) on a batch of small graphs."""
    pool = pytest.importorskip("torch_geometric.nn").global_add_pool

    class GIN(torch.nn.Module):
        def __init__(self, conv):
            super().__init__()
            self.convs = torch.nn.ModuleList(conv(nn=pyg_nn.MLP([w, 32, 32]), train_eps=False) for w in (7, 32, 32))
            self.mlp = pyg_nn.MLP([32, 32, 4], norm=None, dropout=0.5)

        def forward(self, x, edge_index, batch):
            for conv in self.convs:
                x = conv(x, edge_index).relu()
            return self.mlp(pool(x, batch))

    models = []
    for conv in (pyg_nn.GINConv, U.GINConv):
        torch.manual_seed(0)
        models.append(GIN(conv).double().train())
    theirs, ours = models
    for (name, a), (_, b) in zip(theirs.state_dict().items(), ours.state_dict().items()):
        assert torch.equal(a, b), name
    edge_index = torch.cat([random_edges(10, 24, seed=s) + 10 * s for s in range(6)], dim=1)
    batch = torch.arange(6).repeat_interleave(10)
    x = torch.randn(60, 7, dtype=torch.float64)
    outputs = []
    for model in models:
        torch.manual_seed(1)
        out = model(x, edge_index, batch)
        outputs.append((out, torch.autograd.grad(out.square().sum(), list(model.parameters()))))
    torch.testing.assert_close(outputs[1][0], outputs[0][0], **TOL)
    for a, b in zip(outputs[1][1], outputs[0][1]):
        torch.testing.assert_close(a, b, **TOL)
