"""Compiling ``message()`` is sound: the fused path equals ``fuse=False`` whatever the message reads
and however that changes between calls (parameters, buffers, Python attributes, closures, globals,
grad mode, training mode, tensors changed in place, tensors computed from parameters under no_grad),
values and gradients; and messages the tracer cannot handle fall back instead of crashing."""
from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from torch.nn import Parameter

import unigraph
from unigraph import MessagePassing

WIDTH = 4


@pytest.fixture(autouse=True)
def _the_fused_path_on_small_graphs(no_small_graph_rule):
    """These tests are of the fused path: on their small graphs ``auto`` would run the messages
    eagerly (the small-graph rule: ``message_passing/base.py: _small_enough_for_eager``)."""


def make_graph(num_nodes=7, num_edges=23, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return unigraph.Graph(torch.randint(0, num_nodes, (2, num_edges), generator=gen), num_nodes=num_nodes)


def features(rows, seed=1, width=WIDTH):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, width, generator=gen, dtype=torch.float64).requires_grad_(True)


def run(layer, g, fuse, **kwargs):
    """The layer's output and the gradients of a fixed function of it, w.r.t. its tensor inputs and
    its parameters (None where no gradient reaches one)."""
    layer.fuse = fuse
    leaves = [v for v in kwargs.values() if isinstance(v, torch.Tensor) and v.requires_grad]
    leaves += [p for p in layer.parameters() if p.requires_grad]
    out = layer.propagate(g, **kwargs)
    if not torch.is_grad_enabled() or not out.requires_grad:
        return out.detach(), None
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype).view(out.shape)
    grads = torch.autograd.grad((out * weights).sum(), leaves, allow_unused=True)
    return out.detach(), grads


def assert_fused_matches_eager(layer, g, *, expect_grads=None, **kwargs):
    """One fused call against one ``fuse=False`` call of the same layer, values and gradients;
    returns the fused output (the fused call's plan is left in ``layer.fused_plan``)."""
    out, grads = run(layer, g, True, **kwargs)
    plan = layer.fused_plan = layer.explain()
    want, want_grads = run(layer, g, False, **kwargs)
    torch.testing.assert_close(out, want, rtol=1e-7, atol=1e-9, msg=lambda m: f"{m}\n{plan}")
    assert (grads is None) == (want_grads is None)
    if grads is not None:
        for got, ref in zip(grads, want_grads):
            assert (got is None) == (ref is None), f"a gradient reached one path only\n{plan}"
            if got is not None:
                torch.testing.assert_close(got, ref, rtol=1e-7, atol=1e-9, msg=lambda m: f"gradient: {m}\n{plan}")
    if expect_grads is not None:
        assert grads is not None and all(g is not None for g in grads[-expect_grads:]), \
            "gradients must reach the parameters"
    return out


# ---------------------------------------------------------------------- every kind of captured value
class ComputedFromParameter(MessagePassing):
    """A tensor computed from a parameter inside message (baked into a trace)."""

    def __init__(self):
        super().__init__(aggr="sum")
        self.log_scale = Parameter(torch.tensor([0.3, -0.2, 0.1, 0.5], dtype=torch.float64))

    def message(self, x_j):
        return x_j * self.log_scale.exp()


def test_tensor_computed_from_parameter_under_no_grad_in_eval_then_training_again():
    """A validation pass (eval + no_grad) must not freeze the parameter: the optimizer's later
    updates take effect and gradients reach the parameter in training."""
    g, x = make_graph(), features(7)
    layer = ComputedFromParameter()
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    for step in range(3):
        layer.train()
        out = assert_fused_matches_eager(layer, g, x=x, expect_grads=1)
        optimizer.zero_grad()
        layer.fuse = True
        layer.propagate(g, x=x).square().sum().backward()
        assert layer.log_scale.grad is not None and layer.log_scale.grad.abs().sum() > 0
        optimizer.step()
        layer.eval()
        with torch.no_grad():
            validation = assert_fused_matches_eager(layer, g, x=x)
        expected = unigraph.ops.gspmm(g, "copy_u", "sum", x.detach()) * layer.log_scale.detach().exp()
        torch.testing.assert_close(validation, expected)
        assert not torch.equal(validation, out), f"step {step}: the optimizer's update must show"


class ScaledByParameter(MessagePassing):
    def __init__(self):
        super().__init__(aggr="mean")
        self.scale = Parameter(torch.full((WIDTH,), 1.5, dtype=torch.float64))
        self.register_buffer("shift", torch.zeros(WIDTH, dtype=torch.float64))

    def message(self, x_j):
        return x_j * self.scale + self.shift


def test_parameters_and_buffers_changed_in_place_or_replaced():
    g, x = make_graph(), features(7)
    layer = ScaledByParameter()
    first = assert_fused_matches_eager(layer, g, x=x, expect_grads=1)
    with torch.no_grad():
        layer.scale.mul_(-2.0)  # in place, as an optimizer does
        layer.shift.add_(3.0)
    second = assert_fused_matches_eager(layer, g, x=x, expect_grads=1)
    layer.scale = Parameter(torch.linspace(-1, 1, WIDTH, dtype=torch.float64))  # replaced
    layer.shift = torch.full((WIDTH,), -7.0, dtype=torch.float64)
    third = assert_fused_matches_eager(layer, g, x=x, expect_grads=1)
    assert not torch.equal(first, second) and not torch.equal(second, third)


class Tempered(MessagePassing):
    """A plain Python attribute (a temperature schedule) and an attribute branch."""

    def __init__(self):
        super().__init__(aggr="sum")
        self.tau = 1.0
        self.use_destination = False

    def message(self, x_i, x_j):
        h = x_j / self.tau
        if self.use_destination:
            h = h - x_i
        return torch.softmax(h, dim=-1)


def test_python_attributes_and_attribute_branches():
    g, x = make_graph(), features(7)
    layer = Tempered()
    outputs = []
    for tau, use_destination in ((1.0, False), (0.25, False), (0.25, True), (4.0, True), (1.0, False)):
        layer.tau, layer.use_destination = tau, use_destination
        outputs.append(assert_fused_matches_eager(layer, g, x=x))
    assert not torch.equal(outputs[0], outputs[1]) and not torch.equal(outputs[1], outputs[2])
    torch.testing.assert_close(outputs[0], outputs[-1])


_GLOBAL_OFFSET = 0.0


def test_closures_and_globals():
    global _GLOBAL_OFFSET
    g, x = make_graph(), features(7)
    factor = 2.0
    captured = torch.ones(WIDTH, dtype=torch.float64)

    class Closure(MessagePassing):
        def message(self, x_j):
            return x_j * factor * captured + _GLOBAL_OFFSET

    layer = Closure(aggr="max")
    first = assert_fused_matches_eager(layer, g, x=x)
    factor = -3.0  # noqa: F841 - read by the closure
    captured.mul_(0.5)  # a captured tensor changed in place
    _GLOBAL_OFFSET = 10.0
    try:
        second = assert_fused_matches_eager(layer, g, x=x)
    finally:
        _GLOBAL_OFFSET = 0.0
    torch.testing.assert_close(second, unigraph.ops.gspmm(g, "copy_u", "min", x.detach()) * -1.5 + 10.0)
    assert not torch.equal(first, second)


class ModeDependent(MessagePassing):
    """Branches on the training flag and on grad mode (read at trace time)."""

    def __init__(self):
        super().__init__(aggr="sum")
        self.weight = Parameter(torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64))

    def message(self, x_j):
        h = x_j * self.weight if self.training else x_j - self.weight
        return h * 2.0 if torch.is_grad_enabled() else h * -1.0


def test_training_mode_and_grad_mode():
    g, x = make_graph(), features(7)
    layer = ModeDependent()
    seen = []
    for training in (True, False, True):
        layer.train(training)
        seen.append(assert_fused_matches_eager(layer, g, x=x, expect_grads=1))
        with torch.no_grad():
            seen.append(assert_fused_matches_eager(layer, g, x=x))
    assert len({tuple(t.flatten().tolist()) for t in seen}) == 4  # four distinct (mode, grad) programs
    torch.testing.assert_close(seen[0], seen[4])


def test_input_dtype_and_inputs_that_appear_or_disappear():
    g = make_graph()

    class Optional(MessagePassing):
        def message(self, x_j, w=None):
            return x_j if w is None else x_j * w.view(-1, 1)

    layer = Optional(aggr="sum")
    x64 = features(7)
    assert_fused_matches_eager(layer, g, x=x64)
    assert_fused_matches_eager(layer, g, x=x64, w=torch.rand(g.num_edges, dtype=torch.float64))
    x32 = x64.detach().float().requires_grad_(True)
    out = assert_fused_matches_eager(layer, g, x=x32)
    assert out.dtype == torch.float32


def test_autocast_state_read_by_the_message():
    g, x = make_graph(), features(7).detach().float().requires_grad_(True)

    class AutocastAware(MessagePassing):
        def message(self, x_j):
            return x_j * (3.0 if torch.is_autocast_enabled("cpu") else -1.0)

    layer = AutocastAware(aggr="sum")
    plain = assert_fused_matches_eager(layer, g, x=x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        layer.fuse = True
        fused = layer.propagate(g, x=x)
    torch.testing.assert_close(fused.float(), -3.0 * plain, rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------------- messages that read only their arguments
class LiteralBranches(MessagePassing):
    """Reads only its arguments: its trace is cached per input structure, literal values included."""

    def message(self, x_j, flag, w=None):
        h = x_j * 2.0 if flag is True else x_j - 1.0
        return h if w is None else h * w.view(-1, 1)


def test_cached_traces_of_argument_only_messages_follow_the_inputs(monkeypatch):
    from unigraph.message_passing import base

    g, x = make_graph(), features(7)
    w = torch.rand(g.num_edges, dtype=torch.float64)
    layer = LiteralBranches(aggr="sum")
    assert layer._pure_message
    traced = []
    monkeypatch.setattr(base, "trace", lambda call: traced.append(1) or base_trace(call))
    for flag in (True, 1, 1.0, False):  # 1 == 1.0 == True as dict keys, not to `is True`
        for weight in (None, w, None):
            assert_fused_matches_eager(layer, g, x=x, flag=flag, w=weight)
    assert len(traced) <= 8, "eight structures: four flags, with and without w"
    seen = len(traced)
    assert_fused_matches_eager(layer, g, x=x, flag=True, w=w)
    assert len(traced) == seen, "a structure seen before is not traced again"


def base_trace(call):
    from unigraph.message_passing.tracing import trace
    return trace(call)


_GLOBAL_SCALE = 2.0


def _decorated(fn):
    def wrapper(self, x_j):
        return fn(self, x_j)
    return wrapper


class ReadsAttribute(MessagePassing):
    def message(self, x_j):
        return x_j * self.scale


class ReadsGlobal(MessagePassing):
    def message(self, x_j):
        return x_j * _GLOBAL_SCALE


class CallsBuiltin(MessagePassing):
    def message(self, x_j):
        return x_j * len(x_j.shape)


class HasComprehension(MessagePassing):
    def message(self, x_j):
        return [t for t in (x_j,)][0]


class Decorated(MessagePassing):
    @_decorated
    def message(self, x_j):
        return x_j


class CallsSuper(MessagePassing):
    def message(self, x_j):
        return super().message(x_j)


@pytest.mark.parametrize("cls", [ReadsAttribute, ReadsGlobal, CallsBuiltin, HasComprehension, Decorated, CallsSuper])
def test_messages_that_read_more_than_their_arguments_are_traced_every_call(cls):
    from unigraph.message_passing.purity import reads_only_its_arguments

    assert not reads_only_its_arguments(cls.message)
    assert reads_only_its_arguments(LiteralBranches.message) and reads_only_its_arguments(MessagePassing.message)


# ---------------------------------------------------------------------- what tracing cannot handle
UNTRACEABLE_BEFORE = {
    "max values": lambda x_j: x_j - x_j.max(-1, keepdim=True).values,
    "topk values": lambda x_j: torch.topk(x_j, 2, dim=-1).values.sum(-1, keepdim=True) * x_j,
    "sort values": lambda x_j: x_j.sort(-1, descending=True).values,
    "min over edges": lambda x_j: x_j - x_j.min(0).values,
    "t": lambda x_j: x_j.t().t() * 2,
    "slice rows": lambda x_j: torch.cat([x_j[1:], x_j[:1]]),
    "chunk rows": lambda x_j: torch.cat(list(reversed(x_j.chunk(2, dim=0)))),
    "chunk features": lambda x_j: torch.cat(x_j.chunk(2, dim=-1)[::-1], dim=-1),
    "transpose": lambda x_j: x_j.transpose(0, 1).transpose(0, 1),
    "flatten view": lambda x_j: x_j.flatten().view(-1, WIDTH),
    "view by edge count": lambda x_j: x_j.view(x_j.size(0), 2, -1).sum(1),
    "reshape by shape": lambda x_j: x_j.reshape(x_j.shape[0], -1, 2).flatten(1),
    "unpacked chunks": lambda x_j: (lambda a, b: a * b)(*x_j.chunk(2, dim=-1)),
    "tensor branch": lambda x_j: x_j if bool(x_j.sum() > 0) else -x_j,
    "item": lambda x_j: x_j * x_j.abs().max().item(),
    "numpy round trip": lambda x_j: torch.from_numpy(x_j.detach().numpy().copy()) + x_j,
}


@pytest.mark.parametrize("name", list(UNTRACEABLE_BEFORE))
@pytest.mark.parametrize("aggr", ["sum", "max"])
def test_messages_that_broke_tracing_fuse_or_fall_back(name, aggr):
    fn = UNTRACEABLE_BEFORE[name]

    class Layer(MessagePassing):
        def message(self, x_j):
            return fn(x_j)

    g, x = make_graph(num_edges=24), features(7)
    layer = Layer(aggr=aggr)
    assert_fused_matches_eager(layer, g, x=x)
    plan = layer.fused_plan
    if name in FUSE_ON_NODE_ROWS:
        assert plan.mode == "fused", str(plan)
    elif plan.mode != "fused":
        assert plan.reasons and plan.reasons[0], "a fallback says why"


FUSE_ON_NODE_ROWS = ("max values", "topk values", "sort values", "chunk features", "view by edge count",
                     "reshape by shape")


def test_a_message_that_fails_eagerly_fails_the_same_way_fused():
    class WrongRows(MessagePassing):
        def message(self, x_j):
            return x_j[1:]

    g, x = make_graph(), features(7)
    with pytest.raises(ValueError, match="one row per edge"):
        WrongRows().propagate(g, x=x)


# ---------------------------------------------------------------------- random message programs
# A program is a tree of (name, children); `build` turns it into a function of (layer, x_j, x_i, e)
# returning a [E, WIDTH] tensor. The grammar covers elementwise calls, reductions read through
# `.values`, reshapes, slicing across and within rows, matmuls with the layer's weights, softmax,
# branches on the layer's Python attributes, writes in place (into fresh intermediates, into the
# operand itself, through views, through aliases), grad-mode and inference-mode blocks, a custom
# autograd Function and dropout; the test changes the attributes and the weights between calls.
LEAVES = ("x_j", "x_i", "e")
UNARY = {
    "relu": lambda t, m: torch.relu(t),
    "tanh": lambda t, m: torch.tanh(t),
    "sigmoid": lambda t, m: t.sigmoid(),
    "neg_abs": lambda t, m: -t.abs(),
    "over_tau": lambda t, m: t / m.tau,
    "plus_const": lambda t, m: t + 1.5,
    "softmax_features": lambda t, m: torch.softmax(t, dim=-1),
    "log_softmax_features": lambda t, m: F.log_softmax(t, -1),
    "softmax_edges": lambda t, m: torch.softmax(t, dim=0),
    "minus_max_values": lambda t, m: t - t.max(-1, keepdim=True).values,
    "times_min_values": lambda t, m: t * torch.min(t, dim=-1, keepdim=True).values,
    "topk_values": lambda t, m: torch.topk(t, 2, dim=-1).values @ m.w_narrow,
    "sort_values": lambda t, m: t.sort(dim=-1, descending=True).values,
    "minus_edge_max": lambda t, m: t - t.max(0).values,
    "centred_over_edges": lambda t, m: t - t.mean(0, keepdim=True),
    "mean_features": lambda t, m: t.mean(-1, keepdim=True) + t,
    "view_heads": lambda t, m: t.view(-1, 2, WIDTH // 2).sum(1).repeat(1, 2),
    "view_by_size": lambda t, m: t.view(t.size(0), 2, -1).flatten(1),
    "reshape_by_shape": lambda t, m: t.reshape(t.shape[0], -1, 1).squeeze(-1),
    "unsqueeze_squeeze": lambda t, m: t.unsqueeze(1).squeeze(1),
    "double_t": lambda t, m: t.t().t(),
    "double_transpose": lambda t, m: t.transpose(0, 1).transpose(0, 1),
    "flatten_view": lambda t, m: t.flatten().view(-1, WIDTH),
    "rotate_features": lambda t, m: torch.cat([t[:, 1:], t[:, :1]], dim=-1),
    "rotate_edges": lambda t, m: torch.cat([t[1:], t[:1]]),
    "chunk_features": lambda t, m: t.chunk(2, dim=-1)[1].repeat(1, 2),
    "matmul_weight": lambda t, m: t @ m.weight,
    "linear": lambda t, m: F.linear(t, m.weight, m.bias),
    "ellipsis_slice": lambda t, m: t[..., :WIDTH] * 0.5,
}

def _fresh(t):
    return t * 1.0


def _write_then_read(t, write):
    y = _fresh(t)
    write(y)
    return y


def _alias_then_add(t, m, functional):
    y = t * m.tau
    z = y  # the same tensor: it sees the write
    if functional:
        y = y + 0.5
        return y * y
    y += 0.5
    return z * y


@torch.no_grad()
def _detached_projection(t, weight):
    return t @ weight


class Cube(torch.autograd.Function):
    """t**3 with a deliberately different backward (2 t): a trace that inlined forward would lose it."""

    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t * t * t

    @staticmethod
    def backward(ctx, grad):
        (t,) = ctx.saved_tensors
        return 2.0 * grad * t


def _no_grad_block(t, m):
    with torch.no_grad():
        d = t * m.tau
    return t + d


def _enable_grad_inside_no_grad(t, m):
    with torch.no_grad():
        with torch.enable_grad():
            y = t @ m.weight
    return y


def _inference_block(t, m):
    with torch.inference_mode():
        d = t * 2.0
    return t + d


# Writes in place: (as written, the functional twin). Where eager autograd refuses a program (a
# write into a tensor an earlier call saved for backward) the fused path may run it, exactly as
# its twin; the test then compares with the twin.
WRITES = {
    "relu_fresh": (lambda t, m: _write_then_read(t, lambda y: y.relu_()), lambda t, m: torch.relu(t)),
    "clamp_operand": (lambda t, m: t.clamp_(-1.0, 1.0), lambda t, m: t.clamp(-1.0, 1.0)),
    "masked_fill_fresh": (lambda t, m: _write_then_read(t, lambda y: y.masked_fill_(y > 0.5, 0.5)),
                          lambda t, m: t.masked_fill(t > 0.5, 0.5)),
    "leaky_relu_inplace": (lambda t, m: F.leaky_relu(_fresh(t), 0.2, inplace=True), lambda t, m: F.leaky_relu(t, 0.2)),
    "torch_tanh_": (lambda t, m: torch.tanh_(_fresh(t)), lambda t, m: torch.tanh(t)),
    "alias_iadd": (lambda t, m: _alias_then_add(t, m, False), lambda t, m: _alias_then_add(t, m, True)),
    "mul_by_weight_column": (lambda t, m: _write_then_read(t, lambda y: y.mul_(m.weight[0])),
                             lambda t, m: t * m.weight[0]),
    "view_write": (lambda t, m: _write_then_read(t, lambda y: y[:, :1].mul_(2.0)),
                   lambda t, m: torch.cat([t[:, :1] * 2.0, t[:, 1:]], dim=-1)),
    "item_assignment": (lambda t, m: _write_then_read(t, lambda y: y.__setitem__((slice(None), 0), 0.0)),
                        lambda t, m: torch.cat([torch.zeros_like(t[:, :1]), t[:, 1:]], dim=-1)),
}
UNARY.update({name: pair[0] for name, pair in WRITES.items()})
UNARY.update({
    "no_grad_block": _no_grad_block,
    "no_grad_helper": lambda t, m: _detached_projection(t, m.weight) + t,
    "enable_grad_inside_no_grad": _enable_grad_inside_no_grad,
    "set_grad_enabled_false": lambda t, m: _with_grad(False, lambda: t * 0.5) + t,
    "inference_block": _inference_block,
    "autograd_function": lambda t, m: Cube.apply(t),
    "dropout": lambda t, m: F.dropout(t, 0.3, training=m.training),
})


def _with_grad(mode, fn):
    with torch.set_grad_enabled(mode):
        return fn()


BINARY = {
    "add": lambda a, b, m: a + b,
    "sub": lambda a, b, m: a - b,
    "mul": lambda a, b, m: a * b,
    "div": lambda a, b, m: a / (1.0 + b * b),
    "maximum": lambda a, b, m: torch.maximum(a, b),
    "cat_project": lambda a, b, m: torch.cat([a, b], dim=-1) @ m.w_wide,
    "dot_gate": lambda a, b, m: (a * b).sum(-1, keepdim=True) * a,
    "if_flag": lambda a, b, m: a if m.flag else b,
}


def random_program(seed: int):
    """A program tree drawn from the grammar (a seeded draw covers it far better than hypothesis's
    shrink-friendly choices, which favour bare leaves; failures print the tree)."""
    rng = random.Random(seed)
    depth = rng.randint(1, 4)
    unary, binary = sorted(UNARY), sorted(BINARY)

    def draw(level):
        roll = rng.random()
        if level == 0 or (level < depth and roll < 0.15):
            return (rng.choice(LEAVES), ())
        if roll < 0.7:
            return (rng.choice(unary), (draw(level - 1),))
        return (rng.choice(binary), (draw(level - 1), draw(level - 1)))
    return draw(depth)


def build(tree, functional=False):
    """The program as a function; ``functional``: writes in place replaced by their twins."""
    name, children = tree
    if not children:
        return lambda m, env: env[name]
    parts = [build(c, functional) for c in children]
    if name in UNARY:
        fn = WRITES[name][1] if functional and name in WRITES else UNARY[name]
        return lambda m, env: fn(parts[0](m, env), m)
    fn = BINARY[name]
    return lambda m, env: fn(parts[0](m, env), parts[1](m, env), m)


def show(tree) -> str:
    name, children = tree
    return name if not children else f"{name}({', '.join(show(c) for c in children)})"


class Program(MessagePassing):
    def __init__(self, tree, aggr, functional=False):
        super().__init__(aggr=aggr)
        self.body = build(tree, functional)
        gen = torch.Generator().manual_seed(7)
        self.weight = Parameter(0.5 * torch.randn(WIDTH, WIDTH, generator=gen, dtype=torch.float64))
        self.bias = Parameter(torch.randn(WIDTH, generator=gen, dtype=torch.float64))
        self.w_narrow = Parameter(torch.randn(2, WIDTH, generator=gen, dtype=torch.float64))
        self.w_wide = Parameter(0.5 * torch.randn(2 * WIDTH, WIDTH, generator=gen, dtype=torch.float64))
        self.tau, self.flag = 1.0, True

    def message(self, x_j, x_i, e):
        return self.body(self, {"x_j": x_j, "x_i": x_i, "e": e})


def _outcome(compute, seed):
    torch.manual_seed(seed)  # both paths draw dropout masks from the same state
    try:
        return compute(), None
    except (RuntimeError, ValueError, IndexError) as err:  # e.g. max over the edges of an empty graph
        return None, err


def run_udf(layer, g, fused, x, e):
    """The program as a DGL-style function in ``update_all`` (``fused``), or what that must
    compute: the function on gathered per-edge inputs, reduced by copy_e. Output and gradients
    w.r.t. the inputs and the layer's parameters."""
    src, dst = x if isinstance(x, tuple) else (x, x)
    if fused:
        g.srcdata["x"], g.dstdata["x"], g.edata["e"] = src, dst, e
        layer.udf_plan = g.update_all(
            lambda edges: {"m": layer.body(layer, {"x_j": edges.src["x"], "x_i": edges.dst["x"], "e": edges.data["e"]})},
            getattr(unigraph.function, layer.aggr)("m", "out"))
        out = g.dstdata.pop("out")
    else:
        messages = layer.body(layer, {"x_j": src.index_select(0, g.src), "x_i": dst.index_select(0, g.dst), "e": e})
        out = unigraph.ops.gspmm(g, "copy_e", layer.aggr, e=messages)
    leaves = list(dict.fromkeys([src, dst, e])) + list(layer.parameters())
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype).view(out.shape)
    return out.detach(), torch.autograd.grad((out * weights).sum(), leaves, allow_unused=True)


def _refused_by_autograd(err) -> bool:
    """Eager autograd refuses a write into a tensor saved for backward; a fused program has no
    such write (see WRITES)."""
    return err is not None and "modified by an inplace operation" in str(err)


def test_random_message_programs_fused_equal_eager():
    from hypothesis import given, settings, strategies as st
    from graph_strategies import graphs

    @settings(max_examples=max(60, settings.default.max_examples))
    @given(seed=st.integers(0, 2**32 - 1), aggr=st.sampled_from(["sum", "mean", "max", "min"]),
           drawn=graphs(max_nodes=7, max_edges=20, hub_degree=12), data=st.data())
    def check(seed, aggr, drawn, data):
        tree = random_program(seed)
        g = drawn.graph
        gen = drawn.generator()
        x_src = torch.randn(g.num_src_nodes, WIDTH, generator=gen, dtype=torch.float64).requires_grad_(True)
        x = (x_src, torch.randn(g.num_dst_nodes, WIDTH, generator=gen, dtype=torch.float64).requires_grad_(True)) \
            if g.is_bipartite else x_src
        e = torch.randn(g.num_edges, WIDTH, generator=gen, dtype=torch.float64).requires_grad_(True)
        layer, twin = Program(tree, aggr), Program(tree, aggr, functional=True)
        twin.load_state_dict(layer.state_dict())
        where = f"{show(tree)} aggr={aggr} on {drawn.kind} graph"
        for call in range(3):  # change what the program reads between calls
            layer.tau = twin.tau = data.draw(st.sampled_from([0.5, 1.0, 3.0]), label="tau")
            layer.flag = twin.flag = data.draw(st.booleans(), label="flag")
            layer.train(data.draw(st.booleans(), label="training"))
            twin.train(layer.training)
            fronts = [("propagate", lambda module, fuse: run(module, g, fuse, x=x, e=e),
                       lambda: str(layer.explain()))]
            if call == 0:  # the same program as a DGL-style function in update_all
                fronts.append(("update_all", lambda module, fuse: run_udf(module, g, fuse, x, e),
                               lambda: str(layer.udf_plan)))
            for front, compute, explain in fronts:
                fused, fused_error = _outcome(lambda: compute(layer, True), seed + call)
                plan = explain() if fused_error is None else ""
                eager, eager_error = _outcome(lambda: compute(layer, False), seed + call)
                against = ""
                if _refused_by_autograd(eager_error) and fused_error is None:
                    eager, eager_error = _outcome(lambda: compute(twin, False), seed + call)
                    against = " (against its functional twin)"
                at = f"{where}, {front} call {call}{against}"
                if eager_error is not None:
                    assert fused_error is not None, f"{at}: eager raised {eager_error!r}, fused did not\n{plan}"
                    continue
                assert fused_error is None, f"{at}: fused raised {fused_error!r} where eager ran"
                (out, grads), (want, want_grads) = fused, eager
                torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-8, msg=lambda m: f"{at}: {m}\n{plan}")
                for got, ref in zip(grads, want_grads):
                    if got is None or ref is None:
                        assert got is None and ref is None, f"{at}: a gradient reached one path only\n{plan}"
                        continue
                    torch.testing.assert_close(got, ref, rtol=1e-6, atol=1e-8,
                                               msg=lambda m: f"{at} gradient: {m}\n{plan}")
            with torch.no_grad():
                for module in (layer, twin):
                    module.weight.mul_(-0.5)  # an optimizer step's worth of change
                    module.w_narrow.add_(0.25)

    check()
