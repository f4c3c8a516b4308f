"""FastRGCNConv: PyG's name for the same relational convolution (RGCNConv's function and
parameters): PyG's FastRGCNConv weights load and give its numbers."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(num_bases=2, aggr="sum"), dict(num_blocks=2)])
def test_fast_rgcn_conv_matches_pyg(kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.FastRGCNConv(4, 6, 3, **kwargs)
    ours = loaded(theirs, U.FastRGCNConv(4, 6, 3, **kwargs))
    assert str(ours) == str(theirs) == "FastRGCNConv(4, 6, num_relations=3)"
    edge_index = random_edges(10, 30)
    edge_type = torch.randint(0, 3, (30,))
    assert_same(theirs, ours, torch.randn(10, 4, dtype=torch.float64), edge_index, edge_type)
    assert isinstance(ours, U.RGCNConv)


def test_static_graph_refused_by_name():
    with pytest.raises(ValueError, match="does not take static graphs"):
        U.RGCNConv(4, 5, 2)(torch.randn(2, 6, 4), random_edges(6, 10), torch.zeros(10, dtype=torch.int64))
