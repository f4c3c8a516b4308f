"""MessagePassing's copy_u path (``base.py: _copy_propagate``): the default message ``x_j``, the
default update and ``aggregate`` not overridden run as one g-SpMM without the trace machinery.
Each test changes what the path depends on between calls (the hooks, ``aggr``, the inputs) and
compares with the plain path (``fuse=False``: messages gathered per edge, then reduced), values
and gradients in float64."""
from __future__ import annotations

import copy
import pickle

import pytest
import torch

import unigraph
from unigraph.message_passing import MessagePassing
from unigraph.nn import GINConv


@pytest.fixture(autouse=True)
def _the_fused_path_on_small_graphs(no_small_graph_rule):
    """These tests are of the fused path: on their small graphs ``auto`` would run the messages
    eagerly (the small-graph rule: ``message_passing/base.py: _small_enough_for_eager``)."""


class Plain(MessagePassing):
    """A layer that keeps every default hook."""

    def forward(self, g, x, **kwargs):
        return self.propagate(g, x=x, **kwargs)


def _graph(bipartite: bool = False) -> unigraph.Graph:
    # a hub (node 0), a self-loop, a repeated edge and nodes without in-edges
    src = torch.tensor([1, 2, 3, 4, 5, 0, 2, 2, 5, 5])
    dst = torch.tensor([0, 0, 0, 0, 0, 1, 2, 3, 3, 3])
    if bipartite:
        return unigraph.Graph(torch.stack([src, dst]), num_src_nodes=7, num_dst_nodes=5)
    return unigraph.Graph(torch.stack([src, dst]), num_nodes=7)


def _features(rows: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 3, generator=generator, dtype=torch.float64).requires_grad_()


def _run(layer, g, x, **kwargs):
    out = layer(g, x, **kwargs)
    (grad,) = torch.autograd.grad((out * torch.arange(out.numel(), dtype=out.dtype).view_as(out)).sum(), x)
    return out.detach(), grad


def _assert_plain(layer, g, x, **kwargs):
    """The layer's output and input gradient equal those of the plain path (fuse=False) of the same layer."""
    fast = _run(layer, g, x, **kwargs)
    layer.fuse = False
    try:
        plain = _run(layer, g, x, **kwargs)
    finally:
        layer.fuse = True
    torch.testing.assert_close(fast[0], plain[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(fast[1], plain[1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("aggr", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("bipartite", [False, True])
def test_default_hooks_take_the_copy_path_and_equal_the_plain_path(aggr, bipartite):
    layer = Plain(aggr=aggr)
    assert layer._copies_x
    g = _graph(bipartite)
    _assert_plain(layer, g, _features(7))
    _assert_plain(layer, g, _features(7), size=(7, 5 if bipartite else 7))


def test_the_plan_is_the_fused_paths_plan():
    g, x = _graph(), _features(7)
    fast, slow = Plain(), Plain()
    slow._copies_x = False  # the fused path through the trace and the interpreter
    fast(g, x), slow(g, x)
    assert str(fast.explain()) == str(slow.explain())
    assert fast.explain().fused and fast.explain().primitive_calls() == ["gspmm copy_u sum"]


def test_aggr_changed_between_calls():
    layer, g, x = Plain(aggr="sum"), _graph(), _features(7)
    _assert_plain(layer, g, x)
    layer.aggr = "max"
    layer(g, x)
    assert layer.explain().primitive_calls() == ["gspmm copy_u max"]
    _assert_plain(layer, g, x)


def test_message_replaced_on_the_instance_between_calls():
    layer, g, x = Plain(), _graph(), _features(7)
    _assert_plain(layer, g, x)
    layer.message = lambda x_j: 2 * x_j
    out = layer(g, x)
    assert not layer._copies_x
    torch.testing.assert_close(out, 2 * Plain()(g, x), rtol=0, atol=1e-12)
    _assert_plain(layer, g, x)
    del layer.message  # back to the default: the path comes back
    _assert_plain(layer, g, x)
    assert layer._copies_x


def test_update_replaced_on_the_class_between_calls():
    class Layer(Plain):
        pass

    layer, g, x = Layer(), _graph(), _features(7)
    _assert_plain(layer, g, x)
    Layer.update = lambda self, aggr_out: aggr_out + 1
    try:
        out = layer(g, x)
        assert not layer._copies_x
        torch.testing.assert_close(out, Plain()(g, x) + 1, rtol=0, atol=1e-12)
    finally:
        del Layer.update
    layer(g, x)
    assert layer._copies_x


def test_default_message_code_replaced_between_calls():
    layer, g, x = Plain(), _graph(), _features(7)
    _assert_plain(layer, g, x)
    before = layer(g, x).detach()
    code = MessagePassing.message.__code__
    MessagePassing.message.__code__ = (lambda self, x_j: 3 * x_j).__code__
    try:
        out = layer(g, x)
        assert not layer._copies_x
        torch.testing.assert_close(out, 3 * before, rtol=0, atol=1e-12)
        _assert_plain(layer, g, x)
    finally:
        MessagePassing.message.__code__ = code
    layer(g, x)
    assert layer._copies_x


def test_overridden_aggregate_and_other_inputs_keep_the_general_path():
    class Custom(Plain):
        def aggregate(self, inputs, g):
            return unigraph.ops.gspmm(g, "copy_e", "sum", e=inputs) * 2

    g, x = _graph(), _features(7)
    assert not Custom()._copies_x
    torch.testing.assert_close(Custom()(g, x), 2 * Plain()(g, x), rtol=0, atol=1e-12)
    layer = Plain()
    out = layer(g, (x, x[:7]))  # a pair: the general path
    torch.testing.assert_close(out, Plain()(g, x), rtol=0, atol=1e-12)


def test_bad_inputs_are_refused_as_on_the_general_path():
    layer, g = Plain(), _graph()
    with pytest.raises(ValueError, match="x"):
        layer(g, _features(6))
    with pytest.raises(ValueError, match="size"):
        layer(g, _features(7), size=(7, 6))
    with pytest.raises(ValueError, match="node_dim"):
        Plain(node_dim=-2)(g, _features(7).detach().view(7, 3, 1))


def test_copies_and_pickles_keep_the_path():
    layer, g, x = Plain(aggr="mean"), _graph(), _features(7)
    layer(g, x)
    for other in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        assert other._copies_x
        _assert_plain(other, g, x)


@pytest.mark.parametrize("train_eps", [False, True])
def test_gin_conv_on_edge_index_equals_the_plain_path(train_eps):
    torch.manual_seed(0)
    conv = GINConv(torch.nn.Linear(3, 4).double(), eps=0.25, train_eps=train_eps)
    g, x = _graph(), _features(7)
    edge_index = torch.stack([g.src, g.dst])
    fast = conv(x, edge_index)
    params = [x] + list(conv.parameters())
    fast_grads = torch.autograd.grad(fast.square().sum(), params)
    conv.fuse = False
    plain = conv(x, edge_index)
    plain_grads = torch.autograd.grad(plain.square().sum(), params)
    torch.testing.assert_close(fast, plain, rtol=0, atol=1e-12)
    for a, b in zip(fast_grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("where", ["class", "instance"])
def test_aggregate_replaced_after_the_first_call(where):
    class Layer(Plain):
        pass

    layer, g, x = Layer(), _graph(), _features(7)
    before = layer(g, x).detach()

    def doubled(self_or_inputs, *args):
        inputs, graph = (args[0], args[1]) if where == "class" else (self_or_inputs, args[0])
        return unigraph.ops.gspmm(graph, "copy_e", "sum", e=inputs) * 2

    if where == "class":
        Layer.aggregate = doubled
    else:
        layer.aggregate = doubled
    try:
        torch.testing.assert_close(layer(g, x), 2 * before, rtol=0, atol=1e-12)
    finally:
        if where == "class":
            del Layer.aggregate
        else:
            del layer.aggregate
    torch.testing.assert_close(layer(g, x), before, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------- a pure message returning x_j
class Optional(MessagePassing):
    """A message that reads only its arguments and returns ``x_j`` unchanged when ``w`` is None."""

    def forward(self, g, x, **kwargs):
        return self.propagate(g, x=x, **kwargs)

    def message(self, x_j, w=None):
        return x_j if w is None else w.view(-1, 1) * x_j


def _returned(layer) -> bool:
    return any(layer._returned_inputs.values())


@pytest.mark.parametrize("aggr", ["sum", "mean", "max"])
def test_a_message_returning_x_j_takes_the_copy_path_and_equals_the_plain_path(aggr):
    layer, g, x = Optional(aggr=aggr), _graph(), _features(7)
    w = torch.rand(g.num_edges, dtype=torch.float64)
    for kwargs, calls in (({"w": None}, f"gspmm copy_u {aggr}"), ({"w": w}, f"gspmm u_mul_e {aggr}"), ({}, None)):
        _assert_plain(layer, g, x, **kwargs)   # without weights, with, then without again
        layer(g, x, **kwargs)
        assert layer.explain().primitive_calls() == [calls or f"gspmm copy_u {aggr}"]
    assert _returned(layer)


def test_the_returned_copy_plan_is_the_fused_paths_plan():
    g, x = _graph(), _features(7)
    fast, slow = Optional(), Optional()
    slow._returned_copy = lambda *args: None   # the trace and the interpreter
    torch.testing.assert_close(fast(g, x, w=None), slow(g, x, w=None), rtol=0, atol=0)
    assert str(fast.explain()) == str(slow.explain()) and fast.explain().fused


def test_graph_conv_without_weights_takes_the_copy_path():
    torch.manual_seed(0)
    from unigraph.nn import GraphConv
    conv = GraphConv(3, 2, aggr="mean").double()
    g, x = _graph(), _features(7)
    edge_index = torch.stack([g.src, g.dst])
    params = [x] + list(conv.parameters())
    for weight in (None, torch.rand(g.num_edges, dtype=torch.float64), None):
        fast = conv(x, edge_index, weight)
        fast_grads = torch.autograd.grad(fast.square().sum(), params)
        conv.fuse = False
        plain = conv(x, edge_index, weight)
        plain_grads = torch.autograd.grad(plain.square().sum(), params)
        conv.fuse = True
        torch.testing.assert_close(fast, plain, rtol=0, atol=1e-12)
        for a, b in zip(fast_grads, plain_grads):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert _returned(conv)


def test_messages_that_compute_or_write_in_place_do_not_take_it():
    class Doubled(Optional):
        def message(self, x_j, w=None):
            return x_j * 2

    class InPlace(Optional):
        def message(self, x_j, w=None):
            x_j.mul_(2)
            return x_j

    class Other(Optional):   # returns its destination input: not a copy of a source row
        def message(self, x_i, x_j):
            return x_i

    g, x = _graph(), _features(7)
    for layer in (Doubled(), InPlace(), Other()):
        _assert_plain(layer, g, x)
        assert not _returned(layer)
    integer = torch.arange(7).view(7, 1)   # not the copy path: refused as with fuse=False
    for layer in (Optional(), Optional(fuse=False)):
        with pytest.raises(TypeError, match="floating-point"):
            layer(g, integer)


def test_a_message_changed_between_calls_leaves_the_copy_path():
    layer, g, x = Optional(), _graph(), _features(7)
    before = layer(g, x).detach()
    assert _returned(layer)
    layer.message = lambda x_j, w=None: 3 * x_j
    torch.testing.assert_close(layer(g, x), 3 * before, rtol=0, atol=1e-12)
    assert not _returned(layer)
    del layer.message
    _assert_plain(layer, g, x)
    assert _returned(layer)
    for other in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        _assert_plain(other, g, x)
        assert _returned(other)
