"""LEConv against PyG's in float64 (outputs, input and parameter gradients) over bias, edge
weights, (source, destination) pairs, PyG's call forms, static graphs and lazy widths; the
refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, IN, OUT = 9, 30, 5, 4


@pytest.mark.parametrize("bias", [True, False])
def test_matches_pyg(bias):
    torch.manual_seed(0)
    theirs = pyg_nn.LEConv(IN, OUT, bias=bias)
    ours = loaded(theirs, U.LEConv(IN, OUT, bias=bias))
    assert str(ours) == str(theirs) == f"LEConv({IN}, {OUT})"
    edge_index = random_edges(N, E)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64) - 0.3
    x = torch.randn(N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)
    assert_same(theirs, ours, torch.randn(2, N, IN, dtype=torch.float64), edge_index, weight)  # static graph
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
    assert_same(theirs, ours, x, adj)
    assert_same(theirs, ours, x, torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t())
    csr = adj.coalesce().to_torch_sparse_csr_tensor()
    torch.testing.assert_close(ours(x, csr), theirs(x, csr), **TOL)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=N), x, weight), theirs(x, edge_index, weight),
                               **TOL)


def test_pairs_and_flow():
    torch.manual_seed(0)
    theirs = pyg_nn.LEConv((IN, 3), OUT)
    ours = loaded(theirs, U.LEConv((IN, 3), OUT))
    assert str(ours) == str(theirs) == f"LEConv(({IN}, 3), {OUT})"
    edge_index, weight = random_edges(N, E, num_dst=4), torch.rand(E, dtype=torch.float64)
    x = (torch.randn(N, IN, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64))
    assert_same(theirs, ours, x, edge_index, weight)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, 4)).t()
    assert_same(theirs, ours, x, adj)
    theirs = pyg_nn.LEConv(IN, OUT, flow="target_to_source")
    ours = loaded(theirs, U.LEConv(IN, OUT, flow="target_to_source"))
    assert_same(theirs, ours, torch.randn(N, IN, dtype=torch.float64), random_edges(N, E), weight)


def test_lazy_in_channels_and_errors():
    ours = U.LEConv((-1, -1), OUT)
    x, edge_index = (torch.randn(N, IN), torch.randn(4, 3)), random_edges(N, E, num_dst=4)
    assert ours(x, edge_index).shape == (4, OUT)
    theirs = pyg_nn.LEConv((IN, 3), OUT)
    assert_same(theirs, loaded(theirs, ours), tuple(t.double() for t in x), edge_index)
    with pytest.raises(ValueError, match="needs destination features"):
        ours((x[0], None), edge_index)
    with pytest.raises(ValueError, match="LEConv sums its messages"):
        U.LEConv(IN, OUT, aggr="mean")
    with pytest.raises(ValueError, match="5 features"):
        U.LEConv(IN, OUT)(torch.randn(N, 3), random_edges(N, E))
