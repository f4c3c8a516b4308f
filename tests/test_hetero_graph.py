"""HeteroGraph: construction and validation, features, homogeneous round trip, PyG and DGL round
trips, and Graph.from_dgl refusing typed graphs."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

import unigraph
from unigraph import Graph, HeteroGraph
from unigraph.hetero import EDGE_TYPE, NODE_TYPE, from_homogeneous
from hetero_strategies import hetero_graphs

WRITES = ("author", "writes", "paper")
CITES = ("paper", "cites", "paper")


def small() -> HeteroGraph:
    return HeteroGraph({WRITES: torch.tensor([[0, 1, 1], [2, 0, 1]]), CITES: ([0, 2], [1, 1])},
                       {"author": 2, "paper": 3, "venue": 4})


def assert_same(a: HeteroGraph, b: HeteroGraph, order_matters: bool = True) -> None:
    """Same types, counts, relations (edges in order) and features."""
    if order_matters:
        assert a.node_types == b.node_types and a.relations == b.relations
    assert set(a.node_types) == set(b.node_types) and set(a.relations) == set(b.relations)
    for t in a.node_types:
        assert a.num_nodes(t) == b.num_nodes(t)
        assert set(a.ndata[t]) == set(b.ndata[t])
        for key in a.ndata[t]:
            assert torch.equal(a.ndata[t][key], b.ndata[t][key])
    for r in a.relations:
        assert torch.equal(a[r].edge_index, b[r].edge_index), r
        assert set(a.edata[r]) == set(b.edata[r])
        for key in a.edata[r]:
            assert torch.equal(a.edata[r][key], b.edata[r][key])


# ---------------------------------------------------------------------- construction
def test_types_counts_and_relation_graphs():
    hg = small()
    assert hg.node_types == ["author", "paper", "venue"]
    assert hg.relations == [WRITES, CITES]
    assert hg.num_nodes_dict == {"author": 2, "paper": 3, "venue": 4} and hg.num_nodes() == 9
    assert hg.num_edges() == 5 and hg.num_edges("cites") == 2
    writes, cites = hg[WRITES], hg["cites"]
    assert writes.is_bipartite and (writes.num_src_nodes, writes.num_dst_nodes) == (2, 3)
    assert not cites.is_bipartite and cites.num_nodes == 3
    assert torch.equal(cites.edge_index, torch.tensor([[0, 2], [1, 1]]))
    assert hg.metadata() == (hg.node_types, hg.relations)


def test_counts_inferred_per_type_from_every_relation():
    hg = HeteroGraph({("a", "x", "b"): torch.tensor([[4], [0]]), ("b", "y", "a"): torch.tensor([[2], [1]])})
    assert hg.num_nodes_dict == {"a": 5, "b": 3}


def test_empty_relation_and_type_without_nodes():
    hg = HeteroGraph({("a", "r", "b"): torch.empty(2, 0, dtype=torch.int64)}, {"a": 0, "b": 2})
    assert hg.num_edges() == 0 and hg.num_nodes("a") == 0 and hg["r"].num_dst_nodes == 2


@pytest.mark.parametrize("edges, counts, error, words", [
    ({WRITES: torch.tensor([[2], [0]])}, {"author": 2, "paper": 3}, ValueError,
     ["('author', 'writes', 'paper')", "'author' has 2 nodes", "index 2", "0..1"]),
    ({WRITES: torch.tensor([[0], [3]])}, {"author": 2, "paper": 3}, ValueError, ["'paper' has 3", "index 3", "0..2"]),
    ({WRITES: torch.tensor([[-1], [0]])}, None, ValueError, ["negative index -1"]),
    ({WRITES: torch.tensor([[0.0], [1.0]])}, None, TypeError, ["writes", "integers"]),
    ({WRITES: torch.tensor([[0, 1]])}, None, ValueError, ["shape [2, E]"]),
    ({("author", "writes"): torch.tensor([[0], [0]])}, None, TypeError, ["(src_type, name, dst_type)"]),
    ({("author", "", "paper"): torch.tensor([[0], [0]])}, None, TypeError, ["its name", "non-empty str"]),
    ({WRITES: torch.tensor([[0], [0]])}, {"author": -1}, ValueError, ["num_nodes['author']", ">= 0"]),
    ({WRITES: torch.tensor([[0], [0]])}, {"author": 1.5}, TypeError, ["num_nodes['author']", "int"]),
    ({WRITES: (torch.tensor([0, 1]), torch.tensor([0]))}, None, ValueError, ["equal length"]),
    ([(WRITES, torch.tensor([[0], [0]]))], None, TypeError, ["dict"]),
])
def test_bad_input_is_named(edges, counts, error, words):
    with pytest.raises(error) as info:
        HeteroGraph(edges, counts)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_relation_lookup():
    hg = HeteroGraph({("a", "r", "b"): [[0], [0]], ("b", "r", "a"): [[0], [0]], ("a", "s", "a"): [[0], [0]]})
    assert hg["s"] is hg[("a", "s", "a")]
    with pytest.raises(KeyError, match="several relations"):
        hg["r"]
    with pytest.raises(KeyError, match="no relation named 'q'"):
        hg["q"]
    with pytest.raises(KeyError, match="no relation"):
        hg[("a", "q", "b")]


def test_features_checked_per_type_and_relation():
    hg = small()
    hg.ndata["paper"]["x"] = torch.randn(3, 4)
    with pytest.raises(ValueError, match="3 nodes of type 'paper'"):
        hg.ndata["paper"]["y"] = torch.randn(2)
    with pytest.raises(KeyError, match="valid keys"):
        hg.ndata["topic"]
    hg.edata[WRITES]["w"] = torch.ones(3)
    with pytest.raises(ValueError, match="3 edges"):
        hg.edata["writes"]["v"] = torch.ones(4)
    assert hg["writes"].edata["w"] is hg.edata[WRITES]["w"]
    assert set(hg.collect("x")) == {"paper"}


def test_add_reverse_relations_flips_edges_and_keeps_features():
    hg = small()
    hg.edata[WRITES]["w"] = torch.tensor([1.0, 2.0, 3.0])
    hg.ndata["paper"]["x"] = torch.randn(3, 2)
    both = hg.add_reverse_relations()
    assert both.relations == [WRITES, CITES, ("paper", "rev_writes", "author"), ("paper", "rev_cites", "paper")]
    assert torch.equal(both["rev_writes"].edge_index, hg[WRITES].edge_index.flip(0))
    assert torch.equal(both.edata["rev_writes"]["w"], hg.edata[WRITES]["w"])
    assert torch.equal(both.ndata["paper"]["x"], hg.ndata["paper"]["x"])
    both.edata[WRITES]["new"] = torch.zeros(3)
    assert "new" not in hg.edata[WRITES]          # the copy has its own feature stores
    with pytest.raises(ValueError, match="already has"):
        both.add_reverse_relations()


# ---------------------------------------------------------------------- homogeneous
@given(hetero_graphs(), st.integers(0, 2**16))
def test_homogeneous_round_trip(hg, seed):
    gen = torch.Generator().manual_seed(seed)
    for t in hg.node_types:
        hg.ndata[t]["x"] = torch.randn(hg.num_nodes(t), 3, generator=gen)
    for r in hg.relations:
        hg.edata[r]["w"] = torch.randn(hg.num_edges(r), generator=gen)
    g = hg.to_homogeneous(node_features=["x"], edge_features=["w"])
    assert g.num_nodes == hg.num_nodes() and g.num_edges == hg.num_edges()
    offsets = {}
    start = 0
    for tid, t in enumerate(hg.node_types):
        offsets[t] = start
        assert bool((g.ndata[NODE_TYPE][start:start + hg.num_nodes(t)] == tid).all())
        start += hg.num_nodes(t)
    for rid, (s, name, d) in enumerate(hg.relations):  # every edge keeps its endpoints
        mine = g.edata[EDGE_TYPE] == rid
        assert torch.equal(g.src[mine], hg[(s, name, d)].src + offsets[s])
        assert torch.equal(g.dst[mine], hg[(s, name, d)].dst + offsets[d])
    back = HeteroGraph.from_homogeneous(g, hg.node_types, hg.relations)
    assert_same(back, hg)
    # the same nodes in another order (not grouped by type) give the same typed graph
    perm = torch.randperm(g.num_nodes, generator=gen)
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(g.num_nodes)
    shuffled = Graph(torch.stack([inverse[g.src], inverse[g.dst]]), num_nodes=g.num_nodes)
    shuffled.ndata[NODE_TYPE] = g.ndata[NODE_TYPE][perm]
    shuffled.ndata["x"] = g.ndata["x"][perm]
    shuffled.edata[EDGE_TYPE] = g.edata[EDGE_TYPE]
    again = from_homogeneous(shuffled, hg.node_types, hg.relations)
    for t in hg.node_types:  # nodes of a type keep their relative order, so features follow
        mine = (shuffled.ndata[NODE_TYPE] == hg.node_types.index(t)).nonzero().flatten()
        assert torch.equal(again.ndata[t]["x"], shuffled.ndata["x"][mine])


def test_from_homogeneous_refuses_edges_between_wrong_types():
    g = Graph(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    g.ndata[NODE_TYPE] = torch.tensor([0, 1])
    g.edata[EDGE_TYPE] = torch.tensor([0, 0])
    with pytest.raises(ValueError, match="1 of its edges join nodes of other types"):
        from_homogeneous(g, ["a", "b"], [("a", "r", "b")])
    g.edata[EDGE_TYPE] = torch.tensor([0, 3])
    with pytest.raises(ValueError, match="holds 3, outside the 1 relations"):
        from_homogeneous(g, ["a", "b"], [("a", "r", "b")])


def test_to_homogeneous_needs_the_feature_everywhere():
    hg = small()
    hg.ndata["paper"]["x"] = torch.randn(3, 2)
    with pytest.raises(ValueError, match=r"\['author', 'venue'\] have no feature 'x'"):
        hg.to_homogeneous(node_features=["x"])


# ---------------------------------------------------------------------- PyG and DGL
@given(hetero_graphs(), st.integers(0, 2**16))
def test_pyg_round_trip(hg, seed):
    pytest.importorskip("torch_geometric")
    gen = torch.Generator().manual_seed(seed)
    for t in hg.node_types:
        hg.ndata[t]["x"] = torch.randn(hg.num_nodes(t), 2, generator=gen)
    for r in hg.relations:
        hg.edata[r]["edge_attr"] = torch.randn(hg.num_edges(r), 3, generator=gen)
    data = hg.to_pyg()
    assert data.node_types == hg.node_types and data.edge_types == hg.relations
    assert_same(HeteroGraph.from_pyg(data), hg)


def test_from_pyg_reads_features_and_counts():
    from torch_geometric.data import HeteroData
    data = HeteroData()
    data["paper"].x = torch.randn(4, 3)
    data["paper"].y = torch.tensor([0, 1, 0, 1])
    data["author"].num_nodes = 2
    data["author", "writes", "paper"].edge_index = torch.tensor([[0, 1], [3, 3]])
    data["author", "writes", "paper"].edge_attr = torch.randn(2, 5)
    hg = HeteroGraph.from_pyg(data)
    assert hg.num_nodes_dict == {"paper": 4, "author": 2}
    assert torch.equal(hg.ndata["paper"]["y"], data["paper"].y)
    assert torch.equal(hg.edata["writes"]["edge_attr"], data["writes"].edge_attr)
    with pytest.raises(TypeError, match="Graph.from_pyg"):
        HeteroGraph.from_pyg(torch.zeros(2, 1))


@given(hetero_graphs(min_relations=1), st.integers(0, 2**16))
def test_dgl_round_trip(dgl, hg, seed):
    gen = torch.Generator().manual_seed(seed)
    for t in hg.node_types:
        hg.ndata[t]["x"] = torch.randn(hg.num_nodes(t), 2, generator=gen)
    for r in hg.relations:
        hg.edata[r]["w"] = torch.randn(hg.num_edges(r), generator=gen)
    dg = hg.to_dgl()
    assert sorted(dg.canonical_etypes) == sorted(hg.relations)
    for t in hg.node_types:
        assert dg.num_nodes(t) == hg.num_nodes(t)
    assert_same(HeteroGraph.from_dgl(dg), hg, order_matters=False)  # DGL sorts types by name


def test_graph_from_dgl_refuses_typed_graphs(dgl):
    two_types = dgl.heterograph({("author", "writes", "paper"): (torch.tensor([0, 1]), torch.tensor([1, 0]))})
    one_relation = Graph.from_dgl(two_types)  # one relation between two types: a bipartite Graph
    assert one_relation.is_bipartite and one_relation.edge_index.tolist() == [[0, 1], [1, 0]]
    two_relations = dgl.heterograph({("n", "a", "n"): (torch.tensor([0]), torch.tensor([1])),
                                     ("n", "b", "n"): (torch.tensor([1]), torch.tensor([0]))})
    with pytest.raises(ValueError, match="edge types.*HeteroGraph.from_dgl"):
        Graph.from_dgl(two_relations)
    extra_type = dgl.heterograph({("n", "a", "n"): (torch.tensor([0]), torch.tensor([1]))},
                                 num_nodes_dict={"n": 2, "m": 3})
    with pytest.raises(ValueError, match="HeteroGraph.from_dgl"):
        Graph.from_dgl(extra_type)
    hg = HeteroGraph.from_dgl(two_types)                        # what the message points to works
    assert hg.num_nodes_dict == {"author": 2, "paper": 2}
    one_named_type = dgl.heterograph({("paper", "cites", "paper"): (torch.tensor([0, 2]), torch.tensor([1, 1]))})
    assert torch.equal(Graph.from_dgl(one_named_type).edge_index, torch.tensor([[0, 2], [1, 1]]))
    with pytest.raises(ValueError, match="not a DGL block"):
        HeteroGraph.from_dgl(dgl.create_block((torch.tensor([0]), torch.tensor([0])), 2, 1))


def test_exported_from_unigraph():
    assert unigraph.HeteroGraph is HeteroGraph


def test_copies_keep_features_and_refuse_mixed_devices():
    hg = small()
    hg.ndata["paper"]["x"] = torch.randn(3, 2)
    hg.edata["cites"]["w"] = torch.randn(2)
    moved = hg.to("cpu").prepare()
    assert moved is not hg and torch.equal(moved.ndata["paper"]["x"], hg.ndata["paper"]["x"])
    assert torch.equal(moved.edata["cites"]["w"], hg.edata["cites"]["w"]) and moved["cites"].is_prepared()
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="one device"):
            HeteroGraph({WRITES: torch.tensor([[0], [0]]), CITES: torch.tensor([[0], [0]]).cuda()})
