"""``relu_dropout`` at NaN inputs: torch's ReLU passes the gradient where its output is not <= 0
(a NaN output included), so ``dropout(relu(x))`` sends ``g * m / (1 - p)`` to a NaN input. The fused
pass must too (it sent 0), forward and backward, against torch's own ``relu`` then the same mask."""
from __future__ import annotations

import math

import pytest
import torch

from unigraph.nn import dropout as D


@pytest.mark.parametrize("counter", [True, False], ids=["counter-based", "torch generator"])
def test_relu_dropout_gradient_at_nan_inputs_is_torchs(counter):
    torch.manual_seed(3)
    x = torch.randn(64, 9, dtype=torch.float64)
    x[::3] = math.nan  # a third of the rows: about 115 kept NaN elements
    grad = torch.randn_like(x)
    results = []
    with D.counter_based(counter):
        for fused in (True, False):
            leaf = x.clone().requires_grad_()
            torch.manual_seed(4)  # the same key, so the same mask
            y = D.relu_dropout(leaf, 0.4) if fused else D.dropout(torch.relu(leaf), 0.4)
            y.backward(grad)
            results.append((y.detach(), leaf.grad))
        torch.manual_seed(4)
        mask = D.dropout(torch.ones_like(x), 0.4) != 0
    (y_fused, g_fused), (y_plain, g_plain) = results
    torch.testing.assert_close(y_fused, y_plain, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(g_fused, g_plain, rtol=0, atol=0, equal_nan=True)
    kept = mask & torch.isnan(x)  # kept NaN elements: the gradient is g / (1 - p) there
    assert int(kept.sum()) > 50
    torch.testing.assert_close(g_fused[kept], grad[kept] / 0.6, rtol=1e-15, atol=0)
