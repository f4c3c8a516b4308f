"""dgl.shortest_dist, dgl.lap_pe and dgl.LapPE (unigraph/dgl/positional.py) against DGL's: the
same distances and paths (edge ids) on graphs with parallel edges and unreachable pairs; the same
Laplacian eigenvalues, eigenvectors that are eigenvectors (DGL's up to sign where the eigenvalue is
simple), padding, the random signs from NumPy's generator."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import unigraph.dgl as udgl


def edges(seed: int, n: int = 25, density: float = 0.08):
    m = sp.random(n, n, density=density, random_state=seed)
    src, dst = torch.from_numpy(m.row).long(), torch.from_numpy(m.col).long()
    return torch.cat([src, src[:3]]), torch.cat([dst, dst[:3]])   # three parallel edges


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shortest_dist_equals_dgl(dgl, seed):
    src, dst = edges(seed)
    ours, theirs = udgl.graph((src, dst), num_nodes=25), dgl.graph((src, dst), num_nodes=25)
    assert torch.equal(udgl.shortest_dist(ours), dgl.shortest_dist(theirs))
    for a, b in zip(udgl.shortest_dist(ours, return_paths=True), dgl.shortest_dist(theirs, return_paths=True)):
        assert a.dtype == b.dtype == torch.int64 and torch.equal(a, b)
    for root in (0, 7):
        assert torch.equal(udgl.shortest_dist(ours, root), dgl.shortest_dist(theirs, root))
        for a, b in zip(udgl.shortest_dist(ours, root, True), dgl.shortest_dist(theirs, root, True)):
            assert torch.equal(a, b)


def test_shortest_dist_paths_follow_edges():
    g = udgl.graph(edges(3), num_nodes=25)
    dist, paths = udgl.shortest_dist(g, return_paths=True)
    src, dst = g.edges()
    for i, j in [(i, j) for i in range(25) for j in range(25) if dist[i, j] > 0][:60]:
        hop = paths[i, j][: dist[i, j]]
        assert (paths[i, j][dist[i, j]:] == -1).all()
        assert int(src[hop[0]]) == i and int(dst[hop[-1]]) == j
        assert torch.equal(dst[hop[:-1]], src[hop[1:]])   # consecutive edges meet


def test_lap_pe_matches_dgl_spectrum(dgl):
    src, dst = edges(4, n=12, density=0.3)
    src, dst = torch.cat([src, dst]), torch.cat([dst, src])   # symmetric: a real spectrum
    ours, theirs = udgl.graph((src, dst), num_nodes=12), dgl.graph((src, dst), num_nodes=12)
    np.random.seed(0)
    pe, values = udgl.lap_pe(ours, 4, return_eigval=True)
    np.random.seed(0)
    pe_dgl, values_dgl = dgl.lap_pe(theirs, 4, return_eigval=True)
    torch.testing.assert_close(values, values_dgl, atol=1e-4, rtol=1e-4)
    a = ours.adj_external(scipy_fmt="csr").toarray()
    scale = np.clip(ours.in_degrees().numpy(), 1, None) ** -0.5
    laplacian = torch.tensor(np.eye(12) - scale[:, None] * a * scale[None, :], dtype=torch.float32)
    torch.testing.assert_close(laplacian @ pe, pe * values, atol=1e-4, rtol=1e-4)   # eigenvectors
    simple = [i for i in range(4) if (values - values[i]).abs().lt(1e-4).sum() == 1]
    for i in simple:
        torch.testing.assert_close(pe[:, i].abs(), pe_dgl[:, i].abs(), atol=1e-3, rtol=1e-3)


def test_lap_pe_padding_transform_and_errors():
    g = udgl.graph(([0, 1, 2], [1, 2, 0]), num_nodes=3)
    pe, values = udgl.lap_pe(g, 5, padding=True, return_eigval=True)
    assert pe.shape == (3, 5) and not pe[:, 2:].any() and values[2:].isnan().all()
    with pytest.raises(udgl.DGLError, match="smaller than the number of nodes"):
        udgl.lap_pe(g, 5)
    out = udgl.LapPE(2, feat_name="eig", eigval_name="ev")(g)
    assert out is g and g.ndata["eig"].shape == (3, 2) and g.ndata["ev"].shape == (3, 2)
    with pytest.raises(udgl.DGLError, match="root 9"):
        udgl.shortest_dist(g, root=9)
