"""The interpreter's reduction of destination terms (``unigraph/message_passing/lazy.py``): a value
that is the same on every in-edge of a destination, summed over no in-edges, is 0 as on the plain
path, also where that value is inf or nan (``0 * inf`` is nan). Values only: gradients that reach
a parameter through rows no edge reads are ``0 * inf`` there (see docs/message_passing.md, "What
the fast paths assume")."""
from __future__ import annotations

import pytest
import torch

import unigraph
from fused_vs_plain import Inputs, assert_same, fused_and_plain, make_graph


@pytest.mark.parametrize("body", [
    lambda x_j, x_i, w, p: x_j + x_i * p,
    lambda x_j, x_i, w, p: (x_j * w) * (x_i * p),
    lambda x_j, x_i, w, p: x_i * p,
], ids=["x_j + y_i", "(x_j * w) * y_i", "y_i"])
def test_destination_terms_at_nodes_without_in_edges(body):
    base = make_graph()
    g = unigraph.Graph(torch.stack([base.src, base.dst]), num_nodes=8)
    inputs = Inputs(g, grad=False)
    isolated = 7  # no edges at all
    assert g.in_degrees()[isolated] == 0 and g.out_degrees()[isolated] == 0
    with torch.no_grad():
        inputs.x[isolated] = torch.tensor([float("inf"), -float("inf"), float("nan"), 1.0])
    for what, got, want in fused_and_plain(body, g, inputs):
        assert torch.isfinite(want[0][isolated]).all()
        assert_same(got, want, what)
