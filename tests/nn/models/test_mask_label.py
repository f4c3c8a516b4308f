"""MaskLabel against PyG's: both methods in float64 (outputs, gradients), ratio_mask, str(), errors."""
import pytest
import torch

from pyg_compare import TOL, loaded
from unigraph.nn.models import MaskLabel

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")


@pytest.mark.parametrize("method", ["add", "concat"])
def test_matches_pyg(method):
    torch.manual_seed(0)
    theirs = pyg_models.MaskLabel(3, 4, method=method)
    ours = loaded(theirs, MaskLabel(3, 4, method=method))
    x = torch.randn(6, 4, dtype=torch.float64)
    y = torch.tensor([0, 2, 1, 1, 0, 2])
    mask = torch.tensor([True, False, True, True, False, False])
    xs = [x.clone().requires_grad_() for _ in range(2)]
    expected, out = theirs(xs[0], y, mask), ours(xs[1], y, mask)
    torch.testing.assert_close(out, expected, **TOL)
    w = torch.randn_like(out)
    (expected * w).sum().backward()
    (out * w).sum().backward()
    torch.testing.assert_close(xs[1].grad, xs[0].grad, **TOL)
    torch.testing.assert_close(ours.emb.weight.grad, theirs.emb.weight.grad, **TOL)
    assert str(ours) == str(theirs) == "MaskLabel()"


def test_ratio_mask_keeps_false_and_matches_pyg_with_same_seed():
    mask = torch.tensor([True, False, True, True, False, True])
    torch.manual_seed(5)
    expected = pyg_models.MaskLabel.ratio_mask(mask, 0.5)
    torch.manual_seed(5)
    out = MaskLabel.ratio_mask(mask, 0.5)
    assert torch.equal(out, expected) and not out[~mask].any()


def test_errors():
    with pytest.raises(ValueError, match="'add' or 'concat'"):
        MaskLabel(2, 4, method="mul")
    with pytest.raises(ValueError, match="out_channels"):
        MaskLabel(2, 3)(torch.randn(4, 4), torch.zeros(4, dtype=torch.long), torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="one row per node"):
        MaskLabel(2, 4)(torch.randn(4, 4), torch.zeros(3, dtype=torch.long), torch.ones(4, dtype=torch.bool))
