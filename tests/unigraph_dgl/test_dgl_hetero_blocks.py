"""unigraph.dgl's heterogeneous blocks and heterograph transforms against the real DGL 2.1:
``to_block`` on graphs of several node types / relations (source order, ids, features, counts,
relation blocks), ``HeteroGraphConv`` on those blocks, ``remove_edges`` / ``add_edges`` /
``add_nodes`` / ``remove_nodes`` (methods and functions, batch counts), ``AddSelfLoop``,
``AddReverse`` and ``add_reverse_edges``; and the errors."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from unigraph.dgl import transforms as ut

GAMES = {("user", "follows", "user"): ([0, 0, 2, 1], [1, 2, 1, 3]),
         ("user", "plays", "game"): ([0, 0, 0, 1, 2], [0, 2, 3, 0, 2]),
         ("store", "sells", "game"): ([0, 0, 1, 1], [0, 3, 1, 2])}
LOOPY = {("user", "follows", "user"): ([0, 0, 2, 1, 3, 2], [1, 2, 1, 3, 3, 2]),
         ("user", "plays", "game"): ([0, 0, 0, 1, 2], [0, 2, 3, 0, 2]),
         ("store", "sells", "game"): ([0, 0, 1, 1], [0, 3, 1, 2])}
ONE_TYPE = {("_N", "_E", "_N"): ([0, 1, 1, 3, 2], [1, 2, 2, 0, 2]), ("_N", "self", "_N"): ([0, 2], [0, 2])}


def pair(dgl, data, idtype=torch.int64, features=True, num_nodes=None):
    """The same heterograph in unigraph and in DGL, with the same node and edge features."""
    tensors = {cet: (torch.tensor(u, dtype=idtype), torch.tensor(v, dtype=idtype)) for cet, (u, v) in data.items()}
    graphs = (udgl.heterograph(tensors, num_nodes, idtype=idtype), dgl.heterograph(tensors, num_nodes, idtype=idtype))
    if features:
        gen = torch.Generator().manual_seed(0)
        for ntype in graphs[1].ntypes:
            value = torch.randn(graphs[1].num_nodes(ntype), 2, dtype=torch.float64, generator=gen)
            for g in graphs:
                g.nodes[ntype].data["h"] = value
        for cet in graphs[1].canonical_etypes:
            value = torch.randn(graphs[1].num_edges(cet), dtype=torch.float64, generator=gen)
            for g in graphs:
                g.edges[cet].data["w"] = value
    return graphs


def same(a, b):
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert torch.equal(a, b), (a, b)


def same_store(a, b):
    assert set(a) == set(b), (set(a), set(b))
    for key in a:
        same(a[key], b[key])


def same_graph(ours, theirs):
    """Types, counts, edges (in order), node and edge features of two graphs (one a DGL graph)."""
    assert (ours.ntypes, ours.canonical_etypes) == (theirs.ntypes, theirs.canonical_etypes)
    assert ours.idtype == theirs.idtype
    for ntype in theirs.ntypes:
        assert ours.num_nodes(ntype) == theirs.num_nodes(ntype)
        same_store(ours.nodes[ntype].data, theirs.nodes[ntype].data)
    for cet in theirs.canonical_etypes:
        for a, b in zip(ours.edges(form="all", etype=cet), theirs.edges(form="all", etype=cet)):
            same(a, b)
        same_store(ours.edges[cet].data, theirs.edges[cet].data)


def same_block(ours, theirs):
    assert ours.is_block and theirs.is_block
    assert (ours.ntypes, ours.srctypes, ours.dsttypes) == (theirs.ntypes, theirs.srctypes, theirs.dsttypes)
    assert ours.canonical_etypes == theirs.canonical_etypes and ours.etypes == theirs.etypes
    assert (ours.num_nodes(), ours.num_src_nodes(), ours.num_dst_nodes(), ours.num_edges()) == \
        (theirs.num_nodes(), theirs.num_src_nodes(), theirs.num_dst_nodes(), theirs.num_edges())
    for ntype in theirs.srctypes:
        assert (ours.num_src_nodes(ntype), ours.num_dst_nodes(ntype), ours.num_nodes(ntype)) == \
            (theirs.num_src_nodes(ntype), theirs.num_dst_nodes(ntype), theirs.num_nodes(ntype))
        assert ours.number_of_dst_nodes(ntype) == theirs.number_of_dst_nodes(ntype)
        same_store(ours.srcnodes[ntype].data, theirs.srcnodes[ntype].data)
        same_store(ours.dstnodes[ntype].data, theirs.dstnodes[ntype].data)
    for cet in theirs.canonical_etypes:
        for a, b in zip(ours.edges(form="all", etype=cet), theirs.edges(form="all", etype=cet)):
            same(a, b)
        same_store(ours.edges[cet].data, theirs.edges[cet].data)
        rel, ref = ours[cet], theirs[cet]
        assert isinstance(rel, udgl.DGLGraph) and rel.is_block
        assert (rel.ntypes, rel.srctypes, rel.dsttypes, rel.canonical_etypes) == \
            (ref.ntypes, ref.srctypes, ref.dsttypes, ref.canonical_etypes)
        assert (rel.num_src_nodes(), rel.num_dst_nodes()) == (ref.num_src_nodes(), ref.num_dst_nodes())
        same_store(rel.srcdata, ref.srcdata)
        same_store(rel.dstdata, ref.dstdata)
        same(rel.in_degrees(), ref.in_degrees())


def covering(graph_data, dst):
    """The edges of ``graph_data`` into ``dst`` ({type: ids}): what a sampler hands to_block."""
    out = {}
    for cet, (u, v) in graph_data.items():
        keep = [i for i, node in enumerate(v) if node in dst.get(cet[2], [])]
        out[cet] = ([u[i] for i in keep], [v[i] for i in keep])
    return out


# ---------------------------------------------------------------------- to_block
@pytest.mark.parametrize("idtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("case", ["given", "default", "no_dst_in_src", "tensor_ids", "sampled"])
def test_to_block_matches_dgl(dgl, idtype, case):
    data, dst = GAMES, {"user": [0, 1, 2, 3], "game": [0, 1, 2, 3], "store": []}
    if case == "sampled":  # shuffled seeds, a type without seeds, only the edges into the seeds
        dst = {"user": [3, 1, 2], "game": [2, 0]}
        data = covering(LOOPY, dst)
    ours, theirs = pair(dgl, data, idtype, num_nodes={"user": 4, "game": 4, "store": 2})
    args = {"given": (dst,), "default": (), "no_dst_in_src": (dst, False), "sampled": (dst,),
            "tensor_ids": ({t: torch.tensor(v, dtype=idtype) for t, v in dst.items()},)}[case]
    a, b = udgl.to_block(ours, *args), dgl.to_block(theirs, *args)
    assert isinstance(a, udgl.DGLHeteroGraph)
    same_block(a, b)


def test_to_block_one_node_type_and_bipartite_graphs(dgl):
    ours, theirs = pair(dgl, ONE_TYPE)  # one node type, two relations: a heterogeneous block
    for dst in ({"_N": [2, 0, 1]}, torch.tensor([2, 0, 1]), None):
        same_block(udgl.to_block(ours, dst), dgl.to_block(theirs, dst))
    data = {("user", "plays", "game"): ([0, 2, 1, 2], [1, 0, 1, 1])}  # one relation between two types
    ours, theirs = udgl.heterograph(data), dgl.heterograph(data)
    ours.nodes["user"].data["h"] = theirs.nodes["user"].data["h"] = torch.arange(3.0)
    for dst in ({"game": [1, 0]}, None):
        same_block(udgl.to_block(ours, dst), dgl.to_block(theirs, dst))
    g, ref = udgl.graph(([0, 1, 2], [1, 2, 0])), dgl.graph(([0, 1, 2], [1, 2, 0]))  # homogeneous: a DGLGraph
    a, b = udgl.to_block(g, {"_N": [2, 1, 0]}), dgl.to_block(ref, {"_N": [2, 1, 0]})
    assert type(a) is udgl.DGLGraph
    same(a.srcdata[udgl.NID], b.srcdata[dgl.NID])
    same(a.edges()[0], b.edges()[0])


def test_to_block_random_graphs_match_dgl(dgl):
    gen = torch.Generator().manual_seed(3)
    counts = {"a": 7, "b": 5, "c": 6}
    relations = [("a", "x", "a"), ("a", "y", "b"), ("b", "z", "a"), ("c", "x", "b"), ("c", "w", "c")]
    for _ in range(4):
        dst = {t: torch.randperm(n, generator=gen)[: int(torch.randint(0, n, (1,), generator=gen))].tolist()
               for t, n in counts.items()}
        data = {}
        for cet in relations:
            n = 12
            data[cet] = (torch.randint(0, counts[cet[0]], (n,), generator=gen).tolist(),
                         torch.randint(0, counts[cet[2]], (n,), generator=gen).tolist())
        ours, theirs = pair(dgl, covering(data, dst), num_nodes=counts)
        for include in (True, False):
            same_block(udgl.to_block(ours, dst, include), dgl.to_block(theirs, dst, include))


def test_to_block_src_nodes(dgl):
    dst = {"user": [1, 2, 3], "game": [0, 1, 2, 3]}
    ours, theirs = pair(dgl, GAMES)
    reference = dgl.to_block(theirs, dst)
    src = {t: reference.srcnodes[t].data[dgl.NID] for t in reference.srctypes}
    same_block(udgl.to_block(ours, dst, src_nodes=src), reference)  # the order DGL would choose, given back
    # a homogeneous graph with extra sources; DGL 2.1 counts 0 source nodes here (its bug), ids and edges agree
    g, ref = udgl.graph(([0, 1, 2, 0], [1, 2, 1, 2]), num_nodes=5), dgl.graph(([0, 1, 2, 0], [1, 2, 1, 2]), num_nodes=5)
    a = udgl.to_block(g, torch.tensor([1, 2]), src_nodes=torch.tensor([1, 2, 4, 0, 3]))
    b = dgl.to_block(ref, torch.tensor([1, 2]), src_nodes=torch.tensor([1, 2, 4, 0, 3]))
    same(a.srcdata[udgl.NID], b.srcdata[dgl.NID])
    assert (a.num_src_nodes(), a.num_dst_nodes()) == (5, 2)
    for x, y in zip(a.edges(), b.edges()):
        same(x, y)
    with pytest.raises(udgl.DGLError, match="must start with dst_nodes"):
        udgl.to_block(ours, dst, src_nodes={"user": [0, 1, 2, 3], "game": [0, 1, 2, 3], "store": [0, 1]})
    with pytest.raises(udgl.DGLError, match=r"src_nodes\['store'\] lacks node 1"):
        udgl.to_block(ours, dst, src_nodes={"user": [1, 2, 3, 0], "game": [0, 1, 2, 3], "store": [0]})
    with pytest.raises(udgl.DGLError, match="repeats"):
        udgl.to_block(ours, dst, src_nodes={"user": [1, 2, 3, 0, 0], "game": [0, 1, 2, 3], "store": [0, 1]})


def test_block_features_scopes_and_message_passing(dgl):
    ours, theirs = pair(dgl, GAMES)
    a, b = udgl.to_block(ours), dgl.to_block(theirs)
    a["plays"].srcdata["z"] = torch.ones(4)           # a relation block writes into the block's stores
    assert torch.equal(a.srcnodes["user"].data["z"], torch.ones(4))
    assert a["follows"].srcdata is a.srcnodes["user"].data and a["plays"].dstdata is a.dstnodes["game"].data
    assert set(a.srcdata["h"]) == set(b.srcdata["h"]) and set(a.edata["w"]) == set(b.edata["w"])
    with a.local_scope():
        a.dstnodes["game"].data["tmp"] = torch.zeros(4)
    assert "tmp" not in a.dstnodes["game"].data
    local = a.local_var()
    local.srcnodes["user"].data["h"] = torch.zeros(4, 2, dtype=torch.float64)
    assert not torch.equal(a.srcnodes["user"].data["h"], local.srcnodes["user"].data["h"])
    moved = a.to("cpu")
    same_store(moved.srcnodes["store"].data, a.srcnodes["store"].data)
    assert moved.is_block and moved.canonical_etypes == a.canonical_etypes
    assert a.int().idtype == torch.int32 and a.int()["plays"].edges()[0].dtype == torch.int32
    for module, g in ((udgl, a), (dgl, b)):
        fn = module.function
        g.multi_update_all({"plays": (fn.copy_u("h", "m"), fn.mean("m", "multi")),
                            "sells": (fn.copy_u("h", "m"), fn.sum("m", "multi")),
                            "follows": (fn.u_mul_e("h", "w", "m"), fn.max("m", "multi"))}, "sum")
        g.apply_edges(fn.u_dot_v("h", "h", "score"), etype="follows")
    for ntype in ("user", "game"):
        torch.testing.assert_close(a.dstnodes[ntype].data["multi"], b.dstnodes[ntype].data["multi"])
    torch.testing.assert_close(a.edges["follows"].data["score"], b.edges["follows"].data["score"])
    assert "Block(num_src_nodes={'game': 4, 'store': 2, 'user': 4}" in repr(a)


@pytest.mark.parametrize("aggregate", ["sum", "max", "stack"])
def test_hetero_graph_conv_on_blocks_matches_dgl(dgl, aggregate):
    import dgl.nn as dnn
    ours, theirs = pair(dgl, GAMES, features=False)
    blocks = udgl.to_block(ours, {"user": [3, 1, 2], "game": [0, 2, 3, 1]}), \
        dgl.to_block(theirs, {"user": [3, 1, 2], "game": [0, 2, 3, 1]})
    convs = [nn.HeteroGraphConv({"follows": nn.GraphConv(2, 3), "plays": nn.SAGEConv(2, 3, "mean"),
                                 "sells": nn.GraphConv(3, 3)}, aggregate).double() for nn in (unn, dnn)]
    convs[0].load_state_dict(convs[1].state_dict(), strict=True)
    gen = torch.Generator().manual_seed(1)
    x = {"user": torch.randn(4, 2, dtype=torch.float64, generator=gen),
         "game": torch.randn(4, 2, dtype=torch.float64, generator=gen),
         "store": torch.randn(2, 3, dtype=torch.float64, generator=gen)}
    inputs = [{k: v.clone().requires_grad_() for k, v in x.items()} for _ in convs]
    outs = [conv(block, feats) for conv, block, feats in zip(convs, blocks, inputs)]
    assert set(outs[0]) == set(outs[1]) == {"user", "game"}
    for key in outs[1]:
        torch.testing.assert_close(outs[0][key], outs[1][key], rtol=1e-9, atol=1e-9)
    for out, feats in zip(outs, inputs):
        sum(v.square().sum() for v in out.values()).backward()
    for key in x:
        torch.testing.assert_close(inputs[0][key].grad, inputs[1][key].grad, rtol=1e-9, atol=1e-9)
    for (name, p), (_, q) in zip(convs[0].named_parameters(), convs[1].named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-9, atol=1e-9, msg=name)


def test_create_block_of_several_relations_matches_dgl(dgl):
    data = {("user", "plays", "game"): ([0, 1, 2], [1, 0, 1]), ("store", "sells", "game"): ([0, 1], [2, 0]),
            ("user", "follows", "user"): ([0], [1])}
    tensors = {cet: (torch.tensor(u), torch.tensor(v)) for cet, (u, v) in data.items()}
    for counts in ((), ({"user": 4, "store": 3}, {"game": 5, "user": 2, "x": 1})):
        a, b = udgl.create_block(tensors, *counts), dgl.create_block(tensors, *counts)
        assert isinstance(a, udgl.DGLHeteroGraph) and a.is_block
        assert (a.ntypes, a.srctypes, a.dsttypes, a.canonical_etypes) == \
            (b.ntypes, b.srctypes, b.dsttypes, b.canonical_etypes)
        assert [a.num_src_nodes(t) for t in b.srctypes] == [b.num_src_nodes(t) for t in b.srctypes]
        assert [a.num_dst_nodes(t) for t in b.dsttypes] == [b.num_dst_nodes(t) for t in b.dsttypes]
        assert (a.num_nodes("game"), a.num_nodes("user"), a.num_nodes()) == \
            (b.num_nodes("game"), b.num_nodes("user"), b.num_nodes())
        for cet in b.canonical_etypes:
            for x, y in zip(a.edges(etype=cet), b.edges(etype=cet)):
                same(x, y)
    with pytest.raises(udgl.DGLError, match="lack the node types"):
        udgl.create_block(tensors, {"user": 4}, {"game": 5})
    with pytest.raises(udgl.DGLError, match="both"):
        udgl.create_block(tensors, {"user": 4})


def test_to_block_errors():
    ours = udgl.heterograph({cet: (torch.tensor(u), torch.tensor(v)) for cet, (u, v) in GAMES.items()})
    with pytest.raises(udgl.DGLError, match="give dst_nodes as a dict"):
        udgl.to_block(ours, torch.tensor([0]))
    with pytest.raises(udgl.DGLError, match=r"node types \['shop'\]"):
        udgl.to_block(ours, {"shop": [0]})
    with pytest.raises(udgl.DGLError, match="outside 0..3"):
        udgl.to_block(ours, {"user": [4]})
    with pytest.raises(TypeError, match="integers"):
        udgl.to_block(ours, {"user": torch.tensor([0.5])})
    block = udgl.to_block(ours)
    with pytest.raises(udgl.DGLError, match="not a block"):
        udgl.to_block(block)
    with pytest.raises(udgl.DGLError, match="on a block"):
        block.remove_edges([0], etype="plays")
    with pytest.raises(udgl.DGLError, match="on a block"):
        ut.remove_edges(block, [0], etype="plays")


# ---------------------------------------------------------------------- mutations
def test_remove_edges_method_and_function_match_dgl(dgl):
    ours, theirs = pair(dgl, GAMES)
    for g in (ours, theirs):
        g.remove_edges(torch.tensor([1, 3, 1]), etype="follows", store_ids=True)
    same_graph(ours, theirs)
    for g in (ours, theirs):
        g.remove_edges(torch.tensor([], dtype=torch.int64), etype="plays", store_ids=True)  # DGL: no change
    same_graph(ours, theirs)
    ours, theirs = pair(dgl, GAMES)
    a, b = ut.remove_edges(ours, [0, 4], etype=("user", "plays", "game")), \
        dgl.remove_edges(theirs, [0, 4], etype=("user", "plays", "game"))
    same_graph(a, b)
    same_graph(ours, theirs)  # the input is left as it was
    g, ref = udgl.graph(([0, 1, 2, 2], [1, 2, 0, 2])), dgl.graph(([0, 1, 2, 2], [1, 2, 0, 2]))
    g.edata["w"] = ref.edata["w"] = torch.arange(4.0)
    a, b = ut.remove_edges(g, [2], store_ids=True), dgl.remove_edges(ref, [2], store_ids=True)
    for x, y in zip(a.edges(), b.edges()):
        same(x, y)
    same_store(a.edata, b.edata)
    assert g.num_edges() == 4
    with pytest.raises(udgl.DGLError, match="edge type name must be specified"):
        ours.remove_edges([0])
    with pytest.raises(udgl.DGLError, match="outside 0..4"):
        ours.remove_edges([5], etype="plays")


def test_mutations_on_batched_graphs_follow_dgl(dgl):
    parts = [pair(dgl, GAMES, features=False) for _ in range(2)]
    ours, theirs = udgl.batch([p[0] for p in parts]), dgl.batch([p[1] for p in parts])
    for name, args, kwargs in (("remove_edges", ([1, 2, 5],), {"etype": "follows"}),
                               ("remove_nodes", ([1, 5],), {"ntype": "user"}),
                               ("add_edges", ([0], [1]), {"etype": "follows"})):
        a, b = getattr(ut, name)(ours, *args, **kwargs), getattr(dgl, name)(theirs, *args, **kwargs)
        same_graph(a, b)
        if name != "add_edges":  # DGL forgets the batch on additions
            for ntype in b.ntypes:
                same(a.batch_num_nodes(ntype), b.batch_num_nodes(ntype))
            for cet in b.canonical_etypes:
                same(a.batch_num_edges(cet), b.batch_num_edges(cet))
        for cet in theirs.canonical_etypes:
            same(ours.batch_num_edges(cet), theirs.batch_num_edges(cet))  # the input keeps its own
    g, ref = udgl.batch([udgl.graph(([0], [1])), udgl.graph(([0, 1], [1, 2]))]), \
        dgl.batch([dgl.graph(([0], [1])), dgl.graph(([0, 1], [1, 2]))])
    same(ut.remove_edges(g, [0]).batch_num_edges(), dgl.remove_edges(ref, [0]).batch_num_edges())


def test_add_nodes_add_edges_remove_nodes_match_dgl(dgl):
    ours, theirs = pair(dgl, GAMES)
    steps = (("add_nodes", (2,), {"ntype": "game"}),
             ("add_nodes", (1,), {"data": {"h": torch.full((1, 2), 5.0, dtype=torch.float64),
                                           "y": torch.ones(1)}, "ntype": "user"}),
             ("add_edges", (torch.tensor([6, 0]), torch.tensor([7, 1])),
              {"data": {"z": torch.ones(2, 3)}, "etype": "plays"}),
             ("add_edges", ([2], [5]), {"etype": "follows"}),
             ("remove_nodes", (torch.tensor([1, 3]),), {"ntype": "user", "store_ids": True}))
    for name, args, kwargs in steps:
        ours, theirs = getattr(ut, name)(ours, *args, **kwargs), getattr(dgl, name)(theirs, *args, **kwargs)
        same_graph(ours, theirs)
    g, ref = udgl.graph(([0, 1], [1, 2])), dgl.graph(([0, 1], [1, 2]))
    for name, args in (("add_nodes", (2,)), ("add_edges", ([4], [0])), ("remove_nodes", ([1],))):
        g, ref = getattr(ut, name)(g, *args), getattr(dgl, name)(ref, *args)
        for x, y in zip(g.edges(), ref.edges()):
            same(x, y)
    with pytest.raises(udgl.DGLError, match="data\\['h'\\] must be a tensor of 2 rows"):
        ours.add_nodes(2, {"h": torch.ones(3, 2)}, ntype="game")
    with pytest.raises(udgl.DGLError, match="node type name must be given"):
        ours.add_nodes(1)


# ---------------------------------------------------------------------- self-loops and reverse edges
@pytest.mark.parametrize("options", [{}, {"new_etypes": True}, {"allow_duplicate": True},
                                     {"edge_feat_names": ["w"], "fill_data": 3.0}, {"fill_data": "max"},
                                     {"fill_data": "mean", "new_etypes": True}])
def test_add_self_loop_transform_matches_dgl(dgl, options):
    ours, theirs = pair(dgl, LOOPY)
    for g in (ours, theirs):
        g.edges["follows"].data["v"] = torch.arange(12.0).view(6, 2)
    same_graph(ut.AddSelfLoop(**options)(ours), dgl.transforms.AddSelfLoop(**options)(theirs))
    g, ref = udgl.graph(([0, 1, 1, 2], [1, 2, 2, 2])), dgl.graph(([0, 1, 1, 2], [1, 2, 2, 2]))
    g.edata["w"] = ref.edata["w"] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    g.ndata["h"] = ref.ndata["h"] = torch.ones(3, 2)
    same_graph(ut.AddSelfLoop(**options)(g), dgl.transforms.AddSelfLoop(**options)(ref))


def test_self_loop_functions_on_one_relation(dgl):
    ours, theirs = pair(dgl, LOOPY)
    same_graph(ut.add_self_loop(ours, etype="follows"), dgl.add_self_loop(theirs, etype="follows"))
    same_graph(ut.remove_self_loop(ours, etype="follows"), dgl.remove_self_loop(theirs, etype="follows"))
    with pytest.raises(udgl.DGLError, match="unidirectional bipartite"):
        ut.add_self_loop(ours, etype="plays")
    with pytest.raises(udgl.DGLError, match="fill_data must be"):
        ut.add_self_loop(ours, fill_data="median", etype="follows")
    with pytest.raises(udgl.DGLError, match=r"edge_feat_names \['nope'\]"):
        ut.add_self_loop(ours, edge_feat_names=["nope"], etype="follows")


@pytest.mark.parametrize("options", [{}, {"copy_edata": True}, {"sym_new_etype": True},
                                     {"copy_edata": True, "sym_new_etype": True}])
def test_add_reverse_transform_matches_dgl(dgl, options):
    ours, theirs = pair(dgl, LOOPY)
    same_graph(ut.AddReverse(**options)(ours), dgl.transforms.AddReverse(**options)(theirs))
    g, ref = udgl.graph(([0, 1, 1], [1, 2, 2]), idtype=torch.int32), dgl.graph(([0, 1, 1], [1, 2, 2]),
                                                                              idtype=torch.int32)
    g.edata["w"] = ref.edata["w"] = torch.tensor([1.0, 2.0, 3.0])
    same_graph(ut.AddReverse(**options)(g), dgl.transforms.AddReverse(**options)(ref))
    data = {("user", "plays", "game"): ([0, 2, 1], [1, 0, 1])}
    g, ref = udgl.heterograph(data), dgl.heterograph(data)
    same_graph(ut.AddReverse(**options)(g), dgl.transforms.AddReverse(**options)(ref))


@pytest.mark.parametrize("options", [{}, {"copy_edata": True}, {"exclude_self": False, "copy_ndata": False},
                                     {"copy_edata": True, "exclude_self": False}])
def test_add_reverse_edges_matches_dgl(dgl, options):
    g, ref = udgl.graph(([0, 1, 1, 2], [1, 2, 2, 2])), dgl.graph(([0, 1, 1, 2], [1, 2, 2, 2]))
    g.edata["w"] = ref.edata["w"] = torch.arange(4.0)
    g.ndata["h"] = ref.ndata["h"] = torch.ones(3, 2)
    same_graph(ut.add_reverse_edges(g, **options), dgl.add_reverse_edges(ref, **options))
    ours, theirs = pair(dgl, LOOPY)
    same_graph(ut.add_reverse_edges(ours, ignore_bipartite=True, **options),
               dgl.add_reverse_edges(theirs, ignore_bipartite=True, **options))
    with pytest.raises(udgl.DGLError, match="unidirectional bipartite"):
        ut.add_reverse_edges(ours, **options)
