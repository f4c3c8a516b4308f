"""The MessagePassing frontend: fx-traced messages compile to g-SpMM/g-SDDMM where the algebra
allows (no E x F tensor), fall back where it does not, and both equal the materialized reference
(``fuse=False``), forward and backward, on drawn graphs and every backend."""
from __future__ import annotations

import importlib.util
import inspect
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import unigraph
from graph_strategies import graphs
from op_cases import cpu_test_backends
from unigraph import MessagePassing

BACKENDS = cpu_test_backends()
WIDTH = 5


@pytest.fixture(autouse=True)
def _the_fused_path_on_small_graphs(no_small_graph_rule):
    """These tests are of the fused path: on their small graphs ``auto`` would run the messages
    eagerly (the small-graph rule: ``message_passing/base.py: _small_enough_for_eager``)."""


# ---------------------------------------------------------------------- messages under test
class CopySource(MessagePassing):
    def message(self, x_j):
        return x_j


class WeightedUnsqueeze(MessagePassing):
    def message(self, x_j, w):
        return x_j * w.unsqueeze(-1)


class WeightedView(MessagePassing):  # GCN's form, weight on the left
    def message(self, x_j, w):
        return w.view(-1, 1) * x_j


class TwoWeights(MessagePassing):  # (x_j * w1) * w2 -> x_j * (w1 * w2)
    def message(self, x_j, w, v):
        return x_j * w.unsqueeze(-1) * v.unsqueeze(-1)


class Relative(MessagePassing):  # MRConv's / EdgeConv's x_j - x_i
    def message(self, x_i, x_j):
        return x_j - x_i


class DestinationMinusSource(MessagePassing):
    def message(self, x_i, x_j):
        return x_i - x_j


class SourceTimesDestination(MessagePassing):
    def message(self, x_i, x_j):
        return x_j * x_i


class SourcePlusEdge(MessagePassing):
    def message(self, x_j, edge_attr):
        return x_j + edge_attr


class EdgeMinusSource(MessagePassing):
    def message(self, x_j, edge_attr):
        return edge_attr - x_j


class DotScore(MessagePassing):
    def message(self, x_i, x_j):
        return (x_i * x_j).sum(-1, keepdim=True)


class Projected(MessagePassing):  # row-wise work on x_j runs on node rows
    def __init__(self, aggr):
        super().__init__(aggr)
        self.lin = torch.nn.Linear(WIDTH, 3).double()

    def message(self, x_j):
        return torch.relu(self.lin(x_j))


class Gated(MessagePassing):  # an attention-like score per edge times the source features
    def message(self, x_i, x_j):
        return x_j * torch.sigmoid((x_i * x_j).sum(dim=-1, keepdim=True))


# messages that must fall back, and why
class Concatenated(MessagePassing):  # cat of destination and source rows: not row-wise
    def message(self, x_i, x_j):
        return torch.cat([x_i, x_j - x_i], dim=-1).tanh()


class CentredOverEdges(MessagePassing):  # a mean over the edge dimension mixes rows
    def message(self, x_j):
        return x_j - x_j.mean(dim=0, keepdim=True)


class PythonBranch(MessagePassing):  # control flow on a tensor value cannot be traced
    def message(self, x_j):
        if bool(x_j.sum() > 0):
            return x_j * 2
        return -x_j


class ElementwiseMax(MessagePassing):  # a binary op across row spaces that is not + - * /
    def message(self, x_i, x_j):
        return torch.maximum(x_i, x_j)


class CustomAggregate(MessagePassing):  # overriding aggregate needs the messages
    def message(self, x_j, w):
        return x_j * w.unsqueeze(-1)

    def aggregate(self, inputs, g):
        return 2 * unigraph.ops.gspmm(g, "copy_e", self.aggr, e=inputs)


FUSED_CASES = [
    (CopySource, ["sum", "mean", "max", "min"], ["gspmm copy_u"]),
    (WeightedUnsqueeze, ["sum", "mean", "max", "min"], ["gspmm u_mul_e"]),
    (WeightedView, ["sum", "max"], ["gspmm u_mul_e"]),
    (TwoWeights, ["sum", "min"], ["gspmm u_mul_e"]),
    (Relative, ["sum", "mean", "max", "min"], ["gspmm copy_u"]),
    (DestinationMinusSource, ["sum", "max", "min"], ["gspmm copy_u"]),
    (SourceTimesDestination, ["sum", "mean"], ["gspmm copy_u"]),
    (SourcePlusEdge, ["sum", "max"], ["gspmm u_add_e"]),
    (EdgeMinusSource, ["mean", "max"], ["gspmm u_sub_e"]),
    (DotScore, ["sum", "max"], ["gsddmm dot", "gspmm copy_e"]),
    (Projected, ["mean", "max"], ["gspmm copy_u"]),
    (Gated, ["sum", "mean"], ["gsddmm dot", "gspmm u_mul_e"]),
]
FALLBACK_CASES = [
    (Concatenated, "max", "materialized"),
    (CentredOverEdges, "sum", "materialized"),
    (PythonBranch, "mean", "eager"),
    (ElementwiseMax, "sum", "materialized"),
    (SourceTimesDestination, "max", "g-SDDMM"),  # max of a product depends on signs: g-SDDMM then copy_e
    (CustomAggregate, "max", "g-SDDMM"),
]


def make_pair(cls, aggr):
    """The layer under test and its materialized reference (``fuse=False``), with equal weights."""
    torch.manual_seed(0)
    fused = cls(aggr=aggr)
    reference = cls(aggr=aggr)
    reference.fuse = False
    reference.load_state_dict(fused.state_dict())
    return fused, reference


def draw_inputs(data):
    drawn = data.draw(graphs(max_nodes=8, max_edges=24, hub_degree=16), label="graph")
    g, gen = drawn.graph, drawn.generator()

    def tensor(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_(True)

    x = (tensor(g.num_src_nodes, WIDTH), tensor(g.num_dst_nodes, WIDTH)) if g.is_bipartite else tensor(g.num_src_nodes, WIDTH)
    kwargs = {"x": x, "w": tensor(g.num_edges), "v": tensor(g.num_edges), "edge_attr": tensor(g.num_edges, WIDTH)}
    return drawn, kwargs


def call_with(layer, g, kwargs):
    wanted = set(layer_message_inputs(layer)) | {"x"}
    return layer.propagate(g, **{k: v for k, v in kwargs.items() if k in wanted})


def layer_message_inputs(layer):
    return [n[:-2] if n.endswith(("_i", "_j")) else n for n in inspect.signature(layer.message).parameters]


def leaves(kwargs):
    out = []
    for value in kwargs.values():
        out += list(value) if isinstance(value, tuple) else [value]
    return out


def check_equal(fused, reference, drawn, kwargs, backend):
    g = drawn.graph
    inputs = leaves(kwargs)
    with unigraph.use_backend(backend):
        out = call_with(fused, g, kwargs)
    expected = call_with(reference, g, kwargs)
    where = f"{type(fused).__name__}/{fused.aggr} on {backend} ({drawn.kind})"
    torch.testing.assert_close(out, expected, atol=1e-9, rtol=1e-7, msg=lambda m: f"{where}: {m}")
    upstream = torch.randn(out.shape, generator=drawn.generator(), dtype=torch.float64)
    got = torch.autograd.grad((out * upstream).sum(), inputs, allow_unused=True)
    want = torch.autograd.grad((expected * upstream).sum(), inputs, allow_unused=True)
    for a, b, t in zip(got, want, inputs):
        a = torch.zeros_like(t) if a is None else a
        b = torch.zeros_like(t) if b is None else b
        torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-7, msg=lambda m: f"{where} gradient: {m}")


@pytest.mark.parametrize("cls,aggrs,calls", FUSED_CASES, ids=[c[0].__name__ for c in FUSED_CASES])
@given(data=st.data())
def test_recognized_messages_fuse_and_match_materialized(cls, aggrs, calls, data):
    aggr = data.draw(st.sampled_from(aggrs), label="aggr")
    fused, reference = make_pair(cls, aggr)
    drawn, kwargs = draw_inputs(data)
    for backend in BACKENDS:
        check_equal(fused, reference, drawn, kwargs, backend)
        plan = unigraph.explain(fused)
        assert plan.mode == "fused", str(plan)
        assert [" ".join(c.split()[:2]) for c in plan.primitive_calls()] == calls, str(plan)
        assert not plan.gathered and not plan.edge_tensors


@pytest.mark.parametrize("cls,aggr,mode", FALLBACK_CASES, ids=[c[0].__name__ + "-" + c[1] for c in FALLBACK_CASES])
@given(data=st.data())
def test_unrecognized_messages_fall_back_and_match_materialized(cls, aggr, mode, data):
    fused, reference = make_pair(cls, aggr)
    drawn, kwargs = draw_inputs(data)
    for backend in BACKENDS:
        check_equal(fused, reference, drawn, kwargs, backend)
        plan = unigraph.explain(fused)
        assert plan.mode == mode, str(plan)
        assert plan.reasons, "a fallback must say why"


# ---------------------------------------------------------------------- no E x F tensor
class ShapeRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.shapes.append(tuple(t.shape))
        return out


@pytest.mark.parametrize("cls", [WeightedUnsqueeze, Relative, Projected, CopySource])
def test_fused_path_builds_no_edge_by_feature_tensor(cls):
    """On the sparse backend (CSR products underneath) the fused forward never allocates a tensor
    with one row per edge and more than one value per row; the materialized path does."""
    gen = torch.Generator().manual_seed(0)
    num_nodes, num_edges = 11, 37
    g = unigraph.Graph(torch.randint(0, num_nodes, (2, num_edges), generator=gen), num_nodes=num_nodes)
    kwargs = {"x": torch.randn(num_nodes, WIDTH, generator=gen, dtype=torch.float64),
              "w": torch.rand(num_edges, generator=gen, dtype=torch.float64)}
    aggr = "max" if cls is Relative else "sum"
    if aggr == "max" and importlib.util.find_spec("torch_sparse") is None:
        pytest.skip("the sparse backend's max is torch-sparse's spmm_max; without torch-sparse it reduces gathered rows")
    fused, reference = make_pair(cls, aggr)

    def edge_tensors(layer):
        with unigraph.use_backend("sparse"), torch.no_grad(), ShapeRecorder() as recorder:
            call_with(layer, g, kwargs)
        return [s for s in recorder.shapes if len(s) >= 2 and s[0] == num_edges and math.prod(s[1:]) > 1]

    assert edge_tensors(fused) == []
    assert edge_tensors(reference), "the materialized reference should build per-edge messages"


# ---------------------------------------------------------------------- traces, modes, explain
class DropoutMessage(MessagePassing):
    def message(self, x_j):
        return F.dropout(x_j, 0.5, self.training)


def test_trace_follows_training_mode():
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    x = torch.randn(3, 4)
    layer = DropoutMessage(aggr="sum")
    layer.train()
    layer.propagate(g, x=x)
    assert layer.explain().mode == "materialized"  # random per edge: must run per edge
    layer.eval()
    out = layer.propagate(g, x=x)
    assert layer.explain().mode == "fused"
    torch.testing.assert_close(out, unigraph.ops.gspmm(g, "copy_u", "sum", x))


class ScaledByComputedParameter(MessagePassing):
    def __init__(self):
        super().__init__(aggr="sum")
        self.scale = torch.nn.Parameter(torch.tensor(1.5))

    def message(self, x_j):
        return x_j * (self.scale * 2)  # computed from a parameter at trace time


def test_trace_with_parameter_derived_constant_is_not_reused():
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 2)
    layer = ScaledByComputedParameter()
    for expected_scale in (1.5, 4.0):
        with torch.no_grad():
            layer.scale.fill_(expected_scale)
        out = layer.propagate(g, x=x)
        torch.testing.assert_close(out, unigraph.ops.gspmm(g, "copy_u", "sum", x) * 2 * expected_scale)
        (grad,) = torch.autograd.grad(out.sum(), layer.scale)
        torch.testing.assert_close(grad, 2 * x.sum())


def test_explain_describes_the_plan():
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    layer = Concatenated(aggr="max")
    with pytest.raises(RuntimeError, match="has not propagated yet"):
        unigraph.explain(layer)
    layer.propagate(g, x=torch.randn(3, 2))
    text = str(unigraph.explain(layer))
    assert "materialized" in text and "cat" in text and "not row-wise" in text
    fused = WeightedUnsqueeze(aggr="mean")
    fused.propagate(g, x=torch.randn(3, 2), w=torch.rand(3))
    assert "gspmm u_mul_e mean" in str(fused.explain()) and "no per-edge message tensor" in str(fused.explain())


def test_default_message_is_copy_u_and_update_receives_extra_inputs():
    class Residual(MessagePassing):
        def update(self, aggr_out, x_i):
            return aggr_out + x_i

    g = unigraph.Graph(torch.tensor([[0, 1, 1], [1, 2, 0]]), num_src_nodes=2, num_dst_nodes=3)
    x_src, x_dst = torch.randn(2, 3), torch.randn(3, 3)
    out = Residual(aggr="mean").propagate(g, x=(x_src, x_dst))
    torch.testing.assert_close(out, unigraph.ops.gspmm(g, "copy_u", "mean", x_src) + x_dst)


# ---------------------------------------------------------------------- bad input
def test_bad_input_is_named():
    g = unigraph.Graph(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    with pytest.raises(ValueError, match="aggr='median' .*is not an aggregation unigraph has"):
        CopySource(aggr="median")
    with pytest.raises(TypeError, match="expects a unigraph.Graph as its graph argument, got list"):
        CopySource().propagate(g.edge_index.tolist(), x=torch.randn(3, 2))
    with pytest.raises(ValueError, match="x has 4 rows but the graph has 3 nodes"):
        CopySource().propagate(g, x=torch.randn(4, 2))
    with pytest.raises(TypeError, match="needs 'w'"):
        WeightedUnsqueeze().propagate(g, x=torch.randn(3, 2))

    class WrongRows(MessagePassing):
        def message(self, x_j):
            if bool(x_j.sum() > -1e9):  # untraceable: runs eagerly
                return x_j[:1]
            return x_j

    with pytest.raises(ValueError, match="one row per edge"):
        WrongRows().propagate(g, x=torch.randn(3, 2))


# ---------------------------------------------------------------------- PyG's MessagePassing arguments
def test_pyg_arguments_work_or_are_refused_by_name():
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    x = torch.randn(3, 2)
    expected = unigraph.ops.gspmm(g, "copy_u", "mean", x)
    for kwargs in ({"flow": "source_to_target"}, {"node_dim": 0}, {"node_dim": -2}, {"aggr_kwargs": {}},
                   {"aggr_kwargs": None}, {"decomposed_layers": 3}):
        torch.testing.assert_close(CopySource(aggr="mean", **kwargs).propagate(g, x=x), expected)
    torch.testing.assert_close(CopySource(aggr="mean", flow="target_to_source").propagate(g, x=x),
                               unigraph.ops.gspmm(g.reverse(), "copy_u", "mean", x))
    torch.testing.assert_close(CopySource(aggr="mean").propagate(g, x=x, size=(3, 3)), expected)
    torch.testing.assert_close(CopySource(aggr="mean").propagate(g, x=x, size=(None, 3)), expected)
    refusals = [
        ({"flow": "sideways"}, "flow must be 'source_to_target' or 'target_to_source', got 'sideways'"),
        ({"node_dim": 1}, "node_dim must be 0 .* got 1"),
        ({"aggr_kwargs": {"p": 2}}, r"aggr_kwargs=\{'p': 2\}"),
        ({"aggr_kwargs": [2]}, r"aggr_kwargs must be a dict"),
        ({"decomposed_layers": 0}, "decomposed_layers must be a positive int, got 0"),
        ({"aggr": "median"}, "aggr='median' .*is not an aggregation unigraph has"),
        ({"aggr": None}, "aggr=None.*does not override aggregate"),
    ]
    for kwargs, message in refusals:
        with pytest.raises(ValueError, match=message):
            CopySource(**kwargs)
    with pytest.raises(ValueError, match="node_dim=-2 .* shape \\[3, 1, 2\\] is dimension 1"):
        CopySource(node_dim=-2).propagate(g, x=torch.randn(3, 1, 2))
    with pytest.raises(ValueError, match=r"size=\(3, 4\) but the graph has 3 source and 3 destination"):
        CopySource().propagate(g, x=x, size=(3, 4))

    class OwnAggregation(MessagePassing):  # PyG's aggr=None: the layer reduces the messages itself
        def aggregate(self, inputs, g):
            return unigraph.ops.gspmm(g, "copy_e", "sum", e=inputs) * 0.5

    torch.testing.assert_close(OwnAggregation(aggr=None).propagate(g, x=x),
                               unigraph.ops.gspmm(g, "copy_u", "sum", x) * 0.5)
