"""unigraph.torch_dropout: torch's own CPU F.dropout in one pass: the same outputs, gradients (first,
second, forward-mode) and generator state as torch's three operations; every case it does not take
is torch's own kernel."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from proc_helpers import dropped_in_forked_workers
from unigraph import torch_bernoulli as tb
from unigraph import torch_dropout as td

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(not td.installed(), reason="the one-pass dropout is not installed here")

N = tb.MIN_ELEMENTS


@pytest.fixture
def taken(monkeypatch):
    """The sizes the one-pass path took, with other threads (the suite's, if any) out of the way."""
    sizes = []
    assert td._agrees_with_torch()   # its own comparison runs dropouts too: done before counting
    values = td._values
    monkeypatch.setattr(td, "MIN_ELEMENTS", N)   # small tensors take it here: the threshold is tested alone
    monkeypatch.setattr(tb, "_alone", lambda: True)
    monkeypatch.setattr(td, "_values", lambda x, p: (sizes.append(x.numel()), values(x, p))[1])
    return sizes


def _torchs(run):
    """``run()`` with both kernels uninstalled: torch's own dropout, as if unigraph were absent."""
    td.uninstall()
    tb.uninstall()
    try:
        return run()
    finally:
        assert td.install() and tb.installed()


def _assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
        assert torch.equal(a.isnan(), b.isnan())
        assert torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))
        assert torch.equal(torch.signbit(a), torch.signbit(b))   # -0 where torch has it


def _input(shape, dtype):
    x = torch.randn(shape, dtype=dtype)
    flat = x.view(-1)
    flat[::101] = float("nan")
    flat[7::103] = float("inf")
    flat[11::107] = -0.0
    return x.requires_grad_()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", [0.5, 0.3, 0.1, 0.9, 2.0 ** -40, 1.0 - 2.0 ** -40])
@pytest.mark.parametrize("before,shape", [(0, (N,)), (1, (N + 1,)), (623, (300, 73)), (5, (2, 1250, 9))])
def test_values_gradients_and_state_are_torchs(dtype, p, before, shape, taken):
    def run():
        torch.manual_seed(11)
        torch.rand(before)
        x = _input(shape, dtype)
        y = F.dropout(x, p)
        grad = torch.randn(shape, dtype=dtype)
        y.backward(grad)
        return [y.detach(), x.grad, torch.get_rng_state(), torch.rand(5)]
    _assert_same(run(), _torchs(run))
    assert taken == [torch.Size(shape).numel()]


def test_modules_and_functions_users_call_are_torchs(taken):
    """nn.Dropout, torch.dropout, F.dropout(training=...) and a whole training step."""
    def run():
        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Dropout(0.4),
                                    torch.nn.Linear(128, 8))
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        x = torch.randn(600, 64)
        outs = []
        for _ in range(3):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(F.dropout(x, 0.2, training=True)), torch.arange(600) % 8)
            loss.backward()
            optimizer.step()
            outs.append(loss.detach())
        outs += [p.detach().clone() for p in model.parameters()]
        outs += [torch.dropout(x, 0.5, True), F.dropout(x, 0.5, training=False), torch.get_rng_state()]
        return outs
    _assert_same(run(), _torchs(run))
    assert taken == [38_400, 76_800] * 3 + [38_400]


def test_second_and_forward_mode_derivatives_are_torchs(taken):
    def run():
        torch.manual_seed(5)
        x = torch.randn(90, 70, dtype=torch.float64, requires_grad=True)
        y = F.dropout(x, 0.3)
        (g,) = torch.autograd.grad(y.pow(3).sum(), x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sin().sum(), x)
        import torch.autograd.forward_ad as fwAD
        with fwAD.dual_level():
            dual = fwAD.make_dual(torch.randn(90, 70, dtype=torch.float64), torch.randn(90, 70, dtype=torch.float64))
            tangent = fwAD.unpack_dual(F.dropout(dual, 0.6)).tangent
        return [y.detach(), g.detach(), gg, tangent, torch.get_rng_state()]
    _assert_same(run(), _torchs(run))
    assert taken == [6300, 6300]


def test_grad_mode_off_in_place_after_and_retain_graph(taken):
    """Under no_grad the output is plain; an in-place op on the output is allowed (not a view of
    anything); a retained graph gives the same gradient twice."""
    def run():
        torch.manual_seed(9)
        x = torch.randn(100, 80, requires_grad=True)
        with torch.no_grad():
            plain = F.dropout(x, 0.5)
        y = F.dropout(x, 0.5)
        z = y.relu_() * 2
        z.sum().backward(retain_graph=True)
        first = x.grad.clone()
        z.sum().backward()
        return [plain, y.detach(), first, x.grad, torch.get_rng_state()]
    _assert_same(run(), _torchs(run))
    assert taken == [8000, 8000]


def test_checkpoint_recomputes_the_same_mask(taken):
    from torch.utils.checkpoint import checkpoint

    def run(use_checkpoint):
        torch.manual_seed(2)
        layer = torch.nn.Linear(64, 64)
        x = torch.randn(200, 64, requires_grad=True)
        block = lambda t: F.dropout(layer(t), 0.5)
        y = checkpoint(block, x, use_reentrant=False) if use_checkpoint else block(x)
        y.square().sum().backward()
        return [y.detach(), x.grad, layer.weight.grad]
    _assert_same(run(True), run(False))


@pytest.mark.parametrize("case", ["small", "half", "non-contiguous", "p=0", "p=1", "eval", "vmap", "mode",
                                  "disabled", "thread"])
def test_cases_it_does_not_take_are_torchs_own(case, taken, monkeypatch):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    if case == "thread":
        monkeypatch.setattr(tb, "_alone", lambda: False)

    def run():
        torch.manual_seed(1)
        x = torch.randn(100, 90, dtype=torch.float16 if case == "half" else torch.float32)
        if case == "small":
            return [F.dropout(x[:10], 0.5)]
        if case == "non-contiguous":
            return [F.dropout(x.t(), 0.5)]
        if case in ("p=0", "p=1", "eval"):
            return [F.dropout(x, {"p=0": 0.0, "p=1": 1.0, "eval": 0.5}[case], training=case != "eval")]
        if case == "vmap":
            return [torch.func.vmap(lambda r: F.dropout(r, 0.5), randomness="same")(x)]
        if case == "mode":
            with Passing():
                return [F.dropout(x, 0.5)]
        if case == "disabled":
            with tb.enabled(False):
                return [F.dropout(x, 0.5)]
        return [F.dropout(x, 0.5)]
    ours = run()
    _assert_same(ours, _torchs(run))
    assert taken == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_below_its_threshold_torchs_own_kernel_runs(monkeypatch):
    assert td._agrees_with_torch()
    monkeypatch.setattr(tb, "_alone", lambda: True)
    sizes = []
    values = td._values
    monkeypatch.setattr(td, "_values", lambda x, p: (sizes.append(x.numel()), values(x, p))[1])
    F.dropout(torch.randn(td.MIN_ELEMENTS - 1), 0.5)
    F.dropout(torch.randn(td.MIN_ELEMENTS), 0.5)
    assert sizes == [td.MIN_ELEMENTS]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_jit_trace_records_torchs_operator_and_replays_torchs_values(taken):
    def run():
        torch.manual_seed(1)
        x = torch.randn(100, 90)
        traced = torch.jit.trace(lambda t: F.dropout(t, 0.5), x, check_trace=False)
        return traced, [traced(x), torch.get_rng_state()]
    traced, ours = run()
    assert "aten::dropout" in str(traced.graph)
    _assert_same(ours, _torchs(lambda: run()[1]))


def test_a_state_set_by_hand_takes_torchs_three_operations(taken):
    """A generator state the kernel declines (counters torch's draws never leave) is drawn by
    torch's own bernoulli_, div_ and product inside the same node: torch's values and gradient."""
    def run():
        torch.manual_seed(0)
        state = torch.get_rng_state()
        state[8:12] = torch.tensor([5], dtype=torch.int32).view(torch.uint8)   # left=5, next unchanged
        torch.set_rng_state(state)
        x = torch.randn(100, 90, requires_grad=True)
        y = F.dropout(x, 0.5)
        y.backward(torch.ones_like(y))
        return [y.detach(), x.grad, torch.get_rng_state()]
    _assert_same(run(), _torchs(run))
    assert taken == [9000]   # asked, and declined inside


def test_outputs_and_saved_masks_on_pooled_memory_stay_theirs(taken):
    """Pooled blocks are handed out again only once torch frees them: a dropout's output and its
    saved mask survive later pooled allocations, and the gradient is still torch's."""
    def run():
        torch.manual_seed(8)
        x = torch.randn(400, 300, requires_grad=True)
        ys = [F.dropout(x, 0.5) for _ in range(3)]
        for _ in range(3):
            F.dropout(torch.randn(400, 300), 0.5)     # freed at once: its blocks go back to the pool
        sum(y.sum() for y in ys).backward()
        return [y.detach() for y in ys] + [x.grad]
    _assert_same(run(), _torchs(run))


def test_torch_compile_runs_a_model_with_dropout():
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Dropout(0.5))
    compiled = torch.compile(model, backend="aot_eager")
    y = compiled(torch.randn(200, 64))
    y.sum().backward()
    assert 0.3 < float((y == 0).float().mean()) < 0.7


def test_a_kernel_that_disagrees_with_torch_stays_off_and_says_so(monkeypatch):
    monkeypatch.setattr(td, "_checked", None)
    monkeypatch.setattr(td, "_compare", lambda: "float32, 5001 elements after 7 draws, p=0.3")
    monkeypatch.setattr(td, "_values", lambda *a: pytest.fail("the one-pass path was taken"))
    monkeypatch.setattr(td, "MIN_ELEMENTS", N)
    monkeypatch.setattr(tb, "_alone", lambda: True)
    with pytest.warns(RuntimeWarning, match="torch's own kernel stays in use"):
        F.dropout(torch.randn(N * 2), 0.5)
    F.dropout(torch.randn(N * 2), 0.5)   # no second warning, still torch's
    assert td._checked is False


def test_the_comparison_with_torch_passes_here_and_keeps_the_callers_stream(monkeypatch):
    """It draws from the CPU's default generator and restores it; it never calls torch.manual_seed,
    which would reseed the GPUs' generators too (a CUDA user's stream changed by a CPU dropout)."""
    torch.manual_seed(6)
    expected = torch.rand(4)
    torch.manual_seed(6)
    monkeypatch.setattr(torch, "manual_seed", lambda seed: pytest.fail("torch.manual_seed reseeds every device"))
    assert td._compare() is None
    assert torch.equal(torch.rand(4), expected)


def test_the_environment_switch_leaves_both_of_torchs_kernels_alone():
    code = "import unigraph, unigraph.torch_bernoulli as tb, unigraph.torch_dropout as td; print(tb.installed(), td.installed())"
    out = {}
    for value in ("0", "1"):
        env = dict(os.environ, UNIGRAPH_TORCH_BERNOULLI=value)
        out[value] = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout.strip()
    assert out == {"0": "False False", "1": "True True"}


def test_install_is_idempotent_and_uninstall_restores_torch():
    assert td.install() and td.install()
    td.uninstall()
    try:
        assert not td.installed()
        y = F.dropout(torch.randn(N * 2, requires_grad=True), 0.5)
        assert type(y.grad_fn).__name__ == "MulBackward0"   # torch's composite
    finally:
        assert td.install()
    y = F.dropout(torch.randn(td.MIN_ELEMENTS, requires_grad=True), 0.5)
    assert not tb._alone() or type(y.grad_fn).__name__ == "_DropoutBackward"   # ours: a node of our own


def test_a_forked_dataloader_worker_drops_as_torch_does(taken):
    """Workers are forked with the kernel registered; their seeded generators give torch's values."""
    (ours, ours_counts), (theirs, theirs_counts) = dropped_in_forked_workers(taken, N * 3, tb.enabled)
    _assert_same(ours, theirs)
    assert ours_counts == [1, 1] and theirs_counts == [0, 0]
    assert 0.4 < float((ours[0] > 0).float().mean()) < 0.6
