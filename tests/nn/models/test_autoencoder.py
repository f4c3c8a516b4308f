"""unigraph.nn.models' auto-encoders (InnerProductDecoder, GAE, VGAE, ARGA, ARGVA) against PyG's
in float64: decoders, losses with given negatives, gradients, state_dict keys; drawn negatives by
their contract (distinct, no self-loop, no positive edge, one per positive)."""
from __future__ import annotations

import pytest
import torch

from pyg_compare import TOL, random_edges
from unigraph.nn.models import ARGA, ARGVA, GAE, VGAE, InnerProductDecoder

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG compares the auto-encoders")

N, D = 12, 5


def _encoders():
    torch.manual_seed(0)
    lin = torch.nn.Linear(7, D).double()
    mu_std = torch.nn.Linear(7, 2 * D).double()
    disc = torch.nn.Sequential(torch.nn.Linear(D, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1)).double()
    return lin, (lambda x: tuple(mu_std(x).chunk(2, dim=1))), mu_std, disc


def _z(seed=1):
    return torch.randn(N, D, dtype=torch.float64, generator=torch.Generator().manual_seed(seed), requires_grad=True)


@pytest.mark.parametrize("sigmoid", [True, False])
def test_inner_product_decoder_equals_pyg(sigmoid):
    edges = random_edges(N, 30)
    z1, z2 = _z(), _z()
    ours, theirs = InnerProductDecoder()(z1, edges, sigmoid=sigmoid), pyg_models.InnerProductDecoder()(z2, edges, sigmoid=sigmoid)
    torch.testing.assert_close(ours, theirs, **TOL)
    w = torch.randn_like(ours)
    (ours * w).sum().backward(), (theirs * w).sum().backward()
    torch.testing.assert_close(z1.grad, z2.grad, **TOL)
    torch.testing.assert_close(InnerProductDecoder().forward_all(z1, sigmoid=sigmoid),
                               pyg_models.InnerProductDecoder().forward_all(z2, sigmoid=sigmoid), **TOL)
    assert str(InnerProductDecoder()) == str(pyg_models.InnerProductDecoder())


def test_gae_recon_loss_and_test_equal_pyg_with_given_negatives():
    lin = _encoders()[0]
    ours, theirs = GAE(lin), pyg_models.GAE(lin)
    pos, neg = random_edges(N, 25, seed=2), random_edges(N, 20, seed=3)
    z1, z2 = _z(), _z()
    a, b = ours.recon_loss(z1, pos, neg), theirs.recon_loss(z2, pos, neg)
    torch.testing.assert_close(a, b, **TOL)
    a.backward(), b.backward()
    torch.testing.assert_close(z1.grad, z2.grad, **TOL)
    assert ours.test(z1, pos, neg) == pytest.approx(theirs.test(z2, pos, neg), rel=1e-12)
    x = torch.randn(N, 7, dtype=torch.float64)
    torch.testing.assert_close(ours.encode(x), theirs.encode(x), **TOL)
    torch.testing.assert_close(ours(x), theirs(x), **TOL)
    torch.testing.assert_close(ours.decode(z1, pos), theirs.decode(z1, pos), **TOL)
    assert str(ours) == str(theirs)


def test_drawn_negatives_follow_pyg_contract(monkeypatch):
    from unigraph.nn.models import autoencoder
    seen = []
    real = autoencoder.negative_edges
    monkeypatch.setattr(autoencoder, "negative_edges", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    pos = random_edges(N, 40, seed=4)
    z = _z()
    loss = GAE(lambda x: x).recon_loss(z, pos)
    neg = seen[0]
    assert torch.isfinite(loss) and neg.shape == (2, 40)
    assert bool((neg[0] != neg[1]).all())
    pos_keys, neg_keys = pos[0] * N + pos[1], neg[0] * N + neg[1]
    assert neg_keys.unique().numel() == 40 and not torch.isin(neg_keys, pos_keys).any()
    # the loss is the given-negatives loss on those pairs
    torch.testing.assert_close(loss, pyg_models.GAE(lambda x: x).recon_loss(z, pos, neg), **TOL)


def test_drawn_negatives_repeat_with_the_seed_and_stop_at_the_non_edges():
    pos = torch.tensor([[0, 1, 2, 0], [1, 2, 0, 2]])  # 3 nodes: 6 off-diagonal pairs, 2 left
    z = _z()[:3]
    model = GAE(lambda x: x)
    torch.manual_seed(5)
    first = model.recon_loss(z, pos)
    torch.manual_seed(5)
    torch.testing.assert_close(model.recon_loss(z, pos), first, rtol=0, atol=0)
    neg = torch.tensor([[1, 2], [0, 1]])  # all the non-edges: the loss is then determined
    torch.testing.assert_close(first, pyg_models.GAE(lambda x: x).recon_loss(z, pos, neg), **TOL)


def test_vgae_encode_kl_loss_and_state_dict_equal_pyg():
    _, enc, mu_std, _ = _encoders()
    x = torch.randn(N, 7, dtype=torch.float64)
    ours, theirs = VGAE(enc), pyg_models.VGAE(enc)
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours.encode(x), theirs.encode(x), **TOL)
    torch.testing.assert_close(ours.kl_loss(), theirs.kl_loss(), **TOL)
    mu, logstd = torch.randn(N, D, dtype=torch.float64), 20 * torch.randn(N, D, dtype=torch.float64)  # clamped
    torch.testing.assert_close(ours.kl_loss(mu, logstd), theirs.kl_loss(mu, logstd), **TOL)
    ours.train(), theirs.train()
    torch.manual_seed(6)
    a = ours.encode(x)
    torch.manual_seed(6)
    torch.testing.assert_close(a, theirs.encode(x), **TOL)  # randn_like draws the same noise
    assert ours.__logstd__.max() <= 10
    # a module encoder: the same state_dict keys, loading strictly
    ours, theirs = VGAE(mu_std), pyg_models.VGAE(mu_std)
    ours.load_state_dict(theirs.state_dict(), strict=True)


def test_arga_and_argva_losses_equal_pyg():
    lin, enc, mu_std, disc = _encoders()
    z = _z()
    for ours, theirs in [(ARGA(lin, disc), pyg_models.ARGA(lin, disc)),
                         (ARGVA(mu_std, disc), pyg_models.ARGVA(mu_std, disc))]:
        assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
        ours.load_state_dict(theirs.state_dict(), strict=True)
        torch.testing.assert_close(ours.reg_loss(z), theirs.reg_loss(z), **TOL)
        torch.manual_seed(7)
        a = ours.discriminator_loss(z)
        torch.manual_seed(7)
        torch.testing.assert_close(a, theirs.discriminator_loss(z), **TOL)
    ours, theirs = ARGVA(enc, disc), pyg_models.ARGVA(enc, disc)
    ours.eval(), theirs.eval()
    x = torch.randn(N, 7, dtype=torch.float64)
    torch.testing.assert_close(ours.encode(x), theirs.encode(x), **TOL)
    torch.testing.assert_close(ours.__mu__, theirs.__mu__, **TOL)
    torch.testing.assert_close(ours.kl_loss(), theirs.kl_loss(), **TOL)
    torch.testing.assert_close(ours.reparametrize(ours.__mu__, ours.__logstd__), ours.__mu__, **TOL)


def test_reset_parameters_resets_the_modules():
    lin, _, _, disc = _encoders()
    before = lin.weight.detach().clone(), disc[0].weight.detach().clone()
    ARGA(lin, disc)
    assert not torch.equal(lin.weight, before[0]) and not torch.equal(disc[0].weight, before[1])


def test_bad_inputs_are_refused():
    model = GAE(lambda x: x)
    z = _z()
    with pytest.raises(ValueError, match="edge_index"):
        model.decode(z, torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="outside"):
        model.decode(z, torch.tensor([[0], [N]]))
    with pytest.raises(ValueError, match="z as"):
        model.decode(z[0], torch.tensor([[0], [1]]))
    with pytest.raises(ValueError, match="neg_edge_index"):
        model.recon_loss(z, torch.tensor([[0], [1]]), torch.tensor([[0.0], [1.0]]))
    with pytest.raises(TypeError, match="encoder"):
        GAE(3)
    with pytest.raises(ValueError, match="encode first"):
        VGAE(lambda x: (x, x)).kl_loss()
    with pytest.raises(ValueError, match=r"\(mu, logstd\)"):
        VGAE(lambda x: x).encode(z)
