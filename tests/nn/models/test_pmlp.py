"""PMLP against PyG's: training (MLP) and evaluation (propagating) modes, norm, bias, in float64;
str(); errors."""
import pytest
import torch

from pyg_compare import assert_same, loaded, random_edges
from unigraph.nn.models import PMLP

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")


def _pair(num_layers=3, norm=True, bias=True, dropout=0.0):
    torch.manual_seed(0)
    kw = dict(dropout=dropout, norm=norm, bias=bias)
    theirs = pyg_models.PMLP(5, 8, 3, num_layers, **kw)
    return theirs, loaded(theirs, PMLP(5, 8, 3, num_layers, **kw))


@pytest.mark.parametrize("num_layers", [2, 4])
@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_matches_pyg(num_layers, norm, bias, training):
    theirs, ours = _pair(num_layers, norm, bias)
    theirs.train(training), ours.train(training)
    x = torch.randn(7, 5, dtype=torch.float64)
    assert_same(theirs, ours, x, random_edges(7, 20))
    assert str(ours) == str(theirs)


def test_dropout_in_training_matches_with_same_seed():
    theirs, ours = _pair(dropout=0.5)
    x = torch.randn(7, 5, dtype=torch.float64)
    torch.manual_seed(4)
    expected = theirs(x)
    torch.manual_seed(4)
    torch.testing.assert_close(ours(x), expected, rtol=1e-9, atol=1e-10)


def test_errors():
    with pytest.raises(ValueError, match="'edge_index' needs to be present"):
        PMLP(5, 8, 3, 2).eval()(torch.randn(4, 5))
    with pytest.raises(ValueError, match="num_layers"):
        PMLP(5, 8, 3, 1)
    with pytest.raises(ValueError, match="in_channels"):
        PMLP(-1, 8, 3, 2)
