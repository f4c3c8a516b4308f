"""unigraph.nn.dropout: the counter-based CPU dropout has F.dropout's distribution and semantics,
its backward is the same mask (recomputed, not stored), and every path that cannot use it falls
back to torch's generator."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from unigraph.nn import dropout as D

numba = pytest.importorskip("numba", reason="the counter-based path needs numba (the 'cpu' extra)")


def _binomial_ok(kept: int, n: int, q: float, sigmas: float = 6.0) -> bool:
    return abs(kept - n * q) <= sigmas * math.sqrt(n * q * (1 - q))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("n", [1_000_003, 64])  # odd size: the last element is the low half of a pair
def test_keep_fraction_and_kept_values(p, n):
    torch.manual_seed(1)
    x = torch.rand(n) + 0.5  # never zero: a zero output means dropped
    y = D.dropout(x, p)
    kept = y != 0
    assert _binomial_ok(int(kept.sum()), n, 1 - p)
    scale = torch.tensor(1.0 / (1.0 - p), dtype=torch.float32)
    assert torch.equal(y[kept], x[kept] * scale)


def test_neighbouring_elements_and_calls_are_independent():
    """The two halves of one 64-bit draw (elements 2k and 2k+1), and two calls, are independent:
    each joint frequency of (kept, kept) matches the product of the marginals."""
    torch.manual_seed(2)
    n, p = 2_000_000, 0.3
    ones = torch.ones(n)
    a = D.dropout(ones, p) != 0
    b = D.dropout(ones, p) != 0
    pairs = a.view(-1, 2)
    q = 1 - p
    assert _binomial_ok(int((pairs[:, 0] & pairs[:, 1]).sum()), n // 2, q * q)
    assert _binomial_ok(int((a[1:] & a[:-1]).sum()), n - 1, q * q)
    assert _binomial_ok(int((a & b).sum()), n, q * q)
    # rows and columns of a matrix: no column is kept more often than chance allows
    m = D.dropout(torch.ones(4096, 64), p) != 0
    per_column = m.sum(0)
    assert all(_binomial_ok(int(k), 4096, q, sigmas=5.0) for k in per_column)


def test_seeded_repeatable_and_thread_count_free():
    x = torch.randn(300, 257)
    torch.manual_seed(7)
    first = D.dropout(x, 0.4)
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        torch.manual_seed(7)
        serial = D.dropout(x, 0.4)
    finally:
        numba.set_num_threads(before)
    assert torch.equal(first, serial)
    torch.manual_seed(8)
    assert not torch.equal(first, D.dropout(x, 0.4))


def test_backward_is_the_same_mask_and_differentiable_twice():
    torch.manual_seed(3)
    x = torch.randn(50, 33, dtype=torch.float64, requires_grad=True)
    y = D.dropout(x, 0.5)
    g = torch.randn_like(y)
    (grad,) = torch.autograd.grad(y, x, g, create_graph=True)
    multiplier = y.detach() / x.detach()
    assert torch.equal(grad.detach(), g * multiplier)
    rule = D._draw_rule(0.25)
    fn = lambda t: D._CounterDropout.apply(t, rule)  # noqa: E731  (one fixed mask)
    torch.autograd.gradcheck(fn, (torch.randn(7, 5, dtype=torch.float64, requires_grad=True),))
    torch.autograd.gradgradcheck(fn, (torch.randn(7, 5, dtype=torch.float64, requires_grad=True),))


def test_ieee_semantics_as_f_dropout():
    """Dropped NaN/inf give NaN (x * 0, as F.dropout); kept ones stay NaN/inf."""
    torch.manual_seed(4)
    x = torch.tensor([math.nan, math.inf, -math.inf, 1.0] * 2000)
    y = D.dropout(x, 0.5)
    dropped = torch.ones_like(x)
    torch.manual_seed(4)
    mask = D.dropout(dropped, 0.5) != 0
    finite = x.isfinite()
    assert torch.isnan(y[~mask & ~finite]).all() and (y[~mask & finite] == 0).all()
    assert 1000 < int((~mask & ~finite).sum()) < 5000
    assert torch.equal(y[mask].isinf(), x[mask].isinf()) and torch.isnan(y[mask][x[mask].isnan()]).all()


def test_edges_and_errors():
    x = torch.randn(10, 3)
    assert D.dropout(x, 0.0) is x and D.dropout(x, 0.7, training=False) is x
    assert torch.equal(D.dropout(x, 1.0), torch.zeros_like(x))
    assert D.dropout(torch.empty(0, 4), 0.5).shape == (0, 4)
    for bad in (-0.1, 1.5, math.nan, "0.5", True):
        with pytest.raises(ValueError, match="between 0 and 1"):
            D.dropout(x, bad)
    with pytest.raises(ValueError, match="between 0 and 1"):
        D.Dropout(2.0)


def test_non_contiguous_input_uses_row_major_positions():
    x = torch.randn(40, 30)
    torch.manual_seed(5)
    from_view = D.dropout(x.t(), 0.5)
    torch.manual_seed(5)
    from_copy = D.dropout(x.t().contiguous(), 0.5)
    assert from_view.shape == (30, 40) and torch.equal(from_view, from_copy)


def test_keep_mask_is_the_multiplier_dropout_applies():
    x = torch.randn(123, 8)
    torch.manual_seed(6)
    mask = D.keep_mask((123, 8), 0.3, x)
    torch.manual_seed(6)
    assert torch.equal(x * mask, D.dropout(x, 0.3))
    assert set(mask.unique().tolist()) <= {0.0, float(torch.tensor(1 / 0.7, dtype=torch.float32))}


@pytest.mark.parametrize("case", ["switched off", "float16", "bfloat16"])
def test_fallback_paths_draw_from_torch(case, monkeypatch):
    """Where the counter path does not apply, the mask is torch's rand >= p (same distribution)."""
    calls = []
    real = D._torch_mask
    monkeypatch.setattr(D, "_torch_mask", lambda *a: calls.append(a) or real(*a))
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(case, torch.float32)
    x = torch.ones(20000, dtype=dtype)
    if case == "switched off":
        with D.counter_based(False):
            y = D.dropout(x, 0.5)
        assert D._enabled  # restored after the block
    else:
        y = D.dropout(x, 0.5)
    assert len(calls) == 1 and y.dtype == dtype
    assert _binomial_ok(int((y != 0).sum()), 20000, 0.5)


def test_model_training_step_gradients_match_the_mask():
    """The models' dropout after an activation: output and gradient both come from one mask."""
    from unigraph.models import layer_stack
    torch.manual_seed(9)
    h = torch.randn(30, 16, requires_grad=True)
    torch.manual_seed(10)
    y = layer_stack.activation_dropout(h, F.relu, 0.5, True)
    y.sum().backward()
    torch.manual_seed(10)
    mask = D.keep_mask((30, 16), 0.5, h)
    assert torch.equal(y, F.relu(h.detach()) * mask)
    assert torch.equal(h.grad, (h.detach() > 0) * mask)


def test_relu_dropout_is_dropout_of_relu_values_and_gradients():
    """One fused pass, the same numbers as relu then dropout with the same key, forward and backward,
    NaN/inf and zeros included (a NaN gradient at a dropped positive element stays NaN, as in torch)."""
    torch.manual_seed(11)
    x = torch.randn(333, 17, dtype=torch.float64)
    x[0, :4] = torch.tensor([math.nan, math.inf, -math.inf, 0.0])
    grad = torch.randn_like(x)
    grad[1, :3] = math.nan
    results = []
    for fused in (True, False):
        leaf = x.clone().requires_grad_()
        torch.manual_seed(12)
        y = D.relu_dropout(leaf, 0.4) if fused else D.dropout(torch.relu(leaf), 0.4)
        y.backward(grad)
        results.append((y.detach(), leaf.grad))
    (y1, g1), (y2, g2) = results
    assert torch.equal(y1.nan_to_num(7.0), y2.nan_to_num(7.0)) and torch.equal(y1.isnan(), y2.isnan())
    assert torch.equal(g1.nan_to_num(7.0), g2.nan_to_num(7.0)) and torch.equal(g1.isnan(), g2.isnan())
    assert torch.isnan(g1[1, :3][(x[1, :3] > 0)]).all()


def test_relu_dropout_twice_differentiable_and_fallback():
    rule = D._draw_rule(0.3)
    x = torch.randn(9, 4, dtype=torch.float64)
    x = torch.where(x.abs() < 0.1, torch.full_like(x, 0.5), x).requires_grad_()  # away from relu's kink
    fn = lambda t: D._CounterReluDropout.apply(t, rule)  # noqa: E731
    torch.autograd.gradcheck(fn, (x,))
    torch.autograd.gradgradcheck(fn, (x,))
    assert torch.equal(D.relu_dropout(x, 0.3, training=False), torch.relu(x))
    with D.counter_based(False):
        y = D.relu_dropout(torch.randn(20000), 0.5)
    assert _binomial_ok(int((y != 0).sum()), 20000, 0.25) and (y >= 0).all()


def test_on_a_gpu_dropout_is_torchs_own_kernel(monkeypatch):
    """On a GPU ``dropout`` and ``relu_dropout`` are ``F.dropout`` itself (one fused kernel): the same
    values and gradients as torch's for the same seed. Wired here by answering the device test yes
    for CPU tensors (with the counter path off, as it is for CUDA tensors)."""
    x = torch.randn(300, 17, dtype=torch.float64)
    assert not D._torch_kernel(x)  # the CPU keeps its own paths
    monkeypatch.setattr(D, "_torch_kernel", lambda x: True)
    grad = torch.randn_like(x)
    with D.counter_based(False):
        for ours, theirs in ((D.dropout, lambda t, p: F.dropout(t, p, True)),
                             (D.relu_dropout, lambda t, p: F.dropout(torch.relu(t), p, True))):
            results = []
            for fn in (ours, theirs):
                leaf = x.clone().requires_grad_()
                torch.manual_seed(8)
                y = fn(leaf, 0.3)
                y.backward(grad)
                results.append((y.detach(), leaf.grad))
            (y1, g1), (y2, g2) = results
            assert torch.equal(y1, y2) and torch.equal(g1, g2)


@pytest.mark.parametrize("n", [1, 2, 3, 2 * (1 << 14) - 1, 2 * (1 << 14), 2 * (1 << 14) + 3, 5 * (1 << 14) + 7])
def test_counter_kernel_is_its_documented_mapping(n):
    """Each element's multiplier is the documented function of (key, position): a numpy reference
    of the block layout (pairs' low bits for a block's first half, high bits for its second, the
    odd block's middle element on one more pair), so a faster loop cannot change a mask."""
    np = pytest.importorskip("numpy")
    pytest.importorskip("numba")
    from unigraph.kernels.counter_rng import GOLDEN, MIX1, MIX2
    from unigraph.kernels.cpu import dropout as kernels

    def mix64(z):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
        return z ^ (z >> np.uint64(31))

    key, threshold, scale = np.uint64(0x0123456789ABCDEF), np.uint64(3 << 30), 4.0
    expected = np.empty(n, np.float64)
    block = 2 * kernels.PAIRS_PER_BLOCK
    for first in range(0, n, block):
        size = min(block, n - first)
        half = (size + 1) // 2
        pairs = np.arange(first // 2, first // 2 + half, dtype=np.uint64)
        bits = mix64(key + pairs * np.uint64(GOLDEN))
        expected[first:first + half] = np.where((bits & np.uint64(0xFFFFFFFF)) >= threshold, scale, 0.0)
        high = np.where((bits >> np.uint64(32)) >= threshold, scale, 0.0)
        expected[first + half:first + size] = high[:size - half]
    a = np.linspace(-2.0, 3.0, n)
    out = np.empty(n, np.float64)
    kernels.masked(kernels.SCALE, a, out, out, key, threshold, scale)
    np.testing.assert_array_equal(out, a * expected)
