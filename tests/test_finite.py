"""``unigraph.finite.all_finite``, the fast paths' one-pass gate: never True where an entry is NaN
or infinite, whatever the dtype, shape, position or mix; True for finite values whose sum stays
finite; False (the callers' exact general path) where finite values sum past the largest float."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from unigraph.finite import all_finite

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
NON_FINITE = [float("nan"), float("inf"), float("-inf")]


@given(dtype=st.sampled_from(FLOATS), rows=st.integers(1, 40), cols=st.integers(1, 9),
       bad=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(NON_FINITE)), min_size=1, max_size=4),
       scale=st.sampled_from([1.0, 1e3, 6e4]), transpose=st.booleans(), seed=st.integers(0, 2**16))
def test_never_true_where_an_entry_is_not_finite(dtype, rows, cols, bad, scale, transpose, seed):
    gen = torch.Generator().manual_seed(seed)
    t = (torch.randn(rows, cols, generator=gen) * scale).clamp(-6e4, 6e4).to(dtype)
    for at, value in bad:
        t.view(-1)[at % t.numel()] = value
    t = t.t() if transpose else t   # strided views too
    assert not bool(torch.isfinite(t).all())
    assert not all_finite(t)
    assert not all_finite(None, torch.ones(3), t)


@given(dtype=st.sampled_from(FLOATS), n=st.integers(0, 300), seed=st.integers(0, 2**16))
def test_true_for_finite_values_whose_sum_is_finite(dtype, n, seed):
    t = torch.randn(n, generator=torch.Generator().manual_seed(seed)).to(dtype)
    assert all_finite(t) and all_finite(t.view(-1, 1)[::2])


def test_half_precision_is_summed_in_float32():
    """65,504 is float16's largest value: a thousand of them overflow its own sum, not float32's."""
    assert all_finite(torch.full((1000,), 65504.0, dtype=torch.float16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_finite_values_summing_past_the_largest_float_read_as_not_finite(dtype):
    big = torch.full((4,), torch.finfo(dtype).max / 2, dtype=dtype)
    assert bool(torch.isfinite(big).all()) and not all_finite(big)   # the one-sided answer, documented


def test_what_holds_no_float_is_finite():
    assert all_finite()
    assert all_finite(None, torch.empty(0, 5), torch.arange(10), torch.tensor([True]))


def test_complex_values_are_checked_entry_by_entry():
    assert all_finite(torch.tensor([1 + 2j, 3j]))
    assert not all_finite(torch.tensor([1 + 2j, complex(0, float("inf"))]))


def test_it_reads_tensors_that_require_grad_and_runs_under_inference_mode():
    w = torch.ones(4, 3, requires_grad=True)
    with torch.inference_mode():
        assert all_finite(torch.ones(2))
    assert all_finite(w) and w.grad is None and w.grad_fn is None
