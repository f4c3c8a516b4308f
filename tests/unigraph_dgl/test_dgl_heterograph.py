"""unigraph.dgl's heterographs against the real DGL: types, typed views and dict data, relation
graphs that share the node features, message passing per relation and across relations, and the
homogeneous round trip."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl

DATA = {("user", "follows", "user"): (torch.tensor([0, 1, 2, 1]), torch.tensor([1, 1, 0, 2])),
        ("user", "plays", "game"): (torch.tensor([0, 2, 2, 1]), torch.tensor([1, 0, 1, 1])),
        ("dev", "makes", "game"): (torch.tensor([0, 1]), torch.tensor([1, 1]))}


def both(dgl):
    graphs = udgl.heterograph(DATA, {"game": 3}), dgl.heterograph(DATA, {"game": 3, "user": 3, "dev": 2})
    gen = torch.Generator().manual_seed(0)
    for ntype, count in (("user", 3), ("game", 3), ("dev", 2)):
        value = torch.randn(count, 2, dtype=torch.float64, generator=gen)
        for g in graphs:
            g.nodes[ntype].data["h"] = value
    return graphs


def test_types_counts_and_views(dgl):
    ours, theirs = both(dgl)
    assert (ours.ntypes, ours.etypes, ours.canonical_etypes) == (theirs.ntypes, theirs.etypes, theirs.canonical_etypes)
    assert [ours.num_nodes(t) for t in ours.ntypes] == [theirs.num_nodes(t) for t in theirs.ntypes]
    assert ours.num_nodes() == theirs.num_nodes() and ours.num_edges("plays") == theirs.num_edges("plays")
    assert set(ours.ndata["h"]) == set(theirs.ndata["h"])
    for etype in theirs.canonical_etypes:
        for form in ("uv", "all"):
            for a, b in zip(ours.edges(form=form, etype=etype), theirs.edges(form=form, etype=etype)):
                assert torch.equal(a, b)
    ours["plays"].edata["w"] = torch.ones(4)  # a relation graph writes into the heterograph's stores
    ours["plays"].dstdata["z"] = torch.zeros(3)
    assert torch.equal(ours.edges["plays"].data["w"], torch.ones(4))
    assert torch.equal(ours.nodes["game"].data["z"], torch.zeros(3))
    assert ours["follows"].ndata["h"] is ours.nodes["user"].data["h"]
    with pytest.raises(udgl.DGLError, match="edge type 'nope'"):
        ours["nope"]


def test_message_passing_per_relation_and_across(dgl):
    ours, theirs = both(dgl)
    for module, g in ((udgl, ours), (dgl, theirs)):
        fn = module.function
        g.update_all(fn.copy_u("h", "m"), fn.sum("m", "one"), etype="plays")
        g.update_all(fn.copy_u("h", "m"), fn.max("m", "all"))
        g.multi_update_all({"plays": (fn.copy_u("h", "m"), fn.mean("m", "multi")),
                            "makes": (fn.copy_u("h", "m"), fn.sum("m", "multi"))}, "sum")
        g.apply_edges(fn.u_dot_v("h", "h", "score"), etype="follows")
    for key in ("one", "all", "multi"):
        for ntype in theirs.ntypes:
            if key in theirs.nodes[ntype].data:
                torch.testing.assert_close(ours.nodes[ntype].data[key], theirs.nodes[ntype].data[key])
    torch.testing.assert_close(ours.edges["follows"].data["score"], theirs.edges["follows"].data["score"])


def test_homogeneous_round_trip_matches_dgl(dgl):
    ours, theirs = both(dgl)
    for g in (ours, theirs):
        for etype in g.canonical_etypes:
            g.edges[etype].data["w"] = torch.arange(g.num_edges(etype), dtype=torch.float64)
    a, b = udgl.to_homogeneous(ours, ndata=["h"], edata=["w"]), dgl.to_homogeneous(theirs, ndata=["h"], edata=["w"])
    for x, y in zip(a.edges(), b.edges()):
        assert torch.equal(x, y)
    for key in (udgl.NTYPE, udgl.NID, "h"):
        torch.testing.assert_close(a.ndata[key], b.ndata[key])
    for key in (udgl.ETYPE, udgl.EID, "w"):
        torch.testing.assert_close(a.edata[key], b.edata[key])
    back = udgl.to_heterogeneous(a, ours.ntypes, ours.etypes)
    assert back.canonical_etypes == ours.canonical_etypes
    for etype in ours.canonical_etypes:
        torch.testing.assert_close(back.edges[etype].data["w"], ours.edges[etype].data["w"])
        for x, y in zip(back.edges(etype=etype), ours.edges(etype=etype)):
            assert torch.equal(x, y)


def test_one_relation_is_a_unigraph_graph():
    g = udgl.heterograph({("user", "plays", "game"): ([0, 1], [2, 0])}, {"user": 2, "game": 3})
    assert isinstance(g, udgl.DGLGraph) and g.is_bipartite and not g.is_block
    assert (g.num_nodes("user"), g.num_nodes("game"), g.num_nodes()) == (2, 3, 5)
    g.nodes["user"].data["x"] = torch.ones(2, 1)
    g.update_all(udgl.function.copy_u("x", "m"), udgl.function.sum("m", "y"))
    assert g.nodes["game"].data["y"].flatten().tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(udgl.DGLError, match="node type name must be given"):
        g.nodes[[0]].data["x"]


def test_batch_of_heterographs_matches_dgl(dgl):
    # DGL's batch of heterographs of one schema: ids offset per node type, features concatenated
    # per type and relation, batch_num_nodes/edges per type
    ours, theirs = both(dgl)
    smaller = {cet: (src[:2], dst[:2]) for cet, (src, dst) in DATA.items()}
    counts = {"user": 3, "game": 2, "dev": 2}
    extra = [udgl.heterograph(smaller, counts), dgl.heterograph(smaller, counts)]
    for g in extra:
        for ntype, count in counts.items():
            g.nodes[ntype].data["h"] = torch.arange(2 * count, dtype=torch.float64).view(count, 2)
        g.edges["plays"].data["w"] = torch.ones(2)
    ours.edges["plays"].data["w"] = theirs.edges["plays"].data["w"] = torch.arange(4.0)
    mine, reference = udgl.batch([ours, extra[0]]), dgl.batch([theirs, extra[1]])
    assert mine.batch_size == reference.batch_size == 2
    for ntype in reference.ntypes:
        assert torch.equal(mine.batch_num_nodes(ntype), reference.batch_num_nodes(ntype))
        assert torch.equal(mine.nodes[ntype].data["h"], reference.nodes[ntype].data["h"])
    for etype in reference.canonical_etypes:
        assert torch.equal(mine.batch_num_edges(etype), reference.batch_num_edges(etype))
        for a, b in zip(mine.edges(form="all", etype=etype), reference.edges(form="all", etype=etype)):
            assert torch.equal(a, b)
    assert torch.equal(mine.edges["plays"].data["w"], reference.edges["plays"].data["w"])
    with pytest.raises(udgl.DGLError, match="one schema"):
        udgl.batch([ours, udgl.heterograph({("user", "follows", "user"): smaller[("user", "follows", "user")],
                                            ("user", "rates", "game"): smaller[("user", "plays", "game")]})])


def test_unbatch_of_heterographs_gives_the_parts_back(dgl):
    ours, theirs = both(dgl)
    ours.edges["plays"].data["w"] = theirs.edges["plays"].data["w"] = torch.arange(4.0)
    parts = udgl.unbatch(udgl.batch([ours, ours]))
    reference = dgl.unbatch(dgl.batch([theirs, theirs]))
    assert len(parts) == len(reference) == 2
    for mine, expected in zip(parts, reference):
        assert [mine.num_nodes(t) for t in mine.ntypes] == [expected.num_nodes(t) for t in expected.ntypes]
        for etype in expected.canonical_etypes:
            for a, b in zip(mine.edges(form="all", etype=etype), expected.edges(form="all", etype=etype)):
                assert torch.equal(a, b)
        for ntype in expected.ntypes:
            assert torch.equal(mine.nodes[ntype].data["h"], expected.nodes[ntype].data["h"])
        assert torch.equal(mine.edges["plays"].data["w"], expected.edges["plays"].data["w"])
