"""The counting-sort CSR build (``unigraph/kernels/cpu/csr.py``) gives exactly the tensors of the
stable ``torch.sort`` build it replaces on the CPU, and the degree figures the statistics need."""
from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("numba")

from unigraph import Graph, structure  # noqa: E402


def _sorted_csr(rows, cols, num_rows):
    """The reference: the torch path of ``structure.build_csr``."""
    perm = torch.sort(rows, stable=True).indices
    ptr = torch.zeros(num_rows + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(rows, minlength=num_rows), 0, out=ptr[1:])
    return ptr, cols[perm], perm


CASES = [(0, 0, 0), (5, 0, 5), (1, 7, 1), (40, 300, 40), (30, 200, 50), (1000, 20000, 3)]


@pytest.mark.parametrize("num_src,num_edges,num_dst", CASES)
def test_counting_csr_equals_the_stable_sort(num_src, num_edges, num_dst):
    gen = torch.Generator().manual_seed(num_src * 7 + num_edges)
    src = torch.randint(0, max(num_src, 1), (num_edges,), generator=gen)
    dst = torch.randint(0, max(num_dst, 1), (num_edges,), generator=gen)
    for rows, cols, n in ((dst, src, num_dst), (src, dst, num_src)):
        got = structure.build_csr(rows, cols, n)
        for a, b in zip(got, _sorted_csr(rows, cols, n)):
            assert a.dtype == torch.int64 and torch.equal(a, b)
    both = structure.build_both_csr(src, dst, num_src, num_dst)
    for a, b in zip(both[0] + both[1], _sorted_csr(dst, src, num_dst) + _sorted_csr(src, dst, num_src)):
        assert torch.equal(a, b)
    deg_in = torch.bincount(dst, minlength=num_dst)
    deg_out = torch.bincount(src, minlength=num_src)
    assert both[2] == (int(deg_in.max()) if num_dst else 0, int(deg_out.max()) if num_src else 0,
                       int((deg_in * deg_in).sum()))


def test_statistics_from_the_counting_kernel_equal_torchs():
    gen = torch.Generator().manual_seed(3)
    edge_index = torch.randint(0, 300, (2, 5000), generator=gen)
    fast = Graph(edge_index, num_nodes=300)
    fast.tensors()                      # both formats at once: the degree figures come with them
    assert fast.has_memo("degree_moments")
    slow = Graph(edge_index, num_nodes=300)
    slow.in_csr(), slow.out_csr()       # one at a time: the statistics take torch reductions
    assert not slow.has_memo("degree_moments")
    a, b = fast.stats(), slow.stats()
    for field in ("num_src_nodes", "num_dst_nodes", "num_edges", "mean_in_degree", "max_in_degree", "max_out_degree"):
        assert getattr(a, field) == getattr(b, field)
    assert a.cv_in_degree == pytest.approx(b.cv_in_degree, rel=1e-12)


def _plain_graph(edge_index, num_src, num_dst, bipartite):
    if bipartite:
        return Graph(edge_index, num_src_nodes=num_src, num_dst_nodes=num_dst)
    return Graph(edge_index, num_nodes=num_src)


@pytest.mark.parametrize("num_src,num_edges,num_dst", CASES)
@pytest.mark.parametrize("bipartite", [False, True])
def test_a_graph_ingested_in_one_pass_equals_the_plain_graph_with_its_formats(num_src, num_edges, num_dst, bipartite):
    """``Graph._with_formats`` (copies, checks, both CSRs and the degree figures in one kernel call,
    what a layer does with a new edge_index) builds exactly what the plain constructor and the
    formats built on first use give."""
    num_dst = num_dst if bipartite else num_src
    gen = torch.Generator().manual_seed(num_src * 5 + num_edges)
    edge_index = torch.stack([torch.randint(0, max(num_src, 1), (num_edges,), generator=gen),
                              torch.randint(0, max(num_dst, 1), (num_edges,), generator=gen)])
    fast = Graph._with_formats(edge_index, num_src, num_dst, bipartite)
    assert fast.has_memo("degree_moments") and fast.has_memo("in_csr") and fast.has_memo("out_csr")
    slow = _plain_graph(edge_index, num_src, num_dst, bipartite)
    a, b = fast.tensors(), slow.tensors()
    assert (a.num_src, a.num_dst) == (b.num_src, b.num_dst) and fast.is_bipartite == slow.is_bipartite
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            assert x.dtype == torch.int64 and torch.equal(x, y)
    assert fast.stats() == slow.stats()
    edge_index.add_(0)                       # the graph holds copies: the caller's tensor is its own
    fast._check_intact()
    fast.tensors().in_src.add_(0)            # and guards the formats it was given
    with pytest.raises(Exception, match="modified in place"):
        fast.tensors()


@pytest.mark.parametrize("bipartite", [False, True])
@pytest.mark.parametrize("row, value", [(0, -1), (0, 9), (1, -3), (1, 9)])
@pytest.mark.parametrize("csr", [True, False])
def test_an_out_of_range_index_is_named_as_the_plain_constructor_names_it(bipartite, row, value, csr):
    edge_index = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0]])
    edge_index[row, 2] = value
    with pytest.raises(ValueError) as plain:
        _plain_graph(edge_index, 4, 4, bipartite)
    with pytest.raises(ValueError) as fast:
        Graph._with_formats(edge_index, 4, 4, bipartite, csr=csr)
    assert str(fast.value) == str(plain.value) and "edge 2" in str(fast.value)


@pytest.mark.parametrize("num_src,num_edges,num_dst", CASES)
@pytest.mark.parametrize("bipartite", [False, True])
def test_a_graph_ingested_without_csr_equals_the_plain_graph_with_its_in_degrees(num_src, num_edges, num_dst,
                                                                                 bipartite):
    """``Graph._with_formats(csr=False)`` (the small-graph rule's graphs: copies, checks and the
    in-degree counts in one kernel call) holds what the plain constructor holds, and no CSR."""
    num_dst = num_dst if bipartite else num_src
    gen = torch.Generator().manual_seed(num_src * 7 + num_edges)
    edge_index = torch.stack([torch.randint(0, max(num_src, 1), (num_edges,), generator=gen),
                              torch.randint(0, max(num_dst, 1), (num_edges,), generator=gen)])
    with torch.inference_mode():   # the graph's own tensors are normal ones whatever the mode
        fast = Graph._with_formats(edge_index, num_src, num_dst, bipartite, csr=False)
    slow = _plain_graph(edge_index, num_src, num_dst, bipartite)
    assert not fast.has_memo("in_csr") and not fast.has_memo("out_csr") and fast.has_memo("in_degree_counts")
    assert (fast.num_src_nodes, fast.num_dst_nodes, fast.is_bipartite) == (slow.num_src_nodes, slow.num_dst_nodes,
                                                                           slow.is_bipartite)
    assert torch.equal(fast.src, slow.src) and torch.equal(fast.dst, slow.dst)
    assert not fast.src.is_inference() and not fast.in_degree_counts().is_inference()
    assert torch.equal(fast.in_degree_counts(), slow.in_degrees())
    assert dataclasses.asdict(fast.stats()) == pytest.approx(dataclasses.asdict(slow.stats()), rel=1e-12)
    edge_index.add_(0)                       # the graph holds copies
    fast._check_intact()
    fast.src.add_(0)                         # and guards them
    with pytest.raises(Exception, match="modified in place"):
        fast.tensors()


def test_the_one_pass_graph_owns_normal_tensors_under_inference_mode_and_falls_back_elsewhere(monkeypatch):
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    with torch.inference_mode():
        g = Graph._with_formats(edge_index, 3, 3, False)
    assert not any(t.is_inference() for t in g.tensors() if isinstance(t, torch.Tensor))
    assert not Graph._with_formats(edge_index.int(), 3, 3, False).has_memo("in_csr")   # int32: the plain path
    monkeypatch.setattr(structure, "_numba_csr", lambda: False)
    assert not Graph._with_formats(edge_index, 3, 3, False).has_memo("in_csr")          # no numba: the plain path


@pytest.mark.parametrize("num_src,num_edges,num_dst", CASES + [(6, 40, 6)])
def test_the_self_looped_edge_list_in_one_call_equals_torchs(num_src, num_edges, num_dst):
    """``structure.self_looped_edges``'s kernel: the non-loop edges in order, then one loop per node
    below ``min(num_src, num_dst)``; ``kept`` and ``loop_slot`` as ``self_loop_parts`` gives them
    (graphs with several loops on a node, only loops, bipartite sizes, no edges)."""
    gen = torch.Generator().manual_seed(num_src * 3 + num_edges)
    src = torch.randint(0, max(num_src, 1), (num_edges,), generator=gen)
    dst = torch.randint(0, max(num_dst, 1), (num_edges,), generator=gen)
    if num_edges:
        dst[::3] = src[::3].clamp(max=max(num_dst - 1, 0))   # loops, several per node
    num_loops = min(num_src, num_dst)
    got = structure.self_looped_edges(src, dst, num_loops)
    kept, loop_slot = structure.self_loop_parts(src, dst, num_loops)
    loops = torch.arange(num_loops)
    expected = (torch.cat([src[kept], loops]), torch.cat([dst[kept], loops]), kept, loop_slot)
    for a, b in zip(got, expected):
        assert a.dtype == torch.int64 and torch.equal(a, b)
    with torch.inference_mode():
        assert not any(t.is_inference() for t in structure.self_looped_edges(src, dst, num_loops))
