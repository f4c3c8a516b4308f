"""DeepGraphInfomax against PyG's: forward (positional and keyword corruption), discriminate,
loss and their gradients in float64, reset, str, test() and the constructor's errors."""
import pytest
import torch

from pyg_compare import TOL, random_edges
from unigraph.nn.models import DeepGraphInfomax

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")


def _pair(seed=0):
    """PyG's model and ours over one shared encoder (a PyG GCN), ours loaded with PyG's weights."""
    torch.manual_seed(seed)
    encoder = pyg_models.GCN(8, 8, num_layers=2).double()

    def summary(z, *args, **kwargs):
        return z.mean(dim=0).sigmoid()

    def corruption(x, edge_index, edge_weight=None):
        return x.flip(0), edge_index, edge_weight

    theirs = pyg_models.DeepGraphInfomax(8, encoder, summary, corruption).double()
    ours = DeepGraphInfomax(8, encoder, summary, corruption).double()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return theirs, ours


def _run(model, x, edge_index, edge_weight):
    x = x.clone().requires_grad_()
    model.zero_grad()
    pos, neg, s = model(x, edge_index, edge_weight=edge_weight)
    loss = model.loss(pos, neg, s) + model.discriminate(pos, s, sigmoid=False).sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return (pos, neg, s, loss), x.grad, grads


@pytest.mark.parametrize("weighted", [False, True])
def test_same_as_pyg(weighted):
    theirs, ours = _pair()
    x = torch.randn(12, 8, dtype=torch.float64)
    edge_index = random_edges(12, 40)
    w = torch.rand(40, dtype=torch.float64) if weighted else None
    out_t, gx_t, g_t = _run(theirs, x, edge_index, w)
    out_o, gx_o, g_o = _run(ours, x, edge_index, w)
    for a, b in zip(out_o, out_t):
        torch.testing.assert_close(a, b, **TOL)
    torch.testing.assert_close(gx_o, gx_t, **TOL)
    assert g_o.keys() == g_t.keys()
    for name in g_t:
        torch.testing.assert_close(g_o[name], g_t[name], **TOL, msg=name)
    assert str(ours) == str(theirs) == "DeepGraphInfomax(8)"


def test_batched_summary_and_single_argument():
    theirs = pyg_models.DeepGraphInfomax(4, lambda x: x, lambda z, *a: z[:3], lambda x: x + 1).double()
    ours = DeepGraphInfomax(4, lambda x: x, lambda z, *a: z[:3], lambda x: x + 1).double()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    x = torch.randn(5, 4, dtype=torch.float64)
    for a, b in zip(ours(x), theirs(x)):
        torch.testing.assert_close(a, b, **TOL)
    pos, _, s = ours(x)
    torch.testing.assert_close(ours.discriminate(pos, s), theirs.discriminate(pos, s), **TOL)


def test_reset_parameters_matches_pyg():
    torch.manual_seed(3)
    theirs = pyg_models.DeepGraphInfomax(6, pyg_models.GCN(6, 6, 2), lambda z, *a: z.mean(0), lambda x, e: (x, e))
    torch.manual_seed(3)
    ours = DeepGraphInfomax(6, pyg_models.GCN(6, 6, 2), lambda z, *a: z.mean(0), lambda x, e: (x, e))
    for (n, p), (m, q) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert n == m and torch.equal(p, q), n


def test_downstream_test():
    pytest.importorskip("sklearn")
    ours = DeepGraphInfomax(4, lambda x: x, lambda z, *a: z.mean(0), lambda x: x)
    z = torch.randn(20, 4)
    y = (z[:, 0] > 0).long()
    assert 0.0 <= ours.test(z, y, z, y, max_iter=50) <= 1.0


def test_errors():
    with pytest.raises(ValueError, match="hidden_channels"):
        DeepGraphInfomax(0, lambda x: x, lambda z: z, lambda x: x)
    with pytest.raises(TypeError, match="corruption"):
        DeepGraphInfomax(4, lambda x: x, lambda z: z, None)
