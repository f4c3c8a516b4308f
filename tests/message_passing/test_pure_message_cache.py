"""The cache of traces for messages that read only their arguments (``unigraph/message_passing/
base.py``, ``_read_message``): keyed on the input structure, and read for the message as it is on
each eager call. Changing the message's defaults, keyword-only defaults or code, or replacing it on
the class or the instance, between calls gives what calling the new message gives, fused and with
``fuse=False``, values and gradients."""
from __future__ import annotations

import types

import torch

import unigraph
from unigraph import MessagePassing

from fused_vs_plain import WIDTH, make_graph, tensor


def _both(layer, g, x):
    """(fused, plain) outputs and gradients w.r.t. x."""
    results = []
    for fuse in (True, False):
        layer.fuse = fuse
        out = layer.propagate(g, x=x)
        results.append((out.detach(), torch.autograd.grad((out * out).sum(), x)[0]))
    return results


def _expect(layer, g, x, reference):
    """Both paths equal ``reference(x_j)`` summed per destination, values and gradients."""
    want_out = unigraph.ops.gspmm(g, "copy_e", "sum", e=reference(x.index_select(0, g.src)))
    want_grad = torch.autograd.grad((want_out * want_out).sum(), x)[0]
    for fuse, (out, grad) in zip((True, False), _both(layer, g, x)):
        torch.testing.assert_close(out, want_out.detach(), rtol=1e-12, atol=1e-12, msg=f"fuse={fuse}")
        torch.testing.assert_close(grad, want_grad, rtol=1e-12, atol=1e-12, msg=f"fuse={fuse} gradient")


def test_changed_defaults_and_keyword_only_defaults():
    class Scaled(MessagePassing):
        def message(self, x_j, scale=2.0, *, shift=0.0):
            return x_j * scale + shift

    g, x = make_graph(), tensor(7, WIDTH, seed=1)
    layer = Scaled(aggr="sum")
    assert layer._pure_message
    _expect(layer, g, x, lambda x_j: x_j * 2.0)
    Scaled.message.__defaults__ = (3.0,)
    _expect(layer, g, x, lambda x_j: x_j * 3.0)
    Scaled.message.__kwdefaults__["shift"] = 0.5  # the same dict, changed in place
    _expect(layer, g, x, lambda x_j: x_j * 3.0 + 0.5)
    Scaled.message.__defaults__ = (2.0,)  # back to a value traced before
    _expect(layer, g, x, lambda x_j: x_j * 2.0 + 0.5)


def test_message_replaced_on_the_instance_or_the_class_or_its_code():
    class Plain(MessagePassing):
        def message(self, x_j):
            return x_j * 2.0

    g, x = make_graph(), tensor(7, WIDTH, seed=1)
    layer, other = Plain(aggr="sum"), Plain(aggr="sum")
    _expect(layer, g, x, lambda x_j: x_j * 2.0)

    def negated(self, x_j):
        return -x_j

    layer.message = types.MethodType(negated, layer)  # the instance only
    _expect(layer, g, x, lambda x_j: -x_j)
    _expect(other, g, x, lambda x_j: x_j * 2.0)

    def shifted(self, x_j, shift=1.5):
        return x_j - shift

    Plain.message = shifted  # the class: every instance without its own
    _expect(other, g, x, lambda x_j: x_j - 1.5)

    def squared(self, x_j, shift=1.5):
        return x_j * x_j - shift

    shifted.__code__ = squared.__code__  # the same function object, new code
    _expect(other, g, x, lambda x_j: x_j * x_j - 1.5)

    del layer.message  # back to the class's
    _expect(layer, g, x, lambda x_j: x_j * x_j - 1.5)


def test_a_message_bound_to_another_instance():
    class Weighted(MessagePassing):
        def __init__(self, scale):
            super().__init__(aggr="sum")
            self.scale = scale

        def message(self, x_j):
            return x_j * self.scale

    g, x = make_graph(), tensor(7, WIDTH, seed=1)
    layer, other = Weighted(2.0), Weighted(-4.0)
    _expect(layer, g, x, lambda x_j: x_j * 2.0)
    layer.message = other.message  # reads other.scale
    _expect(layer, g, x, lambda x_j: x_j * -4.0)


def test_purity_verdicts_keep_no_layer_alive():
    import gc
    import weakref

    from unigraph.message_passing import purity

    class Plain(MessagePassing):
        def message(self, x_j):
            return x_j

    layer = Plain(aggr="sum")
    layer.propagate(make_graph(), x=tensor(7, WIDTH, seed=1, grad=False))
    ref = weakref.ref(layer)
    gc.disable()  # freed by reference counting: no cycle through what the layer records of itself
    try:
        del layer
        assert ref() is None
    finally:
        gc.enable()
    assert all(isinstance(key, types.CodeType) for key in purity._VERDICTS)


def test_update_replaced_with_new_inputs():
    """``update``'s inputs are read for the update as it is now too: a replacement that takes a new
    input (with a default) receives it."""
    class Plain(MessagePassing):
        def message(self, x_j):
            return x_j

    g, x = make_graph(), tensor(7, WIDTH, seed=1, grad=False)
    layer = Plain(aggr="sum")
    base = layer.propagate(g, x=x)

    def update(self, aggr_out, bias=0.0):
        return aggr_out + bias

    layer.update = types.MethodType(update, layer)
    for fuse in (True, False):
        layer.fuse = fuse
        torch.testing.assert_close(layer.propagate(g, x=x, bias=2.5), base + 2.5, rtol=1e-12, atol=0)
