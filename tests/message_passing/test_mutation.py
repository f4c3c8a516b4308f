"""Writes inside a traced message (``unigraph/message_passing/mutation.py`` and the tracer in
``tracing.py``): a write into a fresh intermediate is recorded as its out-of-place form and stays
fused; any other write (into an input, a view, a constant, through ``out=``, ``y[...] =``, ``.data``,
hooks) runs the message as written. Either way the result is the plain path's, values and
gradients, for ``MessagePassing`` and for DGL-style functions in ``update_all``."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from fused_vs_plain import (
    Inputs, assert_matches_plain, assert_same, fused_and_plain, make_graph, propagate, ran_as_written, update_all)


@pytest.fixture(autouse=True)
def _the_fused_path_on_small_graphs(no_small_graph_rule):
    """These tests are of the fused path: on their small graphs ``auto`` would run the messages
    eagerly (the small-graph rule: ``message_passing/base.py: _small_enough_for_eager``)."""

# ---------------------------------------------------------------------- writes into fresh intermediates: exact, fused


def _relu_(x_j, x_i, w, p):
    y = x_j * w
    y.relu_()
    return y


def _torch_relu_(x_j, x_i, w, p):
    y = x_j * w
    torch.relu_(y)
    return y


def _clamp_(x_j, x_i, w, p):
    y = x_j * p
    y.clamp_(-0.3, 0.4)
    return y * w


def _mul_(x_j, x_i, w, p):
    y = x_j + w
    y.mul_(p)
    return y


def _masked_fill_(x_j, x_i, w, p):
    y = x_j * w
    y.masked_fill_(y > 0.2, 0.2)  # the mask reads y before the write
    return y


def _add_alpha(x_j, x_i, w, p):
    y = x_j * p
    y.add_(x_i, alpha=0.5)
    return y


def _augmented_alias(x_j, x_i, w, p):
    y = x_j * w
    z = y  # the same tensor: it sees the write
    y += x_i
    y *= p
    return z - 0.5 * y


def _inplace_flag(x_j, x_i, w, p):
    y = x_j * w
    F.leaky_relu(y, 0.1, True)  # result unused: the write is what counts
    return y + x_i


def _chained(x_j, x_i, w, p):
    y = x_j * p
    return y.mul_(2.0).sub_(x_i).tanh_()


def _read_before_write(x_j, x_i, w, p):
    y = x_j * w
    s = torch.sigmoid(y)  # computed before the write: it keeps the old values
    y.mul_(p)
    return s + y


def _divide_by_own_sum(x_j, x_i, w, p):
    y = (x_j * w).abs() + 1.0
    y /= y.sum(-1, keepdim=True)  # the sum reads y before the write
    return y * p


FUSED = {"relu_": _relu_, "torch.relu_": _torch_relu_, "clamp_": _clamp_, "mul_": _mul_,
         "masked_fill_": _masked_fill_, "add_ alpha": _add_alpha, "+= and *= through an alias": _augmented_alias,
         "F.leaky_relu inplace": _inplace_flag, "chained": _chained, "y /= y.sum()": _divide_by_own_sum,
         "read before the write": _read_before_write}


@pytest.mark.parametrize("name", list(FUSED))
def test_writes_into_fresh_intermediates_stay_fused_and_exact(name):
    assert_matches_plain(FUSED[name], name, stays_fused=True)


# ---------------------------------------------------------------------- other writes: run as written


def _input_write(x_j, x_i, w, p):
    x_j.mul_(2.0)  # a gathered copy on the plain path: the caller's x is untouched
    return x_j * w


def _input_inplace_flag(x_j, x_i, w, p):
    return F.relu(x_j, inplace=True) * w


def _view_write(x_j, x_i, w, p):
    y = x_j * w
    y[:, :2].mul_(3.0)  # through a view: y changes
    return y * p


def _viewed_then_written(x_j, x_i, w, p):
    y = x_j * w
    v = y[:, :2]
    y.mul_(3.0)  # v sees the write
    return torch.cat([v, v], dim=-1) * p


def _attribute_view_write(x_j, x_i, w, p):
    y = x_j * w
    y.T.mul_(-1.0)
    return y


def _narrow_write(x_j, x_i, w, p):
    y = x_j * w
    a = y.narrow(-1, 0, 2)
    a += 1.0
    return y


def _item_assignment(x_j, x_i, w, p):
    y = x_j * w
    y[:, 0] = 0.0
    return y * p


def _data_assignment(x_j, x_i, w, p):
    y = x_j * w
    y.data = y.data * 0.0 + 1.0
    return y * p


def _copy_(x_j, x_i, w, p):
    y = x_j * w
    y.copy_(x_i * 2.0)
    return y * p


def _zero_(x_j, x_i, w, p):
    y = x_j * w
    y.zero_()
    return y + x_i * p


def _conversion_write(x_j, x_i, w, p):
    y = (x_j * w).double()  # already float64: the same tensor, so x_j * w is written too
    y.relu_()
    return y


def _hook(x_j, x_i, w, p):
    y = x_j * w
    y.register_hook(lambda grad: grad * 3.0)
    return y * p


EAGER = {"write into x_j": _input_write, "F.relu(x_j, inplace=True)": _input_inplace_flag,
         "write through a view": _view_write, "view taken before the write": _viewed_then_written,
         "write through .T": _attribute_view_write, "+= on narrow()": _narrow_write, "y[:, 0] = 0": _item_assignment,
         "y.data = ...": _data_assignment, "copy_": _copy_, "zero_": _zero_, "write after .double()": _conversion_write,
         "register_hook": _hook}


@pytest.mark.parametrize("name", list(EAGER))
def test_other_writes_run_as_written(name):
    assert_matches_plain(EAGER[name], name, stays_fused=False)


@pytest.mark.parametrize("front", ["MessagePassing", "update_all"])
def test_writes_into_inputs_never_reach_the_callers_tensors(front):
    """Fused, ``F.relu(x_j, inplace=True)`` used to run on the node rows: the caller's x itself."""
    g = make_graph()
    inputs = Inputs(g, grad=False)
    before = inputs.x.clone()
    if front == "MessagePassing":
        out = propagate(_input_inplace_flag, g, inputs, True)
    else:
        out = update_all(_input_inplace_flag, g, inputs)
    torch.testing.assert_close(inputs.x, before, rtol=0, atol=0)
    assert ran_as_written(out[2])


def test_a_write_into_a_constant_happens_once():
    """``acc += ...`` of traced values writes into a tensor the message does not own: run as written,
    once (the trace records nothing, so the write does not happen twice)."""
    g = make_graph()
    inputs = Inputs(g)
    totals = []
    for fuse in (True, False):
        acc = torch.zeros((), dtype=torch.float64)

        def body(x_j, x_i, w, p, acc=acc):
            acc.add_((x_j * w).detach().sum())
            return x_j * p

        out = propagate(body, g, inputs, fuse)
        totals.append((acc.clone(), out))
    torch.testing.assert_close(totals[0][0], totals[1][0], rtol=1e-12, atol=0)
    assert_same(totals[0][1], totals[1][1], "constant write")


def test_out_argument_runs_as_written():
    g = make_graph()
    inputs = Inputs(g, grad=False)  # out= refuses autograd: compare values

    def body(x_j, x_i, w, p):
        y = x_j * w
        torch.add(y, x_i, out=y)
        return y

    got, want = propagate(body, g, inputs, True), propagate(body, g, inputs, False)
    assert_same(got, want, "out=")
    assert got[2].mode == "eager" and "out=" in got[2].reasons[0]


@pytest.mark.parametrize("front", ["MessagePassing", "update_all"])
def test_a_write_that_would_change_shape_or_dtype_runs_as_written(front):
    """An in-place op keeps its target's shape and dtype (or fails); its out-of-place form would
    broadcast or promote. The interpreter checks on real data and runs the message as written."""
    g = make_graph()
    inputs = Inputs(g, dtype=torch.float32)
    w64 = inputs.w.detach().double()

    def promotes(x_j, x_i, w, p):
        y = x_j * p
        y.add_(w64)  # float32 += float64 stays float32
        return y

    for what, got, want in fused_and_plain(promotes, g, inputs):
        assert got[0].dtype == torch.float32 and want[0].dtype == torch.float32
        assert_same(got, want, what)
        assert got[2].mode in ("eager", "materialized") and "shape or dtype" in got[2].reasons[0]

    def broadcasts(x_j, x_i, w, p):
        y = x_j[:, :1] * 2.0
        y.add_(w)  # [E, 1] += [E, 4] fails in place
        return y

    run = (lambda: propagate(broadcasts, g, inputs, True)) if front == "MessagePassing" \
        else (lambda: update_all(broadcasts, g, inputs))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        run()


def test_a_write_caught_by_the_message_still_runs_as_written():
    """A message that swallows the tracer's refusal still runs eagerly."""
    g = make_graph()

    def body(x_j, x_i, w, p):
        y = x_j * w
        try:
            y[:, 0] = 0.0
        except Exception:  # noqa: BLE001 - what a careless message might do
            pass
        return y * p

    for what, got, want in fused_and_plain(body, g, Inputs(g)):
        assert_same(got, want, what)
        assert ran_as_written(got[2])
