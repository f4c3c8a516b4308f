"""The fused path's capture of the random generators (``base.py: _traced_propagate``): it is
skipped only where nothing the call runs can draw (``_draws_nothing``: a cached trace of arithmetic
and views on plain tensors, or a cached reason to run eagerly). Each test compares the generators'
state and the outputs with ``fuse=False`` over several calls, and checks when the capture runs."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import unigraph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing import base


@pytest.fixture(autouse=True)
def _the_fused_path_on_small_graphs(no_small_graph_rule):
    """These tests are of the fused path: on their small graphs ``auto`` would run the messages
    eagerly (the small-graph rule: ``message_passing/base.py: _small_enough_for_eager``)."""


class Weighted(MessagePassing):
    """GCNConv's message: one weight per edge times the source features."""

    def forward(self, g, x, w):
        return self.propagate(g, x=x, w=w)

    def message(self, x_j, w):
        return w.view(-1, 1) * x_j


class Dropped(Weighted):
    """Reads a global (F): not a pure message, traced on every call."""

    def message(self, x_j, w):
        return F.dropout(w.view(-1, 1) * x_j, 0.5, True)


class Drawn(Weighted):
    """A pure message (it reads only its arguments, so its trace is cached) that draws."""

    def message(self, x_j, w):
        return x_j * w.view(-1, 1).bernoulli()


class Branching(Weighted):
    """A pure message whose tracing stops at a data-dependent branch (the cached reason: eager
    every call, without the capture), and that draws when it runs."""

    def message(self, x_j, w):
        if (w > 0.5).any():
            return x_j * w.view(-1, 1).bernoulli()
        return x_j


class Noisy(torch.Tensor):
    """A subclass whose operations could run anything (here: draw a number each time)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        torch.rand(1)
        return super().__torch_function__(func, types, args, kwargs or {})


def _graph() -> unigraph.Graph:
    src = torch.tensor([1, 2, 3, 4, 5, 0, 2, 2, 5, 5])
    dst = torch.tensor([0, 0, 0, 0, 0, 1, 2, 3, 3, 3])
    return unigraph.Graph(torch.stack([src, dst]), num_nodes=7)


@pytest.fixture
def captures(monkeypatch):
    calls = []
    real = base.random_state
    monkeypatch.setattr(base, "random_state", lambda devices: calls.append(1) or real(devices))
    return calls


def _calls(layer_type, fuse: bool, x, w, n: int = 3, seed: int = 5):
    """``n`` calls from one seed: the outputs, the input gradients and the generator's state after."""
    layer = layer_type(aggr="sum", fuse=fuse)
    g = _graph()
    torch.manual_seed(seed)
    outs = []
    for _ in range(n):
        leaf = x.detach().clone().requires_grad_()
        out = layer(g, leaf, w)
        (grad,) = torch.autograd.grad(out.sum(), leaf)
        outs.append((out.detach(), grad))
    return outs, torch.get_rng_state(), layer


def _same_as_plain(layer_type, x, w):
    fused, state, layer = _calls(layer_type, True, x, w)
    plain, plain_state, _ = _calls(layer_type, False, x, w)
    assert torch.equal(state, plain_state)   # the same draws, in the same order
    for (out, grad), (out2, grad2) in zip(fused, plain):
        torch.testing.assert_close(out, out2, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(grad, grad2, rtol=1e-12, atol=1e-12)
    return layer


def test_a_cached_trace_of_arithmetic_skips_the_capture(captures):
    x, w = torch.randn(7, 3, dtype=torch.float64), torch.rand(10, dtype=torch.float64)
    layer = _same_as_plain(Weighted, x, w)
    assert layer.explain().mode != "eager"
    # none: the trace is cached by the first call's lookup (_returned_copy) before the fused path asks,
    # and tracing a pure message records its calls on proxies (it reaches no random function)
    assert len(captures) == 0


@pytest.mark.parametrize("layer_type", [Dropped, Drawn])
def test_a_message_that_draws_is_captured_every_call(captures, layer_type):
    x, w = torch.randn(7, 3, dtype=torch.float64), torch.rand(10, dtype=torch.float64)
    _calls(layer_type, True, x, w)
    assert len(captures) == 3
    _same_as_plain(layer_type, x, w)


def test_a_cached_reason_to_run_eagerly_draws_as_the_plain_path(captures):
    x, w = torch.randn(7, 3, dtype=torch.float64), torch.rand(10, dtype=torch.float64)
    w[0] = 0.9   # the branch that draws
    layer = _same_as_plain(Branching, x, w)
    assert layer.explain().mode == "eager" and layer._pure_message
    assert isinstance(next(iter(layer._pure_traces.values())), str) and len(captures) == 0


def test_tensor_subclass_inputs_are_captured(captures):
    x = torch.randn(7, 3, dtype=torch.float64)
    w = torch.rand(10, dtype=torch.float64)
    layer = Weighted(aggr="sum")
    g = _graph()
    layer(g, x, w)   # the trace is cached
    del captures[:]
    layer(g, x, w.as_subclass(Noisy))
    assert len(captures) == 1


def test_the_quiet_check_reads_the_program():
    x, w = torch.randn(7, 3), torch.rand(10)
    for layer_type, quiet in ((Weighted, True), (Drawn, False)):
        layer = layer_type(aggr="sum")
        layer(_graph(), x, w)
        inputs = [("x_j", base.U, x), ("w", base.E, w)]
        traced = next(iter(layer._pure_traces.values()))
        assert base._draws_nothing(traced, inputs) is quiet
        assert base._draws_nothing(None, inputs) is False   # not traced yet: tracing runs the message
