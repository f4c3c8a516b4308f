"""MixHopConv against PyG's in float64 (outputs, input and parameter gradients) over its powers
(with and without the zeroth, out of order), options, PyG's call forms and static graphs."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, IN, OUT = 9, 30, 5, 4


@pytest.mark.parametrize("powers", [None, [0, 1, 2, 4], [2], [3, 0, 1]])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_matches_pyg(powers, add_self_loops):
    torch.manual_seed(0)
    theirs = pyg_nn.MixHopConv(IN, OUT, powers=powers, add_self_loops=add_self_loops)
    ours = loaded(theirs, U.MixHopConv(IN, OUT, powers=powers, add_self_loops=add_self_loops))
    assert str(ours) == str(theirs)
    edge_index = random_edges(N, E)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64) + 0.1
    x = torch.randn(N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)
    assert_same(theirs, ours, torch.randn(2, N, IN, dtype=torch.float64), edge_index)  # static graph
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
    assert_same(theirs, ours, x, adj)
    assert_same(theirs, ours, x, adj.coalesce().to_torch_sparse_csr_tensor())
    torch.testing.assert_close(ours(x, adj.to_torch_sparse_coo_tensor()), theirs(x, adj.to_torch_sparse_coo_tensor()),
                               **TOL)


def test_bias_flow_and_lazy_in_channels():
    torch.manual_seed(0)
    theirs = pyg_nn.MixHopConv(IN, OUT, bias=False, flow="target_to_source")
    ours = loaded(theirs, U.MixHopConv(IN, OUT, bias=False, flow="target_to_source"))
    x, edge_index = torch.randn(N, IN, dtype=torch.float64), random_edges(N, E)
    assert_same(theirs, ours, x, edge_index, torch.rand(E, dtype=torch.float64))
    # PyG's own lazy MixHopConv fails on its first call (lin.forward skips the hook that sizes it):
    # ours is sized by its first call, then takes a PyG state_dict
    ours = U.MixHopConv(-1, OUT, powers=[1, 3])
    assert ours(x.float(), edge_index).shape == (N, 2 * OUT)
    theirs = pyg_nn.MixHopConv(IN, OUT, powers=[1, 3])
    assert_same(theirs, loaded(theirs, ours), x, edge_index)


@pytest.mark.parametrize("powers", [[], [-1], [1.0], "012"])
def test_bad_powers_refused(powers):
    with pytest.raises(ValueError, match="powers must be a non-empty list of ints >= 0"):
        U.MixHopConv(IN, OUT, powers=powers)
