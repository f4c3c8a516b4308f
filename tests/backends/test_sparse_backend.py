"""The sparse backend's CSR product on graphs with more edges than (destination x source) cells."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph import ops

from unigraph.backends.sparse import _csr_matrix


@pytest.mark.parametrize("edges,num_nodes", [([[0, 0], [0, 0]], 1), ([[0, 1, 1, 0, 1], [0, 0, 0, 0, 0]], 2)])
def test_multigraph_with_more_edges_than_cells_pads_rows_and_matches_scatter(edges, num_nodes):
    # cuSPARSE rejects nnz > rows x cols ("invalid value" in cusparseCreateCsr, seen on an H200);
    # the matrix gets empty rows instead, so the invariant holds on every device
    g = unigraph.Graph(torch.tensor(edges), num_nodes=num_nodes)
    gt = g.tensors()
    csr = _csr_matrix(gt, torch.ones(g.num_edges, dtype=torch.float64))
    assert csr.shape[0] * csr.shape[1] >= g.num_edges and csr.shape[0] >= gt.num_dst
    x = torch.randn(num_nodes, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(g.num_edges, 3, dtype=torch.float64, requires_grad=True)
    for op, e in (("copy_u", None), ("u_mul_e", w)):
        out = ops.gspmm(g, op, "sum", x, e, backend="sparse")
        expected = ops.gspmm(g, op, "sum", x, e, backend="scatter")
        torch.testing.assert_close(out, expected)
        leaves = [t for t in (x, e) if t is not None]
        for a, b in zip(torch.autograd.grad(out.sum(), leaves), torch.autograd.grad(expected.sum(), leaves)):
            torch.testing.assert_close(a, b)


def test_whether_torch_sparse_is_installed_is_asked_once(monkeypatch):
    """Asked by every estimate and call: where torch-sparse is absent each ``find_spec`` searched
    ``sys.path`` again (~150 us on the H200 machine), so the answer is kept."""
    import importlib.util

    from unigraph.backends import sparse
    asked = []
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: asked.append(name) or real(name, *a))
    sparse._torch_sparse.cache_clear()
    try:
        first = sparse._torch_sparse()
        assert sparse._torch_sparse() is first and asked == ["torch_sparse"]
    finally:
        sparse._torch_sparse.cache_clear()
