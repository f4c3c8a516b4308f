"""SGConv against PyG's in float64 (outputs, input and parameter gradients) over its options and
PyG's call forms (self-loop weights per form on a graph with self-loops and multi-edges), and its
cache: it answers only for the same graph, features and weights."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, IN, OUT = 9, 30, 5, 4


def _graph(seed: int = 0):
    edge_index = random_edges(N, E, seed)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) + 0.1
    return edge_index, weight


def _sparse_forms(edge_index, weight):
    """PyG's adjacency forms of one weighted graph: SparseTensor (values or none), torch CSR (coalesced:
    PyG's gradient fails for duplicate CSR entries without self-loops), torch COO."""
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
    plain = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()
    return {"sparse_tensor": adj, "sparse_tensor_no_values": plain, "csr": adj.coalesce().to_torch_sparse_csr_tensor(),
            "coo": adj.to_torch_sparse_coo_tensor()}


@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_matches_pyg_edge_index(K, add_self_loops, bias):
    torch.manual_seed(0)
    theirs = pyg_nn.SGConv(IN, OUT, K=K, add_self_loops=add_self_loops, bias=bias)
    ours = loaded(theirs, U.SGConv(IN, OUT, K=K, add_self_loops=add_self_loops, bias=bias))
    assert str(ours) == str(theirs) == f"SGConv({IN}, {OUT}, K={K})"
    edge_index, weight = _graph()
    x = torch.randn(N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)
    assert_same(theirs, ours, torch.randn(3, N, IN, dtype=torch.float64), edge_index, weight)  # static graph


@pytest.mark.parametrize("form", ["sparse_tensor", "sparse_tensor_no_values", "csr", "coo"])
def test_matches_pyg_sparse_forms(form):
    """The self-loop weights differ per form in PyG (kept, replaced by 1, 1 added): each matches."""
    torch.manual_seed(0)
    theirs = pyg_nn.SGConv(IN, OUT, K=2)
    ours = loaded(theirs, U.SGConv(IN, OUT, K=2))
    adj = _sparse_forms(*_graph())[form]
    x = torch.randn(N, IN, dtype=torch.float64)
    if form == "coo":  # PyG's gcn_norm writes in place into a COO adjacency's values: no gradient for them
        torch.testing.assert_close(ours(x, adj), theirs(x, adj), **TOL)
    else:
        assert_same(theirs, ours, x, adj)


def test_flow_edge_index_type_and_graph_form():
    from torch_geometric import EdgeIndex
    torch.manual_seed(0)
    theirs = pyg_nn.SGConv(IN, OUT, K=2, flow="target_to_source")
    ours = loaded(theirs, U.SGConv(IN, OUT, K=2, flow="target_to_source"))
    edge_index, weight = _graph()
    x = torch.randn(N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index, weight)
    plain = loaded(pyg_nn.SGConv(IN, OUT, K=2), U.SGConv(IN, OUT, K=2))
    plain.load_state_dict(ours.state_dict())
    expected = plain(x, edge_index, weight)
    torch.testing.assert_close(plain(x, EdgeIndex(edge_index, sparse_size=(N, N)), weight), expected, **TOL)
    torch.testing.assert_close(plain(unigraph.Graph(edge_index, num_nodes=N), x, weight), expected, **TOL)


def test_lazy_in_channels():
    torch.manual_seed(0)
    theirs, ours = pyg_nn.SGConv(-1, OUT), U.SGConv(-1, OUT)
    assert str(ours) == str(theirs) == f"SGConv(-1, {OUT}, K=1)"
    x, (edge_index, _) = torch.randn(N, IN), _graph()
    assert ours(x, edge_index).shape == (N, OUT)
    theirs(x, edge_index)
    assert_same(theirs, loaded(theirs, ours), x.double(), edge_index)


def test_cache_answers_only_for_the_same_inputs():
    """A hit returns the kept S^K X detached (no gradient reaches x, as PyG's); a new feature tensor,
    one written in place, new or changed weights, another graph, another K: computed again, equal to
    an uncached layer's output."""
    torch.manual_seed(0)
    conv = U.SGConv(IN, OUT, K=2, cached=True).double()
    plain = U.SGConv(IN, OUT, K=2).double()
    plain.load_state_dict(conv.state_dict())
    edge_index, weight = _graph()
    x = torch.randn(N, IN, dtype=torch.float64, requires_grad=True)

    def fresh(out, *args):
        torch.testing.assert_close(out, plain(*args), **TOL)
        return out

    first = fresh(conv(x, edge_index, weight), x, edge_index, weight)
    assert first.requires_grad and conv._cached_x is not None
    hit = conv(x, edge_index, weight)
    torch.testing.assert_close(hit, first, **TOL)
    assert torch.autograd.grad(hit.sum(), x, allow_unused=True)[0] is None   # detached, as PyG's
    fresh(conv(x.detach().clone() * 2, edge_index, weight), x.detach() * 2, edge_index, weight)  # another x
    with torch.no_grad():
        y = x.detach().clone()
        conv(y, edge_index, weight)
        y.mul_(3)                                                       # written in place
    fresh(conv(y, edge_index, weight), y, edge_index, weight)
    weight2 = weight.clone()
    conv(y, edge_index, weight2)
    with torch.no_grad():
        weight2.mul_(0.5)
    fresh(conv(y, edge_index, weight2), y, edge_index, weight2)
    other = random_edges(N, E, seed=7)
    fresh(conv(y, other), y, other)
    conv.K = plain.K = 3
    fresh(conv(y, other), y, other)
    conv._cached_x = None
    assert conv._cached_x is None
    with pytest.raises(ValueError, match="can only be set to None"):
        conv._cached_x = torch.zeros(N, IN)
    conv(y, other)
    conv.reset_parameters()
    assert conv._cached_x is None


def test_errors():
    conv = U.SGConv(IN, OUT)
    x, (edge_index, _) = torch.randn(N, IN), _graph()
    with pytest.raises(ValueError, match="not a \\(source, destination\\) pair"):
        conv((x, x), edge_index)
    with pytest.raises(ValueError, match="needs a square adjacency"):
        conv(x, torch_sparse.SparseTensor.from_edge_index(random_edges(N, 10, num_dst=4), sparse_sizes=(N, 4)).t())
    with pytest.raises(ValueError, match="5 features"):
        conv(torch.randn(N, 3), edge_index)
    with pytest.raises(TypeError, match="floating point"):
        conv(torch.ones(N, IN, dtype=torch.long), edge_index)
    with pytest.raises(ValueError, match="edge_weight"):
        conv(x, edge_index, torch.rand(E + 1))
    with pytest.raises(ValueError, match="K \\(the number of hops\\)"):
        U.SGConv(IN, OUT, K=-1)
