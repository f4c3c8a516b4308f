"""HeteroConv in PyG's form: extra dicts passed positionally (PyG's rule per relation), node
types with dots, PyG's module keys (a PyG state_dict loads), PyG's own layers inside."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def data(dotted: bool = False):
    paper = "src.paper" if dotted else "paper"
    gen = torch.Generator().manual_seed(0)
    x = {paper: torch.randn(6, 4, generator=gen, dtype=torch.float64),
         "author": torch.randn(5, 3, generator=gen, dtype=torch.float64)}
    edges = {(paper, "cites", paper): torch.randint(0, 6, (2, 12), generator=gen),
             (paper, "to", "author"): torch.stack([torch.randint(0, 6, (9,), generator=gen),
                                                   torch.randint(0, 5, (9,), generator=gen)]),
             ("author", "to", paper): torch.stack([torch.randint(0, 5, (9,), generator=gen),
                                                   torch.randint(0, 6, (9,), generator=gen)])}
    return x, edges


def convs(lib, paper):
    return {(paper, "cites", paper): lib.GCNConv(4, 7), (paper, "to", "author"): lib.SAGEConv((4, 3), 7),
            ("author", "to", paper): lib.GATConv((3, 4), 7, add_self_loops=False, edge_dim=2)}


@pytest.mark.parametrize("dotted", [False, True])
def test_pyg_state_dict_loads_and_positional_dicts_follow_pygs_rule(dotted):
    x, edges = data(dotted)
    paper = "src.paper" if dotted else "paper"
    torch.manual_seed(0)
    theirs = pyg_nn.HeteroConv(convs(pyg_nn, paper), aggr="sum").double()
    ours = U.HeteroConv(convs(U, paper), aggr="sum").double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert str(ours) == str(theirs) == "HeteroConv(num_relations=3)"
    edge_attr = {("author", "to", paper): torch.randn(9, 2, dtype=torch.float64)}
    weights = {(paper, "cites", paper): torch.rand(12, dtype=torch.float64)}
    expected = theirs(x, edges, edge_attr, edge_weight_dict=weights)  # edge_attr_dict positionally
    out = ours(x, edges, edge_attr, edge_weight_dict=weights)
    assert set(out) == set(expected)
    for key in out:
        torch.testing.assert_close(out[key], expected[key], **TOL)


def test_pygs_own_layers_inside():
    x, edges = data()
    torch.manual_seed(0)
    layers = {("paper", "cites", "paper"): pyg_nn.GCN2Conv(4, alpha=0.1).double()}
    out = U.HeteroConv(layers)(x, x, {r: edges[r] for r in layers})  # GCN2Conv(x, x_0, edge_index)
    expected = pyg_nn.HeteroConv(layers)(x, x, {r: edges[r] for r in layers})
    torch.testing.assert_close(out["paper"], expected["paper"], **TOL)


def test_self_loops_between_two_types_refused():
    with pytest.raises(ValueError, match="incorrect message passing"):
        U.HeteroConv({("a", "to", "b"): U.GCNConv(4, 4)})
