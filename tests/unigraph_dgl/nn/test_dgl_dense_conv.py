"""The dense layers of unigraph.dgl.nn (DenseGraphConv, DenseSAGEConv, DenseChebConv) against DGL's
(same state_dict, float64, values and gradients) and against the sparse layers on the graph of
the same adjacency (what DGL's own tests check)."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import TOL, assert_same_run, our_graphs, same_modules


def adjacency(g) -> torch.Tensor:
    return g.adj_external(transpose=True).to_dense().double()


@pytest.mark.parametrize("norm", ["both", "right", "none"])
@pytest.mark.parametrize("out_feats", [3, 7])   # projected before (3 < 5) or after the product
def test_dense_graph_conv(dgl, norm, out_feats):
    for g in our_graphs():
        ours, theirs = same_modules(dgl, lambda nn: nn.DenseGraphConv(5, out_feats, norm=norm, activation=torch.tanh))
        x = torch.randn(g.num_src_nodes(), 5, dtype=torch.float64, requires_grad=True)
        assert_same_run(ours, theirs, (adjacency(g), x), (adjacency(g), x), [x])
        sparse = unn.GraphConv(5, out_feats, norm=norm, activation=torch.tanh, allow_zero_in_degree=True).double()
        sparse.load_state_dict(ours.state_dict())
        torch.testing.assert_close(ours(adjacency(g), x), sparse(g, x), **TOL)


def test_dense_sage_conv(dgl):
    for g in our_graphs():
        ours, theirs = same_modules(dgl, lambda nn: nn.DenseSAGEConv(5, 3, activation=torch.relu))
        x = torch.randn(g.num_src_nodes(), 5, dtype=torch.float64, requires_grad=True)
        x_dst = torch.randn(g.num_dst_nodes(), 5, dtype=torch.float64, requires_grad=True)
        assert_same_run(ours, theirs, (adjacency(g), (x, x_dst)), (adjacency(g), (x, x_dst)), [x, x_dst])
        sparse = unn.SAGEConv(5, 3, "gcn", activation=torch.relu).double()
        sparse.fc_neigh.weight.data, sparse.bias.data = ours.fc.weight.data, ours.fc.bias.data
        torch.testing.assert_close(ours(adjacency(g), (x, x_dst)), sparse(g, (x, x_dst)), **TOL)
    ours, theirs = same_modules(dgl, lambda nn: nn.DenseSAGEConv(5, 4))
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    assert_same_run(ours, theirs, (adjacency(our_graphs()[0]), x), (adjacency(our_graphs()[0]), x), [x])


@pytest.mark.parametrize("k", [1, 2, 4])
def test_dense_cheb_conv(dgl, k):
    g = our_graphs()[0]
    ours, theirs = same_modules(dgl, lambda nn: nn.DenseChebConv(5, 3, k))
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    assert_same_run(ours, theirs, (adjacency(g), x, 2.0), (adjacency(g), x, 2.0), [x])
    # lambda_max None: L's largest eigenvalue (DGL 2.1 fails there: torch.eig is gone)
    a = adjacency(g)
    scale = a.sum(1).clamp(min=1).rsqrt()
    lam = torch.linalg.eigvals(torch.eye(6, dtype=a.dtype) - scale[:, None] * a * scale).real.max()
    torch.testing.assert_close(ours(a, x), ours(a, x, float(lam)), **TOL)
    torch.testing.assert_close(ours(a, x, [2.0]), ours(a, x, 2.0), **TOL)


def test_dense_layers_refuse_bad_adjacency():
    g = our_graphs()[0]
    x = torch.randn(6, 5)
    with pytest.raises(udgl.DGLError, match="dense 2-D adjacency"):
        unn.DenseGraphConv(5, 3)(g.adj_external(transpose=True), x)   # sparse: refused by name
    with pytest.raises(udgl.DGLError, match="features of 4 rows"):
        unn.DenseGraphConv(5, 3)(torch.ones(6, 6), x[:4])
    with pytest.raises(udgl.DGLError, match="square"):
        unn.DenseChebConv(5, 3, 2)(torch.ones(4, 6), x)
    with pytest.raises(udgl.DGLError, match="norm must be"):
        unn.DenseGraphConv(5, 3, norm="left")
