"""The custom operators that build graph structure inside compiled programs
(``unigraph/traced_structure.py``): schema, fake (shape-only) implementation and real one agree
(``torch.library.opcheck``), and the real one is the eager rule, raising its errors."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph.self_loops import with_self_loops
from unigraph.structure import build_csr, self_loop_parts


def edges(num_nodes=9, num_edges=30, seed=0):
    """Random edges without self-loops but the first four: ``0->0, 3->3, 3->3, 5->5``."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = (src + torch.randint(1, num_nodes, (num_edges,), generator=gen)) % num_nodes
    edge_index = torch.stack([src, dst])
    edge_index[:, :4] = torch.tensor([[0, 3, 3, 5], [0, 3, 3, 5]])
    return edge_index


@pytest.mark.parametrize("num_edges", [0, 30])
def test_operators_pass_opcheck(num_edges):
    edge_index = edges(num_edges=max(num_edges, 4))[:, :num_edges]
    src, dst = edge_index
    torch.library.opcheck(torch.ops.unigraph.checked_edges.default, (edge_index.to(torch.int32), 9, 9, False))
    torch.library.opcheck(torch.ops.unigraph.csr.default, (dst, src, 9))
    torch.library.opcheck(torch.ops.unigraph.self_loop_parts.default, (src, dst, 9))


def test_the_operators_compute_the_eager_rule():
    edge_index = edges()
    src, dst = torch.ops.unigraph.checked_edges(edge_index.to(torch.int32), 9, 9, False)
    assert src.dtype == dst.dtype == torch.int64 and torch.equal(torch.stack([src, dst]), edge_index)
    for got, want in zip(torch.ops.unigraph.csr(dst, src, 9), build_csr(dst, src, 9)):
        assert torch.equal(got, want)
    kept, loop_slot = torch.ops.unigraph.self_loop_parts(src, dst, 9)
    assert torch.equal(kept, torch.arange(4, 30))
    assert loop_slot.tolist() == [0, 3, 3, 5] + [9] * 26
    assert all(torch.equal(a, b) for a, b in zip((kept, loop_slot), self_loop_parts(src, dst, 9)))


def test_checked_edges_raises_the_graphs_errors():
    bipartite = torch.tensor([[0, 4], [1, 2]])
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds index 4 .* num_src_nodes=3"):
        torch.ops.unigraph.checked_edges(bipartite, 3, 3, True)
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds index 4 .* num_src_nodes=3"):
        unigraph.Graph(bipartite, num_src_nodes=3, num_dst_nodes=3)
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds the negative index -2"):
        torch.ops.unigraph.checked_edges(torch.tensor([[0, 1], [1, -2]]), 3, 3, False)


def test_existing_loop_values_keep_the_last_loop_and_send_gradients_as_pyg():
    """GCN's loop weights: an existing loop keeps its weight (the last of several); the others get
    ``fill``. The gradient reaches every existing loop of a node, as PyG's index_put sends it."""
    g = unigraph.Graph(edges(), num_nodes=9)
    looped = with_self_loops(g)
    weights = torch.arange(1.0, 31.0, dtype=torch.float64, requires_grad=True)
    loop_weights = looped.existing_loop_values(weights, 0.5)
    expected = torch.full((9,), 0.5, dtype=torch.float64)
    expected[[0, 3, 5]] = torch.tensor([1.0, 3.0, 4.0], dtype=torch.float64)
    torch.testing.assert_close(loop_weights, expected, rtol=0, atol=0)
    (grad,) = torch.autograd.grad(loop_weights.sum(), weights)
    assert grad.tolist() == [1.0] * 4 + [0.0] * 26
