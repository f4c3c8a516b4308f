"""``auto-tune`` times what training runs: forward and backward when the call records gradients
(the forward alone otherwise), without touching any ``.grad`` or running anything upstream."""
from __future__ import annotations

import time

import pytest
import torch

import unigraph
from unigraph import backends as registry
from unigraph import ops
from unigraph.backends import autotune
from unigraph.backends.scatter import ScatterBackend


SRC, DST = 30, 20  # bipartite: copy_u/sum's backward is a g-SpMM on the reverse graph (20 -> 30)


class Fake(ScatterBackend):
    """Scatter kernels that sleep ``forward_s`` in the forward and ``backward_s`` in the backward
    (told apart by the graph's direction)."""

    def __init__(self, name, forward_s, backward_s):
        self.name, self.forward_s, self.backward_s = name, forward_s, backward_s

    def availability(self):
        return registry.Availability(True, "fake")

    def estimate_us(self, stats, request):
        return 1.0

    def gspmm(self, g, op, reduce, u, e):
        time.sleep(self.forward_s if g.num_dst == DST else self.backward_s)
        return super().gspmm(g, op, reduce, u, e)


@pytest.fixture
def fakes(monkeypatch):
    made = {"slow_forward": Fake("slow_forward", 0.015, 0.0), "slow_backward": Fake("slow_backward", 0.0, 0.045)}
    monkeypatch.setattr(registry, "_REGISTRY", dict(made))
    monkeypatch.setattr(registry, "_STATUS", {})
    monkeypatch.setattr(autotune, "TUNER", autotune.Tuner(repeats=2))
    monkeypatch.delenv(autotune.CACHE_ENV_VAR, raising=False)
    return made


def _graph():
    gen = torch.Generator().manual_seed(0)
    edges = torch.stack([torch.randint(0, SRC, (120,), generator=gen), torch.randint(0, DST, (120,), generator=gen)])
    return unigraph.Graph(edges, num_src_nodes=SRC, num_dst_nodes=DST)


def _measured():
    (measurement,) = autotune.TUNER._memory.values()
    return measurement


def test_training_calls_are_timed_forward_and_backward(fakes):
    g, lin = _graph(), torch.nn.Linear(8, 8)
    x = torch.randn(30, 8, requires_grad=True)
    with unigraph.use_backend("auto-tune"):
        out = ops.gspmm(g, "copy_u", "sum", lin(x))
    m = _measured()
    assert m.timed == "fwd+bwd" and m.winner == "slow_forward", m
    assert m.timings_us["slow_backward"] > 40_000  # its backward's sleep was timed
    # nothing accumulated anywhere while measuring, and the user's backward is the plain one
    assert x.grad is None and lin.weight.grad is None
    out.sum().backward()
    x_ref = x.detach().clone().requires_grad_()
    ScatterBackend().gspmm(g.tensors(), "copy_u", "sum", lin(x_ref), None)[0].sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)


def test_inference_calls_are_timed_forward_only(fakes):
    g, x = _graph(), torch.randn(30, 8, requires_grad=True)
    with unigraph.use_backend("auto-tune"), torch.no_grad():
        ops.gspmm(g, "copy_u", "sum", x)
    m = _measured()
    assert m.timed == "fwd" and m.winner == "slow_backward", m
    assert m.timings_us["slow_forward"] > 14_000 > m.timings_us["slow_backward"]
