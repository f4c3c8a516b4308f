"""unigraph.nn.MLP's PyG contract beyond its numbers (tests/test_basic_models_pyg.py compares those):
``return_emb`` and TorchScript."""
from __future__ import annotations

import pytest
import torch

from unigraph.nn import MLP


def test_return_emb_as_a_bool_returns_the_pair():
    mlp = MLP([16, 32, 1])
    x = torch.randn(4, 16)
    out, emb = mlp(x, return_emb=True)
    assert out.shape == (4, 1) and emb.shape == (4, 32)
    out_false, none = mlp(x, return_emb=False)
    assert none is None
    torch.testing.assert_close(out_false, out)
    torch.testing.assert_close(mlp(x), out)


@pytest.mark.parametrize("norm", [None, "batch_norm"])
@pytest.mark.parametrize("act_first", [False, True])
def test_torchscript_compiles_the_mlp(norm, act_first):
    mlp = MLP([8, 16, 16, 4], norm=norm, act_first=act_first).eval()
    scripted = torch.jit.script(mlp)
    x = torch.randn(5, 8)
    torch.testing.assert_close(scripted(x), mlp(x))
