"""segment_matmul / block_segment_matmul / TypedLinear: every method equals one matmul per group
(values and gradients), with empty groups, no rows, padding and odd widths."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from unigraph.hetero import TypedLinear, block_segment_matmul, segment_matmul
from unigraph.hetero import grouped

EXACT_METHODS = ["bmm", "loop"]


def reference(x, counts, weight):
    """One matmul per group, written out."""
    out, start = [], 0
    for t, count in enumerate(counts):
        out.append(x[start:start + count] @ weight[t])
        start += count
    return torch.cat(out) if out else x.new_zeros(0, weight.shape[2])


def grads(fn, x, weight, seed=0):
    x = x.detach().requires_grad_()
    weight = weight.detach().requires_grad_()
    out = fn(x, weight)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    gx, gw = torch.autograd.grad(out, (x, weight), upstream, allow_unused=True)
    return out.detach(), gx, gw


@st.composite
def grouped_case(draw):
    counts = draw(st.lists(st.integers(0, 40), min_size=1, max_size=6))
    width_in = draw(st.sampled_from([1, 3, 4, 8, 16]))
    width_out = draw(st.sampled_from([1, 2, 4, 5, 8]))
    return counts, width_in, width_out, draw(st.integers(0, 2**16))


@given(grouped_case(), st.sampled_from([torch.float64, torch.float32]))
def test_every_method_equals_the_loop(case, dtype):
    counts, width_in, width_out, seed = case
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(sum(counts), width_in, generator=gen, dtype=dtype)
    weight = torch.randn(len(counts), width_in, width_out, generator=gen, dtype=dtype)
    want = grads(lambda a, w: reference(a, counts, w), x, weight, seed)
    methods = EXACT_METHODS + ["auto"]
    if grouped.choose_method(x, weight)[0] == "grouped_mm":
        methods.append("grouped_mm")
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    for method in methods:
        got = grads(lambda a, w: segment_matmul(a, counts, w, method=method), x, weight, seed)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, **tol, msg=lambda m: f"{method}: {m}")


def test_auto_uses_grouped_mm_only_where_it_was_checked():
    x32, w32 = torch.randn(6, 16), torch.randn(2, 16, 8)
    assert grouped.choose_method(x32.double(), w32.double())[0] == "bmm"   # a dtype the probe did not pass
    method, reason = grouped.choose_method(torch.randn(6, 3), torch.randn(2, 3, 8))
    assert method == "bmm" and ("16 bytes" in reason or "does not run" in reason)
    if grouped.choose_method(x32, w32)[0] != "grouped_mm":
        pytest.skip(f"torch._grouped_mm is not usable here: {grouped.choose_method(x32, w32)[1]}")
    with pytest.raises(RuntimeError, match="cannot run here"):
        segment_matmul(x32.double(), [3, 3], w32.double(), method="grouped_mm")


def test_bmm_tiles_pad_within_each_group():
    counts = [1, 0, 300, 17]
    tile = grouped.tile_rows(counts, 8, 4)
    gather, tile_group, keep = grouped._tile_plan(tuple(counts), tile, torch.device("cpu"))
    assert tile == 128 and tile_group.tolist() == [0, 2, 2, 2, 3]   # about the mean group size (80)
    assert torch.equal(gather[keep], torch.arange(sum(counts)))      # every row once, in order
    assert int((gather == sum(counts)).sum()) == tile_group.numel() * tile - sum(counts)


def test_equal_groups_take_one_plain_bmm():
    x, weight = torch.randn(12, 3, dtype=torch.float64), torch.randn(4, 3, 2, dtype=torch.float64)
    torch.testing.assert_close(segment_matmul(x, [3, 3, 3, 3], weight, method="bmm"),
                               reference(x, [3, 3, 3, 3], weight), rtol=1e-12, atol=1e-12)


def test_no_rows_keeps_the_weight_in_the_graph():
    weight = torch.randn(2, 3, 4, requires_grad=True)
    out = segment_matmul(torch.randn(0, 3), [0, 0], weight)
    assert out.shape == (0, 4)
    out.sum().backward()
    assert torch.equal(weight.grad, torch.zeros(2, 3, 4))


@pytest.mark.parametrize("counts, shape, error, words", [
    ([2, 2], (5, 3), ValueError, ["sum to 4 rows but x has 5"]),
    ([5], (5, 3), ValueError, ["1 groups but the weight has 2"]),
    ([6, -1], (5, 3), ValueError, ["non-negative"]),
    (torch.tensor([2.0, 3.0]), (5, 3), TypeError, ["integer"]),
])
def test_bad_counts(counts, shape, error, words):
    with pytest.raises(error) as info:
        segment_matmul(torch.randn(*shape), counts, torch.randn(2, 3, 4))
    for word in words:
        assert word in str(info.value)


def test_bad_operands():
    with pytest.raises(ValueError, match="3 columns but each weight matrix has 4 rows"):
        segment_matmul(torch.randn(2, 3), [2], torch.randn(1, 4, 4))
    with pytest.raises(TypeError, match="share dtype"):
        segment_matmul(torch.randn(2, 4), [2], torch.randn(1, 4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="method must be one of"):
        segment_matmul(torch.randn(2, 4), [2], torch.randn(1, 4, 4), method="fast")


@given(st.lists(st.integers(0, 9), min_size=1, max_size=4), st.sampled_from([1, 2, 4]), st.integers(0, 2**16))
def test_block_diagonal_equals_the_block_matrix(counts, blocks, seed):
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(len(counts), blocks, 3, 2, generator=gen, dtype=torch.float64)
    x = torch.randn(sum(counts), blocks * 3, generator=gen, dtype=torch.float64)
    dense = torch.stack([torch.block_diag(*weight[t]) for t in range(len(counts))])   # [T, 3B, 2B]
    want = grads(lambda a, w: reference(a, counts, torch.stack([torch.block_diag(*w[t]) for t in range(len(counts))])),
                 x, weight, seed)
    got = grads(lambda a, w: block_segment_matmul(a, counts, w), x, weight, seed)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    assert dense.shape == (len(counts), 3 * blocks, 2 * blocks)


# ---------------------------------------------------------------------- TypedLinear
def test_typed_linear_equals_one_linear_per_type():
    torch.manual_seed(0)
    widths = {"paper": 5, "author": 3, "field": 5}
    lin = TypedLinear(widths, 4).double()
    x = {"paper": torch.randn(7, 5, dtype=torch.float64, requires_grad=True),
         "field": torch.randn(0, 5, dtype=torch.float64, requires_grad=True),
         "author": torch.randn(2, 3, dtype=torch.float64, requires_grad=True)}
    out = lin(x)
    assert list(out) == ["paper", "author", "field"]
    want = {t: x[t] @ lin.weight[i, : widths[t]] + lin.bias[i] for i, t in enumerate(lin.types)}
    loss = sum((out[t] * (1 + torch.arange(4))).sum() for t in out)
    got_grads = torch.autograd.grad(loss, [x["paper"], x["author"], lin.weight, lin.bias])
    want_loss = sum((want[t] * (1 + torch.arange(4))).sum() for t in want)
    want_grads = torch.autograd.grad(want_loss, [x["paper"], x["author"], lin.weight, lin.bias])
    for t in out:
        torch.testing.assert_close(out[t], want[t], rtol=1e-12, atol=1e-12)
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    assert torch.equal(lin.weight[1, 3:], torch.zeros(2, 4))          # author's padding rows stay zero
    assert set(lin({"author": x["author"]})) == {"author"}            # types may be left out


def test_typed_linear_checks_its_input():
    lin = TypedLinear({"a": 2, "b": 3}, 4)
    with pytest.raises(ValueError, match="no weights for node types \\['c'\\]"):
        lin({"c": torch.randn(1, 2)})
    with pytest.raises(ValueError, match="type 'b' as \\[N, 3\\]"):
        lin({"b": torch.randn(1, 2)})
    with pytest.raises(ValueError, match="needs types"):
        TypedLinear(3, 4)
