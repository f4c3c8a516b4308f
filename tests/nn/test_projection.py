"""``projection.linear``'s choice between the dense product and a cached CSR copy of a mostly-zero
dense input: an undifferentiated product with at most ``DENSE_FORWARD_WIDTH`` outputs stays dense
(``_dense_is_cheaper``); differentiated or wider ones take the sparse path from the second use.
Every case compares with the plain dense product in float64, values and gradients."""
from __future__ import annotations

import pytest
import torch

from unigraph.nn import projection


def _bag_of_words(seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(300, 200, generator=gen, dtype=torch.float64) < 0.02).to(torch.float64)


def _weight(out: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(out, 200, generator=gen, dtype=torch.float64, requires_grad=True)


@pytest.fixture
def conversions(monkeypatch):
    """The CSR copies built (each a call of ``projection._convert``)."""
    made = []
    convert = projection._convert

    def counting(key, x):
        made.append(key)
        return convert(key, x)
    monkeypatch.setattr(projection, "_convert", counting)
    return made


def _plain(x, weight, bias=None):
    with projection.sparse_input(False):
        return projection.linear(x, weight, bias)


def test_narrow_evaluation_stays_dense(conversions):
    x, weight = _bag_of_words(1), _weight(projection.DENSE_FORWARD_WIDTH)
    bias = torch.randn(weight.shape[0], dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        for _ in range(3):
            assert torch.equal(projection.linear(x, weight, bias), torch.nn.functional.linear(x, weight, bias))
    assert not conversions
    weight.requires_grad_(False)   # no grad to take even with grad mode on
    bias.requires_grad_(False)
    for _ in range(2):
        assert torch.equal(projection.linear(x, weight, bias), torch.nn.functional.linear(x, weight, bias))
    assert not conversions


def test_wider_evaluation_takes_the_sparse_copy(conversions):
    x, weight = _bag_of_words(2), _weight(projection.DENSE_FORWARD_WIDTH + 1)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(projection.linear(x, weight), _plain(x, weight), rtol=1e-12, atol=1e-12)
    assert len(conversions) == 1


def test_training_then_evaluation_then_training_on_one_input(conversions):
    """Training takes the sparse path (its backward avoids a dense pass over x); evaluation between
    steps stays dense; a write behind the version counter between them is seen by both."""
    x, weight = _bag_of_words(3), _weight(16)
    for step in range(3):
        got = projection.linear(x, weight)
        (got_grad,) = torch.autograd.grad(got.square().sum(), weight)
        want = _plain(x, weight)
        (want_grad,) = torch.autograd.grad(want.square().sum(), weight)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(got_grad, want_grad, rtol=1e-12, atol=1e-12)
        with torch.no_grad():
            assert torch.equal(projection.linear(x, weight), torch.nn.functional.linear(x, weight))
        if step == 1:
            x.data[7, 3] = 5.0 if x[7, 3] == 0 else 0.0   # behind the version counter
    assert len(conversions) >= 1   # the training steps took the sparse path


def test_input_that_needs_gradients_gets_them(conversions):
    x, weight = _bag_of_words(4).requires_grad_(), _weight(8)
    out = projection.linear(x, weight.detach())
    (grad,) = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(grad, weight.detach().sum(0).expand_as(x), rtol=1e-12, atol=1e-12)
    assert not conversions
