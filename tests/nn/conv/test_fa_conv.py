"""FAConv against PyG's (float64): outputs, input and parameter gradients over its options and call
forms, the attention weights, the cache, and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, F, E = 10, 5, 30


class Bound(torch.nn.Module):
    """``conv(x, x_0, *fixed)``: a call whose adjacency stays out of assert_same's gradient checks."""

    def __init__(self, conv, *fixed):
        super().__init__()
        self.conv, self.fixed = conv, fixed

    def forward(self, x, x_0):
        return self.conv(x, x_0, *self.fixed)


def data(seed=0):
    gen = torch.Generator().manual_seed(seed)
    x, x_0 = torch.randn(2, N, F, dtype=torch.float64, generator=gen)
    return x, x_0, random_edges(N, E, seed)   # (with self-loops and duplicates)


def pair(**kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.FAConv(F, **kwargs)
    return theirs, loaded(theirs, U.FAConv(F, **kwargs))


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("eps", [0.3, 0.0])
def test_matches_pyg(normalize, add_self_loops, eps):
    theirs, ours = pair(eps=eps, normalize=normalize, add_self_loops=add_self_loops)
    x, x_0, edge_index = data()
    weight = None if normalize else torch.rand(E, dtype=torch.float64)
    assert_same(theirs, ours, x, x_0, edge_index, weight)
    assert str(ours) == str(theirs) == f"FAConv(5, eps={eps})"
    out, (index, alpha) = ours(x, x_0, edge_index, weight, return_attention_weights=True)
    expected, (reference_index, reference) = theirs(x, x_0, edge_index, weight, return_attention_weights=True)
    assert torch.equal(index, reference_index)
    torch.testing.assert_close(alpha, reference, **TOL)
    assert ours._alpha is None


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(flow="target_to_source")])
def test_message_passing_arguments_match_pyg(kwargs):
    theirs, ours = pair(**kwargs)
    x, x_0, edge_index = data(1)
    assert_same(theirs, ours, x, x_0, edge_index)
    _, (index, alpha) = ours(x, x_0, edge_index, return_attention_weights=True)
    _, (reference_index, reference) = theirs(x, x_0, edge_index, return_attention_weights=True)
    assert torch.equal(index, reference_index)
    torch.testing.assert_close(alpha, reference, **TOL)


def test_sparse_adjacencies_match_pyg():
    """A SparseTensor without values is normalized as edge_index is; a torch sparse adjacency's
    values are normalized as weights, its existing self-loops adding to the new ones (PyG adds
    the identity to the matrix)."""
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = pair()
    x, x_0, edge_index = data()
    edge_index = torch.unique(edge_index, dim=1)   # an adjacency merges duplicates
    assert bool((edge_index[0] == edge_index[1]).any())
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()
    expected = assert_same(Bound(theirs, adj), Bound(ours, adj), x, x_0)
    torch.testing.assert_close(expected, theirs(x, x_0, edge_index), **TOL)
    _, weighted = ours(x, x_0, adj, return_attention_weights=True)
    _, reference = theirs(x, x_0, adj, return_attention_weights=True)
    torch.testing.assert_close(weighted.to_dense(), reference.to_dense(), **TOL)
    values = torch.rand(edge_index.shape[1], dtype=torch.float64)
    csr = torch_sparse.SparseTensor.from_edge_index(edge_index, values, (N, N)).t().to_torch_sparse_csr_tensor()
    assert_same(Bound(theirs, csr), Bound(ours, csr), x, x_0)
    _, (adj_alpha, alpha) = ours(x, x_0, csr, return_attention_weights=True)
    _, (reference_adj, reference) = theirs(x, x_0, csr, return_attention_weights=True)
    torch.testing.assert_close(adj_alpha.to_dense(), reference_adj.to_dense(), **TOL)
    plain = pair(normalize=False)
    assert_same(Bound(plain[0], csr), Bound(plain[1], csr), x, x_0)


def test_cache_is_kept_per_graph_and_reset():
    theirs, ours = pair(cached=True)
    x, x_0, edge_index = data()
    expected = theirs(x, x_0, edge_index)
    torch.testing.assert_close(ours(x, x_0, edge_index), expected, **TOL)
    assert ours._cached_edge_index is not None and ours._cached_adj_t is None
    torch.testing.assert_close(ours(x, x_0, edge_index), expected, **TOL)   # from the cache
    other = random_edges(N, E, 5)
    # a different graph is normalized anew (PyG would reuse the first graph's normalization)
    torch.testing.assert_close(ours(x, x_0, other), pair()[0](x, x_0, other), **TOL)
    ours.reset_parameters()
    assert ours._cached_edge_index is None and ours._cached_adj_t is None


def test_graph_form_lazy_and_empty_graph():
    theirs, ours = pair(eps=0.5)
    x, x_0, edge_index = data()
    torch.testing.assert_close(ours(x, x_0, unigraph.Graph(edge_index, num_nodes=N)),
                               theirs(x, x_0, edge_index), **TOL)
    lazy = U.FAConv(-1, eps=0.5).double()
    assert lazy(x, x_0, edge_index).shape == (N, F)
    lazy.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(lazy(x, x_0, edge_index), theirs(x, x_0, edge_index), **TOL)
    assert_same(theirs, ours, x, x_0, torch.empty(2, 0, dtype=torch.long))


def test_dropout_acts_on_the_coefficients_in_training():
    torch.manual_seed(0)
    conv = U.FAConv(F, dropout=0.5).double()
    x, x_0, edge_index = data()
    evaluated = conv.eval()(x, x_0, edge_index)
    conv.train()
    torch.manual_seed(3)
    out, (_, alpha) = conv(x, x_0, edge_index, return_attention_weights=True)
    torch.manual_seed(3)
    torch.testing.assert_close(conv(x, x_0, edge_index), out, **TOL)
    assert not torch.allclose(out, evaluated)
    _, (_, undropped) = conv.eval()(x, x_0, edge_index, return_attention_weights=True)
    torch.testing.assert_close(alpha, undropped, **TOL)   # the weights returned: before dropout


def test_refusals():
    torch_sparse = pytest.importorskip("torch_sparse")
    x, x_0, edge_index = data()
    x, x_0 = x.float(), x_0.float()
    with pytest.raises(ValueError, match="takes none"):
        U.FAConv(F)(x, x_0, edge_index, torch.rand(E))
    unique = torch.unique(edge_index, dim=1)
    adj = torch_sparse.SparseTensor.from_edge_index(unique, torch.rand(unique.shape[1]), (N, N)).t()
    with pytest.raises(ValueError, match="SparseTensor's values"):
        U.FAConv(F)(x, x_0, adj)
    with pytest.raises(ValueError, match="needs edge weights"):
        U.FAConv(F, normalize=False)(x, x_0, edge_index)
    with pytest.raises(ValueError, match="x_0"):
        U.FAConv(F)(x, x_0[:, :3], edge_index)
    with pytest.raises(ValueError, match="pair"):
        U.FAConv(F)((x, x), x_0, edge_index)
    with pytest.raises(ValueError, match="static graphs"):
        U.FAConv(F)(torch.randn(2, N, F), x_0, edge_index)
    with pytest.raises(ValueError, match="channels"):
        U.FAConv(0)
