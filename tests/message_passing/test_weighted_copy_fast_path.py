"""MessagePassing's weighted-copy path (``base.py: _weighted_copy``): a message that reads only its
arguments and is one weight per edge times a source input (GCNConv's and GraphConv's
``edge_weight.view(-1, 1) * x_j``) runs as the fused path's one ``u_mul_e`` g-SpMM without the
interpreter. It must be the fused path's very call: each test compares it with the fused path
(the fast path switched off) bit for bit, values, gradients and plan, and checks that the forms
the interpreter treats otherwise are left to it."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph.message_passing import MessagePassing, base
from unigraph.nn import GCNConv, GraphConv


@pytest.fixture(autouse=True)
def _the_fused_path_on_small_graphs(no_small_graph_rule):
    """These tests are of the fused path: on their small graphs ``auto`` would run the messages
    eagerly (the small-graph rule: ``message_passing/base.py: _small_enough_for_eager``)."""


def _graph() -> unigraph.Graph:
    # a hub (node 0), a self-loop, a repeated edge and nodes without in-edges
    src = torch.tensor([1, 2, 3, 4, 5, 0, 2, 2, 5, 5, 6])
    dst = torch.tensor([0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 0])
    return unigraph.Graph(torch.stack([src, dst]), num_nodes=7)


# messages that read only their arguments (no globals: ``torch.mul`` would make one impure)
_FORMS = {
    "view, weight first": lambda self, x_j, w: w.view(-1, 1) * x_j,
    "view, source first": lambda self, x_j, w: x_j * w.view(-1, 1),
    "reshape": lambda self, x_j, w: w.reshape(-1, 1).mul(x_j),
    "unsqueeze": lambda self, x_j, w: x_j.mul(w.unsqueeze(1)),
    "scaled": lambda self, x_j, w: w.view(-1, 1) * x_j * 2.0,
    "destination": lambda self, x_i, w: w.view(-1, 1) * x_i,
    "sum": lambda self, x_j, w: w.view(-1, 1) + x_j,
}


class _Weighted(MessagePassing):
    def forward(self, g, x, w):
        return self.propagate(g, x=x, w=w)


def Weighted(form: str, aggr: str = "sum") -> MessagePassing:
    return type(f"Weighted_{form.replace(' ', '_').replace(',', '')}", (_Weighted,), {"message": _FORMS[form]})(aggr=aggr)


def _inputs(dtype=torch.float64, weight_dtype=None, weight_shape=(11,), seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(7, 3, generator=generator, dtype=dtype).requires_grad_()
    w = (torch.rand(weight_shape, generator=generator, dtype=weight_dtype or dtype) + 0.5).requires_grad_()
    return x, w


def _run(layer, g, x, w, fast: bool, monkeypatch):
    """Output, gradients and plan of one call, with the weighted-copy path on or off."""
    taken = []
    real_path = base.MessagePassing._weighted_copy

    def spy(self, *args):
        out = real_path(self, *args) if fast else None
        taken.append(out is not None)
        return out
    monkeypatch.setattr(base.MessagePassing, "_weighted_copy", spy)
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()
    out = layer(g, x, w)
    grads = torch.autograd.grad(out.square().sum(), (x, w))
    monkeypatch.setattr(base.MessagePassing, "_weighted_copy", real_path)
    return out.detach(), grads, str(layer.explain()), taken


@pytest.mark.parametrize("form", ["view, weight first", "view, source first", "reshape", "unsqueeze"])
@pytest.mark.parametrize("aggr", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_weighted_forms_take_the_path_and_equal_the_fused_path_bit_for_bit(form, aggr, dtype, monkeypatch):
    x, w = _inputs(dtype)
    fused = _run(Weighted(form, aggr), _graph(), x, w, False, monkeypatch)
    fast = _run(Weighted(form, aggr), _graph(), x, w, True, monkeypatch)
    assert fast[3] == [True]
    assert torch.equal(fast[0], fused[0]) and all(torch.equal(a, b) for a, b in zip(fast[1], fused[1]))
    assert fast[2] == fused[2] and "gspmm u_mul_e" in fast[2]


@pytest.mark.parametrize("layer", [lambda: GCNConv(3, 4), lambda: GraphConv(3, 4, aggr="mean")], ids=["gcn", "graph"])
def test_gcn_and_graph_conv_with_edge_weights_take_it_and_equal_the_fused_path(layer, monkeypatch):
    x, w = _inputs(torch.float32)

    def call(fast):
        torch.manual_seed(0)
        conv = layer()
        taken = []
        real_path = base.MessagePassing._weighted_copy
        monkeypatch.setattr(base.MessagePassing, "_weighted_copy",
                            lambda self, *a: taken.append(1) or (real_path(self, *a) if fast else None))
        xs, ws = x.detach().requires_grad_(), w.detach().requires_grad_()
        out = conv(_graph(), xs, edge_weight=ws)
        grads = torch.autograd.grad(out.square().sum(), (xs, ws, *conv.parameters()))
        monkeypatch.setattr(base.MessagePassing, "_weighted_copy", real_path)
        return out.detach(), grads, str(conv.explain()), taken
    fast, fused = call(True), call(False)
    assert fast[3] and torch.equal(fast[0], fused[0]) and fast[2] == fused[2]
    assert all(torch.equal(a, b) for a, b in zip(fast[1], fused[1]))


@pytest.mark.parametrize("case", ["scaled", "destination", "sum", "weights [E, 1]", "float32 weights",
                                  "subclass", "aggregate overridden"])
def test_other_forms_and_operands_are_left_to_the_fused_path(case, monkeypatch):
    """A product with more in it, a destination input, another operation, a weight that is not
    1-D, weights of another dtype than the features, a tensor subclass (its __torch_function__ may
    do anything), an overridden aggregate: the path is not taken, and the call equals ``fuse=False``."""
    form = case if case in ("scaled", "destination", "sum") else "view, weight first"
    x, w = _inputs(weight_dtype=torch.float32 if case == "float32 weights" else None,
                   weight_shape=(11, 1) if case == "weights [E, 1]" else (11,))
    if case == "subclass":
        class Tagged(torch.Tensor):
            pass
        x = x.detach().as_subclass(Tagged).requires_grad_()
    layer = Weighted(form)
    if case == "aggregate overridden":
        layer.aggregate = lambda inputs, g: unigraph.ops.gspmm(g, "copy_e", "sum", e=inputs)
    taken = []
    real_path = base.MessagePassing._weighted_copy

    def spy(self, *args):
        out = real_path(self, *args)
        taken.append(out is not None)
        return out
    monkeypatch.setattr(base.MessagePassing, "_weighted_copy", spy)
    out = layer(_graph(), x, w)
    assert not any(taken)
    layer.fuse = False
    assert torch.allclose(out, layer(_graph(), x, w), rtol=1e-5, atol=1e-6)


def test_a_message_changed_between_calls_is_read_again(monkeypatch):
    """The weighted form is found per cached trace; replacing the message (here by a sum) empties
    the cache with the hooks' identity, and the next call runs the new message."""
    x, w = _inputs()
    layer = Weighted("view, weight first")
    first = layer(_graph(), x, w)
    assert layer._weighted_inputs and list(layer._weighted_inputs.values()) == [("x_j", "w")]
    type(layer).message = _FORMS["sum"]
    second = layer(_graph(), x, w)
    layer.fuse = False
    assert torch.allclose(second, layer(_graph(), x, w)) and not torch.allclose(first, second)
