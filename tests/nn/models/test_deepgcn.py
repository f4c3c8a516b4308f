"""DeepGCNLayer against PyG's: every block, dropout, gradient checkpointing, in float64; str();
errors."""
import pytest
import torch

from pyg_compare import TOL, assert_same, loaded, random_edges
from unigraph.nn import GENConv
from unigraph.nn.models import DeepGCNLayer

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference")


def _pair(block, ckpt_grad=False, dropout=0.0):
    torch.manual_seed(0)
    mods = lambda conv: (conv(8, 8), torch.nn.LayerNorm(8), torch.nn.ReLU())  # noqa: E731
    theirs = pyg_nn.DeepGCNLayer(*mods(pyg_nn.GENConv), block=block, dropout=dropout,
                                 ckpt_grad=ckpt_grad)
    ours = DeepGCNLayer(*mods(GENConv), block=block, dropout=dropout, ckpt_grad=ckpt_grad)
    return theirs, loaded(theirs, ours)


@pytest.mark.parametrize("block", ["res+", "res", "dense", "plain", "RES+"])
@pytest.mark.parametrize("ckpt_grad", [False, True])
def test_matches_pyg(block, ckpt_grad):
    theirs, ours = _pair(block, ckpt_grad)
    x = torch.randn(6, 8, dtype=torch.float64)
    out = assert_same(theirs, ours, x, random_edges(6, 15))
    assert out.shape == (6, 16 if block == "dense" else 8)
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("block", ["res+", "plain"])
def test_dropout_in_training_matches_with_same_seed(block):
    theirs, ours = _pair(block, dropout=0.5)
    x, ei = torch.randn(6, 8, dtype=torch.float64), random_edges(6, 15)
    torch.manual_seed(3)
    expected = theirs(x, ei)
    torch.manual_seed(3)
    torch.testing.assert_close(ours(x, ei), expected, **TOL)
    theirs.eval(), ours.eval()
    torch.testing.assert_close(ours(x, ei), theirs(x, ei), **TOL)


def test_errors():
    with pytest.raises(ValueError, match="block"):
        DeepGCNLayer(block="skip")
    with pytest.raises(ValueError, match="no conv"):
        DeepGCNLayer()(torch.randn(3, 4), random_edges(3, 4))
    with pytest.raises(TypeError, match="node features"):
        DeepGCNLayer(torch.nn.Identity())()
