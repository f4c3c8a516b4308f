"""``auto-tune`` measures without side effects a caller can observe: its timing runs never reach
the caller's autograd graph (hooks, ``retain_grad``, ``.grad``, saved-tensor hooks), and leave the
RNG state, the grad mode and the operands' in-place versions as they were. Each test compares a
call that measures with the same call on the winning backend alone (the plain path), in float64,
forward and backward."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph import backends as registry
from unigraph import ops
from unigraph.backends import autotune
from unigraph.backends.scatter import ScatterBackend


class RandomDrawing(ScatterBackend):
    """Scatter kernels that also draw a random number per call, as a stochastic kernel would."""

    def __init__(self, name: str, estimate_us: float):
        self.name, self._estimate = name, estimate_us

    def availability(self):
        return registry.Availability(True, "fake")

    def estimate_us(self, stats, request):
        return self._estimate

    def gspmm(self, g, op, reduce, u, e):
        torch.rand(1)
        return super().gspmm(g, op, reduce, u, e)


@pytest.fixture
def fakes(monkeypatch):
    made = {"a": RandomDrawing("a", 1.0), "b": RandomDrawing("b", 2.0)}
    monkeypatch.setattr(registry, "_REGISTRY", dict(made))
    monkeypatch.setattr(registry, "_STATUS", {})
    monkeypatch.setattr(autotune, "TUNER", autotune.Tuner(repeats=2))
    monkeypatch.delenv(autotune.CACHE_ENV_VAR, raising=False)
    return made


def _graph(seed=0):
    edges = torch.randint(0, 12, (2, 40), generator=torch.Generator().manual_seed(seed))
    return unigraph.Graph(edges, num_nodes=12)


def _inputs():
    gen = torch.Generator().manual_seed(1)
    leaf = torch.randn(12, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.randn(40, 1, dtype=torch.float64, generator=gen, requires_grad=True)
    return leaf, weight


def _run(backend: str, leaf, weight, go):
    """``u_mul_e`` on ``2 * leaf`` (a non-leaf with a hook and retain_grad) and ``weight`` (a leaf
    with a hook); returns the output, what the hooks saw during the forward and after backward."""
    seen = {"mid": 0, "leaf": 0, "weight": 0}
    mid = leaf * 2
    mid.retain_grad()
    mid.register_hook(lambda grad: seen.__setitem__("mid", seen["mid"] + 1))
    leaf_handle = leaf.register_hook(lambda grad: seen.__setitem__("leaf", seen["leaf"] + 1))
    weight_handle = weight.register_hook(lambda grad: seen.__setitem__("weight", seen["weight"] + 1))
    with unigraph.use_backend(backend):
        out = ops.gspmm(_graph(), "u_mul_e", "sum", mid, weight)
    during = dict(seen), mid.grad, leaf.grad, weight.grad
    out.backward(go)
    leaf_handle.remove()
    weight_handle.remove()
    return out, during, dict(seen), mid.grad


def test_measuring_never_reaches_the_callers_hooks_or_grads(fakes):
    go = torch.randn(12, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    leaf, weight = _inputs()
    out, during, after, mid_grad = _run("auto-tune", leaf, weight, go)
    assert autotune.TUNER._memory, "the call should have measured"
    assert during == ({"mid": 0, "leaf": 0, "weight": 0}, None, None, None), during
    assert after == {"mid": 1, "leaf": 1, "weight": 1}, after
    ref_leaf, ref_weight = _inputs()
    winner = next(iter(autotune.TUNER._memory.values())).winner
    ref_out, _, ref_after, ref_mid_grad = _run(winner, ref_leaf, ref_weight, go)
    assert ref_after == after
    torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
    torch.testing.assert_close(mid_grad, ref_mid_grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(leaf.grad, ref_leaf.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(weight.grad, ref_weight.grad, rtol=0, atol=1e-12)


def test_measuring_never_calls_the_callers_saved_tensor_hooks(fakes):
    leaf, weight = _inputs()
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with unigraph.use_backend("auto-tune"):
            ops.gspmm(_graph(), "u_mul_e", "sum", leaf, weight)
    assert autotune.TUNER._memory
    measured = len(packed)
    packed.clear()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with unigraph.use_backend(next(iter(autotune.TUNER._memory.values())).winner):
            ops.gspmm(_graph(), "u_mul_e", "sum", leaf, weight)
    assert measured == len(packed)  # the user's call saved its tensors once; the timing runs none


@pytest.mark.parametrize("grad", [True, False])
def test_measuring_leaves_rng_grad_mode_and_versions_as_they_were(fakes, grad):
    leaf, weight = _inputs()
    versions = (leaf._version, weight._version)
    torch.manual_seed(5)
    with torch.set_grad_enabled(grad), unigraph.use_backend("auto-tune"):
        out = ops.gspmm(_graph(), "u_mul_e", "sum", leaf, weight)
        mode = torch.is_grad_enabled()
    after_measuring = torch.rand(4)
    assert autotune.TUNER._memory
    assert mode == grad and (leaf._version, weight._version) == versions
    torch.manual_seed(5)
    with torch.set_grad_enabled(grad), unigraph.use_backend(next(iter(autotune.TUNER._memory.values())).winner):
        ref = ops.gspmm(_graph(), "u_mul_e", "sum", leaf, weight)
    # the random stream goes on as if only the caller's own call had drawn from it
    torch.testing.assert_close(after_measuring, torch.rand(4), rtol=0, atol=0)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    assert out.requires_grad == ref.requires_grad == grad

