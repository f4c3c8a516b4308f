"""The Graph: cached formats agree with the edge list, statistics, transforms, conversions."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given

from graph_strategies import graphs
import unigraph


def edge_multiset(g) -> list[tuple[int, int]]:
    return sorted(zip(g.src.tolist(), g.dst.tolist()))


@given(graphs())
def test_csr_formats_describe_the_same_edges(drawn):
    g = drawn.graph
    ptr, src_sorted, eid = g.in_csr()
    assert ptr[0] == 0 and ptr[-1] == g.num_edges and bool((ptr[1:] >= ptr[:-1]).all())
    assert sorted(eid.tolist()) == list(range(g.num_edges))  # a permutation of edge ids
    for v in range(g.num_dst_nodes):
        ids = eid[ptr[v]:ptr[v + 1]]
        assert bool((g.dst[ids] == v).all())
        assert torch.equal(g.src[ids], src_sorted[ptr[v]:ptr[v + 1]])
        assert ids.tolist() == sorted(ids.tolist())  # user order kept inside a row (stable)
    optr, dst_sorted, oeid = g.out_csr()
    for s in range(g.num_src_nodes):
        ids = oeid[optr[s]:optr[s + 1]]
        assert bool((g.src[ids] == s).all()) and torch.equal(g.dst[ids], dst_sorted[optr[s]:optr[s + 1]])
    assert torch.equal(g.in_degrees(), torch.bincount(g.dst, minlength=g.num_dst_nodes))
    assert torch.equal(g.out_degrees(), torch.bincount(g.src, minlength=g.num_src_nodes))


@given(graphs())
def test_degree_statistics(drawn):
    g = drawn.graph
    stats = g.stats()
    deg = torch.bincount(g.dst, minlength=g.num_dst_nodes).double()
    assert stats.num_edges == g.num_edges
    if g.num_dst_nodes:
        assert stats.mean_in_degree == pytest.approx(float(deg.mean()))
        assert stats.max_in_degree == int(deg.max())
    if g.num_edges:
        assert stats.cv_in_degree == pytest.approx(float(deg.std(unbiased=False) / deg.mean()))
    else:
        assert stats.cv_in_degree == 0.0


def test_hub_has_high_coefficient_of_variation():
    n = 200
    hub_edges = torch.stack([torch.arange(1, n), torch.zeros(n - 1, dtype=torch.long)])
    ring = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n])
    assert unigraph.Graph(hub_edges, num_nodes=n).stats().cv_in_degree > 10
    assert unigraph.Graph(ring, num_nodes=n).stats().cv_in_degree == pytest.approx(0.0)


def test_self_loop_transforms_carry_edge_data():
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 2, 0]]), num_nodes=4)
    g.edata["w"] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    g.ndata["x"] = torch.arange(4.0)
    with_loops = g.add_self_loops(fill_value=9.0)
    assert with_loops.num_edges == 8
    assert edge_multiset(with_loops) == sorted(edge_multiset(g) + [(i, i) for i in range(4)])
    assert with_loops.edata["w"].tolist() == [1.0, 2.0, 3.0, 4.0, 9.0, 9.0, 9.0, 9.0]
    assert torch.equal(with_loops.ndata["x"], g.ndata["x"])
    without = with_loops.remove_self_loops()
    assert edge_multiset(without) == [(0, 1), (1, 2), (2, 0)]
    assert without.edata["w"].tolist() == [1.0, 2.0, 4.0]


def test_block_self_loops_join_destination_to_its_source_copy():
    block = unigraph.Graph(torch.tensor([[3, 4], [0, 1]]), num_src_nodes=5, num_dst_nodes=2)
    looped = block.add_self_loops()
    assert edge_multiset(looped) == [(0, 0), (1, 1), (3, 0), (4, 1)]
    with pytest.raises(ValueError, match="num_src_nodes=1 < num_dst_nodes=2"):
        unigraph.Graph(torch.tensor([[0], [1]]), num_src_nodes=1, num_dst_nodes=2).add_self_loops()


def test_reverse_swaps_roles_and_reuses_formats():
    g = unigraph.Graph(torch.tensor([[0, 0, 1], [1, 2, 2]]), num_src_nodes=2, num_dst_nodes=3)
    in_csr = g.in_csr()
    r = g.reverse()
    assert (r.num_src_nodes, r.num_dst_nodes) == (3, 2)
    assert edge_multiset(r) == [(1, 0), (2, 0), (2, 1)]
    assert r.out_csr() is in_csr  # cached format shared, not rebuilt
    assert torch.equal(r.in_degrees(), g.out_degrees())


def test_to_undirected_coalesces_and_reduces_edge_data():
    g = unigraph.Graph(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 2]]), num_nodes=3)
    g.edata["w"] = torch.tensor([1.0, 10.0, 5.0, 7.0])
    u = g.to_undirected(reduce="sum")
    assert edge_multiset(u) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 2)]
    weights = dict(zip(zip(u.src.tolist(), u.dst.tolist()), u.edata["w"].tolist()))
    assert weights == {(0, 1): 11.0, (1, 0): 11.0, (1, 2): 5.0, (2, 1): 5.0, (2, 2): 14.0}
    assert u.to_undirected().num_edges == u.num_edges  # idempotent
    with pytest.raises(ValueError, match="bipartite"):
        unigraph.Graph(torch.tensor([[0], [0]]), num_src_nodes=1, num_dst_nodes=1).to_undirected()


def test_to_device_moves_features_and_formats():
    g = unigraph.Graph(torch.tensor([[0, 1], [1, 0]]))
    g.ndata["x"] = torch.ones(2, 3)
    g.prepare()
    moved = g.to("cpu")
    assert moved._cache["in_csr"][0].device.type == "cpu"  # carried over, not rebuilt
    assert torch.equal(moved.in_csr()[0], g.in_csr()[0])
    assert torch.equal(moved.ndata["x"], g.ndata["x"])
    meta = g.to("meta")
    assert meta.device.type == "meta" and meta.in_csr()[0].device.type == "meta"


def test_from_csr_matches_edge_list_construction():
    indptr = torch.tensor([0, 2, 2, 5])
    indices = torch.tensor([1, 2, 0, 0, 4])
    block = unigraph.Graph.from_csr(indptr, indices, num_src_nodes=5, bipartite=True)
    assert (block.num_src_nodes, block.num_dst_nodes) == (5, 3)
    assert edge_multiset(block) == [(0, 2), (0, 2), (1, 0), (2, 0), (4, 2)]
    assert torch.equal(block.in_degrees(), torch.tensor([2, 0, 3]))
    with pytest.raises(ValueError, match="indptr must start at 0"):
        unigraph.Graph.from_csr(torch.tensor([0, 3]), indices, num_src_nodes=5, bipartite=True)
    with pytest.raises(ValueError, match="valid indices are 0..3"):
        unigraph.Graph.from_csr(indptr, indices, num_src_nodes=4, bipartite=True)


# --------------------------------------------------------------------------- conversions
@given(graphs(bipartite=False))
def test_pyg_roundtrip(drawn):
    g = drawn.graph
    g.ndata["x"] = torch.randn(g.num_nodes, 2)
    g.edata["edge_attr"] = torch.randn(g.num_edges, 3)
    data = g.to_pyg()
    assert torch.equal(data.edge_index, g.edge_index) and data.num_nodes == g.num_nodes
    back = unigraph.Graph.from_pyg(data)
    assert torch.equal(back.edge_index, g.edge_index) and back.num_nodes == g.num_nodes
    assert torch.equal(back.ndata["x"], g.ndata["x"])
    assert torch.equal(back.edata["edge_attr"], g.edata["edge_attr"])


@given(graphs())
def test_scipy_roundtrip_keeps_multi_edges(drawn):
    g = drawn.graph
    g.edata["weight"] = torch.arange(g.num_edges, dtype=torch.float64)
    matrix = g.to_scipy(weight="weight")
    assert matrix.shape == (g.num_src_nodes, g.num_dst_nodes)
    back = unigraph.Graph.from_scipy(matrix)  # COO keeps duplicates and their order
    assert torch.equal(back.edge_index, g.edge_index)
    assert torch.equal(back.edata["weight"], g.edata["weight"])
    assert back.is_bipartite == (g.num_src_nodes != g.num_dst_nodes)


@given(graphs(bipartite=False))
def test_networkx_roundtrip_keeps_isolated_nodes_and_multi_edges(drawn):
    g = drawn.graph
    nx_graph = g.to_networkx()
    assert nx_graph.number_of_nodes() == g.num_nodes and nx_graph.number_of_edges() == g.num_edges
    back = unigraph.Graph.from_networkx(nx_graph)
    assert back.num_nodes == g.num_nodes
    assert edge_multiset(back) == edge_multiset(g)


def test_undirected_networkx_graph_gets_both_directions():
    nx_graph = nx.Graph()
    nx_graph.add_nodes_from(["a", "b", "c", "d"])
    nx_graph.add_edge("a", "b", weight=2.0)
    nx_graph.add_edge("c", "c", weight=1.0)
    g = unigraph.Graph.from_networkx(nx_graph)
    assert g.num_nodes == 4
    assert edge_multiset(g) == [(0, 1), (1, 0), (2, 2)]
    assert sorted(g.edata["weight"].tolist()) == [1.0, 2.0, 2.0]


def test_scipy_input_must_be_sparse():
    with pytest.raises(TypeError, match="scipy sparse"):
        unigraph.Graph.from_scipy(np.eye(3))
    assert unigraph.Graph.from_scipy(sp.eye(3, format="csr")).num_edges == 3


def test_dgl_roundtrip(dgl):
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 0]]), num_nodes=4)
    g.ndata["x"] = torch.randn(4, 2)
    g.edata["w"] = torch.randn(4)
    dg = g.to_dgl()
    assert dg.num_nodes() == 4 and dg.num_edges() == 4
    back = unigraph.Graph.from_dgl(dg)
    assert torch.equal(back.edge_index, g.edge_index)
    assert torch.equal(back.ndata["x"], g.ndata["x"]) and torch.equal(back.edata["w"], g.edata["w"])
    block = unigraph.Graph(torch.tensor([[2, 3], [0, 1]]), num_src_nodes=4, num_dst_nodes=2)
    dblock = block.to_dgl()
    assert dblock.is_block and (dblock.num_src_nodes(), dblock.num_dst_nodes()) == (4, 2)
    back_block = unigraph.Graph.from_dgl(dblock)
    assert back_block.is_bipartite and torch.equal(back_block.edge_index, block.edge_index)


def test_from_dgl_reads_a_csc_only_graph_and_a_bipartite_relation(dgl):
    csc_only = dgl.graph((torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1]))).formats("csc")
    csc_only.ndata["h"] = torch.arange(3.0)
    g = unigraph.Graph.from_dgl(csc_only)
    assert g.edge_index.tolist() == [[0, 1, 2, 2], [1, 2, 0, 1]] and torch.equal(g.ndata["h"], torch.arange(3.0))
    plays = dgl.heterograph({("user", "plays", "game"): (torch.tensor([0, 1, 2]), torch.tensor([1, 0, 1]))},
                            {"user": 4, "game": 2})
    plays.nodes["user"].data["x"] = torch.ones(4, 1)
    plays.nodes["game"].data["y"] = torch.zeros(2, 1)
    g = unigraph.Graph.from_dgl(plays)
    assert g.is_bipartite and (g.num_src_nodes, g.num_dst_nodes) == (4, 2)
    assert g.edge_index.tolist() == [[0, 1, 2], [1, 0, 1]] and list(g.srcdata) == ["x"] and list(g.dstdata) == ["y"]
    two = dgl.heterograph({("a", "r", "b"): ([0], [0]), ("b", "s", "a"): ([0], [0])})
    with pytest.raises(ValueError, match="one edge type"):
        unigraph.Graph.from_dgl(two)


def test_dgl_missing_gives_a_clear_error(monkeypatch):
    import sys
    from unigraph._optional import require_dgl
    monkeypatch.setitem(sys.modules, "dgl", None)  # makes `import dgl` raise ImportError
    with pytest.raises(ImportError, match="needs DGL.*graphbolt"):
        require_dgl("Graph.to_dgl")


def test_feature_stores_check_rows():
    g = unigraph.Graph(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    with pytest.raises(ValueError, match=r"ndata\['x'\] has 2 rows but the graph has 3 nodes"):
        g.ndata["x"] = torch.zeros(2, 4)
    with pytest.raises(ValueError, match=r"edata\['w'\] has 3 rows but the graph has 2 edges"):
        g.edata["w"] = torch.zeros(3)
    block = unigraph.Graph(torch.tensor([[0], [0]]), num_src_nodes=3, num_dst_nodes=1)
    with pytest.raises(AttributeError, match="srcdata and dstdata"):
        block.ndata
    with pytest.raises(AttributeError, match="num_src_nodes=3"):
        block.num_nodes
    block.dstdata["y"] = torch.zeros(1)
    with pytest.raises(KeyError, match="holds \\['y'\\]"):
        block.dstdata["z"]


@pytest.mark.parametrize("num_src,num_dst,edges", [(5, 4, [[0, 1, 1, 4, 2], [0, 0, 3, 3, 3]]), (3, 2, [[], []]),
                                                   (0, 0, [[], []]), (2, 0, [[], []]), (0, 3, [[], []])])
def test_degree_statistics_from_counts_equal_the_formulas(num_src, num_dst, edges):
    """``stats_from_degrees`` reads its figures back in one transfer (one host wait on a GPU): the
    same numbers as computing each, empty sides included."""
    from unigraph.structure import stats_from_degrees
    src, dst = torch.tensor(edges[0], dtype=torch.int64), torch.tensor(edges[1], dtype=torch.int64)
    deg_in, deg_out = torch.bincount(dst, minlength=num_dst), torch.bincount(src, minlength=num_src)
    s = stats_from_degrees(deg_in, deg_out, src.numel())
    mean = src.numel() / max(num_dst, 1)
    std = float(deg_in.double().std(unbiased=False)) if num_dst else 0.0
    assert (s.num_src_nodes, s.num_dst_nodes, s.num_edges) == (num_src, num_dst, src.numel())
    assert s.max_in_degree == (int(deg_in.max()) if num_dst else 0) and isinstance(s.max_in_degree, int)
    assert s.max_out_degree == (int(deg_out.max()) if num_src else 0) and isinstance(s.max_out_degree, int)
    assert s.mean_in_degree == mean and s.cv_in_degree == (std / mean if mean > 0 else 0.0)


def test_statistics_of_a_graph_with_its_in_csr_only_build_no_out_csr():
    """A sampled block comes with its in-CSR: its statistics count the sources instead of building
    the out-CSR (a sort, on a GPU) for its row lengths; the same figures as from both CSRs."""
    from unigraph.structure import degree_stats
    gen = torch.Generator().manual_seed(0)
    edges = torch.stack([torch.randint(0, 30, (200,), generator=gen), torch.randint(0, 20, (200,), generator=gen)])
    g = unigraph.Graph(edges, num_src_nodes=30, num_dst_nodes=20)
    g.in_csr()
    stats = g.stats()
    assert not g.has_memo("out_csr")
    full = unigraph.Graph(edges, num_src_nodes=30, num_dst_nodes=20)
    assert stats == degree_stats(full.in_csr()[0], full.out_csr()[0])
    h = unigraph.Graph(edges, num_src_nodes=30, num_dst_nodes=20)
    h.out_csr()
    assert h.stats() == stats and not h.has_memo("in_csr")


@pytest.mark.parametrize("values,size", [([3, 0, 3, 1, 3], 4), ([3, 0, 3, 1, 3], 9), ([], 0), ([], 5), ([0], 1)])
def test_counting_indices_by_adding_equals_bincount(values, size):
    """The GPU's way of counting degrees (no host wait) gives bincount's counts, zeros past the
    largest index included; on the CPU ``count_index`` is bincount itself."""
    from unigraph.structure import _count_by_adding, count_index
    index = torch.tensor(values, dtype=torch.int64)
    expected = torch.bincount(index, minlength=size)
    for counts in (_count_by_adding(index, size), count_index(index, size)):
        assert counts.dtype == torch.int64 and torch.equal(counts, expected)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_degree_counts_statistics_and_csr_on_a_gpu_equal_the_cpu_and_count_without_waiting():
    """On a GPU a graph's degree counts (``in_degree_counts``, ``stats`` of a block with its in-CSR
    only, ``build_csr``'s row lengths) are added up on the device: ``count_index`` makes the host
    wait for nothing (sync debug mode raises on a wait), and the counts, statistics and CSRs are
    the CPU's."""
    from unigraph.structure import build_csr, count_index
    gen = torch.Generator().manual_seed(1)
    edges = torch.stack([torch.randint(0, 300, (4000,), generator=gen), torch.randint(0, 200, (4000,), generator=gen)])
    cpu = unigraph.Graph(edges, num_src_nodes=310, num_dst_nodes=205)
    gpu = unigraph.Graph(edges.cuda(), num_src_nodes=310, num_dst_nodes=205)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        counts = count_index(gpu.dst, 205)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    ptr, cols, perm = build_csr(gpu.dst, gpu.src, 205)
    assert torch.equal(counts.cpu(), torch.bincount(edges[1], minlength=205))
    for built, expected in zip((ptr, cols, perm), cpu.in_csr()):
        assert torch.equal(built.cpu(), expected)
    assert torch.equal(gpu.in_degree_counts().cpu(), cpu.in_degree_counts())
    gpu.in_csr()
    on_gpu, on_cpu = gpu.stats(), cpu.stats()   # (the CPU's come from the counting kernel's moments)
    assert not gpu.has_memo("out_csr")
    for field in ("num_src_nodes", "num_dst_nodes", "num_edges", "max_in_degree", "max_out_degree"):
        assert getattr(on_gpu, field) == getattr(on_cpu, field), field
    assert on_gpu.mean_in_degree == pytest.approx(on_cpu.mean_in_degree)
    assert on_gpu.cv_in_degree == pytest.approx(on_cpu.cv_in_degree)
