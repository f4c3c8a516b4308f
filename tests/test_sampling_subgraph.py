"""Subgraph samplers: the partitioner (balanced, cuts few edges), Cluster-GCN batches, GraphSAINT
random walks and the unbiasedness of its normalization coefficients."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

import unigraph
from graph_strategies import graphs
from unigraph.data import planted_partition, random_geometric_graph, rmat
from unigraph.sampling import EID, ClusterSampler, NodeLoader, RandomWalkSampler, partition_graph
from unigraph.sampling.csr_view import in_csr_view
from unigraph.sampling.partition import bfs_order, _undirected_csr
from unigraph.sampling.saint import random_walks
from unigraph.sampling.subgraph import induced_subgraph


def _edge_multiset(graph, pairs_of) -> list:
    return sorted(zip(*pairs_of(graph)))


@given(graphs(bipartite=False), st.data())
def test_induced_subgraph_keeps_exactly_the_inner_edges(drawn, data):
    graph = drawn.graph
    nodes = torch.tensor(sorted(data.draw(st.sets(st.integers(0, max(graph.num_nodes - 1, 0)), max_size=graph.num_nodes))),
                         dtype=torch.int64) if graph.num_nodes else torch.zeros(0, dtype=torch.int64)
    sub = induced_subgraph(in_csr_view(graph), nodes)
    inside = torch.zeros(graph.num_nodes, dtype=torch.bool)
    inside[nodes] = True
    expected = sorted(e for e in range(graph.num_edges) if inside[graph.src[e]] and inside[graph.dst[e]])
    assert sorted(sub.edata[EID].tolist()) == expected
    assert torch.equal(nodes[sub.src], graph.src[sub.edata[EID]]) and torch.equal(nodes[sub.dst], graph.dst[sub.edata[EID]])
    assert sub.num_nodes == nodes.numel()


@given(graphs(bipartite=False), st.integers(1, 4))
def test_partition_is_a_balanced_assignment_on_drawn_graphs(drawn, num_parts):
    graph = drawn.graph
    ptr, neighbours = _undirected_csr(graph)
    assert sorted(bfs_order(ptr, neighbours, graph.num_nodes).tolist()) == list(range(graph.num_nodes))
    if graph.num_nodes < num_parts:
        return
    part = partition_graph(graph, num_parts, seed=drawn.seed)
    assert part.shape == (graph.num_nodes,) and int(part.min()) >= 0 and int(part.max()) < num_parts
    capacity = -(-int(1.05 * graph.num_nodes * 100) // (num_parts * 100))
    assert int(torch.bincount(part, minlength=num_parts).max()) <= max(capacity, -(-graph.num_nodes // num_parts))


def _cut(graph, part) -> float:
    return float((part[graph.src] != part[graph.dst]).float().mean())


def test_partition_cuts_far_fewer_edges_than_random_and_refinement_helps():
    graph = random_geometric_graph(2000, 0.05, seed=3)
    unrefined = partition_graph(graph, 8, refine_rounds=0)
    refined = partition_graph(graph, 8)
    random_part = torch.randint(0, 8, (2000,), generator=torch.Generator().manual_seed(0))
    assert _cut(graph, refined) < 0.3 * _cut(graph, random_part)
    assert _cut(graph, refined) < _cut(graph, unrefined)
    assert int(torch.bincount(refined).max()) <= 263                      # ceil(1.05 * 2000 / 8)
    assert torch.equal(refined, partition_graph(graph, 8))                 # deterministic


def test_partition_bad_arguments():
    graph = random_geometric_graph(10, 0.5)
    with pytest.raises(ValueError, match=r"num_parts must be an int in 1..10"):
        partition_graph(graph, 11)
    with pytest.raises(ValueError, match="refine_rounds"):
        partition_graph(graph, 2, refine_rounds=-1)
    with pytest.raises(TypeError, match="homogeneous"):
        partition_graph(unigraph.Graph([[0], [0]], num_src_nodes=1, num_dst_nodes=1), 1)


def test_cluster_batches_are_induced_subgraphs_of_whole_parts_and_an_epoch_covers_every_node():
    ds = planted_partition(num_nodes=600, num_val=100, num_test=200)
    sampler = ClusterSampler(ds.graph, 12)
    batch = sampler.sample(ds.graph, [4, 1])
    expected_nodes = torch.cat([torch.nonzero(sampler.part == p).squeeze(1) for p in (4, 1)])
    assert torch.equal(batch.nodes, expected_nodes)
    inside = torch.zeros(600, dtype=torch.bool)
    inside[expected_nodes] = True
    assert batch.graph.num_edges == int((inside[ds.graph.src] & inside[ds.graph.dst]).sum())
    loader = NodeLoader(ds.graph, torch.arange(12), sampler, batch_size=3, features=ds.x, labels=ds.y)
    seen = torch.cat([b.nodes for b in loader])
    assert torch.equal(torch.sort(seen).values, torch.arange(600))
    with pytest.raises(ValueError, match="duplicate part ids"):
        sampler.sample(ds.graph, [1, 1])
    with pytest.raises(ValueError, match="parts holds node id 12"):
        sampler.sample(ds.graph, [12])


def test_random_walks_follow_in_edges():
    graph = rmat(300, 1500, seed=4)
    csr = in_csr_view(graph)
    walks = random_walks(csr, torch.arange(300), 4, key=8)
    edges = set(zip(graph.src.tolist(), graph.dst.tolist()))
    no_in_edges = set(torch.nonzero(graph.in_degrees() == 0).squeeze(1).tolist())
    for walk in walks.tolist():
        for here, there in zip(walk, walk[1:]):
            assert (there, here) in edges or (here == there and here in no_in_edges)
    assert torch.equal(walks, random_walks(csr, torch.arange(300), 4, key=8))


def test_saint_normalization_makes_the_estimates_unbiased():
    graph = random_geometric_graph(800, 0.06, seed=2)
    sampler = RandomWalkSampler(graph, 2, roots_per_subgraph=60, num_presample=500, seed=1)
    in_degree = graph.in_degrees().double()
    loss_estimates, messages, degrees = [], 0.0, 0.0
    for key in range(300):
        batch = sampler.sample(graph, torch.randperm(800, generator=torch.Generator().manual_seed(key))[:60], key=key)
        assert torch.equal(batch.nodes, torch.unique(batch.nodes))
        loss_estimates.append(float(batch.node_norm.double().sum()))   # estimates the mean of 1 over all nodes
        messages += float(batch.edge_norm.double().sum())               # estimates sum of in-degrees of batch nodes
        degrees += float(in_degree[batch.nodes].sum())
    mean_estimate = sum(loss_estimates) / len(loss_estimates)
    assert abs(mean_estimate - 1.0) < 0.04, mean_estimate             # 1.008 measured (bias shrinks with presamples)
    assert abs(messages / degrees - 1.0) < 0.05, messages / degrees   # 1.022 measured
    assert bool((sampler.node_norm > 0).all()) and bool((sampler.edge_norm > 0).all())


def test_saint_bad_arguments():
    graph = random_geometric_graph(50, 0.3)
    with pytest.raises(ValueError, match="walk_length must be an int >= 0"):
        RandomWalkSampler(graph, -1, roots_per_subgraph=5)
    with pytest.raises(ValueError, match="roots_per_subgraph=60 exceeds"):
        RandomWalkSampler(graph, 2, roots_per_subgraph=60)
    sampler = RandomWalkSampler(graph, 2, roots_per_subgraph=5, num_presample=2)
    with pytest.raises(ValueError, match="set up for a graph of 50 nodes"):
        sampler.sample(random_geometric_graph(20, 0.3), [0])
