"""NeighborSampler: sampled edges exist, fanouts hold, seeds come first, blocks chain, draws are
uniform, both kernel paths agree bit for bit, bad input is refused."""
from __future__ import annotations

from collections import Counter

import pytest
import torch
from hypothesis import given, strategies as st

import unigraph
from graph_strategies import graphs
from unigraph.data import rmat
from unigraph.kernels.cpu import numba_status
from unigraph.sampling import EID, NeighborSampler

HAVE_NUMBA = numba_status()[0]
needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="numba (the 'cpu' extra) is not installed")


def _draw_case(data, graph):
    fanouts = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3), label="fanouts")
    replace = data.draw(st.booleans(), label="replace")
    num_seeds = data.draw(st.integers(0, graph.num_nodes), label="num_seeds")
    order = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(data.draw(st.integers(0, 999))))
    return fanouts, replace, order[:num_seeds]


def check_blocks(graph: unigraph.Graph, batch, seeds, fanouts, replace) -> None:
    """Every property a sampled batch must have (see the Blocks docstring)."""
    nodes = batch.input_nodes
    assert torch.equal(batch.seeds, seeds) and torch.equal(nodes[: seeds.numel()], seeds)
    assert nodes.unique().numel() == nodes.numel()                                  # each node once
    assert len(batch.blocks) == len(fanouts)
    assert batch.blocks[-1].num_dst_nodes == seeds.numel()
    assert batch.blocks[0].num_src_nodes == nodes.numel()
    for lower, upper in zip(batch.blocks, batch.blocks[1:]):                         # blocks chain
        assert lower.num_dst_nodes == upper.num_src_nodes
    in_degree = graph.in_degrees()
    for block, fanout in zip(batch.blocks, fanouts):
        assert block.is_bipartite and block.num_dst_nodes <= block.num_src_nodes
        src, dst = nodes[block.src], nodes[block.dst]
        eids = block.edata[EID]
        assert torch.equal(graph.src[eids], src) and torch.equal(graph.dst[eids], dst)   # real edges
        kept = torch.bincount(block.dst, minlength=block.num_dst_nodes)
        degree = in_degree[nodes[: block.num_dst_nodes]]
        expected = torch.where(degree > 0, fanout, 0) if replace else degree.clamp(max=fanout)
        assert torch.equal(kept, expected)
        if not replace:                                                                # distinct edges
            pairs = block.dst * max(graph.num_edges, 1) + eids
            assert pairs.unique().numel() == pairs.numel()
        # the sources are exactly the destinations plus the nodes this hop reached first
        reached = set(src.tolist()) | set(nodes[: block.num_dst_nodes].tolist())
        assert reached == set(nodes[: block.num_src_nodes].tolist())
        ptr, indices, _ = block.in_csr()                                               # CSR cached, consistent
        assert torch.equal(indices, block.src) and int(ptr[-1]) == block.num_edges


def computation_trees(batch) -> dict:
    """Every sampled edge, by (block index, destination): the sorted global sources."""
    trees = {}
    nodes = batch.input_nodes
    for index, block in enumerate(batch.blocks):
        for d, s in zip(nodes[block.dst].tolist(), nodes[block.src].tolist()):
            trees.setdefault((index, d), []).append(s)
    return {key: sorted(sources) for key, sources in trees.items()}


@given(graphs(bipartite=False), st.data())
def test_a_seed_gets_the_same_tree_in_any_part_of_its_batch(drawn, data):
    graph = drawn.graph
    fanouts, replace, seeds = _draw_case(data, graph)
    sampler = NeighborSampler(fanouts, replace=replace, path="torch")
    whole = computation_trees(sampler.sample(graph, seeds, key=drawn.seed))
    half = seeds.numel() // 2
    for part in (seeds[:half], seeds[half:]):
        for key, sources in computation_trees(sampler.sample(graph, part, key=drawn.seed)).items():
            assert whole[key] == sources, key


@given(graphs(bipartite=False), st.data())
def test_blocks_have_every_property_on_drawn_graphs(drawn, data):
    graph = drawn.graph
    fanouts, replace, seeds = _draw_case(data, graph)
    sampler = NeighborSampler(fanouts, replace=replace, return_eids=True, path="torch")
    check_blocks(graph, sampler.sample(graph, seeds, key=drawn.seed), seeds, fanouts, replace)


@needs_numba
@given(graphs(bipartite=False), st.data())
def test_numba_and_torch_paths_sample_identical_blocks(drawn, data):
    graph = drawn.graph
    fanouts, replace, seeds = _draw_case(data, graph)
    batches = [NeighborSampler(fanouts, replace=replace, return_eids=True, path=path).sample(graph, seeds, key=drawn.seed)
               for path in ("numba", "torch")]
    assert torch.equal(batches[0].input_nodes, batches[1].input_nodes)
    for a, b in zip(batches[0].blocks, batches[1].blocks):           # the same Graph, cached formats and all
        assert (a.num_src_nodes, a.num_dst_nodes, a.is_bipartite) == (b.num_src_nodes, b.num_dst_nodes, b.is_bipartite)
        assert torch.equal(a.src, b.src) and torch.equal(a.dst, b.dst)
        assert all(torch.equal(x, y) for x, y in zip(a.in_csr(), b.in_csr()))
        assert torch.equal(a.edata[EID], b.edata[EID])


def _star(degree: int) -> unigraph.Graph:
    """Node 0 receives one edge from each of nodes 1..degree."""
    return unigraph.Graph(torch.stack([torch.arange(1, degree + 1), torch.zeros(degree, dtype=torch.int64)]),
                          num_nodes=degree + 1)


@pytest.mark.parametrize("path", ["torch", pytest.param("numba", marks=needs_numba)])
def test_draws_are_uniform_over_the_in_edges(path):
    degree, fanout, trials = 10, 3, 3000
    graph = _star(degree)
    sampler = NeighborSampler([fanout], path=path)
    picked = Counter()
    subsets = Counter()
    for key in range(trials):
        neighbours = sampler.sample(graph, [0], key=key).input_nodes[1:].tolist()
        picked.update(neighbours)
        subsets[frozenset(neighbours)] += 1
    expected = trials * fanout / degree                                 # 900, standard deviation about 25
    assert all(abs(picked[v] - expected) < 110 for v in range(1, degree + 1)), picked
    assert len(subsets) == 120                                          # all C(10, 3) subsets occur
    assert max(subsets.values()) < 3 * trials / 120


def test_with_replacement_draws_each_in_edge_with_probability_one_over_degree():
    graph = _star(4)
    sampler = NeighborSampler([6], replace=True, return_eids=True)
    counts = torch.zeros(4)
    for key in range(500):
        block = sampler.sample(graph, [0], key=key).blocks[0]
        assert block.num_edges == 6
        counts += torch.bincount(block.edata[EID], minlength=4)
    assert bool(((counts / 3000 - 0.25).abs() < 0.04).all()), counts


def test_deterministic_under_key_and_seed_and_different_otherwise():
    graph = rmat(500, 6000, seed=1)
    seeds = torch.arange(0, 500, 7)
    a = NeighborSampler([4, 3]).sample(graph, seeds, key=11)
    b = NeighborSampler([4, 3]).sample(graph, seeds, key=11)
    c = NeighborSampler([4, 3]).sample(graph, seeds, key=12)
    assert torch.equal(a.input_nodes, b.input_nodes) and torch.equal(a.blocks[0].src, b.blocks[0].src)
    assert not torch.equal(a.blocks[0].src, c.blocks[0].src)
    first = [NeighborSampler([4, 3], seed=5).sample(graph, seeds).input_nodes for _ in range(2)]
    assert torch.equal(first[0], first[1])                              # same sampler seed, same first batch


def test_layer_order_of_fanouts_and_blocks():
    """fanouts[i] belongs to blocks[i]; the last block holds the seeds (DGL's convention)."""
    graph = rmat(400, 8000, seed=2)
    degree = graph.in_degrees()
    seeds = torch.nonzero(degree >= 10).squeeze(1)[:20]
    batch = NeighborSampler([7, 2]).sample(graph, seeds, key=0)
    assert batch.blocks[1].num_edges == 2 * seeds.numel()               # 2 per seed
    inner = batch.input_nodes[: batch.blocks[0].num_dst_nodes]
    assert batch.blocks[0].num_edges == int(degree[inner].clamp(max=7).sum())


def test_a_failed_call_leaves_the_sampler_clean():
    graph = rmat(300, 3000, seed=3)
    sampler = NeighborSampler([3, 3])
    before = sampler.sample(graph, [1, 2, 3], key=4)
    with pytest.raises(ValueError, match="duplicate"):
        sampler.sample(graph, [5, 6, 5], key=4)
    after = sampler.sample(graph, [1, 2, 3], key=4)
    assert torch.equal(before.input_nodes, after.input_nodes)


@pytest.mark.parametrize("fanouts, error, match", [
    ([0], ValueError, r"fanouts\[0\] must be a positive int, got 0"),
    ([25, -1], ValueError, r"fanouts\[1\] must be a positive int"),
    ([2.5], TypeError, r"fanouts\[0\] must be a positive int, got float"),
    ([True], TypeError, r"fanouts\[0\]"),
    ([], TypeError, "non-empty list"),
    ("25", TypeError, "non-empty list"),
    (10, TypeError, "non-empty list"),
])
def test_bad_fanouts(fanouts, error, match):
    with pytest.raises(error, match=match):
        NeighborSampler(fanouts)


def test_bad_seeds_and_graphs():
    graph = rmat(100, 500, seed=0)
    sampler = NeighborSampler([2])
    with pytest.raises(ValueError, match=r"seeds holds node id 100, outside the graph's 0..99"):
        sampler.sample(graph, [3, 100])
    with pytest.raises(ValueError, match="node id -1"):
        sampler.sample(graph, torch.tensor([-1]))
    with pytest.raises(TypeError, match=r"integer node ids \(int32 or int64\), got torch.float32"):
        sampler.sample(graph, torch.tensor([1.0]))
    with pytest.raises(TypeError, match="a mask"):
        sampler.sample(graph, torch.ones(100, dtype=torch.bool))
    with pytest.raises(ValueError, match="1-D"):
        sampler.sample(graph, torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="bipartite"):
        sampler.sample(unigraph.Graph([[0], [0]], num_src_nodes=2, num_dst_nodes=1), [0])
    with pytest.raises(ValueError, match="path must be one of"):
        NeighborSampler([2], path="cuda")
    with pytest.raises(TypeError, match="key must be an int"):
        sampler.sample(graph, [1], key=1.5)


@pytest.mark.skipif(HAVE_NUMBA, reason="checks the message when numba is absent")
def test_numba_path_without_numba_fails_loudly():
    with pytest.raises(ImportError, match="numba"):
        NeighborSampler([2], path="numba").sample(rmat(10, 20), [0])


def test_path_reported():
    sampler = NeighborSampler([2])
    sampler.sample(rmat(10, 20), [0])
    assert sampler.path_used == ("numba" if HAVE_NUMBA else "torch") and sampler.path_reason


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_blocks_equal_cpu_blocks():
    graph = rmat(2000, 30000, seed=5)
    seeds = torch.arange(0, 2000, 3)
    cpu = NeighborSampler([5, 4], path="torch", return_eids=True).sample(graph, seeds, key=9)
    gpu = NeighborSampler([5, 4], return_eids=True).sample(graph.to("cuda"), seeds.cuda(), key=9)
    assert torch.equal(cpu.input_nodes, gpu.input_nodes.cpu())
    for a, b in zip(cpu.blocks, gpu.blocks):
        assert b.device.type == "cuda" and torch.equal(a.src, b.src.cpu()) and torch.equal(a.edata[EID], b.edata[EID].cpu())


def test_fanouts_mean_what_they_mean_in_dgl(dgl):
    """Same layer-order reading as DGL: per destination node, both keep min(fanout, in-degree)."""
    graph = rmat(300, 3000, seed=6)
    seeds = torch.arange(0, 300, 5)
    theirs = dgl.dataloading.NeighborSampler([4, 2]).sample_blocks(
        dgl.graph((graph.src, graph.dst), num_nodes=300), seeds)[2]
    batch = NeighborSampler([4, 2]).sample(graph, seeds, key=0)
    degree = graph.in_degrees()
    for layer, fanout in enumerate([4, 2]):
        their_dst = theirs[layer].dstdata[dgl.NID]
        assert torch.equal(theirs[layer].in_degrees(), degree[their_dst].clamp(max=fanout))
        ours = batch.blocks[layer]
        assert torch.equal(ours.in_degrees(), degree[batch.input_nodes[: ours.num_dst_nodes]].clamp(max=fanout))
    assert torch.equal(theirs[1].dstdata[dgl.NID], seeds) and batch.blocks[1].num_dst_nodes == seeds.numel()
