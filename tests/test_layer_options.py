"""Layer options PyG and DGL users rely on: lazy ``in_channels=-1``, attention weights that are exactly the coefficients used, and the sparse input projection of every
layer (values and gradients equal to the dense path, and taken). SAGEConv's aggregators:
tests/nn/conv/test_sage_conv.py."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph.nn import projection

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse", reason="SparseTensor inputs need torch_sparse")

U = unigraph
N, IN, OUT = 16, 5, 4


def edges(seed: int = 0, num_edges: int = 50) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    pairs = torch.unique(torch.randint(0, N - 1, (2, num_edges), generator=gen), dim=1)  # N-1: no in-edges
    return pairs[:, torch.randperm(pairs.shape[1], generator=gen)]


# ---------------------------------------------------------------------- lazy in_channels
LAZY = [(U.GCNConv, -1, {}), (U.GraphConv, -1, {}), (U.GraphConv, (-1, -1), {}), (U.SAGEConv, -1, {}),
        (U.SAGEConv, -1, {"aggr": ["mean", "max"]}), (U.SAGEConv, -1, {"aggr": "gcn"}),
        (U.GATConv, -1, {"heads": 2, "residual": True}), (U.GATConv, (-1, -1), {"heads": 2}),
        (U.GATv2Conv, -1, {"heads": 2, "residual": True})]


@pytest.mark.parametrize("cls,in_channels,kwargs", LAZY, ids=lambda v: getattr(v, "__name__", str(v)))
def test_lazy_in_channels(cls, in_channels, kwargs):
    torch.manual_seed(0)
    lazy = cls(in_channels, OUT, **kwargs)
    with pytest.raises(ValueError, match="uninitialized parameter"):  # torch's own error before the first call
        sum(p.numel() for p in lazy.parameters())
    optimizer = torch.optim.SGD(lazy.parameters(), lr=0.1)  # built before the first call: still works after
    x, edge_index = torch.randn(N, IN), edges()
    out = lazy(x, edge_index)
    assert out.shape[0] == N and not lazy._lazy
    eager = cls(IN if isinstance(in_channels, int) else (IN, IN), OUT, **kwargs)
    eager.load_state_dict(lazy.state_dict(), strict=True)
    torch.testing.assert_close(out, eager(x, edge_index))
    before = [p.detach().clone() for p in lazy.parameters()]
    out.square().sum().backward()
    optimizer.step()
    assert any(not torch.equal(b, p) for b, p in zip(before, lazy.parameters()))
    with pytest.raises(ValueError, match=f"{IN} features"):
        lazy(torch.randn(N, IN + 1), edge_index)


def test_lazy_refused_where_the_width_is_needed_up_front():
    for kwargs in ({"project": True}, {"aggr": "pool"}, {"aggr": "lstm"}, {"aggr": "dgl_lstm"}):
        with pytest.raises(ValueError, match="does not support lazy initialization.*cannot infer in_channels"):
            U.SAGEConv(-1, OUT, **kwargs)
    with pytest.raises(ValueError, match="got -2"):
        U.GCNConv(-2, OUT)


# ---------------------------------------------------------------------- attention weights
def attention_layers():
    torch.manual_seed(0)
    return [U.GATConv(IN, 3, heads=2).double(), U.GATConv(IN, 3, heads=2, concat=False).double(),
            U.GATv2Conv(IN, 3, heads=2).double()]


def recompute(layer, x, edge_index, alpha):
    """``out`` from ``alpha``: each destination's alpha-weighted sum of projected sources, heads merged."""
    heads, channels = layer.heads, layer.out_channels
    h = layer.lin(x) if isinstance(layer, U.GATConv) else layer.lin_l(x)
    h = h.view(-1, heads, channels)
    out = torch.zeros(x.shape[0], heads, channels, dtype=x.dtype)
    out.index_add_(0, edge_index[1], alpha.unsqueeze(-1) * h[edge_index[0]])
    out = out.reshape(x.shape[0], -1) if layer.concat else out.mean(1)
    return out + layer.bias


@pytest.mark.parametrize("form", ["edge_index", "graph", "sparse_tensor", "torch_sparse"])
def test_attention_weights_are_the_coefficients_used(form):
    edge_index, x = edges(3), torch.randn(N, IN, dtype=torch.float64)
    for layer in attention_layers():
        if form == "edge_index":
            out, (used, alpha) = layer(x, edge_index, return_attention_weights=True)
        elif form == "graph":
            out, (used, alpha) = layer(U.Graph(edge_index, num_nodes=N), x, return_attention_weights=True)
        elif form == "sparse_tensor":
            adj = torch_sparse.SparseTensor(row=edge_index[1], col=edge_index[0], sparse_sizes=(N, N))
            out, adj_alpha = layer(x, adj, return_attention_weights=True)
            assert isinstance(adj_alpha, torch_sparse.SparseTensor)
            row, col, alpha = adj_alpha.coo()
            used = torch.stack([col, row])
        else:
            adj = torch.sparse_coo_tensor(torch.stack([edge_index[1], edge_index[0]]), torch.ones(edge_index.shape[1]),
                                          (N, N))
            out, (adj_alpha, alpha) = layer(x, adj, return_attention_weights=True)
            assert adj_alpha.is_sparse and torch.equal(adj_alpha.values(), alpha)
            used = adj_alpha.indices().flip(0)
        loops = int((edge_index[0] == edge_index[1]).sum())
        assert used.shape[1] == edge_index.shape[1] - loops + N  # one self-loop per node replaces those given
        torch.testing.assert_close(out, recompute(layer, x, used, alpha), rtol=1e-10, atol=1e-12)
        # the weights of each destination sum to 1
        torch.testing.assert_close(torch.zeros(N, layer.heads, dtype=x.dtype).index_add_(0, used[1], alpha),
                                   torch.ones(N, layer.heads, dtype=x.dtype))
        # and the fused path (no weights asked) gives the same output
        torch.testing.assert_close(layer(x, edge_index), out, rtol=1e-10, atol=1e-12)


def test_attention_weights_with_dropout_are_those_applied():
    layer = U.GATConv(IN, 3, heads=2, dropout=0.5).double().train()
    edge_index, x = edges(4), torch.randn(N, IN, dtype=torch.float64)
    out, (used, alpha) = layer(x, edge_index, return_attention_weights=True)
    assert (alpha == 0).any()
    torch.testing.assert_close(out, recompute(layer, x, used, alpha), rtol=1e-10, atol=1e-12)


def test_attention_weights_match_pyg():
    torch.manual_seed(0)
    for ours_cls, pyg_cls in ((U.GATConv, pyg_nn.GATConv), (U.GATv2Conv, pyg_nn.GATv2Conv)):
        theirs = pyg_cls(IN, 3, heads=2).double().eval()
        ours = ours_cls(IN, 3, heads=2).double().eval()
        ours.load_state_dict(theirs.state_dict(), strict=True)
        edge_index, x = edges(5), torch.randn(N, IN, dtype=torch.float64)
        out, (used, alpha) = ours(x, edge_index, return_attention_weights=True)
        expected, (their_used, their_alpha) = theirs(x, edge_index, return_attention_weights=True)
        assert torch.equal(used, their_used)
        torch.testing.assert_close(alpha, their_alpha, rtol=1e-7, atol=1e-9)
        torch.testing.assert_close(out, expected, rtol=1e-7, atol=1e-9)


def test_get_attention_is_dgls_alias():
    layer = U.GATConv(IN, 3, heads=2, add_self_loops=False).double()
    edge_index, x = edges(6), torch.randn(N, IN, dtype=torch.float64)
    g = U.Graph(edge_index, num_nodes=N)
    out, a = layer(g, x, get_attention=True)
    _, (used, alpha) = layer(g, x, return_attention_weights=True)
    assert a.shape == (edge_index.shape[1], 2, 1) and torch.equal(used, edge_index)
    torch.testing.assert_close(a.squeeze(-1), alpha)
    with pytest.raises(ValueError, match="add_self_loops"):
        U.GATConv(IN, 3)(g, x.float(), get_attention=True)


# ---------------------------------------------------------------------- sparse input projection
@pytest.fixture
def small_inputs_looked_at(monkeypatch):
    """These inputs are small: looked at for the sparse projection at any size here (production:
    ``projection.SPARSE_MIN_ELEMENTS``)."""
    monkeypatch.setattr(projection, "SPARSE_MIN_ELEMENTS", 0)


class TwoGAT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = U.GATConv(60, 4, heads=2)
        self.conv2 = U.GATConv(8, 3)

    def forward(self, x, edge_index):
        return self.conv2(torch.relu(self.conv1(x, edge_index)), edge_index)


@pytest.mark.parametrize("layout", ["dense", "coo", "csr"])
def test_model_from_layers_takes_the_sparse_projection(layout, monkeypatch, small_inputs_looked_at):
    torch.manual_seed(0)
    x = torch.rand(40, 60) * (torch.rand(40, 60) < 0.03)  # bag-of-words density, as Cora's
    x_input = {"dense": x, "coo": x.to_sparse(), "csr": x.to_sparse_csr()}[layout]
    edge_index = torch.randint(0, 40, (2, 150))
    model = TwoGAT()
    calls = []
    real = projection._SparseLinear.apply
    model(x_input, edge_index)   # a dense mostly-zero input is converted on its second use
    monkeypatch.setattr(projection._SparseLinear, "apply", lambda *a: calls.append(1) or real(*a))
    out = model(x_input, edge_index)
    out.square().sum().backward()
    assert calls, "the first layer's projection did not take the sparse path"
    sparse_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    monkeypatch.setattr(projection, "SPARSE_INPUT_DENSITY", -1.0)  # the dense path, for reference
    projection._SPARSE_COPIES.clear()
    reference = model(x.clone(), edge_index)
    reference.square().sum().backward()
    torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-6)
    for p, g in zip(model.parameters(), sparse_grads):
        torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-6)


def test_sparse_copy_follows_in_place_changes():
    conv = U.GCNConv(60, 4)
    x = torch.rand(40, 60) * (torch.rand(40, 60) < 0.03)
    edge_index = torch.randint(0, 40, (2, 150))
    conv(x, edge_index)
    x[0, :] = 1.0  # in place: the cached CSR copy is stale
    torch.testing.assert_close(conv(x, edge_index), conv(x.clone(), edge_index), rtol=1e-5, atol=1e-6)
    coo = x.to_sparse()
    conv(coo, edge_index)
    coo.values().mul_(2.0)
    torch.testing.assert_close(conv(coo, edge_index), conv(2 * x, edge_index), rtol=1e-5, atol=1e-6)


def test_sparse_input_switch_does_not_leak_its_verdict(small_inputs_looked_at):
    """A dense verdict cached while the projection was switched off is not reused after it."""
    x = torch.zeros(300, 50)
    x[::7, 3] = 1.0
    with projection.sparse_input(False):
        assert projection.sparse_if_mostly_zero(x) is x
        assert projection.sparse_if_mostly_zero(x) is x
    assert projection.sparse_if_mostly_zero(x) is x   # mostly zeros, first use: dense
    assert projection.is_sparse(projection.sparse_if_mostly_zero(x))
    with projection.sparse_input(False):
        assert projection.sparse_if_mostly_zero(x) is x


def test_a_small_input_stays_dense_unlooked_at_and_a_large_one_is_converted():
    """Below SPARSE_MIN_ELEMENTS a mostly-zero input is not even remembered (no cache entry); at the
    bound it is, and converted at its second sight."""
    n = projection.SPARSE_MIN_ELEMENTS // 64
    for rows, converted in ((n - 1, False), (n, True)):
        projection._SPARSE_COPIES.clear()
        x = torch.zeros(rows, 64)
        x[::9, 5] = 1.0
        assert projection.sparse_if_mostly_zero(x) is x
        assert projection.is_sparse(projection.sparse_if_mostly_zero(x)) == converted
        assert bool(projection._SPARSE_COPIES) == converted
    projection._SPARSE_COPIES.clear()


def test_an_input_made_anew_every_step_is_not_converted(monkeypatch, small_inputs_looked_at):
    """F.dropout(x) before the first layer makes a new mostly-zero tensor every step: converting
    each one cost more than the sparse product saved (PyG's gcn.py on Cora: ~13 ms a step), so only
    an input seen a second time is converted, and the results are the dense path's."""
    conversions = []
    real = torch.Tensor.to_sparse_csr
    monkeypatch.setattr(torch.Tensor, "to_sparse_csr", lambda self, *a, **k: conversions.append(1) or real(self, *a, **k))
    projection._SPARSE_COPIES.clear()
    torch.manual_seed(0)
    x = torch.rand(200, 80) * (torch.rand(200, 80) < 0.03)
    edge_index = torch.randint(0, 200, (2, 600))
    conv = U.GCNConv(80, 4)
    for _ in range(3):
        out = conv(torch.nn.functional.dropout(x, 0.5), edge_index)
    assert conversions == []
    fixed = x.clone()
    first, second = conv(fixed, edge_index), conv(fixed, edge_index)
    assert conversions == [1]
    torch.testing.assert_close(first, second, rtol=1e-5, atol=1e-6)
    assert out.shape == (200, 4)
