"""unigraph.torch_bernoulli: torch's own CPU Bernoulli draws (F.dropout's masks), bit for bit, and
the generator's state after them; every case it does not take goes to torch's kernel."""
from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F

from proc_helpers import dropped_in_forked_workers
from unigraph import torch_bernoulli as tb

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(not tb.installed(), reason="the faster bernoulli_ is not installed here")

CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


@pytest.fixture
def taken(monkeypatch):
    """The sizes the fast path drew, with other threads (the suite's, if any) out of the way, and
    F.dropout's own one-pass kernel (``unigraph.torch_dropout``, tested there) uninstalled: here
    its masks come from ``bernoulli_``."""
    from unigraph import torch_dropout
    torch_dropout.uninstall()
    yield from _taken(monkeypatch)
    assert torch_dropout.install()


def _taken(monkeypatch):
    sizes = []
    assert tb._agrees_with_torch()  # its own comparison with torch draws too: done before counting
    draw = tb._draw
    monkeypatch.setattr(tb, "_alone", lambda: True)
    monkeypatch.setattr(tb, "_draw", lambda *a: (sizes.append(a[0].numel()), draw(*a))[1])
    yield sizes


def _drawn(length, dtype, p, before, seed, ours):
    """(draws, generator state after, the generator's next numbers) from a private generator that
    has made ``before`` 32-bit draws (``torch.rand`` of float32 takes one each)."""
    g = torch.Generator().manual_seed(seed)
    torch.rand(before, generator=g)
    out = torch.full((length,), 7.0, dtype=dtype)
    if ours:
        out.bernoulli_(p, generator=g)
    else:
        tb._original.call_boxed(CPU, out, p, generator=g)
    return out, g.get_state(), torch.rand(5, generator=g)


def _ours_and_torchs(generator, make, p):
    """(draws, the generator's state after) through the operator and through torch's own kernel,
    each from a fresh ``generator()`` into a fresh ``make()``."""
    results = []
    for ours in (True, False):
        g, out = generator(), make()
        if ours:
            out.bernoulli_(p, generator=g)
        else:
            tb._original.call_boxed(CPU, out, p, generator=g)
        results.append((out, g.get_state()))
    return results


def _assert_same(a, b):
    for x, y in zip(a, b):
        assert torch.equal(x, y)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("before", [0, 1, 311, 622, 623, 624, 625, 1247])
@pytest.mark.parametrize("length", [4096, 4097, 10_001, 100_000])
def test_draws_and_state_are_torchs_across_block_boundaries(dtype, before, length, taken):
    """Odd and even stream positions, the fresh-seeded state (before=0), a block's last words, and
    lengths that end inside, at and after a twist."""
    for p in (0.5, 0.1):
        _assert_same(_drawn(length, dtype, p, before, 11 + before, True),
                     _drawn(length, dtype, p, before, 11 + before, False))
    assert taken == [length, length]


@pytest.mark.parametrize("p", [0.0, 1.0, 1.0 - 0.6, 1e-6, 0.999999, 2.0 ** -53, 1.0 - 2.0 ** -53, 0.3])
def test_probabilities_at_the_edges_of_the_53_bit_comparison(p, taken):
    _assert_same(_drawn(50_000, torch.float32, p, 3, 5, True), _drawn(50_000, torch.float32, p, 3, 5, False))
    assert taken == [50_000]


def test_the_smallest_tensor_it_takes(taken):
    _assert_same(_drawn(tb.MIN_ELEMENTS, torch.float32, 0.5, 0, 1, True),
                 _drawn(tb.MIN_ELEMENTS, torch.float32, 0.5, 0, 1, False))
    assert taken == [tb.MIN_ELEMENTS]


def _fallback_cases():
    big = tb.MIN_ELEMENTS * 4
    return {
        "small": lambda: torch.empty(tb.MIN_ELEMENTS - 1),
        "half": lambda: torch.empty(big, dtype=torch.float16),
        "int": lambda: torch.empty(big, dtype=torch.int32),
        "bool": lambda: torch.empty(big, dtype=torch.bool),
        "non-contiguous": lambda: torch.empty(big, 3)[:, 1],
        "transposed": lambda: torch.empty(64, big // 64).t(),
    }


@pytest.mark.parametrize("case", list(_fallback_cases()))
def test_cases_it_does_not_take_are_torchs_own(case, monkeypatch):
    monkeypatch.setattr(tb, "_draw", lambda *a: pytest.fail("the fast path was taken"))
    _assert_same(*_ours_and_torchs(lambda: torch.Generator().manual_seed(3), _fallback_cases()[case], 0.3))


def test_bypassed_inside_enabled_false_and_while_another_thread_lives(monkeypatch):
    monkeypatch.setattr(tb, "_draw", lambda *a: pytest.fail("the fast path was taken"))
    x = torch.empty(tb.MIN_ELEMENTS * 2)
    with tb.enabled(False):
        x.bernoulli_(0.5)
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        x.bernoulli_(0.5)  # torch's kernel holds the generator's lock for the draw; Python cannot
    finally:
        release.set()
        other.join()


def test_threads_known_never_to_draw_leave_it_on(monkeypatch):
    release = threading.Event()
    watchers = [threading.Thread(target=release.wait, name=name, daemon=True) for name in sorted(tb.QUIET_THREADS)]
    for thread in watchers:
        thread.start()
    other = threading.Thread(target=release.wait, daemon=True)
    try:
        assert tb._alone()
        other.start()
        assert not tb._alone()
    finally:
        release.set()
        for thread in [*watchers, other]:
            thread.join()


def test_torch_compiles_worker_threads_leave_it_on():
    """A process that compiled anything keeps inductor's compile pool alive (the benchmark's
    compiled rows turned the faster draw off for every later row before these threads were known)."""
    from torch._inductor.async_compile import AsyncCompile
    pool = AsyncCompile.pool()
    pool.submit(lambda: None).result()
    assert tb._compile_workers() and tb._compile_workers() <= set(threading.enumerate())
    assert tb._alone() or any(t not in tb._compile_workers() and t is not threading.current_thread()
                              and t.name not in tb.QUIET_THREADS for t in threading.enumerate())


def test_the_quiet_threads_are_the_ones_unigraph_starts():
    import pathlib
    import unigraph
    source = "".join(p.read_text() for p in pathlib.Path(unigraph.__file__).parent.rglob("*.py"))
    for name in tb.QUIET_THREADS:
        assert f'name="{name}"' in source, name


def test_a_state_set_by_hand_with_counters_torch_never_leaves_goes_to_torch(taken):
    """The kernel reads state words by ``left``/``next`` unchecked: counters that torch's own draws
    never leave (next + left - 1 != 624) are not followed; torch's kernel draws instead (it reads
    words 5 .. 618 of the block, then twists)."""
    g = torch.Generator().manual_seed(8)
    torch.rand(10, generator=g)
    state = g.get_state()
    state.numpy()[tb._NEXT] = 5   # next 5 with left 615 (10 drawn): not a position torch reaches
    _assert_same(*_ours_and_torchs(lambda: g.set_state(state) or g, lambda: torch.empty(tb.MIN_ELEMENTS), 0.5))
    assert taken == [tb.MIN_ELEMENTS]   # _draw was asked and declined


def test_a_probability_outside_0_1_raises_torchs_error():
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        torch.empty(tb.MIN_ELEMENTS * 2).bernoulli_(1.5)


def test_torchs_dropouts_equal_torch_with_the_kernel_uninstalled(taken):
    """What users call: F.dropout (values, gradient, the default generator's state after),
    nn.Dropout, torch.bernoulli(x, p), F.dropout2d, alpha_dropout, in-place dropout."""
    def run():
        torch.manual_seed(0)
        x = torch.randn(300, 70, requires_grad=True)
        y = F.dropout(x, 0.4)
        y.pow(2).sum().backward()
        z = torch.randn(2, 40, 30, 30)
        outs = [y, x.grad, torch.nn.Dropout(0.5)(x.detach()), torch.bernoulli(x.detach(), 0.25),
                F.dropout2d(z, 0.5), F.alpha_dropout(x.detach(), 0.2, True), F.dropout(z.clone(), 0.3, inplace=True)]
        return outs + [torch.get_rng_state()]
    ours = run()
    tb.uninstall()
    try:
        theirs = run()
    finally:
        assert tb.install()
    _assert_same(ours, theirs)
    assert taken == [21_000] * 4 + [72_000]  # all but dropout2d's (2, 40, 1, 1) noise


def test_a_kernel_that_disagrees_with_torch_stays_off_and_says_so(monkeypatch):
    monkeypatch.setattr(tb, "_checked", None)
    monkeypatch.setattr(tb, "_compare", lambda: "float32, 311 draws after 7, p=0.3")
    monkeypatch.setattr(tb, "_draw", lambda *a: pytest.fail("the fast path was taken"))
    with pytest.warns(RuntimeWarning, match="torch's own kernel stays in use"):
        torch.empty(tb.MIN_ELEMENTS * 2).bernoulli_(0.5)
    torch.empty(tb.MIN_ELEMENTS * 2).bernoulli_(0.5)  # no second warning, still torch's
    assert tb._checked is False


def test_the_comparison_with_torch_passes_here():
    assert tb._compare() is None


def test_a_forked_dataloader_worker_draws_torchs_masks(taken):
    """Workers are forked with the kernel registered; their seeded generators give torch's masks."""
    (ours, ours_counts), (theirs, theirs_counts) = dropped_in_forked_workers(taken, tb.MIN_ELEMENTS * 3, tb.enabled)
    _assert_same(ours, theirs)
    assert ours_counts == [1, 1] and theirs_counts == [0, 0]
    assert 0.4 < float((ours[0] > 0).float().mean()) < 0.6


def test_install_is_idempotent_and_uninstall_restores_torch():
    assert tb.install() and tb.install()
    tb.uninstall()
    try:
        assert not tb.installed()
        x = torch.empty(tb.MIN_ELEMENTS * 2)
        x.bernoulli_(0.5)
    finally:
        assert tb.install()
