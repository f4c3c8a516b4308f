"""GPSConv against PyG's: values and gradients (float64) for both attention types over the norms,
with and without a batch vector and a local layer, dropout in eval mode, the Performer attention
on its own, the call forms, PyG's repr and state_dict, and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from unigraph.nn.gps_conv import PerformerAttention, dense_batch
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
SparseTensor = pytest.importorskip("torch_sparse").SparseTensor

BATCH = torch.tensor([0, 0, 0, 1, 1, 2, 2])


def inputs():
    return torch.randn(7, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1)), random_edges(7, 20)


def pair(local: bool = True, seed: int = 0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.GPSConv(8, pyg_nn.SAGEConv(8, 8) if local else None, **options)
    return theirs, loaded(theirs, U.GPSConv(8, U.SAGEConv(8, 8) if local else None, **options))


@pytest.mark.parametrize("attn_type", ["multihead", "performer"])
@pytest.mark.parametrize("norm", [None, "batch_norm", "layer_norm", "graph_norm", "instance_norm"])
def test_attention_and_norms_equal_pygs(attn_type, norm):
    theirs, ours = pair(heads=2, norm=norm, attn_type=attn_type)
    assert str(ours) == str(theirs) == f"GPSConv(8, conv=SAGEConv(8, 8, aggr=mean), heads=2, attn_type={attn_type})"
    x, edge_index = inputs()
    for batch in (None, BATCH):   # (training mode: the batch norms use the batch statistics)
        theirs.zero_grad()
        ours.zero_grad()
        assert_same(theirs, ours, x, edge_index, batch)


@pytest.mark.parametrize("attn_type, attn_kwargs", [
    ("multihead", dict(bias=False)),
    ("performer", dict(head_channels=4, qkv_bias=True, attn_out_bias=False, kernel=torch.nn.ELU())),
])
def test_options_equal_pygs(attn_type, attn_kwargs):
    theirs, ours = pair(heads=4, attn_type=attn_type, attn_kwargs=attn_kwargs, act="gelu", dropout=0.3,
                        norm="layer_norm", norm_kwargs=dict(mode="node"))
    theirs.eval()
    ours.eval()
    x, edge_index = inputs()
    assert_same(theirs, ours, x, edge_index, BATCH)
    theirs, ours = pair(local=False, attn_type=attn_type, attn_kwargs=attn_kwargs)
    assert str(ours) == str(theirs)
    assert_same(theirs, ours, x, edge_index, BATCH)


def test_call_forms_equal_pygs():
    theirs, ours = pair(heads=2, attn_type="performer")
    x, edge_index = inputs()
    expected = assert_same(theirs, ours, x, edge_index, BATCH)
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, None, (7, 7)).t(), BATCH)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=7), x, BATCH), expected, **TOL)


def test_performer_attention_equals_pygs():
    from torch_geometric.nn.attention import PerformerAttention as Theirs
    torch.manual_seed(0)
    theirs = Theirs(8, heads=2, head_channels=5)
    ours = loaded(theirs, PerformerAttention(8, heads=2, head_channels=5))
    assert str(ours) == str(theirs)
    assert ours.fast_attn.projection_matrix.shape == (int(5 * torch.log(torch.tensor(5.0))), 5)
    x = torch.randn(3, 4, 8, dtype=torch.float64)
    mask = torch.tensor([[True] * 4, [True, True, False, False], [True, False, False, False]])
    assert_same(theirs, ours, x, mask)
    ours._reset_parameters()   # a new projection: orthonormal rows within each block
    block = ours.fast_attn.projection_matrix[:5].float()
    torch.testing.assert_close(block @ block.t(), torch.eye(5), atol=1e-5, rtol=0)


def test_dense_batch_places_each_graph_in_a_row():
    x = torch.arange(14.0).view(7, 2)
    dense, mask, slots = dense_batch(x, BATCH)
    assert dense.shape == (3, 3, 2)
    assert mask.tolist() == [[True] * 3, [True, True, False], [True, True, False]]
    torch.testing.assert_close(dense[mask], x)
    torch.testing.assert_close(dense.view(-1, 2)[slots], x)


def test_refusals():
    with pytest.raises(ValueError, match="attn_type must be one of"):
        U.GPSConv(8, None, attn_type="bigbird")
    with pytest.raises(ValueError, match="divisible by heads"):
        U.GPSConv(8, None, heads=3)
    with pytest.raises(ValueError, match="dropout must be in"):
        U.GPSConv(8, None, dropout=1.5)
    with pytest.raises(ValueError, match="unknown normalization"):
        U.GPSConv(8, None, norm="nope")
    conv = U.GPSConv(8, U.SAGEConv(8, 8))
    x, edge_index = inputs()
    x = x.float()
    with pytest.raises(ValueError, match="must be sorted"):
        conv(x, edge_index, BATCH.flip(0))
    with pytest.raises(ValueError, match=r"shape \[7\]"):
        conv(x, edge_index, BATCH[:5])
    with pytest.raises(ValueError, match=r"\[num_nodes, 8\]"):
        conv(x[:, :6], edge_index)
