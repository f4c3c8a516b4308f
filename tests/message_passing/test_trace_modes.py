"""Modes inside a traced message (``unigraph/message_passing/tracing.py``): a call recorded under
another grad mode, inference mode, autocast state or default dtype than the caller's (``no_grad``
blocks, ``@torch.no_grad`` helpers, ``enable_grad`` inside ``no_grad``, a custom
``torch.autograd.Function``) runs the message as written; random draws are the plain path's,
also when a traced message falls back. Values and gradients against the plain path, for
``MessagePassing`` and DGL-style functions in ``update_all``."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fused_vs_plain import (
    Inputs, assert_matches_plain, assert_same, fused_and_plain, make_graph, propagate, ran_as_written, update_all,
    update_all_plain)
from test_message_tracing_soundness import Cube


@pytest.fixture(autouse=True)
def _the_fused_path_on_small_graphs(no_small_graph_rule):
    """These tests are of the fused path: on their small graphs ``auto`` would run the messages
    eagerly (the small-graph rule: ``message_passing/base.py: _small_enough_for_eager``)."""


def _no_grad_block(x_j, x_i, w, p):
    with torch.no_grad():
        y = x_j * p
    return y * w + x_j


def _set_grad_enabled_block(x_j, x_i, w, p):
    with torch.set_grad_enabled(False):
        y = torch.tanh(x_j - x_i)
    return y * p + w


def _inference_mode_block(x_j, x_i, w, p):
    with torch.inference_mode():
        y = x_j * 2.0
    return y + x_j * w * p


@torch.no_grad()
def _detached_scale(t, p):
    return t * p


def _no_grad_helper(x_j, x_i, w, p):
    return _detached_scale(x_j, p) * w + x_i


def _autograd_function(x_j, x_i, w, p):
    return Cube.apply(x_j * p) * w  # x**3 with a deliberately different backward


class _Reverse(torch.autograd.Function):
    """Gradient reversal, written as DANN's: forward is a view of its input."""

    @staticmethod
    def forward(ctx, a):
        return a.view_as(a)

    @staticmethod
    def backward(ctx, grad):
        return -grad


def _gradient_reversal(x_j, x_i, w, p):
    return _Reverse.apply(x_j * p) + w


def _default_dtype_block(x_j, x_i, w, p):
    before = torch.get_default_dtype()  # float32
    torch.set_default_dtype(torch.float64)
    try:
        y = torch.full(x_j.shape, 0.1)  # float64(0.1) != float32(0.1)
    finally:
        torch.set_default_dtype(before)
    return x_j * y * p


MODES = {"with torch.no_grad()": _no_grad_block, "torch.set_grad_enabled(False)": _set_grad_enabled_block,
         "torch.inference_mode()": _inference_mode_block, "@torch.no_grad helper": _no_grad_helper,
         "autograd.Function": _autograd_function, "gradient reversal": _gradient_reversal,
         "default dtype": _default_dtype_block}


@pytest.mark.parametrize("name", list(MODES))
def test_mode_changes_inside_the_message_run_as_written(name):
    assert_matches_plain(MODES[name], name, stays_fused=False)


def _enable_grad_block(x_j, x_i, w, p):
    with torch.enable_grad():
        y = x_j * p
    return y * w


def test_enable_grad_inside_a_no_grad_caller():
    """The caller runs without grad; the message turns it back on for part of the work (the
    reduction then runs without grad again, on both paths)."""
    g = make_graph()
    with torch.no_grad():
        runs = fused_and_plain(_enable_grad_block, g, Inputs(g))
    for what, got, want in runs:
        assert_same(got, want, what)
        assert ran_as_written(got[2]), f"{what}\n{got[2]}"


@pytest.mark.parametrize("front", ["MessagePassing", "update_all"])
def test_a_message_that_leaves_grad_mode_off(front):
    """Grad mode left off by the message: the caller finds it off afterwards on both paths, and the
    traced attempt does not leave the eager run starting without grad."""
    g = make_graph()
    inputs = Inputs(g)

    def leaves_it_off(x_j, x_i, w, p):
        y = x_j * w * p
        torch.set_grad_enabled(False)
        return y

    results = []
    for fused in (True, False):
        torch.set_grad_enabled(True)
        try:
            if front == "MessagePassing":
                layer_out = propagate(leaves_it_off, g, inputs, fused)
            elif fused:
                layer_out = update_all(leaves_it_off, g, inputs)
            else:
                layer_out = update_all_plain(leaves_it_off, g, inputs)
            results.append((layer_out, torch.is_grad_enabled()))
        finally:
            torch.set_grad_enabled(True)
    (got, got_mode), (want, want_mode) = results
    assert got_mode is False and want_mode is False
    torch.testing.assert_close(got[0], want[0], rtol=1e-12, atol=0)


def test_autocast_inside_the_message():
    g = make_graph()
    inputs = Inputs(g, dtype=torch.float32)
    weight = torch.randn(4, 4, generator=torch.Generator().manual_seed(5))

    def autocast_block(x_j, x_i, w, p):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = (x_j * p) @ weight
        return y.float() + w

    for what, got, want in fused_and_plain(autocast_block, g, inputs):
        assert_same(got, want, what)
        assert ran_as_written(got[2])


# ---------------------------------------------------------------------- random draws


def _dropout(x_j, x_i, w, p):
    return F.dropout(x_j * w, 0.4, training=True) * p


def _draws_then_falls_back(x_j, x_i, w, p):
    noise = torch.randn(x_j.shape[-1], dtype=torch.float64)  # drawn while tracing, drawn again eagerly
    with torch.no_grad():
        scale = x_i * 0.5
    return F.dropout(x_j * w, 0.3, training=True) * (noise + scale) * p


@pytest.mark.parametrize("body", [_dropout, _draws_then_falls_back], ids=["dropout", "draws, then falls back"])
def test_random_draws_are_the_plain_paths(body):
    g = make_graph()
    for what, got, want in fused_and_plain(body, g, Inputs(g), seed=11):
        assert_same(got, want, what)
        assert (got[0] == 0).any() and not (got[0] == 0).all(), "dropout ran"


# ---------------------------------------------------------------------- the caller's modes between calls


def test_the_callers_modes_between_calls_of_a_cached_trace():
    """A message that reads only its arguments is traced once per input structure and cached; the
    caller's grad mode, inference mode and autocast change between calls and each call equals the
    plain path's."""
    from unigraph import MessagePassing

    class Pure(MessagePassing):
        def message(self, x_j, w):
            y = x_j * w
            y.relu_()
            return y + x_j

    g = make_graph()
    inputs = Inputs(g)
    layer = Pure(aggr="sum")
    assert layer._pure_message
    for mode in ("grad", "no_grad", "inference", "grad", "autocast"):
        outs = []
        for fuse in (True, False):
            layer.fuse = fuse
            context = {"grad": torch.enable_grad(), "no_grad": torch.no_grad(), "inference": torch.inference_mode(),
                       "autocast": torch.autocast("cpu", dtype=torch.bfloat16)}[mode]
            with context:
                out = layer.propagate(g, x=inputs.x, w=inputs.w)
            outs.append((out.detach().clone() if not out.is_inference() else out.clone(), out.requires_grad,
                         layer.explain().mode))
            if out.requires_grad:
                outs[-1] += (torch.autograd.grad(out.sum(), [inputs.x, inputs.w]),)
        (got, got_grad, got_mode, *got_grads), (want, want_grad, _, *want_grads) = outs
        assert got_mode != "eager" and got_grad == want_grad, mode
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12, msg=mode)
        for a, b in zip(got_grads[0] if got_grads else (), want_grads[0] if want_grads else ()):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12, msg=mode)
