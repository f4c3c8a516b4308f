"""Typed neighbour sampling: block structure, every sampled edge exists, fanouts per relation,
determinism, and layers on full-fanout blocks computing exactly what they compute on the graph."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

import unigraph
from unigraph import HeteroConv, HeteroGraph, HGTConv, RGCNConv
from unigraph.hetero import HeteroNeighborSampler
from hetero_strategies import hetero_graphs, random_features


def academic(seed: int = 0) -> HeteroGraph:
    gen = torch.Generator().manual_seed(seed)
    counts = {"paper": 30, "author": 20, "field": 5}
    edges = {("author", "writes", "paper"): torch.stack([torch.randint(0, 20, (60,), generator=gen),
                                                         torch.randint(0, 30, (60,), generator=gen)]),
             ("paper", "cites", "paper"): torch.randint(0, 30, (2, 80), generator=gen),
             ("field", "about", "paper"): torch.stack([torch.randint(0, 5, (40,), generator=gen),
                                                       torch.randint(0, 30, (40,), generator=gen)])}
    return HeteroGraph(edges, counts).add_reverse_relations()


def check_blocks(hg: HeteroGraph, batch, sampler: HeteroNeighborSampler) -> None:
    """Block chaining, input nodes, every edge real and within its fanout."""
    fanouts = sampler.relation_fanouts(hg)
    for t in hg.node_types:
        seeds = batch.seeds.get(t, torch.empty(0, dtype=torch.int64))
        assert torch.equal(batch.input_nodes[t][: seeds.numel()], seeds)
        assert batch.input_nodes[t].unique().numel() == batch.input_nodes[t].numel()      # each node once
        assert batch.blocks[0].num_src_nodes(t) == batch.input_nodes[t].numel()
        assert batch.blocks[-1].num_dst_nodes(t) == seeds.numel()
    for earlier, later in zip(batch.blocks, batch.blocks[1:]):
        assert earlier.num_dst_nodes_dict == later.num_src_nodes_dict
    for layer, block in enumerate(batch.blocks):
        assert block.is_block and block.relations == hg.relations
        for relation, graph in block.items():
            s, _, d = relation
            assert (graph.num_src_nodes, graph.num_dst_nodes) == (block.num_src_nodes(s), block.num_dst_nodes(d))
            original = hg[relation]
            eid = graph.edata["eid"]
            assert torch.equal(batch.input_nodes[s][graph.src], original.src[eid]), relation       # edge exists
            assert torch.equal(batch.input_nodes[d][graph.dst], original.dst[eid]), relation
            degree = original.in_degrees()[batch.input_nodes[d][: graph.num_dst_nodes]]
            fanout = fanouts[relation][layer]
            taken = graph.in_degrees()
            if fanout == -1:
                assert torch.equal(taken, degree)
            elif sampler.replace:
                assert torch.equal(taken, torch.where(degree > 0, fanout, 0))
            else:
                assert torch.equal(taken, degree.clamp(max=fanout))
                for v in range(graph.num_dst_nodes):                  # without replacement: distinct edges
                    mine = eid[graph.dst == v]
                    assert mine.unique().numel() == mine.numel()


@given(hg=hetero_graphs(min_relations=1), data=st.data())
def test_blocks_on_random_typed_graphs(hg, data):
    layers = data.draw(st.integers(1, 3), label="layers")
    fanouts = {r: [data.draw(st.sampled_from([-1, 0, 1, 2, 3])) for _ in range(layers)] for r in hg.relations}
    replace = data.draw(st.booleans(), label="replace")
    seed_type = data.draw(st.sampled_from(hg.node_types), label="seed type")
    n = hg.num_nodes(seed_type)
    seeds = data.draw(st.lists(st.integers(0, max(n - 1, 0)), unique=True, max_size=n), label="seeds") if n else []
    sampler = HeteroNeighborSampler(fanouts, replace=replace, return_eids=True, seed=1)
    batch = sampler.sample(hg, {seed_type: torch.tensor(seeds, dtype=torch.int64)}, key=7)
    assert len(batch.blocks) == layers
    check_blocks(hg, batch, sampler)
    again = sampler.sample(hg, {seed_type: torch.tensor(seeds, dtype=torch.int64)}, key=7)
    for a, b in zip(batch.blocks, again.blocks):                      # deterministic under a key
        for relation in hg.relations:
            assert torch.equal(a[relation].edge_index, b[relation].edge_index)


def test_per_relation_fanouts_by_name_and_pyg_reading():
    hg = academic()
    sampler = HeteroNeighborSampler({"writes": [2, 3], "cites": [0, 1], ("field", "about", "paper"): [1, 1],
                                     "rev_writes": [1, 0], "rev_cites": [0, 0], "rev_about": [2, 2]},
                                    return_eids=True)
    batch = sampler.sample(hg, {"paper": torch.tensor([3, 7, 11])}, key=0)
    check_blocks(hg, batch, sampler)
    last = batch.blocks[-1]                                            # the hop next to the seeds: last entry
    assert int(last["writes"].in_degrees().max()) <= 3 and last["rev_writes"].num_edges == 0
    assert batch.blocks[0]["cites"].num_edges == 0


def test_same_seed_same_batches_and_trees_independent_of_other_seeds():
    hg = academic(1)
    first = HeteroNeighborSampler([3, 2], seed=5)
    second = HeteroNeighborSampler([3, 2], seed=5)
    for _ in range(2):
        a, b = first.sample(hg, {"paper": torch.arange(6)}), second.sample(hg, {"paper": torch.arange(6)})
        for relation in hg.relations:
            assert torch.equal(a.blocks[0][relation].edge_index, b.blocks[0][relation].edge_index)
    alone = HeteroNeighborSampler([2], return_eids=True).sample(hg, {"paper": torch.tensor([4])}, key=3)
    together = HeteroNeighborSampler([2], return_eids=True).sample(hg, {"paper": torch.tensor([9, 4, 1])}, key=3)
    for relation in hg.relations:
        if relation[2] != "paper":
            continue
        mine = alone.blocks[0][relation]
        theirs = together.blocks[0][relation]
        assert torch.equal(mine.edata["eid"], theirs.edata["eid"][theirs.dst == 1])   # seed 4 is row 1 there


def test_layers_on_full_fanout_blocks_equal_the_whole_graph():
    hg = academic(2)
    torch.manual_seed(0)
    x = random_features(hg, 6, torch.Generator().manual_seed(0))
    rgcn = [RGCNConv(6, 6, hg.relations, num_bases=3).double(), RGCNConv(6, 4, hg.relations, aggr="max").double()]
    hgt = [HGTConv(6, 6, hg.metadata(), heads=2).double(), HGTConv(6, 4, hg.metadata(), heads=2).double()]
    sage = [HeteroConv({r: unigraph.SAGEConv(6, w) for r in hg.relations}, aggr="mean").double() for w in (6, 4)]
    seeds = torch.tensor([5, 0, 17, 29])
    batch = HeteroNeighborSampler([-1, -1]).sample(hg, {"paper": seeds})
    inputs = {t: x[t][batch.input_nodes[t]] for t in hg.node_types}
    for name, layers in (("RGCNConv", rgcn), ("HGTConv", hgt), ("HeteroConv(SAGEConv)", sage)):
        whole = layers[1](hg, layers[0](hg, x))["paper"][seeds]
        h = inputs
        for layer, block in zip(layers, batch.blocks):
            h = layer(block, h)
        torch.testing.assert_close(h["paper"], whole, rtol=1e-9, atol=1e-9, msg=lambda m: f"{name}: {m}")


def test_bad_fanouts_and_seeds_are_named():
    hg = academic()
    with pytest.raises(ValueError, match="no entry for relations"):
        HeteroNeighborSampler({"writes": [1]}).sample(hg, {"paper": [0]})
    with pytest.raises(ValueError, match="one entry per layer"):
        HeteroNeighborSampler({"writes": [1], "cites": [1, 2]})
    with pytest.raises(ValueError, match=r"fanouts\[1\] must be >= 0"):
        HeteroNeighborSampler([1, -2])
    with pytest.raises(TypeError, match="non-empty list"):
        HeteroNeighborSampler([])
    with pytest.raises(KeyError, match="no relation named 'likes'"):
        HeteroNeighborSampler({"likes": [1]}).sample(hg, {"paper": [0]})
    sampler = HeteroNeighborSampler([2])
    with pytest.raises(ValueError, match=r"seeds\['paper'\] holds node id 30, outside the graph's 0..29"):
        sampler.sample(hg, {"paper": [30]})
    with pytest.raises(ValueError, match="node type 'venue'"):
        sampler.sample(hg, {"venue": [0]})
    with pytest.raises(ValueError, match="duplicate"):
        sampler.sample(hg, {"paper": [1, 1]})
    clean = sampler.sample(hg, {"paper": [1, 2]}, key=0)              # scratch arrays were left clean
    fresh = HeteroNeighborSampler([2]).sample(hg, {"paper": [1, 2]}, key=0)
    for t in hg.node_types:
        assert torch.equal(clean.input_nodes[t], fresh.input_nodes[t])
