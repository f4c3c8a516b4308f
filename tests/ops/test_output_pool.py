"""The CPU kernels' output pool (``kernels/cpu/alloc.py``) changes no result and never hands out
memory still in use: every op, forward and backward, on pooled memory poisoned with NaN (and
out-of-range winners) equals the unpooled run bit for bit; a block comes back only after the
last view and saved tensor are gone; the pool stays within its bound; the settings are checked."""
from __future__ import annotations

import gc
import subprocess
import sys
import threading

import pytest
import torch

import unigraph
from unigraph.kernels.cpu import alloc

pytest.importorskip("numba")
from tests.ops.test_cpu_fast_paths import _every_op  # noqa: E402


def _graph_with_isolated_nodes(seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, 300, (4000,), generator=gen)
    dst = torch.randint(0, 300, (4000,), generator=gen)
    dst[:1000] = 7                       # a hub
    return unigraph.Graph(torch.stack([src, dst]), num_nodes=340)   # 40 nodes without any edge


def _assert_same(a, b):
    for (out_a, grads_a), (out_b, grads_b) in zip(a, b):
        torch.testing.assert_close(out_a, out_b, rtol=0, atol=0, equal_nan=True)
        for x, y in zip(grads_a, grads_b):
            torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True)


def test_every_op_on_poisoned_pooled_memory_equals_the_unpooled_run(poisoned_output_pool, monkeypatch):
    g = _graph_with_isolated_nodes()
    pooled = [_every_op(g, torch.Generator().manual_seed(1)) for _ in range(2)]  # the 2nd recycles
    assert poisoned_output_pool.stats["new"] > 0 and poisoned_output_pool.stats["reused"] > 0    # the path under test ran
    monkeypatch.setattr(poisoned_output_pool, "max_bytes", 0)                          # pooling off: torch.empty
    plain = _every_op(g, torch.Generator().manual_seed(1))
    for run in pooled:
        _assert_same(run, plain)


def test_dropout_kernels_on_poisoned_pooled_memory(poisoned_output_pool):
    from unigraph.nn import dropout
    x = torch.randn(257, 33, requires_grad=True)
    outs = []
    for _ in range(2):
        torch.manual_seed(3)
        y = dropout.relu_dropout(x, 0.4, True)
        (g,) = torch.autograd.grad(y.sum(), x)
        outs.append((y.detach().clone(), g))
    assert poisoned_output_pool.stats["reused"] > 0
    assert torch.isfinite(outs[0][0]).all() and torch.isfinite(outs[0][1]).all()
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)


def test_a_block_comes_back_only_after_every_view_is_gone(poisoned_output_pool):
    t = alloc.empty((1000, 8), torch.float32)
    view = t[10:20]
    ptr = t.data_ptr()
    del t
    gc.collect()
    other = alloc.empty((1000, 8), torch.float32)
    assert other.data_ptr() != ptr            # the view still holds the block
    view.fill_(1.0)
    assert other.isnan().all()                # poisoned, and untouched by writes through the view
    del view
    gc.collect()
    again = alloc.empty((1000, 8), torch.float32)
    assert again.data_ptr() == ptr            # now recycled


def test_a_detached_alias_keeps_the_block(poisoned_output_pool):
    """``detach()`` shares the storage without keeping the tensor: the block waits for it too."""
    t = alloc.empty((1000, 8), torch.float32)
    alias, ptr = t.detach(), t.data_ptr()
    del t
    gc.collect()
    other = alloc.empty((1000, 8), torch.float32)
    assert other.data_ptr() != ptr
    alias.fill_(1.0)
    assert other.isnan().all()
    del alias
    gc.collect()
    assert alloc.empty((1000, 8), torch.float32).data_ptr() == ptr


def test_tensors_saved_for_backward_keep_their_block(poisoned_output_pool):
    x = torch.randn(64, 16, requires_grad=True)
    from unigraph.nn import pooled_linear
    w = torch.randn(32, 16, requires_grad=True)
    y = pooled_linear._PooledLinear.apply(x, w, None)
    z = (y * y).sum()             # saves y for the backward
    ptr = y.data_ptr()
    expected = y.detach().clone()
    del y
    gc.collect()
    for _ in range(4):            # requests of the same size must not get y's block
        assert alloc.empty((64, 32), torch.float32).data_ptr() != ptr
    (gx,) = torch.autograd.grad(z, x)
    torch.testing.assert_close(gx, (2 * expected) @ w.detach())


def test_freeing_on_other_threads(poisoned_output_pool):
    made = [alloc.empty((100, 100), torch.float64) for _ in range(8)]
    threads = [threading.Thread(target=made.pop) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    poisoned_output_pool.harvest()  # the last block freed waits for the next request (or this)
    assert len(poisoned_output_pool.sizes) == 8 and poisoned_output_pool.free_bytes == sum(s for s, _ in poisoned_output_pool.sizes)


def test_the_pool_keeps_at_most_its_bound_and_drops_the_oldest(monkeypatch):
    pool = alloc._Pool(10 << 20)
    monkeypatch.setattr(alloc, "_POOL", pool)
    monkeypatch.setattr(alloc, "MIN_BYTES", 0)
    blocks = [alloc.empty((1 << 20,), torch.float32) for _ in range(5)]   # 4 MiB each (2 huge pages)
    ptrs = [t.data_ptr() for t in blocks]
    for i in range(5):                                                    # freed oldest first
        blocks[i] = None
    gc.collect()
    pool.harvest()
    assert pool.free_bytes == 8 << 20 and pool.stats["dropped"] == 3
    assert sorted(block.data_ptr() for block in pool.blocks.values()) == sorted(ptrs[3:])


def test_requests_reuse_only_blocks_of_about_their_size(poisoned_output_pool):
    big = alloc.empty((4 << 20,), torch.uint8)
    ptr = big.data_ptr()
    del big
    gc.collect()
    assert alloc.empty((1 << 20,), torch.uint8).data_ptr() != ptr   # a quarter: not served by the big block
    assert alloc.empty(((3 << 20) + 1,), torch.uint8).data_ptr() == ptr   # rounds up to the block's size


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32,
                                   torch.int64, torch.bool])
def test_pooled_tensors_are_ordinary_tensors(poisoned_output_pool, dtype):
    t = alloc.empty((37, 5), dtype)
    assert t.shape == (37, 5) and t.dtype == dtype and t.is_contiguous() and t._base is None
    t.zero_()
    assert not t.any()
    t.fill_(1)                                          # in place
    assert int(t.to(torch.int64).sum()) == 37 * 5
    assert torch.equal(torch.from_numpy(t.numpy()) if dtype not in (torch.bfloat16,) else t, t)


@pytest.mark.parametrize("grow", [(1 << 22, 5), (40, 5), (37 * 5 * 20,)])
def test_pooled_outputs_grow_with_resize_as_plain_tensors(poisoned_output_pool, grow):
    """``resize_`` past the block (or within it) as on a ``torch.empty`` tensor: the elements kept
    keep their values; the grown tensor is usable, and its memory comes back to the pool later."""
    t = alloc.empty((37, 5), torch.float64)
    plain = torch.empty((37, 5), dtype=torch.float64)
    for x in (t, plain):
        x.copy_(torch.arange(37 * 5, dtype=torch.float64).view(37, 5))
        x.resize_(*grow)
        x.view(-1)[185:].fill_(2.0)
    assert t.shape == plain.shape and t.is_contiguous()
    torch.testing.assert_close(t, plain, rtol=0, atol=0)
    grown = t.untyped_storage().nbytes()
    del t
    gc.collect()
    poisoned_output_pool.harvest()
    assert not poisoned_output_pool.lent  # given back (kept, or dropped when above the bound)
    assert (grown in {size for size, _ in poisoned_output_pool.sizes}) == (grown <= poisoned_output_pool.max_bytes)


def test_pooling_off_gives_torch_empty(monkeypatch):
    monkeypatch.setattr(alloc, "_POOL", alloc._Pool(0))
    t = alloc.empty((alloc.MIN_BYTES, 2), torch.uint8)
    t.resize_(alloc.MIN_BYTES * 2, 2)                   # an ordinary resizable storage
    assert alloc.pool().stats["new"] == 0


def test_memory_output_pool_setting(monkeypatch):
    monkeypatch.setattr(alloc, "_POOL", alloc._Pool(alloc.DEFAULT_MAX_BYTES))
    from unigraph import memory
    assert memory.output_pool()["max_bytes"] == alloc.DEFAULT_MAX_BYTES
    memory.output_pool(0)
    assert alloc.pool().max_bytes == 0
    with pytest.raises(ValueError, match="bytes"):
        memory.output_pool(-1)


@pytest.mark.parametrize("value, message", [("lots", "whole number"), ("-5", ">= 0")])
def test_environment_setting_is_checked(value, message):
    code = "import unigraph.kernels.cpu.alloc"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**__import__("os").environ, "UNIGRAPH_OUTPUT_POOL_BYTES": value})
    assert done.returncode != 0 and "UNIGRAPH_OUTPUT_POOL_BYTES" in done.stderr and message in done.stderr


def test_environment_setting_is_read():
    code = "from unigraph.kernels.cpu import alloc; print(alloc.pool().max_bytes)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**__import__("os").environ, "UNIGRAPH_OUTPUT_POOL_BYTES": "12345"})
    assert done.stdout.strip() == "12345"
