"""unigraph.nn.models against PyG's torch_geometric.nn.models: the same arguments build the same
parameters (PyG's state_dict loads strictly) and the same function, forward and backward, in
float64; unigraph's own call forms (a Graph, blocks) give the same numbers as PyG's."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import unigraph
from unigraph.nn import models as ours

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference (test extra)")

N, IN, HIDDEN, OUT, EDGE_DIM = 12, 5, 8, 3, 2


def graph(seed: int = 0, num_edges: int = 40) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, N, (2, num_edges), generator=g)


def build(name: str, **kwargs):
    """PyG's model and ours with the same arguments, PyG's weights loaded into ours (strict)."""
    torch.manual_seed(0)
    theirs = getattr(pyg_models, name)(IN, HIDDEN, **kwargs).double()
    mine = getattr(ours, name)(IN, HIDDEN, **kwargs).double()
    assert [k for k in mine.state_dict()] == [k for k in theirs.state_dict()]
    mine.load_state_dict(theirs.state_dict(), strict=True)
    return theirs, mine


def compare(theirs, mine, *args, train: bool = False, **kwargs) -> None:
    """Outputs, input gradients and parameter gradients equal to 1e-9 (float64)."""
    theirs.train(train)
    mine.train(train)
    x = torch.randn(N, IN, dtype=torch.float64)
    x_theirs, x_mine = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected, out = theirs(x_theirs, *args, **kwargs), mine(x_mine, *args, **kwargs)
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-9)
    weights = torch.randn_like(expected)
    (expected * weights).sum().backward()
    (out * weights).sum().backward()
    torch.testing.assert_close(x_mine.grad, x_theirs.grad, rtol=1e-9, atol=1e-9)
    grads_theirs = {k: p.grad for k, p in theirs.named_parameters()}
    for key, p in mine.named_parameters():
        if grads_theirs[key] is None:
            assert p.grad is None or not p.grad.any(), key
        else:
            torch.testing.assert_close(p.grad, grads_theirs[key], rtol=1e-9, atol=1e-9, msg=key)
    for key, buffer in theirs.named_buffers():  # running statistics after a training step
        torch.testing.assert_close(dict(mine.named_buffers())[key], buffer, rtol=1e-9, atol=1e-9)


PNA_ARGS = dict(aggregators=["mean", "min", "max", "std", "var", "sum"],
                scalers=["identity", "amplification", "attenuation", "linear", "inverse_linear"],
                deg=torch.tensor([1, 3, 4, 2, 2]))
CASES = [
    ("GCN", dict(num_layers=2, out_channels=OUT)),
    ("GCN", dict(num_layers=3, norm="batch_norm", jk="cat", act="leaky_relu", act_kwargs={"negative_slope": 0.3})),
    ("GCN", dict(num_layers=2, improved=True, add_self_loops=True, jk="lstm", out_channels=OUT)),
    ("GraphSAGE", dict(num_layers=3, out_channels=OUT, norm="layer_norm", act_first=True)),
    ("GraphSAGE", dict(num_layers=2, aggr="max", jk="max", norm="graph_norm")),
    ("GIN", dict(num_layers=2, out_channels=OUT, norm="batch_norm", train_eps=True)),
    ("GIN", dict(num_layers=3, jk="last", act=F.elu)),
    ("GAT", dict(num_layers=2, out_channels=OUT, heads=2)),
    ("GAT", dict(num_layers=3, heads=4, v2=True, jk="cat", norm="layer_norm")),
    ("GAT", dict(num_layers=2, heads=2, edge_dim=EDGE_DIM, out_channels=OUT)),
    ("EdgeCNN", dict(num_layers=2, out_channels=OUT, norm="batch_norm")),
    ("PNA", dict(num_layers=2, out_channels=4, edge_dim=EDGE_DIM, towers=2, **PNA_ARGS)),
]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_same_function_as_pyg_given_pyg_weights(name, kwargs):
    theirs, mine = build(name, **kwargs)
    assert str(mine) == str(theirs)
    edge_index = graph()
    extra = {}
    if name == "GCN":
        extra["edge_weight"] = torch.rand(edge_index.shape[1], dtype=torch.float64)
    if kwargs.get("edge_dim"):
        extra["edge_attr"] = torch.randn(edge_index.shape[1], EDGE_DIM, dtype=torch.float64)
    compare(theirs, mine, edge_index, **extra)
    compare(theirs, mine, edge_index, train=True, **extra)  # batch statistics; no dropout in these cases


def test_dropout_and_attention_dropout_follow_the_mode():
    _, mine = build("GAT", num_layers=2, heads=2, dropout=0.5)
    x, edge_index = torch.randn(N, IN, dtype=torch.float64), graph()
    mine.eval()
    torch.testing.assert_close(mine(x, edge_index), mine(x, edge_index))
    assert mine.convs[0].dropout == 0.5  # PyG passes the model's dropout to the attention
    mine.train()
    assert not torch.equal(mine(x, edge_index), mine(x, edge_index))


def test_batch_aware_norms_get_the_batch_and_refuse_ids_out_of_range():
    batch = torch.tensor([0] * 5 + [1] * 7)
    for norm in ("GraphNorm", "InstanceNorm", "LayerNorm"):
        theirs, mine = build("GraphSAGE", num_layers=2, norm=norm)
        assert mine.supports_norm_batch and theirs.supports_norm_batch
        compare(theirs, mine, graph(), batch=batch, train=True)
        with pytest.raises(RuntimeError, match="out of bounds"):
            mine(torch.randn(N, IN, dtype=torch.float64), graph(), batch=batch, batch_size=1)
    assert not ours.GraphSAGE(IN, HIDDEN, 2, norm="BatchNorm").supports_norm_batch


def test_unigraph_graph_and_blocks_give_the_pyg_form_numbers():
    theirs, mine = build("GraphSAGE", num_layers=2, out_channels=OUT, jk="cat")
    mine.eval()
    edge_index = graph()
    x = torch.randn(N, IN, dtype=torch.float64)
    expected = mine(x, edge_index)
    g = unigraph.Graph(edge_index, num_nodes=N)
    torch.testing.assert_close(mine(g, x), expected)
    # blocks: layer 0 on every node, layer 1 on the first 4 (their rows are the output)
    first = unigraph.Graph(edge_index, num_src_nodes=N, num_dst_nodes=N)
    keep = edge_index[1] < 4
    second = unigraph.Graph(edge_index[:, keep], num_src_nodes=N, num_dst_nodes=4)
    torch.testing.assert_close(mine([first, second], x), expected[:4])
    with pytest.raises(ValueError, match="2 layers but got 1 blocks"):
        mine([first], x)


def test_trimming_per_hop_matches_pyg():
    # nodes by hop: 2 seeds, then 3, then 4; edges by hop: 3 into the seeds, then 5 into hop 1
    edge_index = torch.tensor([[2, 3, 4, 5, 6, 7, 8, 5], [0, 1, 0, 2, 3, 4, 2, 3]])
    nodes, edges = [2, 3, 4], [3, 5]
    for name in ("GraphSAGE", "GCN"):
        theirs, mine = build(name, num_layers=2, out_channels=OUT)
        theirs.eval(), mine.eval()
        x = torch.randn(9, IN, dtype=torch.float64)
        expected = theirs(x, edge_index, num_sampled_nodes_per_hop=nodes, num_sampled_edges_per_hop=edges)
        out = mine(x, edge_index, num_sampled_nodes_per_hop=nodes, num_sampled_edges_per_hop=edges)
        torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-9)
        if name == "GraphSAGE":  # (GCN's degrees see the trimmed edges: the seeds' outputs change)
            torch.testing.assert_close(out[:2], mine(x, edge_index)[:2], rtol=1e-9, atol=1e-9)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="jk must be one of"):
        ours.GCN(IN, HIDDEN, 2, jk="sum")
    with pytest.raises(ValueError, match="unknown activation 'relu6x'"):
        ours.GCN(IN, HIDDEN, 2, act="relu6x")
    with pytest.raises(ValueError, match="unknown normalization 'pair_norm_x'"):
        ours.GCN(IN, HIDDEN, 2, norm="pair_norm_x")
    with pytest.raises(ValueError, match="divisible by heads=3"):
        ours.GAT(IN, HIDDEN, 2, heads=3)
    with pytest.raises(ValueError, match="num_layers must be a positive int"):
        ours.GIN(IN, HIDDEN, 0)


def test_reexported_where_pyg_users_look():
    import unigraph.nn as nn
    assert nn.GCN is ours.GCN and nn.models.GraphSAGE is ours.GraphSAGE and nn.MLP is ours.MLP


class _Batch:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def one_hop_batches(edge_index: torch.Tensor, seeds_per_batch: int) -> list:
    """What PyG's NeighborLoader(num_neighbors=[-1]) yields: seeds first, then their in-neighbours,
    every edge into the seeds, in local ids."""
    batches = []
    for start in range(0, N, seeds_per_batch):
        seeds = torch.arange(start, min(start + seeds_per_batch, N))
        into = torch.isin(edge_index[1], seeds)
        others = torch.unique(edge_index[0, into])
        n_id = torch.cat([seeds, others[~torch.isin(others, seeds)]])
        local = torch.full((N,), -1, dtype=torch.long)
        local[n_id] = torch.arange(n_id.numel())
        batches.append(_Batch(n_id=n_id, batch_size=seeds.numel(), edge_index=local[edge_index[:, into]]))
    return batches


def test_layer_wise_inference_equals_the_full_forward():
    edge_index = graph()
    x = torch.randn(N, IN, dtype=torch.float64)

    class Loader(list):
        data = _Batch(x=x)

    # (GCN's normalization reads source degrees, which a one-hop batch does not hold: PyG's too)
    for name, kwargs in (("GraphSAGE", dict(jk="last", norm="batch_norm")), ("GIN", dict(out_channels=OUT))):
        _, mine = build(name, num_layers=2, **kwargs)
        mine.eval()
        loader = Loader(one_hop_batches(edge_index, 5))
        torch.testing.assert_close(mine.inference(loader, cache=True), mine(x, edge_index), rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="eval mode"):
        mine.train().inference(loader)


def test_whole_model_pickles(tmp_path):
    """torch.save of the model object (not only its state_dict) and deepcopy: what a layer read of
    its message/update hooks is rebuilt on loading."""
    import copy
    _, mine = build("GIN", num_layers=2, out_channels=OUT, norm="batch_norm")
    mine.eval()
    x, edge_index = torch.randn(N, IN, dtype=torch.float64), graph()
    torch.save(mine, tmp_path / "model.pt")
    loaded = torch.load(tmp_path / "model.pt", weights_only=False)
    torch.testing.assert_close(loaded(x, edge_index), mine(x, edge_index), rtol=0, atol=0)
    torch.testing.assert_close(copy.deepcopy(mine)(x, edge_index), mine(x, edge_index), rtol=0, atol=0)
