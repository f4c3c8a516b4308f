"""PANConv against PyG's: the output, the MET matrix M, the gradients of x and of the linear
layer (float64) over filter sizes, aggregations and every adjacency form; the gradient of the
path weights against a dense reference (PyG's sparse-sparse products do not pass it back through
the earlier powers, so PyG's is wrong for all but the last weight); repr and refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse", reason="PyG's PANConv returns a SparseTensor")


@pytest.fixture(autouse=True)
def float64_default():
    """PyG's PANConv fills the adjacency with the default dtype: float64 runs need it float64."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(saved)


def pair(in_channels=4, out_channels=3, filter_size=2, seed=0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.PANConv(in_channels, out_channels, filter_size, **options)
    ours = loaded(theirs, U.PANConv(in_channels, out_channels, filter_size, **options))
    with torch.no_grad():   # path weights other than 0.5, negative too
        weights = torch.linspace(-0.8, 1.3, filter_size + 1)
        theirs.weight.copy_(weights)
        ours.weight.copy_(weights)
    return theirs, ours


def dense_reference(conv, x: torch.Tensor, adj_t: torch.Tensor, stored: torch.Tensor):
    """``(out, M)`` from dense matrices: ``adj_t`` the weights, ``stored`` its pattern."""
    n = x.shape[0]
    power, pattern = torch.eye(n), torch.eye(n, dtype=torch.bool)
    reach, total = pattern.clone(), torch.zeros(n, n)
    coefficients = torch.cumprod(conv.weight, 0)
    for level in range(conv.filter_size + 1):
        if level:
            power, pattern = power @ adj_t, (pattern.double() @ stored.double()) > 0
        total = total + coefficients[level] * power
        reach |= pattern
    inverse_sqrt = reach.sum(1).double().pow(-0.5)
    m = inverse_sqrt.view(-1, 1) * total * inverse_sqrt.view(1, -1) * reach
    return conv.lin(m @ x), m


def check_against_pyg(theirs, ours, x, adjacency, reference=None):
    theirs.zero_grad(), ours.zero_grad()
    x_theirs, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected, their_m = theirs(x_theirs, adjacency)
    out, m = ours(x_ours, adjacency)
    assert isinstance(m, torch_sparse.SparseTensor)
    torch.testing.assert_close(out, expected, **TOL)
    torch.testing.assert_close(m.to_dense(), their_m.to_dense(), **TOL)
    assert m.nnz() == their_m.nnz()
    grad = torch.randn_like(out)
    (out * grad).sum().backward()
    (expected * grad).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, **TOL)
    for name in ("lin.weight", "lin.bias"):
        torch.testing.assert_close(ours.get_parameter(name).grad, theirs.get_parameter(name).grad, **TOL)
    if reference is not None:   # the path weights' gradient: against the dense reference
        dense_conv = U.PANConv(x.shape[1], ours.out_channels, ours.filter_size)
        dense_conv.load_state_dict(ours.state_dict())
        dense_out, dense_m = dense_reference(dense_conv, x, *reference)
        torch.testing.assert_close(m.to_dense(), dense_m, **TOL)
        (dense_out * grad).sum().backward()
        torch.testing.assert_close(ours.weight.grad, dense_conv.weight.grad, **TOL)
    return out


def dense_adjacency(edge_index, n, values=None):
    values = torch.ones(edge_index.shape[1]) if values is None else values
    adj_t = torch.zeros(n, n).index_put((edge_index[1], edge_index[0]), values, accumulate=True)
    stored = torch.zeros(n, n, dtype=torch.bool)
    stored[edge_index[1], edge_index[0]] = True
    return adj_t, stored


@pytest.mark.parametrize("filter_size", [0, 1, 3])
@pytest.mark.parametrize("aggr", ["add", "mean"])
def test_edge_index_equals_pyg_and_dense_reference(filter_size, aggr):
    n = 9
    x, edge_index = torch.randn(n, 4), random_edges(n, 14)   # repeated edges, self-loops, isolated nodes
    theirs, ours = pair(filter_size=filter_size, aggr=aggr)
    reference = dense_adjacency(edge_index, n) if aggr == "add" else None
    check_against_pyg(theirs, ours, x, edge_index, reference)


def test_sparse_adjacencies_equal_pygs():
    """A torch sparse adjacency's values weight A (PyG keeps them); a SparseTensor's are dropped."""
    n = 8
    x, edge_index = torch.randn(n, 4), torch.tensor([[0, 1, 2, 3, 4, 5, 6, 2], [1, 2, 3, 4, 5, 0, 0, 2]])
    values = torch.tensor([0.5, -1.0, 2.0, 1.5, 0.25, 1.0, -0.5, 3.0])
    theirs, ours = pair(filter_size=3)
    csr = torch.sparse_coo_tensor(edge_index.flip(0), values, (n, n)).coalesce().to_sparse_csr()
    check_against_pyg(theirs, ours, x, csr, dense_adjacency(edge_index, n, values))
    coo = torch.sparse_coo_tensor(edge_index.flip(0), values, (n, n)).coalesce()
    check_against_pyg(theirs, ours, x, coo)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, values, (n, n)).t()
    check_against_pyg(theirs, ours, x, adj, dense_adjacency(edge_index, n))


def test_a_power_that_sums_to_zero_stays_stored():
    """Entries of A^2 that cancel are kept in M's pattern (and counted in z), as PyG's products keep them."""
    n = 4
    edge_index, values = torch.tensor([[1, 2, 3, 3], [0, 0, 1, 2]]), torch.tensor([1.0, -1.0, 1.0, 1.0])
    x = torch.randn(n, 4)
    csr = torch.sparse_coo_tensor(edge_index.flip(0), values, (n, n)).coalesce().to_sparse_csr()
    check_against_pyg(*pair(filter_size=2), x, csr, dense_adjacency(edge_index, n, values))


def test_graph_form_cache_and_lazy_width():
    n = 7
    x, edge_index = torch.randn(n, 4), random_edges(n, 12, seed=2)
    theirs, ours = pair(filter_size=2)
    expected, expected_m = ours(x, edge_index)
    g = unigraph.Graph(edge_index, num_nodes=n)
    for _ in range(2):   # the second call reads the path table kept on the graph
        out, m = ours(g, x)
        torch.testing.assert_close(out, expected, **TOL)
        torch.testing.assert_close(m.to_dense(), expected_m.to_dense(), **TOL)
    with torch.no_grad():
        ours.weight.mul_(2.0)   # the kept table holds no weights: a change is seen
    assert not torch.allclose(ours(g, x)[0], expected)
    lazy = U.PANConv(-1, 3, filter_size=1)
    assert lazy(x, edge_index)[0].shape == (n, 3)
    assert str(lazy) == str(pyg_nn.PANConv(-1, 3, filter_size=1)) == "PANConv(-1, 3, filter_size=1)"


def test_without_torch_sparse_m_is_a_torch_sparse_tensor(monkeypatch):
    import sys
    n = 5
    x, edge_index = torch.randn(n, 4), random_edges(n, 8, seed=3)
    theirs, ours = pair(filter_size=2)
    _, expected = ours(x, edge_index)
    monkeypatch.setitem(sys.modules, "torch_sparse", None)   # an import of it now raises ImportError
    _, m = ours(x, edge_index)
    assert m.layout == torch.sparse_coo and m.is_coalesced()
    torch.testing.assert_close(m.to_dense(), expected.to_dense(), **TOL)


def test_repr_and_refusals():
    assert str(U.PANConv(16, 32, filter_size=2)) == str(pyg_nn.PANConv(16, 32, filter_size=2))
    x, edge_index = torch.randn(5, 4), random_edges(5, 8)
    with pytest.raises(ValueError, match="filter_size"):
        U.PANConv(4, 3, filter_size=-1)
    with pytest.raises(ValueError, match="target_to_source"):
        U.PANConv(4, 3, 2, flow="target_to_source")(x, edge_index)
    with pytest.raises(ValueError, match="one tensor"):
        U.PANConv(4, 3, 2)((x, x[:3]), edge_index)
    with pytest.raises(ValueError, match="4 features"):
        U.PANConv(4, 3, 2)(torch.randn(5, 6), edge_index)
    with pytest.raises(ValueError, match="square"):
        U.PANConv(4, 3, 2)(x, torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 2]]), torch.ones(2), (3, 5)))
