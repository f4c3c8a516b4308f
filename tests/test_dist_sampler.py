"""The partitioned graph, feature store, sampler and loader, in one process (every partition held here).

``LocalPeers`` answers the owners' requests in-process with the same code the RPC owners run, so
these tests check the algorithms exhaustively and fast; ``test_dist_train.py`` runs them across
real processes.
"""
from __future__ import annotations

import time

import pytest
import torch
from scipy import stats

from unigraph.data import planted_partition
from unigraph.distributed import format as fmt
from unigraph.distributed.cache import expected_reads
from unigraph.distributed.layout import JobLayout
from unigraph.distributed.loader import DistNodeLoader, epoch_tasks, equal_num_batches
from unigraph.distributed.local import LocalPartition
from unigraph.distributed.partition import partition_dataset
from unigraph.distributed.peers import LocalPeers, RemoteError
from unigraph.distributed.sampler import DistNeighborSampler
from unigraph.distributed.server import GraphServer
from unigraph.distributed.store import DistFeatureStore, DistGraph
from unigraph.graph import Graph
from unigraph.sampling import NeighborSampler
from unigraph.train import build_node_classifier

PARTS = 4


class World:
    """A partition set held in this process (one in-process graph server per machine, ``machines``
    of them), and the original graph renumbered like it (the reference)."""

    def __init__(self, directory, dataset, machines: int = PARTS):
        self.info = fmt.read_metadata(directory)
        layout = JobLayout(PARTS, machines)
        self.servers = {m: GraphServer.load(directory, layout, m, eids=True, shared=False) for m in range(machines)}
        self.parts = {m: server.local for m, server in self.servers.items()}
        self.peers = LocalPeers(self.servers)
        self.orig = torch.from_numpy(fmt.original_ids(self.info))
        self.new_of_orig = torch.empty_like(self.orig)
        self.new_of_orig[self.orig] = torch.arange(self.orig.numel())
        g = dataset.graph
        self.graph = Graph(torch.stack([self.new_of_orig[g.src], self.new_of_orig[g.dst]]), num_nodes=g.num_nodes)
        self.x, self.y = dataset.x[self.orig], dataset.y[self.orig]
        self.dataset = dataset

    def dist_graph(self, part: int) -> DistGraph:
        return DistGraph(self.parts[part], self.peers)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    dataset = planted_partition(1200, num_features=6, avg_degree=12, train_per_class=40, num_val=100, num_test=200,
                                seed=7)
    directory = tmp_path_factory.mktemp("parts")
    partition_dataset(dataset, PARTS, directory, method="random", seed=2)  # random: most neighbours are remote
    return World(directory, dataset)


def assert_same_blocks(a, b) -> None:
    assert torch.equal(a.seeds, b.seeds) and torch.equal(a.input_nodes, b.input_nodes)
    assert len(a.blocks) == len(b.blocks)
    for x, y in zip(a.blocks, b.blocks):
        assert (x.num_src_nodes, x.num_dst_nodes) == (y.num_src_nodes, y.num_dst_nodes)
        for u, v in zip(x.in_csr()[:2], y.in_csr()[:2]):
            assert torch.equal(u, v)
        assert ("eid" in x.edata) == ("eid" in y.edata)
        if "eid" in x.edata:
            assert torch.equal(x.edata["eid"], y.edata["eid"])


# ---------------------------------------------------------------------- the same samples
@pytest.mark.parametrize("path", ["numba", "torch"])
@pytest.mark.parametrize("replace", [False, True])
def test_blocks_equal_the_single_machine_samplers(world, path, replace, monkeypatch):
    if path == "numba":
        pytest.importorskip("numba", reason="the `cpu` extra (numba) is not installed")
    for part in world.parts.values():
        monkeypatch.setattr(part, "path_used", path)
    reference = NeighborSampler([4, 3, 5], replace=replace, path=path, return_eids=True)
    generator = torch.Generator().manual_seed(0)
    for part in range(PARTS):
        sampler = DistNeighborSampler([4, 3, 5], replace=replace, return_eids=True)
        seeds = torch.randperm(world.info.num_nodes, generator=generator)[:40]
        assert_same_blocks(sampler.sample(world.dist_graph(part), seeds, key=99 + part),
                           reference.sample(world.graph, seeds, key=99 + part))


def test_a_machine_holding_two_parts_samples_the_same_blocks(world):
    """2 machines x 2 parts: each machine merges its parts (and their halos, without its own nodes)."""
    pair = World(world.info.directory, world.dataset, machines=2)
    assert [(p.first, p.end) for p in pair.parts.values()] == [(0, world.info.offsets[2]),
                                                               (world.info.offsets[2], world.info.num_nodes)]
    reference = NeighborSampler([4, 3, 5], return_eids=True)
    generator = torch.Generator().manual_seed(1)
    for machine in range(2):
        local = pair.parts[machine]
        assert not bool(((local.halo_ids >= local.first) & (local.halo_ids < local.end)).any())
        seeds = torch.randperm(world.info.num_nodes, generator=generator)[:40]
        assert_same_blocks(DistNeighborSampler([4, 3, 5], return_eids=True).sample(pair.dist_graph(machine), seeds,
                                                                                   key=7 + machine),
                           reference.sample(world.graph, seeds, key=7 + machine))
        nodes = torch.arange(local.first, local.end)
        assert torch.equal(DistFeatureStore(pair.dist_graph(1 - machine)).gather(nodes), world.x[nodes])


def test_one_request_per_owner_per_hop(world, monkeypatch):
    sent = []
    original = world.peers._send
    monkeypatch.setattr(world.peers, "_send", lambda owner, request, ids, *a: sent.append((owner, request, ids))
                        or original(owner, request, ids, *a))
    graph = world.dist_graph(1)
    seeds = torch.arange(*graph.book.node_range(1))[:30]           # owned seeds: hop 0 is all local, and
    DistNeighborSampler([5, 5]).sample(graph, seeds, key=3)        # hop 1 too (owned and halo rows)
    assert sent == [] and graph.saved["sample_rows"] > 0 and graph.saved["sample_bytes"] > 0
    DistNeighborSampler([5, 5, 5]).sample(graph, seeds, key=3)
    assert [r for _, r, _ in sent] == ["sample"] * len(sent)
    assert 1 not in {owner for owner, _, _ in sent}                # the local rows never go out
    hops = [sent[i:i + PARTS - 1] for i in range(0, len(sent), PARTS - 1)]
    assert len(sent) == PARTS - 1                                  # hop 2: one request to each other owner
    for hop in hops:
        assert sorted(owner for owner, _, _ in hop) == [0, 2, 3]
        for owner, _, ids in hop:                                  # only nodes that owner owns, each once
            first, end = graph.book.node_range(owner)
            assert bool(((ids >= first) & (ids < end)).all()) and torch.unique(ids).numel() == ids.numel()


@pytest.mark.parametrize("replace", [False, True])
def test_every_sampled_edge_exists_and_fanouts_hold(world, replace):
    edges = set(zip(world.graph.src.tolist(), world.graph.dst.tolist()))
    in_degree = world.graph.in_degrees()
    fanouts = [3, 2, 6]
    blocks = DistNeighborSampler(fanouts, replace=replace).sample(world.dist_graph(2), torch.arange(0, 1200, 7), key=5)
    for fanout, block in zip(fanouts, blocks.blocks):
        indptr, local, _ = block.in_csr()
        dst = blocks.input_nodes[:block.num_dst_nodes]
        counts = indptr[1:] - indptr[:-1]
        expected = torch.where(in_degree[dst] > 0, fanout, 0) if replace else in_degree[dst].clamp(max=fanout)
        assert torch.equal(counts, expected)
        sources = blocks.input_nodes[local]
        rows = torch.repeat_interleave(dst, counts)
        assert all((u, v) in edges for u, v in zip(sources.tolist(), rows.tolist()))
        if not replace:                                            # distinct in-edges (no multi-edges here)
            assert len(set(zip(sources.tolist(), rows.tolist()))) == sources.numel()


def _homogeneity_p_values(counts_a: torch.Tensor, counts_b: torch.Tensor, degree: torch.Tensor, draws: int,
                          fanout: int, replace: bool) -> list[float]:
    """Per node, the p-value of 'both samplers draw each in-neighbour equally often'.

    ``counts_*[i, j]``: how often in-edge ``j`` of node ``i`` was drawn in ``draws`` independent
    batches. One batch's count vector has covariance ``c (I - 11'/d)`` (``d`` the degree):
    ``c = k/d`` with replacement (multinomial), ``c = p(1-p) d/(d-1)``, ``p = k/d``, without
    (``k`` of ``d`` uniformly). The difference of two independent samples then has covariance
    ``2 N c (I - 11'/d)``, so ``sum_j (a_j - b_j)^2 / (2 N c)`` is chi-square with ``d - 1``
    degrees of freedom under the hypothesis that both distributions are equal (N large).
    """
    out = []
    for a, b, d in zip(counts_a, counts_b, degree.tolist()):
        a, b = a[:d].double(), b[:d].double()
        p = fanout / d
        c = p if replace else p * (1 - p) * d / (d - 1)
        statistic = float(((a - b) ** 2).sum() / (2 * draws * c))
        out.append(float(stats.chi2.sf(statistic, d - 1)))
    return out


@pytest.mark.parametrize("replace", [False, True])
def test_neighbour_distribution_matches_the_single_machine_sampler(world, replace):
    """Statistical equivalence on the *original* numbering, with independent keys.

    Edges are identified by their original edge ids (``return_eids``). Threshold: every node's
    p-value must exceed 1e-4; with 24 nodes the chance that equal
    distributions fail is below 24 x 1e-4 = 0.0024 (Bonferroni), and the same statistic must
    reject a sampler that always takes the first ``k`` in-edges (p < 1e-6).
    """
    fanout, draws = 3, 1000
    graph = world.dataset.graph
    ptr, _, eids = graph.in_csr()
    degree = ptr[1:] - ptr[:-1]
    nodes = torch.nonzero((degree > 6) & (degree <= 16)).squeeze(1)[:24]   # original ids
    reference = NeighborSampler([fanout], replace=replace, return_eids=True)
    sampler = DistNeighborSampler([fanout], replace=replace, return_eids=True)
    dist_graph = world.dist_graph(0)
    drawn_single = torch.zeros(graph.num_edges)                   # how often each (original) edge was drawn
    drawn_dist = torch.zeros(graph.num_edges)
    for draw in range(draws):
        drawn_single += torch.bincount(reference.sample(graph, nodes, key=draw).blocks[0].edata["eid"],
                                       minlength=graph.num_edges)
        blocks = sampler.sample(dist_graph, world.new_of_orig[nodes], key=10**6 + draw)
        drawn_dist += torch.bincount(blocks.blocks[0].edata["eid"], minlength=graph.num_edges)
    width = int(degree[nodes].max())
    single, distributed = torch.zeros(nodes.numel(), width), torch.zeros(nodes.numel(), width)
    for i, v in enumerate(nodes.tolist()):                        # per node: its in-edges in CSR order
        in_edges = eids[ptr[v]:ptr[v + 1]]
        single[i, :in_edges.numel()] = drawn_single[in_edges]
        distributed[i, :in_edges.numel()] = drawn_dist[in_edges]
    p_values = _homogeneity_p_values(single, distributed, degree[nodes], draws, fanout, replace)
    assert min(p_values) > 1e-4, p_values
    biased = torch.zeros_like(distributed)
    biased[:, :fanout] = draws                                     # always the first k in-edges (same total)
    assert max(_homogeneity_p_values(single, biased, degree[nodes], draws, fanout, replace)) < 1e-6


# ---------------------------------------------------------------------- the graph and its features
def test_degree_and_neighbourhood_queries_batch_remote_nodes(world):
    graph = world.dist_graph(3)
    ids = torch.randperm(world.info.num_nodes, generator=torch.Generator().manual_seed(1))[:300]
    before = world.peers.traffic()["requests"]
    assert torch.equal(graph.in_degrees(ids), world.graph.in_degrees()[ids])
    assert torch.equal(graph.out_degrees(ids), world.graph.out_degrees()[ids])
    counts, neighbours = graph.in_neighbors(ids)
    ptr, sources, _ = world.graph.in_csr()
    assert torch.equal(counts, ptr[ids + 1] - ptr[ids])
    assert torch.equal(neighbours, torch.cat([sources[ptr[i]:ptr[i + 1]] for i in ids.tolist()]))
    assert world.peers.traffic()["requests"] - before == 3 * (PARTS - 1)   # one per owner per query


def reference_reads(world, seeds, fanouts) -> torch.Tensor:
    """Expected reads per node (the cache's ranking) computed on the whole renumbered graph, edge by edge."""
    src, dst = world.graph.src.tolist(), world.graph.dst.tolist()
    degree = world.graph.in_degrees().double()
    count = torch.zeros(world.graph.num_nodes, dtype=torch.float64)
    count[seeds] = 1.0
    for fanout in reversed(fanouts):
        reached = torch.zeros_like(count)
        for u, w in zip(src, dst):
            reached[u] += count[w] * min(1.0, fanout / float(degree[w]))
        count = count + reached
    return count


def test_the_cache_keeps_the_halo_rows_expected_to_be_read_most(world):
    graph = world.dist_graph(0)
    seeds = graph.local.first + torch.nonzero(graph.local.train_mask).squeeze(1)
    reference = reference_reads(world, seeds, [4, 3])
    torch.testing.assert_close(expected_reads(graph.local, seeds, [4, 3]), reference[graph.local.halo_ids],
                               rtol=1e-12, atol=0)                # two layers: exact from the machine's structure
    server = world.servers[0]
    server.fill_cache(graph, seeds, [4, 3], 50)
    store = DistFeatureStore(graph, server.cache)
    assert store.cache_ids.numel() == 50 and torch.equal(store.cache_ids, torch.sort(store.cache_ids).values)
    halo_reads = reference[graph.local.halo_ids]
    assert float(reference[store.cache_ids].min()) >= float(torch.sort(halo_reads, descending=True).values[49])
    assert torch.equal(store.cache.rows, world.x[store.cache_ids])
    ids = torch.cat([store.cache_ids[:10], torch.arange(0, 1200, 5)])
    requests = world.peers.traffic()["requests"]
    assert torch.equal(store.gather(ids), world.x[ids])
    assert world.peers.traffic()["requests"] - requests == PARTS - 1
    owner = graph.book.owner(ids)
    cached = torch.isin(ids, store.cache_ids)
    assert store.hits == int(cached.sum()) >= 10
    assert store.misses == int(((owner != 0) & ~cached).sum())
    assert 0 < store.hit_rate < 1 and store.saved_bytes == store.hits * (8 + 6 * 4)
    assert torch.equal(DistFeatureStore(graph).gather(ids), world.x[ids])      # no cache: the same rows


def test_blocks_run_every_layer_unchanged(world):
    """With fanouts keeping every in-edge, a model on distributed blocks computes what it computes
    on the whole graph (layers whose output depends on in-edges only; GIN's batch norm in eval mode)."""
    graph = world.dist_graph(1)
    everything = int(world.graph.in_degrees().max())
    seeds = torch.arange(*graph.book.node_range(1))[:50]
    blocks = DistNeighborSampler([everything, everything]).sample(graph, seeds, key=1)
    x = DistFeatureStore(graph).gather(blocks.input_nodes).double()
    for name in ("sage", "gat", "gin"):
        torch.manual_seed(0)
        model = build_node_classifier(name, 6, 4, hidden_channels=8, dropout=0.0).double().eval()
        torch.testing.assert_close(model(blocks.blocks, x), model(world.graph, world.x.double())[seeds])


# ---------------------------------------------------------------------- the loader
def test_epoch_split_covers_each_seed_once_with_equal_batches_and_shared_keys(world):
    counts = [int(world.parts[p].train_mask.sum()) for p in range(PARTS)]
    num_batches = equal_num_batches(counts, 16)
    assert num_batches == max(-(-c // 16) for c in counts)
    keys = None
    for p in range(PARTS):
        nodes = world.parts[p].first + torch.nonzero(world.parts[p].train_mask).squeeze(1)
        tasks = epoch_tasks(nodes, num_batches, seed=4, epoch=2, shuffle=True)
        assert len(tasks) == num_batches
        assert torch.equal(torch.sort(torch.cat([s for s, _ in tasks])).values, nodes)
        assert max(s.numel() for s, _ in tasks) - min(s.numel() for s, _ in tasks) <= 1
        assert keys is None or keys == [k for _, k in tasks]
        keys = [k for _, k in tasks]
    assert len(set(keys)) == num_batches
    assert keys != [k for _, k in epoch_tasks(nodes, num_batches, seed=4, epoch=3, shuffle=True)]


def test_prefetching_yields_the_batches_of_the_synchronous_loader(world):
    graph = world.dist_graph(2)
    nodes = graph.local.first + torch.nonzero(graph.local.train_mask).squeeze(1)
    batches = {}
    for prefetch in (0, 3):
        store = DistFeatureStore(graph, world.servers[2].cache)
        with DistNodeLoader(graph, nodes, DistNeighborSampler([3, 3]), features=store, num_batches=4, seed=1,
                            prefetch=prefetch) as loader:
            batches[prefetch] = [list(loader) for _ in range(2)]     # two epochs
            assert loader.stats["batches"] == 8
    for epoch_a, epoch_b in zip(batches[0], batches[3]):
        for a, b in zip(epoch_a, epoch_b):
            assert_same_blocks(a, b)
            assert torch.equal(a.x, world.x[a.input_nodes]) and torch.equal(a.x, b.x)
            assert torch.equal(a.y, world.y[a.seeds]) and torch.equal(a.y, b.y)


@pytest.mark.parametrize("prefetch", [1, 3])
def test_prefetch_prepares_the_next_batches_while_one_is_used_and_no_more(world, prefetch):
    """While the caller holds batch b, batches b+1..b+prefetch are sampled (overlapping its step),
    and no further one: the queue is bounded."""
    graph = world.dist_graph(1)
    nodes = graph.local.first + torch.nonzero(graph.local.train_mask).squeeze(1)
    sampler = DistNeighborSampler([3, 3])
    sampled, sample = [], sampler.sample
    sampler.sample = lambda *args, **kwargs: sampled.append(kwargs["key"]) or sample(*args, **kwargs)

    def sampled_soon(count: int) -> int:
        deadline = time.monotonic() + 10.0
        while len(sampled) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.1)                                           # time to overshoot, were the queue unbounded
        return len(sampled)

    with DistNodeLoader(graph, nodes, sampler, features=DistFeatureStore(graph), num_batches=6, seed=1,
                        prefetch=prefetch) as loader:
        batches = iter(loader)
        next(batches)
        assert sampled_soon(1 + prefetch) == 1 + prefetch
        next(batches)
        assert sampled_soon(2 + prefetch) == 2 + prefetch
        assert len(list(batches)) == 4 and len(sampled) == 6


# ---------------------------------------------------------------------- errors
def test_bad_input_is_refused_with_the_valid_range(world):
    graph = world.dist_graph(0)
    sampler = DistNeighborSampler([2])
    with pytest.raises(ValueError, match="duplicate node ids"):
        sampler.sample(graph, torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="node id 1200, outside the partitioned graph's 0..1199"):
        sampler.sample(graph, torch.tensor([3, 1200]))
    with pytest.raises(TypeError, match="integer node ids"):
        graph.in_degrees(torch.tensor([0.5]))
    with pytest.raises(ValueError, match=r"machine 0 owns nodes 0\.\.\d+; asked about node"):
        world.parts[0].answer("features", torch.tensor([1199]))
    with pytest.raises(ValueError, match="unknown request 'delete'"):
        world.servers[0].answer("delete", torch.tensor([0]))
    with pytest.raises(ValueError, match="machine 0 has no inference table 5"):
        world.servers[0].answer("hidden", torch.tensor([0]), 5)
    with pytest.raises(ValueError, match="must be nodes of this process's machine 0"):
        DistNodeLoader(graph, torch.tensor([1199]), sampler)
    with pytest.raises(ValueError, match="fanouts\\[0\\] must be a positive int"):
        DistNeighborSampler([0])


def test_an_owner_error_reaches_the_caller_naming_the_owner(world, monkeypatch):
    def broken(*args):
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(world.parts[3], "sample", broken)
    with pytest.raises(RemoteError, match=r"'sample' request to machine 3's graph server \(server3\) failed: "
                       ".*disk on fire"):
        DistNeighborSampler([2, 2, 2]).sample(world.dist_graph(0), torch.arange(0, 1200, 3), key=0)


def test_a_structure_only_partition_serves_sampling_but_not_features(world, tmp_path_factory):
    part = LocalPartition.load(world.info.directory, 1, nodes=False)
    assert part.x is None and part.indices.numel() == world.parts[1].indices.numel()
    with pytest.raises(ValueError, match="loaded without node data"):
        part.answer("features", torch.tensor([part.first]))
    with pytest.raises(ValueError, match="needs a partition loaded with its node data"):
        DistFeatureStore(DistGraph(part, world.peers))


# ---------------------------------------------------------------------- layer-wise evaluation across machines
@pytest.mark.parametrize("name, layers", [("sage", 2), ("gat", 3)])
def test_layerwise_evaluation_across_machines_equals_the_whole_graph(world, name, layers):
    """Each machine's trainer (a thread here; the barrier is the trainers' barrier) computes its share
    of every hidden layer into its machine's table, reading the others' rows from their servers; only
    the nodes a later layer reads are computed. The output at every machine's nodes is the model's on
    the whole graph, in float64."""
    import threading

    from unigraph.distributed.train import MachineTables, PartitionedSource
    from unigraph.train.inference import layerwise_outputs
    torch.manual_seed(0)
    model = build_node_classifier(name, 6, 4, num_layers=layers, hidden_channels=5, dropout=0.0).double().eval()
    reference = model(world.graph, world.x.double())
    barrier = threading.Barrier(PARTS, timeout=60)
    results, errors = {}, []

    def machine(m):
        try:
            graph = world.dist_graph(m)
            source = PartitionedSource(graph, DistFeatureStore(graph), MachineTables(world.servers[m]),
                                       lambda ids: ids, barrier.wait)
            final = graph.local.first + torch.nonzero(graph.local.val_mask | graph.local.test_mask).squeeze(1)
            results[m] = (final, layerwise_outputs(model, source, final, in_width=6, batch_edges=30),
                          {slot: ids.numel() for slot, ids in source.ids.items()})
        except BaseException as err:  # noqa: BLE001 - reported below, with the others released
            errors.append(err)
            barrier.abort()
    threads = [threading.Thread(target=machine, args=(m,)) for m in range(PARTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for m, (final, out, planned) in results.items():
        torch.testing.assert_close(out, reference[final], rtol=1e-10, atol=1e-12)
        assert 0 < planned[layers - 1] < world.parts[m].num_owned                 # not every node: those read
