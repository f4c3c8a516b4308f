"""EGConv against PyG's: values and gradients (float64) over its aggregators, self-loops and call
forms (edge_index; SparseTensor and torch sparse adjacencies, weighted or not, whose values PyG
reads as weights), sparse input features, the cache, PyG's repr and state_dict, and the refusals."""
from __future__ import annotations

import warnings

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
SparseTensor = pytest.importorskip("torch_sparse").SparseTensor

# a self-loop (1 -> 1) and every node with an edge (PyG's add_remaining_self_loops infers the node
# count from the edges for the aggregators other than symnorm: see test_isolated_last_node)
EDGES = torch.tensor([[0, 0, 0, 1, 2, 3, 1, 4, 2, 5, 5], [1, 2, 3, 0, 0, 0, 1, 2, 4, 3, 1]])
AGGREGATORS = [["symnorm"], ["sum"], ["sum", "symnorm", "std"], ["mean", "max", "min", "var"], ["std"],
               ["symnorm", "var"]]


def pair(*args, seed: int = 0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.EGConv(*args, **options)
    return theirs, loaded(theirs, U.EGConv(*args, **options))


def features(seed: int = 1) -> torch.Tensor:
    return torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def same_on_adjacency(theirs, ours, x, adj):
    """Outputs and the gradients of ``x`` and every parameter, with ``adj`` (a torch sparse tensor)
    passed as it is, not as a gradient leaf."""
    theirs.zero_grad()
    ours.zero_grad()
    x_theirs, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected, out = theirs(x_theirs, adj), ours(x_ours, adj)
    torch.testing.assert_close(out, expected, **TOL)
    weight = torch.randn_like(expected)
    (expected * weight).sum().backward()
    (out * weight).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, **TOL)
    reference = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, reference[name].grad, **TOL, msg=name)


@pytest.mark.parametrize("aggregators", AGGREGATORS)
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_aggregators_and_forms_equal_pygs(aggregators, add_self_loops):
    theirs, ours = pair(8, 12, aggregators=aggregators, add_self_loops=add_self_loops, num_heads=4, num_bases=3)
    assert str(ours) == str(theirs) == f"EGConv(8, 12, aggregators={aggregators})"
    x = features()
    weights = torch.rand(EDGES.shape[1], dtype=torch.float64) + 0.5
    assert_same(theirs, ours, x, EDGES)
    theirs.zero_grad()
    ours.zero_grad()
    for values in (None, weights):   # PyG weighs the messages by a sparse adjacency's values
        assert_same(theirs, ours, x, SparseTensor.from_edge_index(EDGES, values, (6, 6)).t())
        theirs.zero_grad()
        ours.zero_grad()
    if add_self_loops and "symnorm" not in aggregators:
        return   # PyG refuses a torch sparse adjacency here (its add_remaining_self_loops cannot read one)
    for values in (None, weights):
        adj = torch.sparse_coo_tensor(EDGES, torch.ones(EDGES.shape[1], dtype=torch.float64)
                                      if values is None else values, (6, 6)).t().coalesce()
        same_on_adjacency(theirs, ours, x, adj)
        same_on_adjacency(theirs, ours, x, adj.to_sparse_csr())


def test_flow_and_graph_form_equal_pygs():
    theirs, ours = pair(8, 12, aggregators=["symnorm", "max"], num_heads=4, flow="target_to_source")
    assert_same(theirs, ours, features(), EDGES)
    theirs, ours = pair(8, 12, aggregators=["symnorm", "mean"], num_heads=4)
    expected = assert_same(theirs, ours, features(), EDGES)
    torch.testing.assert_close(ours(unigraph.Graph(EDGES, num_nodes=6), features()), expected, **TOL)


def test_sparse_features_equal_dense():
    theirs, ours = pair(8, 16)
    x = features()
    x[x.abs() < 0.8] = 0.0
    expected = theirs(x, EDGES)
    torch.testing.assert_close(ours(x.to_sparse_coo(), EDGES), expected, **TOL)
    torch.testing.assert_close(ours(x.to_sparse_csr(), EDGES), expected, **TOL)


def test_cache_is_reused_for_the_same_graph_and_refreshed_for_another():
    _, ours = pair(8, 12, aggregators=["symnorm", "sum"], num_heads=4, cached=True)
    x = features()
    first = ours(x, EDGES)
    assert ours._cached_edge_index is not None and ours._cached_adj_t is None
    kept = ours._cached_edge_index[1]
    torch.testing.assert_close(ours(x, EDGES), first, **TOL)
    assert ours._cached_edge_index[1] is kept
    ours(x, SparseTensor.from_edge_index(EDGES, None, (6, 6)).t())
    assert ours._cached_adj_t is not None
    # PyG would reuse the first graph's normalization here; this layer normalizes the new graph
    other = EDGES[:, :6]
    fresh = U.EGConv(8, 12, aggregators=["symnorm", "sum"], num_heads=4).double()
    fresh.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(x, other), fresh(x, other), **TOL)
    ours._cached_edge_index = None
    assert ours._cached_edge_index is None
    with pytest.raises(ValueError, match="can only be set to None"):
        ours._cached_adj_t = (EDGES, None)


def test_isolated_last_node_gets_its_self_loop():
    """PyG's add_remaining_self_loops (for the aggregators other than symnorm) counts the nodes from
    the edges, so a last node without edges gets no loop there; here every node gets one (the
    paper's N(i) with i): its output is its own basis, as with symnorm."""
    _, ours = pair(8, 12, aggregators=["sum"], num_heads=1, num_bases=1)
    x = features()
    edges = EDGES[:, (EDGES < 5).all(0)]   # node 5 isolated
    out = ours(x, edges)
    basis = x[5] @ ours.bases_lin.weight.t()
    expected = (x[5] @ ours.comb_lin.weight.t() + ours.comb_lin.bias) * basis + ours.bias
    torch.testing.assert_close(out[5], expected, **TOL)


def test_lazy_width_uses_pygs_initializers():
    conv = U.EGConv(-1, 16)
    assert conv(features().float(), EDGES).shape == (6, 16)
    assert conv.bases_lin.weight.shape == (8, 8)


def test_refusals():
    with pytest.raises(ValueError, match="must be divisible by the number of"):
        U.EGConv(16, 30, num_heads=8)
    with pytest.raises(ValueError, match="Unsupported aggregator"):
        U.EGConv(16, 32, aggregators=["xxx"])
    conv = U.EGConv(8, 16)
    x = features().float()
    with pytest.raises(ValueError, match="not a \\(source, destination\\) pair"):
        conv((x, x), EDGES)
    with pytest.raises(ValueError, match="square adjacency"):
        conv(x, SparseTensor.from_edge_index(EDGES, None, (6, 7)).t())
    with pytest.raises(ValueError, match="x with 8 features"):
        conv(x[:, :5], EDGES)
    with pytest.raises(TypeError, match="floating point"):
        conv(x.long(), EDGES)
