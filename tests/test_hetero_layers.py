"""Heterogeneous layers, values and gradients (float64):

* RGCNConv equals PyG's RGCNConv and FastRGCNConv given the same weights (every decomposition and
  aggregation, both orders of weight and aggregation), on drawn graphs with relation ids;
* RGCNConv and HGTConv on random typed graphs equal the same computation written relation by
  relation with homogeneous ops (types without nodes, relations without edges, self-relations), on
  every CPU backend; HGTConv equals PyG's HGTConv;
* HeteroConv equals PyG's HeteroConv with the same layers and weights, and refuses misuse by name.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, strategies as st

import unigraph
from unigraph import HeteroGraph, HeteroConv, HGTConv, RGCNConv, ops
from graph_strategies import graphs
from hetero_strategies import hetero_graphs, random_features
from op_cases import cpu_test_backends

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

TOL = dict(rtol=1e-9, atol=1e-9)
DECOMPOSITIONS = [{}, {"num_bases": 2}, {"num_blocks": 2}]


def forward_and_grads(module, call, leaves: list[torch.Tensor], seed: int = 0):
    """``(outputs, gradients of leaves and parameters)`` for a random upstream gradient; ``outputs``
    a tensor or a dict of them."""
    out = call()
    outs = out if isinstance(out, dict) else {"": out}
    gen = torch.Generator().manual_seed(seed)
    loss = sum((o * torch.randn(o.shape, generator=gen, dtype=o.dtype)).sum()
               for _, o in sorted(outs.items(), key=lambda kv: kv[0]))
    params = [p for _, p in module.named_parameters()]
    grads = torch.autograd.grad(loss, leaves + params, allow_unused=True) if loss.requires_grad else [None] * (
        len(leaves) + len(params))
    grads = [torch.zeros_like(t) if g is None else g for t, g in zip(leaves + params, grads)]
    return {k: v.detach() for k, v in outs.items()}, grads


def assert_all_close(got, want, where: str, tol=TOL):
    got_out, got_grads = got
    want_out, want_grads = want
    assert got_out.keys() == want_out.keys(), where
    for key in want_out:
        torch.testing.assert_close(got_out[key], want_out[key], **tol, msg=lambda m: f"{where} output {key}: {m}")
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        torch.testing.assert_close(g, w, **tol, msg=lambda m: f"{where} gradient {i}: {m}")


def leaves_of(x_dict: dict) -> list[torch.Tensor]:
    return [x_dict[t] for t in sorted(x_dict)]


# ---------------------------------------------------------------------- RGCNConv against PyG
@given(data=st.data())
def test_rgcn_matches_pyg(data):
    decomposition = data.draw(st.sampled_from(DECOMPOSITIONS), label="decomposition")
    aggr = data.draw(st.sampled_from(["mean", "sum", "max"]), label="aggr")
    drawn = data.draw(graphs(max_nodes=8, max_edges=24, hub_degree=12), label="graph")
    g, gen = drawn.graph, drawn.generator()
    relations = data.draw(st.integers(1, 4), label="relations")
    width_in, width_out = data.draw(st.sampled_from([(6, 4), (4, 6)]), label="widths")   # both orders
    edge_type = torch.randint(0, relations, (g.num_edges,), generator=gen)
    torch.manual_seed(drawn.seed % 1000)
    theirs = pyg_nn.RGCNConv(width_in, width_out, relations, aggr=aggr, **decomposition).double()
    with torch.no_grad():
        theirs.bias.uniform_(-1, 1)
    ours = RGCNConv(width_in, width_out, relations, aggr=aggr, **decomposition).double()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    x_src = torch.randn(g.num_src_nodes, width_in, generator=gen, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(g.num_dst_nodes, width_in, generator=gen, dtype=torch.float64, requires_grad=True)
    x, leaves = ((x_src, x_dst), [x_src, x_dst]) if g.is_bipartite else (x_src, [x_src])
    want = forward_and_grads(theirs, lambda: theirs(x, g.edge_index, edge_type), leaves)
    assert_all_close(forward_and_grads(ours, lambda: ours(g, x, edge_type), leaves), want, f"RGCNConv vs PyG ({aggr})")
    if aggr != "max":  # FastRGCNConv: messages x_j W_r per edge, normalized per relation
        fast = pyg_nn.FastRGCNConv(width_in, width_out, relations, aggr=aggr, **decomposition).double()
        fast.load_state_dict(theirs.state_dict(), strict=True)
        assert_all_close(forward_and_grads(ours, lambda: ours(g, x, edge_type), leaves),
                         forward_and_grads(fast, lambda: fast(x, g.edge_index, edge_type), leaves),
                         f"RGCNConv vs FastRGCNConv ({aggr})")


def test_rgcn_reuses_its_layout_only_for_the_same_relation_ids():
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    conv = RGCNConv(2, 2, 2, aggr="sum").double()
    x = torch.randn(3, 2, dtype=torch.float64)
    edge_type = torch.tensor([0, 1, 0, 1])
    first = conv(g, x, edge_type)
    edge_type[0] = 1                                  # changed in place: the cached layout must not be reused
    second = conv(g, x, edge_type)
    reference = pyg_nn.RGCNConv(2, 2, 2, aggr="sum").double()
    reference.load_state_dict(conv.state_dict())
    torch.testing.assert_close(second, reference(x, g.edge_index, edge_type), **TOL)
    assert not torch.allclose(first, second)


def test_rgcn_refuses_bad_input():
    g = unigraph.Graph(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    conv = RGCNConv(3, 4, 2)
    x = torch.randn(2, 3)
    with pytest.raises(ValueError, match=r"relation id 2, outside 0..1"):
        conv(g, x, torch.tensor([0, 2]))
    with pytest.raises(ValueError, match=r"shape \[2\]"):
        conv(g, x, torch.tensor([0]))
    with pytest.raises(TypeError, match="needs edge_type"):
        conv(g, x)
    with pytest.raises(TypeError, match="integer relation ids"):
        conv(g, x, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="not both"):
        RGCNConv(4, 4, 2, num_bases=2, num_blocks=2)
    with pytest.raises(ValueError, match="must divide"):
        RGCNConv(4, 6, 2, num_blocks=4)
    hg = HeteroGraph({("a", "r", "b"): [[0], [0]]})
    with pytest.raises(ValueError, match="built for 2 relations but the graph has 1"):
        conv(hg, {"a": torch.randn(1, 3), "b": torch.randn(1, 3)})
    with pytest.raises(ValueError, match=r"no features for node types \['b'\]"):
        RGCNConv(3, 4, 1)(hg, {"a": torch.randn(1, 3)})
    with pytest.raises(ValueError, match="no weights for relations"):
        RGCNConv(3, 4, [("a", "s", "b")])(hg, {"a": torch.randn(1, 3), "b": torch.randn(1, 3)})
    with pytest.raises(TypeError, match="share one dtype"):
        RGCNConv(3, 4, 1)(hg, {"a": torch.randn(1, 3), "b": torch.randn(1, 3, dtype=torch.float64)})
    with pytest.raises(ValueError, match=r"features of node type 'b' must be \[1, F\]"):
        RGCNConv(3, 4, 1)(hg, {"a": torch.randn(1, 3), "b": torch.randn(2, 3)})
    with pytest.raises(ValueError, match="one input width"):
        RGCNConv((3, 2), 4, 1)(hg, {"a": torch.randn(1, 3), "b": torch.randn(1, 3)})


# ---------------------------------------------------------------------- relation by relation
def dense_relation_weights(conv: RGCNConv) -> list[torch.Tensor]:
    if conv.num_bases is not None:
        return [torch.einsum("b,bio->io", conv.comp[r], conv.weight) for r in range(conv.num_relations)]
    if conv.num_blocks is not None:
        return [torch.block_diag(*conv.weight[r]) for r in range(conv.num_relations)]
    return list(conv.weight)


def rgcn_by_relation(conv: RGCNConv, hg: HeteroGraph, x: dict) -> dict:
    """R-GCN written relation by relation with homogeneous ops: aggregate, then the relation's weight."""
    weights = dense_relation_weights(conv)
    out = {t: x[t][: hg.num_dst_nodes(t)] @ conv.root + conv.bias for t in hg.node_types}
    for r, (relation, graph) in enumerate(hg.items()):
        aggregated = ops.gspmm(graph, "copy_u", conv.aggr, u=x[relation[0]])
        out[relation[2]] = out[relation[2]] + aggregated @ weights[r]
    return out


@given(hg=hetero_graphs(), widths=st.sampled_from([(6, 4), (4, 6)]), decomposition=st.sampled_from(DECOMPOSITIONS),
       aggr=st.sampled_from(["mean", "sum", "max", "min"]), seed=st.integers(0, 2**16))
def test_rgcn_hetero_equals_relation_by_relation(hg, widths, decomposition, aggr, seed):
    torch.manual_seed(seed % 1000)
    conv = RGCNConv(widths[0], widths[1], max(len(hg.relations), 1), aggr=aggr, **decomposition).double()
    assume(len(hg.relations) == conv.num_relations)
    with torch.no_grad():
        conv.bias.uniform_(-1, 1)
    x = {t: v.requires_grad_() for t, v in random_features(hg, widths[0], torch.Generator().manual_seed(seed)).items()}
    leaves = leaves_of(x)
    want = forward_and_grads(conv, lambda: rgcn_by_relation(conv, hg, x), leaves, seed)
    got = forward_and_grads(conv, lambda: conv(hg, x), leaves, seed)
    assert_all_close(got, want, f"RGCNConv {aggr} {decomposition} on {hg}")


def test_rgcn_matches_relations_by_name():
    hg = HeteroGraph({("a", "r", "b"): [[0, 1], [1, 1]], ("b", "s", "a"): [[1], [0]], ("a", "t", "a"): [[0], [1]]})
    shuffled = HeteroGraph({r: hg[r].edge_index for r in reversed(hg.relations)}, hg.num_nodes_dict)
    conv = RGCNConv(3, 2, hg.relations, num_bases=2).double()
    x = random_features(hg, 3, torch.Generator().manual_seed(0))
    a, b = conv(hg, x), conv(shuffled, x)
    for t in a:
        torch.testing.assert_close(a[t], b[t], **TOL)


def test_hetero_layers_run_every_relation_on_each_backend():
    """The relation-wise aggregation goes through the ops front door: each backend gives the same."""
    gen = torch.Generator().manual_seed(3)
    hg = HeteroGraph({("a", "r", "b"): torch.randint(0, 6, (2, 30), generator=gen),
                      ("b", "s", "a"): torch.randint(0, 6, (2, 20), generator=gen),
                      ("a", "t", "a"): torch.randint(0, 6, (2, 25), generator=gen)}, {"a": 6, "b": 6})
    torch.manual_seed(0)
    rgcn = RGCNConv(8, 4, 3, aggr="mean").double()
    hgt = HGTConv(8, 8, hg.metadata(), heads=2).double()
    x = {t: v.requires_grad_() for t, v in random_features(hg, 8, gen).items()}
    for layer, reference in ((rgcn, lambda: rgcn_by_relation(rgcn, hg, x)), (hgt, lambda: hgt_by_relation(hgt, hg, x))):
        want = forward_and_grads(layer, reference, leaves_of(x))
        for backend in cpu_test_backends():
            with unigraph.use_backend(backend):
                got = forward_and_grads(layer, lambda: layer(hg, x), leaves_of(x))
            assert_all_close(got, want, f"{type(layer).__name__} on {backend}", dict(rtol=1e-7, atol=1e-7))


# ---------------------------------------------------------------------- HGTConv
def hgt_by_relation(conv: HGTConv, hg: HeteroGraph, x: dict) -> dict:
    """HGT written relation by relation with homogeneous ops; the softmax across relations is done
    by hand: a shift per destination (any shift gives the same softmax), exponentials, and the sum
    over every relation's in-edges."""
    heads, width = conv.heads, conv.out_channels
    dim = width // heads
    types = conv.node_types
    kqv = {t: x[t] @ conv.kqv_lin.weight[types.index(t), : x[t].shape[1]] + conv.kqv_lin.bias[types.index(t)]
           for t in x}
    k = {t: v[:, :width].reshape(-1, heads, dim) for t, v in kqv.items()}
    q = {t: v[:, width:2 * width].reshape(-1, heads, dim) for t, v in kqv.items()}
    v = {t: v[:, 2 * width:].reshape(-1, heads, dim) for t, v in kqv.items()}
    scores, values = {}, {}
    for relation, graph in hg.items():
        r = conv.relations.index(relation)
        keys = torch.einsum("nhd,hde->nhe", k[relation[0]], conv.k_rel[r])
        values[relation] = torch.einsum("nhd,hde->nhe", v[relation[0]], conv.v_rel[r])
        dot = ops.gsddmm(graph, "dot", keys, q[relation[2]], "u", "v")                   # [E, H, 1]
        scores[relation] = dot * conv.p_rel[r].view(1, heads, 1) / math.sqrt(dim)
    shift = {t: torch.zeros(hg.num_dst_nodes(t), heads, 1, dtype=torch.float64) for t in hg.node_types}
    for relation, graph in hg.items():
        shift[relation[2]] = torch.maximum(shift[relation[2]], ops.gspmm(graph, "copy_e", "max", e=scores[relation]))
    exps = {r: torch.exp(s - shift[r[2]][hg[r].dst]) for r, s in scores.items()}
    total = {t: torch.zeros(hg.num_dst_nodes(t), heads, 1, dtype=torch.float64) for t in hg.node_types}
    for relation, graph in hg.items():
        total[relation[2]] = total[relation[2]] + ops.gspmm(graph, "copy_e", "sum", e=exps[relation])
    messages = {t: torch.zeros(hg.num_dst_nodes(t), heads, dim, dtype=torch.float64) for t in hg.node_types}
    for relation, graph in hg.items():
        alpha = exps[relation] / total[relation[2]][graph.dst]
        messages[relation[2]] = messages[relation[2]] + ops.gspmm(graph, "u_mul_e", "sum", values[relation], alpha)
    out = {}
    for t in dict.fromkeys(r[2] for r in hg.relations):
        i = types.index(t)
        a = F.gelu(messages[t].reshape(-1, width)) @ conv.out_lin.weight[i] + conv.out_lin.bias[i]
        if x[t].shape[1] == width:
            gate = torch.sigmoid(conv.skip[i])
            a = gate * a + (1 - gate) * x[t]
        out[t] = a
    return out


def copy_pyg_hgt(ours: HGTConv, theirs) -> None:
    """PyG's HGTConv weights into ours: per-type Linear -> stacked [in, out]; k_rel/v_rel indexed
    ``head * R + relation`` -> ``[relation, head]``."""
    relations = len(ours.relations)
    with torch.no_grad():
        for i, t in enumerate(ours.node_types):
            lin = theirs.kqv_lin.lins[t]
            ours.kqv_lin.weight[i].zero_()
            ours.kqv_lin.weight[i, : lin.weight.shape[1]] = lin.weight.t()
            ours.kqv_lin.bias[i] = lin.bias
            ours.out_lin.weight[i] = theirs.out_lin.lins[t].weight.t()
            ours.out_lin.bias[i] = theirs.out_lin.lins[t].bias
            ours.skip[i] = theirs.skip[t]
        for r, relation in enumerate(ours.relations):
            ours.p_rel[r] = theirs.p_rel["__".join(relation)][0]
            for h in range(ours.heads):
                ours.k_rel[r, h] = theirs.k_rel.weight[h * relations + r]
                ours.v_rel[r, h] = theirs.v_rel.weight[h * relations + r]


@given(hg=hetero_graphs(min_relations=1), heads=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_hgt_matches_pyg_and_relation_by_relation(hg, heads, seed):
    gen = torch.Generator().manual_seed(seed)
    widths = {t: [4, 3][i % 2] for i, t in enumerate(hg.node_types)}     # some types skip-connect, some not
    torch.manual_seed(seed % 1000)
    theirs = pyg_nn.HGTConv(widths, 4, hg.metadata(), heads=heads).double()
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = HGTConv(widths, 4, hg.metadata(), heads=heads).double()
    copy_pyg_hgt(ours, theirs)
    x = {t: v.requires_grad_() for t, v in random_features(hg, widths, gen).items()}
    leaves = leaves_of(x)
    got = forward_and_grads(ours, lambda: ours(hg, x), leaves, seed)
    assert_all_close(got, forward_and_grads(ours, lambda: hgt_by_relation(ours, hg, x), leaves, seed),
                     f"HGTConv vs relation by relation on {hg}")
    assume(all(n > 0 for n in hg.num_nodes_dict.values()))    # PyG's HeteroDictLinear needs rows
    edge_index = {r: g.edge_index for r, g in hg.items()}
    pyg_out = forward_and_grads(theirs, lambda: theirs(x, edge_index), leaves, seed)
    for key, value in pyg_out[0].items():
        torch.testing.assert_close(got[0][key], value, **TOL)
    for g, w in zip(got[1][: len(leaves)], pyg_out[1][: len(leaves)]):
        torch.testing.assert_close(g, w, **TOL)


# ---------------------------------------------------------------------- HeteroConv
LAYERS = {
    "sage": lambda s, d: (unigraph.SAGEConv, pyg_nn.SAGEConv, ((4, 4), 3), {}),
    "graph": lambda s, d: (unigraph.GraphConv, pyg_nn.GraphConv, ((4, 4), 3), {"aggr": "mean"}),
    "gat": lambda s, d: (unigraph.GATConv, pyg_nn.GATConv, ((4, 4), 3),
                         {"heads": 2, "add_self_loops": s == d}),
    "gcn-on-self": lambda s, d: ((unigraph.GCNConv, pyg_nn.GCNConv, (4, 3), {}) if s == d else
                                 (unigraph.SAGEConv, pyg_nn.SAGEConv, ((4, 4), 3), {"aggr": "max"})),
}


@pytest.mark.filterwarnings("ignore:There exist node types")  # PyG's note on types without in-relations
@given(hg=hetero_graphs(min_relations=1, min_nodes=1), layer=st.sampled_from(list(LAYERS)),
       aggr=st.sampled_from(["sum", "mean", "max", "min", "cat", None]), seed=st.integers(0, 2**16))
def test_hetero_conv_matches_pyg(hg, layer, aggr, seed):
    torch.manual_seed(seed % 1000)
    ours_convs, pyg_convs = {}, {}
    for relation in hg.relations:
        ours_cls, pyg_cls, args, kwargs = LAYERS[layer](relation[0], relation[2])
        pyg_convs[relation] = pyg_cls(*args, **kwargs)
        ours_convs[relation] = ours_cls(*args, **kwargs)
    theirs = pyg_nn.HeteroConv(pyg_convs, aggr=aggr).double().eval()
    ours = HeteroConv(ours_convs, aggr=aggr).double().eval()
    for relation, conv in ours_convs.items():   # PyG's HeteroConv names its modules differently
        conv.load_state_dict(pyg_convs[relation].state_dict(), strict=True)
    x = {t: v.requires_grad_() for t, v in random_features(hg, 4, torch.Generator().manual_seed(seed)).items()}
    leaves = leaves_of(x)
    edge_index = {r: g.edge_index for r, g in hg.items()}
    assert_all_close(forward_and_grads(ours, lambda: ours(hg, x), leaves, seed),
                     forward_and_grads(theirs, lambda: theirs(x, edge_index), leaves, seed),
                     f"HeteroConv[{layer}, {aggr}] on {hg}", dict(rtol=1e-7, atol=1e-7))


def test_hetero_conv_refuses_misuse_by_name():
    hg = HeteroGraph({("a", "r", "b"): [[0], [1]], ("b", "s", "b"): [[0], [1]]}, {"a": 2, "b": 2})
    x = {"a": torch.randn(2, 4), "b": torch.randn(2, 4)}
    with pytest.raises(ValueError, match=r"\('a', 'r', 'b'\) adds self-loops.*add_self_loops=False"):
        HeteroConv({("a", "r", "b"): unigraph.GATConv(4, 2)})
    with pytest.raises(ValueError, match=r"relation \('a', 'r', 'b'\): GCNConv takes one feature tensor"):
        HeteroConv({("a", "r", "b"): unigraph.GCNConv(4, 2, add_self_loops=False)})(hg, x)
    with pytest.raises(ValueError, match="does not have"):
        HeteroConv({("a", "q", "b"): unigraph.SAGEConv(4, 2)})(hg, x)
    with pytest.raises(ValueError, match="no features for 'a'"):
        HeteroConv({("a", "r", "b"): unigraph.SAGEConv(4, 2)})(hg, {"b": x["b"]})
    with pytest.raises(TypeError, match="edge_weight_dict"):
        HeteroConv({("a", "r", "b"): unigraph.GraphConv(4, 2)})(hg, x, edge_weight=torch.ones(1))
    with pytest.raises(ValueError, match="aggr must be one of"):
        HeteroConv({("a", "r", "b"): unigraph.SAGEConv(4, 2)}, aggr="prod")


def test_hetero_conv_passes_relation_keyword_arguments():
    hg = HeteroGraph({("a", "r", "b"): [[0, 1], [1, 1]], ("b", "s", "b"): [[0], [1]]}, {"a": 2, "b": 2})
    x = {"a": torch.randn(2, 4, dtype=torch.float64), "b": torch.randn(2, 4, dtype=torch.float64)}
    weights = {("a", "r", "b"): torch.tensor([2.0, 0.5], dtype=torch.float64)}
    torch.manual_seed(0)
    conv_r, conv_s = unigraph.GraphConv(4, 3).double(), unigraph.GraphConv(4, 3).double()
    hetero = HeteroConv({("a", "r", "b"): conv_r, ("b", "s", "b"): conv_s})
    out = hetero(hg, x, edge_weight_dict=weights)
    want = conv_r(hg["r"], (x["a"], x["b"]), weights[("a", "r", "b")]) + conv_s(hg["s"], x["b"])
    torch.testing.assert_close(out["b"], want, **TOL)
    assert set(out) == {"b"}
