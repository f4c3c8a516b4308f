"""DGL's message passing entry points (update_all, send_and_recv, pull, push, apply_edges,
apply_nodes) on unigraph.dgl against the real DGL: which rows change, built-in and user-defined
functions, initializers for receivers without messages; float64 forward and gradients."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl

SRC = [0, 0, 1, 2, 2, 3, 4, 1, 1]
DST = [1, 2, 2, 0, 3, 1, 0, 2, 2]  # node 4 has no in-edge, node 5 none at all


def pair(dgl, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 3, dtype=torch.float64, generator=gen)
    w = torch.randn(9, 1, dtype=torch.float64, generator=gen)
    graphs = []
    for module in (udgl, dgl):
        g = module.graph((torch.tensor(SRC), torch.tensor(DST)), num_nodes=6)
        g.ndata["x"] = x.clone().requires_grad_(True)
        g.edata["w"] = w.clone().requires_grad_(True)
        g.ndata["old"] = torch.full((6, 3), -1.0, dtype=torch.float64)
        graphs.append(g)
    return graphs


def udf_message(edges):
    return {"m": edges.src["x"] * edges.data["w"] - edges.dst["x"]}


def udf_reduce(nodes):
    return {"old": nodes.mailbox["m"].max(1).values + nodes.data["x"]}


def apply(nodes):
    return {"old": nodes.data["old"] * 2}


CALLS = {
    "update_all": lambda g: g.update_all(udf_message, udf_reduce, apply),
    "send_and_recv": lambda g: g.send_and_recv(torch.tensor([8, 0, 5]), udf_message, udf_reduce, apply),
    "send_and_recv_uv": lambda g: g.send_and_recv((torch.tensor([1, 3]), torch.tensor([2, 1])), udf_message,
                                                  udf_reduce),
    "pull": lambda g: g.pull(torch.tensor([2, 4, 1]), udf_message, udf_reduce, apply),
    "push": lambda g: g.push(torch.tensor([1]), udf_message, udf_reduce, apply),
    "apply_edges_subset": lambda g: g.apply_edges(lambda e: {"w": e.data["w"] * e.src["x"][:, :1]},
                                                  torch.tensor([3, 1])),
    "apply_nodes_subset": lambda g: g.apply_nodes(lambda n: {"old": n.data["x"] + 1}, torch.tensor([5, 0])),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_udf_calls_change_the_rows_dgl_changes(dgl, call):
    ours, theirs = pair(dgl)
    for g in (ours, theirs):
        g.set_n_initializer(lambda shape, dtype, ctx, ids: torch.full(shape, 5.0, dtype=dtype), field="old")
        CALLS[call](g)
    for key in ("old", "x"):
        torch.testing.assert_close(ours.ndata[key], theirs.ndata[key])
    torch.testing.assert_close(ours.edata["w"], theirs.edata["w"])
    loss_ours = ours.ndata["old"].sum() + ours.edata["w"].sum()
    loss_theirs = theirs.ndata["old"].sum() + theirs.edata["w"].sum()
    grads = [torch.autograd.grad(loss, (g.ndata["x"], g.edata["w"]), allow_unused=True)
             for loss, g in ((loss_ours, ours), (loss_theirs, theirs))]
    for mine, reference in zip(*grads):
        if reference is None:
            assert mine is None or not mine.any()
        else:
            torch.testing.assert_close(mine, reference)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("message", ["copy_u", "u_mul_e", "u_sub_v", "e_add_v"])
def test_builtins_on_pull_match_dgl(dgl, message, reduce):
    ours, theirs = pair(dgl)
    ours.ndata["y"] = theirs.ndata["y"] = torch.randn(6, 1, dtype=torch.float64)
    operands = {"copy_u": ("x",), "u_mul_e": ("x", "w"), "u_sub_v": ("x", "y"), "e_add_v": ("w", "y")}[message]
    for module, g in ((udgl, ours), (dgl, theirs)):
        g.pull(torch.tensor([4, 2, 0]), getattr(module.function, message)(*operands, "m"),
               getattr(module.function, reduce)("m", "out"))
    torch.testing.assert_close(ours.ndata["out"], theirs.ndata["out"])


def test_update_all_takes_dgl_keyword_names_and_etype(dgl):
    ours, _ = pair(dgl)
    ours.update_all(message_func=udgl.function.copy_u("x", "m"), reduce_func=udgl.function.sum("m", "s"),
                    apply_node_func=lambda nodes: {"s": nodes.data["s"] + 1}, etype="_E")
    expected = torch.zeros(6, 3, dtype=torch.float64).index_add(0, torch.tensor(DST), ours.ndata["x"][SRC]) + 1
    torch.testing.assert_close(ours.ndata["s"], expected)
    with pytest.raises(udgl.DGLError, match="edge type 'nope'"):
        ours.update_all(udgl.function.copy_u("x", "m"), udgl.function.sum("m", "s"), etype="nope")


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_pull_of_nodes_without_in_edges_writes_the_empty_reduction_as_dgl(dgl, reduce):
    """A pull whose nodes have no in-edge at all: DGL runs the built-ins on no edge and writes
    zeros to the pulled nodes (into an existing or a new field); with some in-edges the nodes
    without them get DGL's usual values; send_and_recv of no edge writes nothing."""
    results = []
    for lib in (udgl, dgl):
        out = []
        for nodes in ([0, 3], [3], [0, 2]):
            g = lib.graph(([0, 1], [1, 2]), num_nodes=4)
            g.ndata["h"], g.ndata["out"] = torch.arange(8.0).view(4, 2), torch.full((4, 2), 7.0)
            g.pull(torch.tensor(nodes), lib.function.copy_u("h", "m"), getattr(lib.function, reduce)("m", "out"))
            g.pull(torch.tensor(nodes), lib.function.copy_u("h", "m"), getattr(lib.function, reduce)("m", "new"))
            g.send_and_recv(torch.tensor([], dtype=torch.long), lib.function.copy_u("h", "m"),
                            getattr(lib.function, reduce)("m", "unwritten"))
            out.append((g.ndata["out"], g.ndata["new"], "unwritten" in g.ndata))
        results.append(out)
    for (a_out, a_new, a_flag), (b_out, b_new, b_flag) in zip(*results):
        assert torch.equal(a_out, b_out) and torch.equal(a_new, b_new) and a_flag == b_flag


@pytest.mark.parametrize("cross_reducer", ["sum", "mean", "max", "min", "stack"])
def test_multi_update_all_on_a_graph_of_one_typed_relation_equals_dgl(dgl, cross_reducer):
    """DGL's heterogeneous models call multi_update_all also on a graph of one relation (a
    DGLGraph): its update_all, combined alone (stack adds the relation dimension), then the apply."""
    results = []
    for lib in (udgl, dgl):
        g = lib.heterograph({("user", "plays", "game"): (torch.tensor([0, 1, 1, 2]), torch.tensor([0, 0, 1, 1]))},
                            num_nodes_dict={"user": 3, "game": 3})
        g.nodes["user"].data["h"] = torch.arange(6.0).view(3, 2)
        g.multi_update_all({"plays": (lib.function.copy_u("h", "m"), lib.function.sum("m", "h"))}, cross_reducer,
                           apply_node_func=lambda nodes: {"h2": nodes.data["h"] * 2})
        results.append((g.nodes["game"].data["h"], g.nodes["game"].data["h2"]))
    for a, b in zip(*results):
        assert torch.equal(a, b)
    with pytest.raises(udgl.DGLError, match="cross_reducer"):
        udgl.graph(([0], [1])).multi_update_all({}, "prod")
