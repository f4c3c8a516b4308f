"""unigraph.nn.norm against torch_geometric.nn.norm (float64, train and eval, with and without a
batch vector: outputs, gradients, running statistics), and graph ids out of range refused."""
from __future__ import annotations

import pytest
import torch

from unigraph.nn import norm as ours
from pyg_compare import assert_same

pyg_norm = pytest.importorskip("torch_geometric.nn.norm", reason="PyG is the reference (test extra)")

F = 4
BATCH = torch.tensor([0, 0, 0, 1, 1, 3, 3, 3])  # graph 2 has no nodes

CASES = [("BatchNorm", {}), ("LayerNorm", {}), ("LayerNorm", dict(mode="node")), ("LayerNorm", dict(affine=False)),
         ("GraphNorm", {}), ("InstanceNorm", {}), ("InstanceNorm", dict(affine=True, track_running_stats=True))]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("with_batch", [False, True])
def test_matches_pyg(name, kwargs, with_batch):
    if with_batch and name == "BatchNorm":
        pytest.skip("BatchNorm takes no batch vector")
    torch.manual_seed(0)
    theirs = getattr(pyg_norm, name)(F, **kwargs).double()
    mine = getattr(ours, name)(F, **kwargs).double()
    mine.load_state_dict(theirs.state_dict(), strict=True)
    extra = dict(batch=BATCH, batch_size=4) if with_batch else {}
    for _ in range(2):  # train twice (running statistics move), then eval
        assert_same(theirs.train(), mine.train(), torch.randn(BATCH.numel(), F, dtype=torch.float64), **extra)
        with torch.no_grad():  # PyG's InstanceNorm keeps its running statistics attached to the graph
            for key, buffer in list(theirs.named_buffers()):
                setattr(theirs, key, buffer.detach())
    for key, buffer in theirs.named_buffers():
        torch.testing.assert_close(dict(mine.named_buffers())[key], buffer)
    assert_same(theirs.eval(), mine.eval(), torch.randn(BATCH.numel(), F, dtype=torch.float64), **extra)


def test_graph_ids_out_of_range_are_refused_before_computing():
    for layer in (ours.LayerNorm(F), ours.GraphNorm(F), ours.InstanceNorm(F)):
        with pytest.raises(ours.BatchIndexError, match="graph id 3, out of bounds for batch_size=2"):
            layer(torch.randn(BATCH.numel(), F), BATCH, batch_size=2)
        with pytest.raises(ValueError, match="batch has 2 entries but x has 8 rows"):
            layer(torch.randn(8, F), torch.tensor([0, 1]))
    assert issubclass(ours.BatchIndexError, RuntimeError)  # what PyG's scatter raises


def test_resolver_names():
    from unigraph.nn.resolver import activation_resolver, normalization_resolver
    assert isinstance(normalization_resolver("batch_norm", F), ours.BatchNorm)
    assert isinstance(normalization_resolver("GraphNorm", F), ours.GraphNorm)
    assert normalization_resolver("layer", F, mode="node").mode == "node"
    assert isinstance(activation_resolver("leaky_relu", negative_slope=0.1), torch.nn.LeakyReLU)
    assert activation_resolver(None) is None
    with pytest.raises(ValueError, match="unknown normalization 'pair'"):
        normalization_resolver("pair", F)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name, kwargs", [("LayerNorm", {"mode": "graph"}), ("GraphNorm", {}), ("InstanceNorm", {})])
def test_half_precision_statistics_of_a_large_graph_are_taken_in_float32(dtype, name, kwargs):
    """A graph of 15,000 nodes x 32 features: its sums of squares and LayerNorm's entry count pass
    float16's 65,504 (the statistics came out 0 or inf, the output silently wrong); each graph's
    statistics are now taken in float32 and the output rounded once: the float64 result, rounded,
    within the dtype's own step."""
    from unigraph import nn as U
    gen = torch.Generator().manual_seed(0)
    batch = torch.cat([torch.zeros(15000, dtype=torch.long), torch.ones(40, dtype=torch.long)])
    x = torch.randn(15040, 32, generator=gen, dtype=torch.float64) * 3 + 1
    torch.manual_seed(0)
    layer = getattr(U, name)(32, **kwargs)
    expected = layer.double()(x, batch)
    out = layer.to(dtype)(x.to(dtype), batch)
    assert out.dtype == dtype and torch.isfinite(out).all()
    step = {torch.float16: 1e-2, torch.bfloat16: 6e-2}[dtype]
    torch.testing.assert_close(out.double(), expected, rtol=step, atol=step)


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_device_argument_places_the_parameters_and_buffers(name, kwargs):
    # PyG's norms take device=; a "meta" module has no storage, so every tensor is seen to follow it
    module = getattr(ours, name)(F, **kwargs, device="meta")
    tensors = list(module.parameters()) + [b for b in module.buffers() if b.dim() > 0]
    assert all(t.device.type == "meta" for t in tensors)   # (LayerNorm(affine=False), InstanceNorm(): none)


def test_batch_norm_running_statistics_reset():
    norm = ours.BatchNorm(F)
    norm(torch.randn(6, F) * 3 + 1)
    assert not torch.equal(norm.module.running_mean, torch.zeros(F))
    norm.reset_running_stats()
    assert torch.equal(norm.module.running_mean, torch.zeros(F)) and torch.equal(norm.module.running_var, torch.ones(F))
    with pytest.raises(ValueError, match="requires 'track_running_stats'"):
        ours.BatchNorm(F, track_running_stats=False, allow_single_element=True)
