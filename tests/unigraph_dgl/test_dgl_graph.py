"""unigraph.dgl's DGLGraph against the real DGL: structure queries, mutations (and that they drop
every cached format), feature views with initializers, subgraphs, blocks and batches."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
from unigraph import function as fn

SRC = [0, 0, 1, 2, 2, 3, 3, 4, 1, 1]
DST = [1, 2, 2, 0, 3, 1, 4, 0, 2, 2]  # a multi-edge 1 -> 2 (three times) and node 5 isolated


def both(dgl, idtype=torch.int64):
    edges = (torch.tensor(SRC, dtype=idtype), torch.tensor(DST, dtype=idtype))
    return udgl.graph(edges, num_nodes=6), dgl.graph(edges, num_nodes=6)


def same(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), (a, b)
    else:
        assert a == b, (a, b)


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_structure_queries_match_dgl(dgl, idtype):
    ours, theirs = both(dgl, idtype)
    assert ours.idtype == theirs.idtype == idtype
    for form in ("uv", "eid", "all"):
        for order in ("eid", "srcdst"):
            same(ours.edges(form=form, order=order), theirs.edges(form=form, order=order))
    nodes = torch.tensor([2, 0, 5], dtype=idtype)
    same(ours.in_degrees(nodes), theirs.in_degrees(nodes))
    same(ours.out_degrees(), theirs.out_degrees())
    assert ours.in_degrees(2) == theirs.in_degrees(2)
    same(ours.in_edges(nodes, form="all"), theirs.in_edges(nodes, form="all"))
    same(ours.out_edges(nodes, form="eid"), theirs.out_edges(nodes, form="eid"))
    same(ours.successors(1), theirs.successors(1))
    same(ours.predecessors(2), theirs.predecessors(2))
    u, v = torch.tensor([0, 3, 1], dtype=idtype), torch.tensor([2, 4, 2], dtype=idtype)
    same(ours.edge_ids(u, v), theirs.edge_ids(u, v))
    same(ours.edge_ids(1, 2, return_uv=True), theirs.edge_ids(1, 2, return_uv=True))
    u, v = torch.tensor([0, 2, 5], dtype=idtype), torch.tensor([1, 1, 0], dtype=idtype)
    same(ours.has_edges_between(u, v), theirs.has_edges_between(u, v))
    same(ours.find_edges(torch.tensor([3, 9], dtype=idtype)), theirs.find_edges(torch.tensor([3, 9], dtype=idtype)))
    assert ours.is_multigraph == theirs.is_multigraph is True
    assert ours.num_nodes() == ours.number_of_nodes() == 6 and ours.num_edges() == 10
    assert (ours.ntypes, ours.etypes, ours.canonical_etypes) == (theirs.ntypes, theirs.etypes, theirs.canonical_etypes)
    with pytest.raises(udgl.DGLError, match="no edge 5 -> 0"):
        ours.edge_ids(5, 0)


def test_mutations_rebuild_the_structure_and_drop_cached_formats(dgl):
    ours, theirs = both(dgl)
    x = torch.randn(6, 3, dtype=torch.float64)
    ours.ndata["x"], theirs.ndata["x"] = x, x
    ours.update_all(fn.copy_u("x", "m"), fn.sum("m", "s"))  # builds and caches the formats
    assert ours.edge_ids(1, 2) == 2 and ours.is_multigraph  # and the sorted pair index (a memo)
    for g in (ours, theirs):
        g.ndata.pop("s", None)
        g.add_nodes(2, data={"x": torch.ones(2, 3, dtype=torch.float64)})
        g.add_edges(torch.tensor([6, 7, 5]), torch.tensor([0, 0, 7]))
        g.remove_edges(torch.tensor([0, 4]))
    same(ours.edges(), theirs.edges())
    same(ours.edge_ids(*theirs.edges()), theirs.edge_ids(*theirs.edges()))
    torch.testing.assert_close(ours.ndata["x"], theirs.ndata["x"])
    ours.update_all(fn.copy_u("x", "m"), fn.sum("m", "s"))
    theirs.update_all(dgl.function.copy_u("x", "m"), dgl.function.sum("m", "s"))
    torch.testing.assert_close(ours.ndata["s"], theirs.ndata["s"])
    fresh = udgl.graph(ours.edges(), num_nodes=8)
    fresh.ndata["x"] = ours.ndata["x"]
    fresh.update_all(fn.copy_u("x", "m"), fn.sum("m", "s"))
    torch.testing.assert_close(ours.ndata["s"], fresh.ndata["s"], rtol=0, atol=0)
    for g in (ours, theirs):
        g.remove_nodes(torch.tensor([1]))
    same(ours.edges(), theirs.edges())
    torch.testing.assert_close(ours.ndata["x"], theirs.ndata["x"])


def test_row_views_initializers_and_local_var(dgl):
    ours, theirs = both(dgl)
    for g in (ours, theirs):
        g.set_n_initializer(lambda shape, dtype, ctx, ids: torch.full(shape, 7.0, dtype=dtype))
        g.nodes[torch.tensor([1, 3])].data["h"] = torch.ones(2, 2)
        g.edges[torch.tensor([0]), torch.tensor([2])].data["w"] = torch.ones(1, 4)
        local = g.local_var()
        local.nodes[[0]].data["h"] = torch.zeros(1, 2)
        local.ndata["new"] = torch.zeros(6)
    torch.testing.assert_close(ours.ndata["h"], theirs.ndata["h"])
    torch.testing.assert_close(ours.edata["w"], theirs.edata["w"])
    assert "new" not in ours.ndata and ours.ndata["h"][0, 0] == 7.0
    torch.testing.assert_close(ours.nodes[[3, 0]].data["h"], theirs.nodes[[3, 0]].data["h"])


def test_subgraphs_blocks_and_batches_match_dgl(dgl):
    ours, theirs = both(dgl)
    x = torch.randn(6, 2)
    ours.ndata["x"], theirs.ndata["x"] = x, x
    ours.edata["w"] = theirs.edata["w"] = torch.arange(10.0)
    for name, args in (("subgraph", ([3, 1, 2],)), ("in_subgraph", ([2, 0],)), ("out_subgraph", ([1],)),
                       ("edge_subgraph", ([9, 0, 4],))):
        a, b = getattr(ours, name)(*args), getattr(theirs, name)(*args)
        same(a.edges(), b.edges())
        same(a.edata[udgl.EID], b.edata[dgl.EID])
        torch.testing.assert_close(a.edata["w"], b.edata["w"])
        if name in ("subgraph", "edge_subgraph"):
            same(a.ndata[udgl.NID], b.ndata[dgl.NID])
    for dst in (None, torch.tensor([2, 0])):  # a sampler's use: the in-edges of the seeds, then the block
        a = udgl.to_block(ours if dst is None else ours.in_subgraph(dst), dst)
        b = dgl.to_block(theirs if dst is None else theirs.in_subgraph(dst), dst)
        assert (a.num_src_nodes(), a.num_dst_nodes()) == (b.num_src_nodes(), b.num_dst_nodes())
        same(a.srcdata[udgl.NID], b.srcdata[dgl.NID])
        same(a.dstdata[udgl.NID], b.dstdata[dgl.NID])
        same(a.edges(), b.edges())
        same(a.edata[udgl.EID], b.edata[dgl.EID])
        torch.testing.assert_close(a.srcdata["x"], b.srcdata["x"])
        assert a.is_block and a.srcnodes().numel() == a.num_src_nodes()
        assert (a.ntypes, a.srctypes, a.dsttypes) == (b.ntypes, b.srctypes, b.dsttypes)   # ['_N', '_N'], ...
        assert a.num_nodes() == b.num_nodes()
    parts = [udgl.graph(([0, 1], [1, 2])), udgl.add_self_loop(udgl.graph(([0], [1])))]
    batched = udgl.batch(parts)
    reference = dgl.batch([dgl.graph(([0, 1], [1, 2])), dgl.add_self_loop(dgl.graph(([0], [1])))])
    same(batched.edges(), reference.edges())
    same(batched.batch_num_nodes(), reference.batch_num_nodes())
    for a, b in zip(udgl.unbatch(batched), dgl.unbatch(reference)):
        same(a.edges(), b.edges())
    same(udgl.to_bidirected(ours).edges(), dgl.to_bidirected(theirs).edges())
    same(udgl.remove_self_loop(udgl.add_self_loop(ours)).edges(), ours.edges())


def test_bad_ids_are_refused_before_anything_runs():
    g = udgl.graph(([0, 1], [1, 2]))
    with pytest.raises(udgl.DGLError, match="outside 0..2"):
        g.in_degrees(torch.tensor([3]))
    with pytest.raises(TypeError, match="integers"):
        g.nodes[torch.tensor([0.5])].data["h"] = torch.ones(1)
    with pytest.raises(udgl.DGLError, match="2 rows are written"):
        g.nodes[[0, 1]].data["h"] = torch.ones(3)
    with pytest.raises(ValueError, match="num_nodes=2"):
        udgl.graph(([0, 1], [1, 2]), num_nodes=2)


def test_pinning_is_not_offered_and_says_so():
    g = udgl.graph(([0, 1], [1, 2]))
    assert g.is_pinned() is False and g.unpin_memory_() is g   # unpinning a graph that is not pinned: a no-op
    with pytest.raises(udgl.DGLError, match="does not pin"):
        g.pin_memory_()
