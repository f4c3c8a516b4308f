"""DGL-style ``update_all`` / ``apply_edges`` with ``unigraph.function`` built-ins and user-defined
functions give DGL's results (forward and gradients), and traced user-defined messages compile to
the same primitives as the built-ins."""
from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, strategies as st

import unigraph
from graph_strategies import graphs
from op_cases import cpu_test_backends
from unigraph import function as fn

BACKENDS = cpu_test_backends()
BINARY = [f"{a}_{op}_{b}" for a in "uve" for b in "uve" if a != b for op in ("add", "sub", "mul", "div", "dot")]
MESSAGES = ["copy_u", "copy_e"] + BINARY
REDUCERS = ["sum", "mean", "max", "min"]
# (node feature shape, edge feature shape): equal widths, and per-head weights broadcast DGL-style
# (node feature shape, edge feature shape); the last two differ in rank: DGL pads 1s right after the
# row dimension ([E, 4] against [N, 4, 4] is [E, 1, 4]).
SHAPES = [((3,), (3,)), ((2, 3), (2, 1)), ((4, 4), (4,)), ((4,), (3, 4))]


def make_message(name: str):
    if name == "copy_u":
        return getattr(fn, name)("hu", "m")
    if name == "copy_e":
        return getattr(fn, name)("he", "m")
    lhs, _, rhs = name.split("_")
    return getattr(fn, name)("h" + lhs, "h" + rhs, "m")


def features(g, shapes, gen, op_name):
    """Source ('hu'), destination ('hv') and edge ('he') fields; divisors kept away from zero."""
    node_shape, edge_shape = shapes
    if "dot" in op_name:
        edge_shape = node_shape  # dot needs equal last dims

    def tensor(rows, shape):
        t = torch.randn((rows,) + shape, generator=gen, dtype=torch.float64)
        if "div" in op_name:
            t = torch.sign(t) * (0.5 + t.abs())
        return t.requires_grad_(True)

    return {"hu": tensor(g.num_src_nodes, node_shape), "hv": tensor(g.num_dst_nodes, node_shape),
            "he": tensor(g.num_edges, edge_shape)}


def store(graph, fields, *, dgl_graph: bool):
    """Put the fields on a unigraph or DGL graph (bipartite: src/dst data; else one node store)."""
    src = graph.srcdata if (dgl_graph and graph.is_block) or (not dgl_graph and graph.is_bipartite) else None
    if src is not None:
        graph.srcdata["hu"], graph.dstdata["hv"] = fields["hu"], fields["hv"]
    else:
        data = graph.ndata
        data["hu"], data["hv"] = fields["hu"], fields["hv"]
    graph.edata["he"] = fields["he"]


def run_ours(g, fields, message, reducer, backend):
    ours = unigraph.Graph(g.edge_index, num_src_nodes=g.num_src_nodes, num_dst_nodes=g.num_dst_nodes) \
        if g.is_bipartite else unigraph.Graph(g.edge_index, num_nodes=g.num_nodes)
    store(ours, fields, dgl_graph=False)
    with unigraph.use_backend(backend):
        plan = ours.update_all(make_message(message), getattr(fn, reducer)("m", "out"))
    return ours.dstdata["out"], plan


def run_dgl(dgl, g, fields, message, reducer):
    dgl_fn = dgl.function
    graph = g.to_dgl()
    store(graph, fields, dgl_graph=True)
    msg = make_message(message)
    args = (msg.lhs_field, msg.out_field) if msg.op == "copy" else (msg.lhs_field, msg.rhs_field, msg.out_field)
    graph.update_all(getattr(dgl_fn, message)(*args), getattr(dgl_fn, reducer)("m", "out"))
    return graph.dstdata["out"]


def compare(dgl, g, fields, message, reducer, backend, where):
    leaves = [fields[k] for k in ("hu", "hv", "he")]
    out, plan = run_ours(g, fields, message, reducer, backend)
    expected = run_dgl(dgl, g, fields, message, reducer)
    torch.testing.assert_close(out, expected, atol=1e-9, rtol=1e-7, msg=lambda m: f"{where}: {m}")
    if out.numel():
        upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        got = torch.autograd.grad((out * upstream).sum(), leaves, allow_unused=True)
        want = torch.autograd.grad((expected * upstream).sum(), leaves, allow_unused=True)
        for a, b, t in zip(got, want, leaves):
            a = torch.zeros_like(t) if a is None else a
            b = torch.zeros_like(t) if b is None else b
            torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-7, msg=lambda m: f"{where} gradient: {m}")
    return plan


def edge_case_graph() -> unigraph.Graph:
    """Multi-edges, a self-loop, a hub and an isolated node (node 6)."""
    src = torch.tensor([0, 0, 1, 2, 3, 4, 5, 5, 2, 1, 3, 0, 4])
    dst = torch.tensor([1, 1, 2, 2, 0, 0, 0, 0, 0, 3, 4, 5, 3])
    return unigraph.Graph(torch.stack([src, dst]), num_nodes=7)


def test_every_dgl_builtin_exists():
    assert set(BINARY) | {"copy_u", "copy_e"} <= set(fn.MESSAGE_FUNCTIONS)
    for name in fn.MESSAGE_FUNCTIONS + fn.REDUCERS:
        assert callable(getattr(fn, name)), name
    assert repr(fn.u_mul_e("h", "w", "m")) == "u_mul_e('h', 'w', 'm')"
    assert repr(fn.sum("m", "h")) == "sum('m', 'h')"


def test_dgl_names_match(dgl):
    dgl_messages = {n for n in dir(dgl.function) if n.count("_") == 2 or n in ("copy_u", "copy_e")}
    dgl_messages.discard("absolute_import")
    assert dgl_messages <= set(fn.MESSAGE_FUNCTIONS)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shapes", SHAPES, ids=["equal", "per-head", "node-rank-higher", "edge-rank-higher"])
def test_update_all_builtins_match_dgl_on_edge_cases(dgl, backend, shapes):
    g = edge_case_graph()
    gen = torch.Generator().manual_seed(0)
    for message in MESSAGES:
        for reducer in REDUCERS:
            fields = features(g, shapes, gen, message)
            compare(dgl, g, fields, message, reducer, backend, f"{message}/{reducer} on {backend}")


@given(data=st.data())
def test_update_all_builtins_match_dgl_on_drawn_graphs(dgl, data):
    drawn = data.draw(graphs(max_nodes=8, max_edges=20, hub_degree=12), label="graph")
    message = data.draw(st.sampled_from(MESSAGES), label="message")
    reducer = data.draw(st.sampled_from(REDUCERS), label="reducer")
    shapes = data.draw(st.sampled_from(SHAPES), label="shapes")
    g = drawn.graph
    if reducer in ("max", "min"):  # DGL's max/min backward mishandles a graph without edges (it sends
        assume(g.num_edges > 0)    # the gradient of empty rows to node 0, or fails without source nodes)
    fields = features(g, shapes, drawn.generator(), message)
    for backend in BACKENDS:
        compare(dgl, g, fields, message, reducer, backend, f"{message}/{reducer} on {backend} ({drawn.kind})")


def test_builtin_plans_avoid_messages():
    g = edge_case_graph()
    g.ndata["h"] = torch.randn(7, 4)
    g.edata["w"] = torch.rand(13, 1)
    assert g.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "h2")).primitive_calls() == ["gspmm u_mul_e sum"]
    assert g.update_all(fn.u_sub_v("h", "h", "m"), fn.max("m", "h2")).primitive_calls() == ["gspmm copy_u max"]
    plan = g.update_all(fn.u_mul_v("h", "h", "m"), fn.max("m", "h2"))  # sign-dependent: needs the messages
    assert plan.mode == "g-SDDMM" and plan.primitive_calls() == ["gsddmm mul u v", "gspmm copy_e max"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_user_defined_message_is_traced_to_the_builtin(backend):
    g = edge_case_graph()
    g.ndata["h"] = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    g.edata["w"] = torch.rand(13, dtype=torch.float64, requires_grad=True)
    with unigraph.use_backend(backend):
        plan = g.update_all(lambda edges: {"m": edges.src["h"] * edges.data["w"].unsqueeze(-1)}, fn.mean("m", "a"))
        builtin = unigraph.ops.gspmm(g, "u_mul_e", "mean", g.ndata["h"], g.edata["w"].unsqueeze(-1))
    assert plan.mode == "fused" and plan.primitive_calls() == ["gspmm u_mul_e mean"]
    torch.testing.assert_close(g.ndata["a"], builtin)


def test_user_defined_functions_match_dgl(dgl):
    g = edge_case_graph()
    h = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    w = torch.rand(13, 1, dtype=torch.float64, requires_grad=True)

    def message(edges):
        return {"m": torch.tanh(edges.src["h"] - edges.dst["h"]) * edges.data["w"], "unused": edges.data["w"]}

    def reducer(nodes):  # mailbox: [nodes, in_degree, 3], in edge-id order
        return {"out": nodes.mailbox["m"].max(dim=1).values + nodes.mailbox["m"][:, 0] + nodes.data["h"]}

    def update(nodes):
        return {"final": nodes.data["out"] * 2}

    g.ndata["h"], g.edata["w"] = h, w
    plan = g.update_all(message, reducer, update)
    d = g.to_dgl()
    d.ndata["h"], d.edata["w"] = h, w
    d.update_all(message, reducer, update)
    torch.testing.assert_close(g.ndata["final"], d.ndata["final"])
    got = torch.autograd.grad(g.ndata["final"].sum(), (h, w))
    want = torch.autograd.grad(d.ndata["final"].sum(), (h, w))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert "mailbox" in " ".join(plan.reasons)


@pytest.mark.parametrize("name", ["u_add_v", "u_dot_v", "e_sub_u", "copy_u", "v_div_e"])
def test_apply_edges_matches_dgl(dgl, name):
    g = edge_case_graph()
    gen = torch.Generator().manual_seed(3)
    fields = features(g, ((3,), (3,)), gen, name)
    store(g, fields, dgl_graph=False)
    msg = make_message(name)
    plan = g.apply_edges(msg)
    d = g.to_dgl()
    store(d, fields, dgl_graph=True)
    args = (msg.lhs_field, msg.out_field) if msg.op == "copy" else (msg.lhs_field, msg.rhs_field, msg.out_field)
    d.apply_edges(getattr(dgl.function, name)(*args))
    torch.testing.assert_close(g.edata["m"], d.edata["m"])
    assert plan.owner == "apply_edges"


def test_apply_edges_user_function_runs_node_work_on_nodes():
    g = edge_case_graph()
    lin = torch.nn.Linear(4, 2)
    g.ndata["h"] = torch.randn(7, 4)
    plan = g.apply_edges(lambda edges: {"s": (lin(edges.src["h"]) * lin(edges.dst["h"])).sum(-1)})
    expected = (lin(g.ndata["h"])[g.src] * lin(g.ndata["h"])[g.dst]).sum(-1)
    torch.testing.assert_close(g.edata["s"], expected)
    assert plan.mode == "fused" and plan.primitive_calls() == ["gsddmm dot u v"]


@pytest.mark.parametrize("spelling", [{"keepdim": True}, {"keepdims": True}, {"keepdims": False}, {}])
def test_traced_dot_keeps_the_dimension_however_it_is_spelled(spelling):
    """``sum(-1, keepdims=True)`` (numpy's spelling, which torch accepts and DGL's test helpers
    use) keeps the summed dimension on the traced path as it does eagerly."""
    g = edge_case_graph()
    x = torch.randn(7, 2, 3, dtype=torch.float64, requires_grad=True)
    g.ndata["x"] = x
    plan = g.apply_edges(lambda edges: {"s": (edges.src["x"] * edges.dst["x"]).sum(-1, **spelling)})
    expected = (x[g.src] * x[g.dst]).sum(-1, **spelling)
    assert g.edata["s"].shape == expected.shape
    torch.testing.assert_close(g.edata["s"], expected)
    assert plan.primitive_calls() == ["gsddmm dot u v"]


def test_bad_functions_are_named():
    g = edge_case_graph()
    g.ndata["h"] = torch.randn(7, 2)
    with pytest.raises(KeyError, match="reads message 'x'"):
        g.update_all(fn.copy_u("h", "m"), fn.sum("x", "out"))
    with pytest.raises(TypeError, match="is a reduce function"):
        g.update_all(fn.sum("m", "out"), fn.sum("m", "out"))
    with pytest.raises(TypeError, match="is a message function"):
        g.update_all(fn.copy_u("h", "m"), fn.copy_u("h", "m"))
    with pytest.raises(KeyError, match="no field 'missing'"):
        g.update_all(fn.copy_u("missing", "m"), fn.sum("m", "out"))
    with pytest.raises(TypeError, match="feature name"):
        fn.copy_u(3, "m")
