"""The counting-sort CSR build (``unigraph/kernels/cpu/csr.py``) gives exactly the tensors of the
stable ``torch.sort`` build it replaces on the CPU, and the degree figures the statistics need."""
from __future__ import annotations

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
