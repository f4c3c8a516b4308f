"""SAGEConv: DGL's aggregators (DGL's SAGEConv is the oracle), PyG's aggregation names, lists and
modules (PyG's SAGEConv is), PyG's refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from unigraph.nn import aggr as our_aggr
from pyg_compare import assert_same, assert_same_as_peer, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, IN, OUT = 16, 5, 4


def edges(seed: int = 0, num_edges: int = 50) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    pairs = torch.unique(torch.randint(0, N - 1, (2, num_edges), generator=gen), dim=1)  # N-1: no in-edges
    return pairs[:, torch.randperm(pairs.shape[1], generator=gen)]


@pytest.mark.parametrize("aggr", ["pool", "gcn", "dgl_lstm"])
@pytest.mark.parametrize("in_channels", [IN, 3])  # wider and narrower than OUT (gcn projects first when wider)
def test_sage_dgl_aggregators_match_dgl(aggr, in_channels, dgl):
    from dgl.nn.pytorch import SAGEConv as DGLSAGEConv
    torch.manual_seed(0)
    theirs = DGLSAGEConv(in_channels, OUT, "lstm" if aggr == "dgl_lstm" else aggr).double()
    ours = U.SAGEConv(in_channels, OUT, aggr=aggr).double()
    with torch.no_grad():
        bias = theirs.bias if aggr == "gcn" else theirs.fc_self.bias  # DGL's one bias: where it lives
        torch.nn.init.normal_(bias)
        ours.lin_l.weight.copy_(theirs.fc_neigh.weight)
        ours.lin_l.bias.copy_(bias)
        if aggr != "gcn":
            ours.lin_r.weight.copy_(theirs.fc_self.weight)
        if aggr == "pool":
            ours.lin.load_state_dict(theirs.fc_pool.state_dict())
        if aggr == "dgl_lstm":
            ours.lstm.load_state_dict(theirs.lstm.state_dict())
    edge_index = edges(1, 70)  # in-degrees 0 to ~8, neighbours in random edge order
    g = dgl.graph((edge_index[0], edge_index[1]), num_nodes=N)
    x = torch.randn(N, in_channels, dtype=torch.float64)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, expected = ours(x_ours, edge_index), theirs(g, x_theirs)
    torch.testing.assert_close(out, expected, rtol=1e-7, atol=1e-9)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(ours.lin_l.weight.grad, theirs.fc_neigh.weight.grad, rtol=1e-7, atol=1e-9)
    # the same layer on the DGL graph itself and on a block
    torch.testing.assert_close(ours(g, x), expected.detach(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("aggr", [["mean", "max", "sum"], ["min", "add"]])
def test_sage_multi_aggregation_matches_pyg(aggr):
    torch.manual_seed(0)
    theirs = pyg_nn.SAGEConv(IN, OUT, aggr=list(aggr))
    ours = loaded(theirs, U.SAGEConv(IN, OUT, aggr=aggr))
    assert ours.lin_l.weight.shape == (OUT, len(aggr) * IN)
    assert_same(theirs, ours, torch.randn(N, IN, dtype=torch.float64), edges(2))


# PyG's names, lists with combine modes, and modules: unigraph's aggregation modules, PyG's weights
MODULE_CASES = [
    dict(aggr="std"), dict(aggr="var"), dict(aggr="softmax"), dict(aggr="powermean"),
    dict(aggr=["mean", "max", "sum", "softmax"], aggr_kwargs=dict(mode="cat", aggrs_kwargs=[{}, {}, {}, dict(
        learn=True, t=1)])),
    dict(aggr=["mean", "std"], aggr_kwargs=dict(mode="proj", mode_kwargs=dict(in_channels=IN, out_channels=6))),
    dict(aggr=["mean", "max", "min"], aggr_kwargs=dict(mode="attn", mode_kwargs=dict(in_channels=IN, out_channels=6,
                                                                                        num_heads=2))),
    dict(aggr=["sum", "var"], aggr_kwargs=dict(mode="sum")),
    dict(aggr="lstm"),
    dict(aggr="max", project=True, normalize=True, root_weight=False),
]


@pytest.mark.parametrize("case", MODULE_CASES, ids=lambda c: str(c["aggr"]) + "-" + str(c.get("aggr_kwargs", {})
                                                                                       .get("mode", "")))
def test_aggregation_names_lists_and_modes_match_pyg(case):
    torch.manual_seed(0)
    theirs = pyg_nn.SAGEConv(IN, OUT, **case)
    ours = loaded(theirs, U.SAGEConv(IN, OUT, **case))
    assert str(ours) == str(theirs)
    edge_index = edges(3, 60)
    edge_index = edge_index[:, edge_index[1].argsort(stable=True)]  # the sequence aggregations need it sorted
    x = torch.randn(N, IN, dtype=torch.float64)
    theirs.train(), ours.train()
    assert_same(theirs, ours, x, edge_index)
    # bipartite, with a (source, destination) pair
    x_dst = torch.randn(N - 1, IN, dtype=torch.float64)
    assert_same(theirs, ours, (x, x_dst), edge_index)


def test_pygs_own_aggregation_module_is_called_as_pyg_calls_it():
    torch.manual_seed(0)
    module = pyg_nn.aggr.MLPAggregation(IN, IN, max_num_elements=3, num_layers=1)
    theirs = pyg_nn.SAGEConv(IN, OUT, aggr=module)
    ours = loaded(theirs, U.SAGEConv(IN, OUT, aggr=module))
    edge_index = edges(4)
    edge_index = edge_index[:, edge_index[1].argsort(stable=True)]
    assert_same(theirs, ours, torch.randn(N, IN, dtype=torch.float64), edge_index)
    # and unigraph's own MLPAggregation computes the same as PyG's
    mine = our_aggr.MLPAggregation(IN, IN, max_num_elements=3, num_layers=1).double()
    mine.load_state_dict(module.state_dict())
    ours_with_ours = U.SAGEConv(IN, OUT, aggr=mine).double()
    ours_with_ours.load_state_dict(ours.state_dict())
    x = torch.randn(N, IN, dtype=torch.float64)
    torch.testing.assert_close(ours_with_ours(x, edge_index), theirs(x, edge_index))


def test_sequence_aggregations_refuse_unsorted_edges():
    conv = U.SAGEConv(IN, OUT, aggr="lstm")
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 1, 0]])
    with pytest.raises(ValueError, match="'index' tensor is not sorted"):
        conv(torch.randn(4, IN), edge_index)


def test_sage_aggregator_names_checked():
    with pytest.raises(ValueError, match="unknown aggregation 'median'"):
        U.SAGEConv(IN, OUT, aggr="median")
    with pytest.raises(ValueError, match="cannot be combined"):
        U.SAGEConv(IN, OUT, aggr=["mean", "dgl_lstm"])
    with pytest.raises(ValueError, match="at least one"):
        U.SAGEConv(IN, OUT, aggr=[])
    with pytest.raises(ValueError, match="aggr_kwargs configure an aggregation module"):
        U.SAGEConv(IN, OUT, aggr="pool", aggr_kwargs={"mode": "cat"})


def test_keyword_edge_index_and_flow():
    torch.manual_seed(0)
    conv = U.SAGEConv(IN, OUT).double()
    x, edge_index = torch.randn(N, IN, dtype=torch.float64), edges(5)
    out = conv(x, edge_index)
    torch.testing.assert_close(conv(x, edge_index=edge_index), out)
    conv.flow = "target_to_source"
    torch.testing.assert_close(conv(x, edge_index.flip(0)), out)


@pytest.mark.parametrize("aggr", ["mean", "max", ["mean", "std"], "softmax", "pool", "dgl_lstm", "lstm"])
def test_static_graph_is_each_feature_set_alone(aggr):
    """``[B, N, F]`` with one graph: the aggregations that mix channels (pool, LSTMs, learned
    ones) included; PyG's where it takes the same call (its LSTM needs sorted edges)."""
    from pyg_compare import assert_static_is_each_copy
    torch.manual_seed(0)
    edge_index = edges(3)
    if aggr == "lstm":
        edge_index = edge_index[:, edge_index[1].argsort(stable=True)]
    x = torch.randn(3, N, IN, dtype=torch.float64)
    out = assert_static_is_each_copy(U.SAGEConv(IN, OUT, aggr=aggr).double(), x, edge_index)
    assert out.shape == (3, N, OUT)
    if aggr in ("mean", "max", ["mean", "std"], "softmax"):
        theirs = pyg_nn.SAGEConv(IN, OUT, aggr=aggr)
        assert_same(theirs, loaded(theirs, U.SAGEConv(IN, OUT, aggr=aggr)), x, edge_index)


def test_static_graph_needs_a_square_graph():
    with pytest.raises(ValueError, match="need a square graph"):
        U.SAGEConv(IN, OUT)(torch.randn(2, N, IN), random_edges(N, 30, num_dst=4), size=(N, 4))


@pytest.mark.parametrize("in_channels", [3, IN, 9])  # aggregate, then both products / project both first
def test_sage_mean_matches_dgl_mean(in_channels, dgl):
    """The user_arxiv model's layer: SAGEConv("mean") equals DGL's with the same weights, values and
    every gradient (float64), on both of the layer's fast paths."""
    from dgl.nn.pytorch import SAGEConv as DGLSAGEConv
    out_channels = 6
    torch.manual_seed(0)
    theirs = DGLSAGEConv(in_channels, out_channels, "mean").double()
    ours = U.SAGEConv(in_channels, out_channels).double()
    with torch.no_grad():
        torch.nn.init.normal_(theirs.fc_self.bias)
        ours.lin_l.weight.copy_(theirs.fc_neigh.weight)
        ours.lin_r.weight.copy_(theirs.fc_self.weight)
        ours.lin_l.bias.copy_(theirs.fc_self.bias)
    edge_index = edges(2, 70)
    g = dgl.graph((edge_index[0], edge_index[1]), num_nodes=N)
    assert_same_as_peer(lambda x: ours(x, edge_index), lambda x: theirs(g, x),
                        torch.randn(N, in_channels, dtype=torch.float64),
                        [(ours.lin_l.weight, theirs.fc_neigh.weight), (ours.lin_r.weight, theirs.fc_self.weight),
                         (ours.lin_l.bias, theirs.fc_self.bias)])
