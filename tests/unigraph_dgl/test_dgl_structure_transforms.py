"""DGL's structural transforms (unigraph/dgl/structure_transforms.py, to_simple's aggregator and
to_bidirected on heterographs in transforms.py, g.line_graph / g.reverse(...) in graph.py) against
DGL's: the same edges in the same order, the same features and dtypes, on a graph with
self-loops, parallel edges and an isolated node and on heterographs; plus the bad-input errors."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
from unigraph.dgl.base import DGLError
from unigraph.dgl.structure_transforms import (
    AddMetaPaths, KHopGraph, LineGraph, RemoveSelfLoop, ToSimple, compact_graphs, khop_adj, khop_graph,
    laplacian_lambda_max, line_graph, norm_by_dst)
from unigraph.dgl.transforms import to_bidirected, to_simple

# 6 nodes (5 is isolated); self-loops on 0 and 3, the edge 1 -> 2 three times, 0 -> 1 twice
SRC = [0, 1, 1, 2, 0, 3, 1, 4, 0, 1, 2, 0]
DST = [1, 2, 2, 0, 0, 3, 0, 3, 1, 2, 4, 2]


def pair(dgl, idtype=torch.int64, features=True):
    ours = udgl.graph((torch.tensor(SRC), torch.tensor(DST)), num_nodes=6, idtype=idtype)
    theirs = dgl.graph((torch.tensor(SRC), torch.tensor(DST)), num_nodes=6, idtype=idtype)
    if features:
        for g in (ours, theirs):
            g.ndata["x"] = torch.arange(12, dtype=torch.float64).reshape(6, 2)
            g.edata["w"] = torch.arange(24, dtype=torch.float32).reshape(12, 2) / 7
            g.edata["i"] = torch.arange(12) * 3
    return ours, theirs


def hetero_pair(dgl, idtype=torch.int64):
    data = {("user", "follows", "user"): ([0, 1, 1, 2, 2, 0, 1], [1, 2, 2, 2, 0, 1, 2]),
            ("user", "plays", "game"): ([0, 1, 1, 3, 0], [1, 0, 0, 2, 1]),
            ("game", "rev", "user"): ([1, 0], [0, 0])}
    counts = {"user": 5, "game": 4}
    graphs = []
    for lib in (udgl, dgl):
        g = lib.heterograph({k: (torch.tensor(s), torch.tensor(d)) for k, (s, d) in data.items()}, counts,
                            idtype=idtype)
        g.nodes["user"].data["h"] = torch.arange(5.0)
        g.nodes["game"].data["h"] = torch.arange(8.0).reshape(4, 2)
        g.edges["follows"].data["w"] = torch.arange(7.0) / 3
        g.edges["plays"].data["w"] = torch.arange(10.0).reshape(5, 2)
        graphs.append(g)
    return graphs


def same_edges(a, b, etype=None):
    for x, y in zip(a.edges(form="all", etype=etype), b.edges(form="all", etype=etype)):
        assert x.dtype == y.dtype and torch.equal(x, y)


def same_store(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-9)


def same_graph(a, b):
    assert a.ntypes == b.ntypes and a.canonical_etypes == b.canonical_etypes and a.idtype == b.idtype
    for ntype in a.ntypes:
        assert a.num_nodes(ntype) == b.num_nodes(ntype)
        same_store(dict(a.nodes[ntype].data), dict(b.nodes[ntype].data))
    for cet in a.canonical_etypes:
        same_edges(a, b, cet)
        same_store(dict(a.edges[cet].data), dict(b.edges[cet].data))


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("backtracking", [True, False])
@pytest.mark.parametrize("shared", [True, False])
def test_line_graph_equals_dgl(dgl, idtype, backtracking, shared):
    ours, theirs = pair(dgl, idtype)
    ours_lg = line_graph(ours, backtracking=backtracking, shared=shared)
    theirs_lg = dgl.line_graph(theirs, backtracking=backtracking, shared=shared)
    same_graph(ours_lg, theirs_lg)
    same_graph(ours.line_graph(backtracking, shared), theirs_lg)   # the method form
    same_graph(LineGraph(backtracking)(ours), dgl.LineGraph(backtracking)(theirs))


def test_line_graph_refuses_heterographs(dgl):
    ours, _ = hetero_pair(dgl)
    with pytest.raises(DGLError, match="homogeneous"):
        line_graph(ours)
    with pytest.raises(DGLError, match="homogeneous"):
        line_graph(ours["plays"])   # bipartite


@pytest.mark.parametrize("k", [0, 1, 2, 3])
@pytest.mark.parametrize("fmt", [None, "csr"])
def test_khop_equals_dgl(dgl, k, fmt):
    ours, theirs = pair(dgl, torch.int32)
    if fmt is not None:   # the format made first decides the order of the product's entries (in DGL too)
        ours, theirs = ours.formats(fmt), theirs.formats(fmt)
    a, b = khop_adj(ours, k), dgl.khop_adj(theirs, k)
    assert a.dtype == b.dtype == torch.float32 and torch.equal(a, b)
    same_graph(khop_graph(ours, k), dgl.khop_graph(theirs, k))
    same_graph(khop_graph(ours, k, copy_ndata=False), dgl.khop_graph(theirs, k, copy_ndata=False))
    same_graph(KHopGraph(k)(ours), dgl.KHopGraph(k)(theirs))


def test_khop_errors(dgl):
    ours, _ = pair(dgl)
    for bad in (-1, 1.5, True):
        with pytest.raises(DGLError, match="k must be"):
            khop_graph(ours, bad)
    with pytest.raises(DGLError, match="homogeneous"):
        khop_adj(hetero_pair(dgl)[0], 2)


def test_compact_graphs_homogeneous_equals_dgl(dgl):
    ours, theirs = (lib.graph(([7, 1, 7, 3], [3, 3, 0, 3]), num_nodes=10, idtype=torch.int32) for lib in (udgl, dgl))
    for g in (ours, theirs):
        g.ndata["x"] = torch.arange(20.0).reshape(10, 2)
        g.edata["w"] = torch.arange(4.0)
    same_graph(compact_graphs(ours), dgl.compact_graphs(theirs))
    keep = torch.tensor([9, 9, 8, 1], dtype=torch.int32)
    same_graph(compact_graphs(ours, always_preserve=keep), dgl.compact_graphs(theirs, always_preserve=keep))
    same_graph(compact_graphs(ours, copy_ndata=False, copy_edata=False),
               dgl.compact_graphs(theirs, copy_ndata=False, copy_edata=False))
    out, out_dgl = compact_graphs([ours, ours]), dgl.compact_graphs([theirs, theirs])
    assert isinstance(out, list) and len(out) == 2
    for a, b in zip(out, out_dgl):
        same_graph(a, b)
    assert compact_graphs([]) == []


def test_compact_graphs_heterographs_equal_dgl(dgl):
    ours1, theirs1 = hetero_pair(dgl)
    counts = {"user": 5, "game": 4}
    ours2, theirs2 = (lib.heterograph({("game", "clicked", "user"): (torch.tensor([3]), torch.tensor([4])),
                                       ("user", "likes", "user"): (torch.tensor([4, 0]), torch.tensor([3, 4]))},
                                      counts) for lib in (udgl, dgl))
    same_graph(compact_graphs(ours1), dgl.compact_graphs(theirs1))
    keep = {"game": torch.tensor([3, 2])}
    for a, b in zip(compact_graphs([ours1, ours2], always_preserve=keep),
                    dgl.compact_graphs([theirs1, theirs2], always_preserve=keep)):
        same_graph(a, b)


def test_compact_graphs_errors(dgl):
    ours1, _ = hetero_pair(dgl)
    with pytest.raises(DGLError, match="give always_preserve as"):
        compact_graphs(ours1, always_preserve=torch.tensor([1]))
    with pytest.raises(DGLError, match="node types"):
        compact_graphs(ours1, always_preserve={"venue": torch.tensor([1])})
    with pytest.raises(DGLError, match="outside"):
        compact_graphs(ours1, always_preserve={"game": torch.tensor([4])})
    small = udgl.graph(([0], [1]), num_nodes=3)
    with pytest.raises(DGLError, match="same node types and counts"):
        compact_graphs([small, udgl.graph(([0], [1]), num_nodes=4)])
    with pytest.raises(DGLError, match="id type"):
        compact_graphs([small, small.int()])
    block = udgl.to_block(small, torch.tensor([1]))
    with pytest.raises(DGLError, match="block"):
        compact_graphs(block)


def test_laplacian_lambda_max_equals_dgl(dgl):
    src = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 2, 5])
    dst = torch.tensor([1, 2, 3, 4, 0, 4, 0, 1, 2, 3, 0, 6])
    ours, theirs = udgl.graph((src, dst), num_nodes=8), dgl.graph((src, dst), num_nodes=8)
    ours_bi, theirs_bi = to_bidirected(ours), dgl.to_bidirected(theirs)
    for a, b in ((ours, theirs), (ours_bi, theirs_bi)):
        values, expected = laplacian_lambda_max(a), dgl.laplacian_lambda_max(b)
        assert len(values) == 1 and values[0] == pytest.approx(float(expected[0]), abs=1e-9)
    assert laplacian_lambda_max(ours_bi)[0] <= 2 + 1e-9
    batch = udgl.batch([ours_bi, ours_bi, udgl.graph(([0, 1], [1, 0]))])
    values = laplacian_lambda_max(batch)   # (a part of 2 nodes: DGL's ARPACK call fails there)
    assert values[0] == pytest.approx(values[1], abs=1e-9) and values[2] == pytest.approx(2.0, abs=1e-12)
    with pytest.raises(DGLError, match="no nodes"):
        laplacian_lambda_max(udgl.graph(([], []), num_nodes=0))
    with pytest.raises(DGLError, match="homogeneous"):
        laplacian_lambda_max(hetero_pair(dgl)[0])


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_norm_by_dst_equals_dgl(dgl, idtype):
    ours, theirs = pair(dgl, idtype)
    a, b = norm_by_dst(ours), dgl.norm_by_dst(theirs)
    assert a.dtype == b.dtype and torch.equal(a, b)
    ours, theirs = hetero_pair(dgl, idtype)
    for etype in ("follows", ("user", "plays", "game"), "rev"):
        a, b = norm_by_dst(ours, etype), dgl.norm_by_dst(theirs, etype)
        assert a.dtype == b.dtype and torch.equal(a, b)


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_to_simple_equals_dgl(dgl, idtype):
    ours, theirs = pair(dgl, idtype)
    del ours.edata["i"], theirs.edata["i"]   # (DGL's sum / mean fail on integer features)
    for kwargs in ({}, {"copy_ndata": False}, {"return_counts": None, "copy_edata": True},
                   {"return_counts": "w", "copy_edata": True}, {"copy_edata": True, "aggregator": "sum"},
                   {"copy_edata": True, "aggregator": "mean"}, {"aggregator": "sum"}):
        same_graph(to_simple(ours, **kwargs), dgl.to_simple(theirs, **kwargs))
    (a, wa), (b, wb) = to_simple(ours, writeback_mapping=True), dgl.to_simple(theirs, writeback_mapping=True)
    same_graph(a, b)
    assert wa.dtype == wb.dtype and torch.equal(wa, wb)
    for aggregator in ("arbitrary", "sum", "mean"):
        same_graph(ToSimple(aggregator=aggregator)(ours), dgl.ToSimple(aggregator=aggregator)(theirs))


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_to_simple_heterograph_equals_dgl(dgl, idtype):
    ours, theirs = hetero_pair(dgl, idtype)
    for kwargs in ({}, {"copy_ndata": False, "copy_edata": True}, {"copy_edata": True, "aggregator": "mean"}):
        same_graph(to_simple(ours, **kwargs), dgl.to_simple(theirs, **kwargs))
    (a, wa), (b, wb) = (f(g, writeback_mapping=True) for f, g in ((to_simple, ours), (dgl.to_simple, theirs)))
    same_graph(a, b)
    assert sorted(wa) == sorted(wb)
    for cet in wa:
        assert wa[cet].dtype == wb[cet].dtype and torch.equal(wa[cet], wb[cet])


def test_to_simple_integer_features_and_errors(dgl):
    ours, _ = pair(dgl)
    out = to_simple(ours, copy_edata=True, aggregator="sum")   # (DGL 2.1 fails here)
    assert out.edata["i"].dtype == torch.int64 and int(out.edata["i"].sum()) == int(ours.edata["i"].sum())
    mean = to_simple(ours, copy_edata=True, aggregator="mean").edata["i"]
    assert mean.dtype == torch.get_default_dtype()
    src, dst = out.edges()
    row = [(int(s), int(d)) for s, d in zip(src, dst)].index((1, 2))   # merged from edges 1, 2 and 9
    assert mean[row] == pytest.approx((3 * 1 + 3 * 2 + 3 * 9) / 3)
    with pytest.raises(DGLError, match="aggregator"):
        to_simple(ours, aggregator="max")


def test_to_bidirected_equals_dgl(dgl):
    ours, theirs = pair(dgl)
    same_graph(to_bidirected(ours), dgl.to_bidirected(theirs))
    same_graph(to_bidirected(ours, copy_ndata=True), dgl.to_bidirected(theirs, copy_ndata=True))
    data = {("user", "wins", "user"): ([0, 0, 1, 2, 2], [1, 0, 2, 1, 2]), ("user", "follows", "user"): ([0, 3], [1, 1])}
    hg = [lib.heterograph({k: (torch.tensor(s), torch.tensor(d)) for k, (s, d) in data.items()}, {"user": 5})
          for lib in (udgl, dgl)]
    for g in hg:
        g.nodes["user"].data["h"] = torch.arange(5.0)
    for copy_ndata in (False, True):
        same_graph(to_bidirected(hg[0], copy_ndata=copy_ndata), dgl.to_bidirected(hg[1], copy_ndata=copy_ndata))
    with pytest.raises(DGLError, match="bipartite"):
        to_bidirected(hetero_pair(dgl)[0])
    with pytest.raises(DGLError, match="bipartite"):
        to_bidirected(hetero_pair(dgl)[0]["plays"])


def test_reverse_method_keywords(dgl):
    ours, theirs = pair(dgl, torch.int32)
    for kwargs in ({"copy_ndata": True, "copy_edata": True}, {"copy_ndata": False}, {"copy_edata": False}):
        same_graph(ours.reverse(**kwargs), theirs.reverse(**kwargs))
    plain = ours.reverse()   # no arguments: the core reverse, as before (features along)
    assert "w" in plain.edata and torch.equal(plain.edges()[0], ours.edges()[1].long())


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_remove_self_loop_module_equals_dgl(dgl, idtype):
    ours, theirs = pair(dgl, idtype)
    same_graph(RemoveSelfLoop()(ours), dgl.RemoveSelfLoop()(theirs))
    ours, theirs = hetero_pair(dgl, idtype)
    for g in (ours, theirs):
        g.add_edges(torch.tensor([3], dtype=idtype), torch.tensor([3], dtype=idtype), etype="follows")
    same_graph(RemoveSelfLoop()(ours), dgl.RemoveSelfLoop()(theirs))


@pytest.mark.parametrize("keep", [True, False])
def test_add_metapaths_equals_dgl(dgl, keep):
    ours, theirs = hetero_pair(dgl)
    paths = {"reaches": [("user", "plays", "game"), ("game", "rev", "user")],
             "twice": [("user", "follows", "user")] * 2 + [("user", "plays", "game")]}
    expected = dgl.AddMetaPaths(paths, keep_orig_edges=keep)(theirs)
    same_graph(AddMetaPaths(paths, keep_orig_edges=keep)(ours), expected)
    # edge type names as well (DGL 2.1 reads a name's first letter as the node type there)
    named = {"reaches": ["plays", "rev"], "twice": ["follows", "follows", "plays"]}
    same_graph(AddMetaPaths(named, keep_orig_edges=keep)(ours), expected)
    with pytest.raises(DGLError, match="metapaths must be a dict"):
        AddMetaPaths([("user", "plays", "game")])
    with pytest.raises(DGLError):
        AddMetaPaths({"bad": ["plays", "follows"]})(ours)   # game -> user -> ... does not chain
