"""The layers that normalize by a weighted degree, in bfloat16 and float16, on a graph with a
3,000-edge in-hub: the degree is summed (and inverted) in float32 and rounded once, so the hub's
output stays within a few units of the format's precision of the float32 layer's. A half-precision
running sum of weights stops growing at 256 (bfloat16) or 2,048 (float16): before 2026-11-28 these
layers' hub rows were 2-3x off in bfloat16 and 7-24% in float16, with no error."""
from __future__ import annotations

import pytest
import torch
from torch.nn import Linear

import unigraph.nn as U

N = 3001
# name -> (constructor, what the call adds after (x, edge_index))
LAYERS = {
    "FAConv": (lambda: U.FAConv(8, eps=0.2), "x0"),
    "ClusterGCNConv": (lambda: U.ClusterGCNConv(8, 8, diag_lambda=0.5), None),
    "WLConvContinuous": (lambda: U.WLConvContinuous(), "weight"),
    "PDNConv": (lambda: U.PDNConv(8, 8, edge_dim=3, hidden_channels=4), "edge_attr"),
    "LEConv": (lambda: U.LEConv(8, 8), "weight"),
    "ChebConv": (lambda: U.ChebConv(8, 8, K=2), "weight"),
    "HypergraphConv": (lambda: U.HypergraphConv(8, 8), "hyperedge_weight"),
    "GCNConv": (lambda: U.GCNConv(8, 8), "weight"),
    "SAGEConv": (lambda: U.SAGEConv(8, 8), None),
    "GINEConv": (lambda: U.GINEConv(Linear(8, 8), edge_dim=3), "edge_attr"),
}
UNITS = 12   # allowed error at the hub, in units of the format's precision (observed: up to ~6)


def _graph():
    gen = torch.Generator().manual_seed(0)
    hub = torch.stack([torch.arange(1, N), torch.zeros(N - 1, dtype=torch.long)])   # every node -> node 0
    return torch.cat([hub, torch.randint(0, N, (2, 2000), generator=gen)], 1), gen


def _call(layer, x, edge_index, extra, inputs):
    if extra == "x0":
        return layer(x, inputs["x0"], edge_index)
    if extra == "hyperedge_weight":   # node 0 in 3,000 hyperedges: its degree sums their weights
        return layer(x, edge_index.flip(0), inputs["hyperedge_weight"])
    return layer(x, edge_index, *([inputs[extra]] if extra else []))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", LAYERS)
def test_a_hub_in_half_precision_is_within_its_rounding(name, dtype):
    make, extra = LAYERS[name]
    torch.manual_seed(0)
    reference_layer = make().eval()
    layer = make().eval()
    layer.load_state_dict(reference_layer.state_dict())
    layer = layer.to(dtype)
    edge_index, gen = _graph()
    x = torch.rand(N, 8, generator=gen)
    inputs = {"edge_attr": torch.rand(edge_index.shape[1], 3, generator=gen),
              "weight": torch.rand(edge_index.shape[1], generator=gen) + 0.1,
              "x0": torch.rand(N, 8, generator=gen),
              "hyperedge_weight": torch.rand(N, generator=gen) + 0.5}
    with torch.no_grad():
        expected = _call(reference_layer, x, edge_index, extra, inputs)
        out = _call(layer, x.to(dtype), edge_index, extra, {k: v.to(dtype) for k, v in inputs.items()})
    # relative to the hub row's largest value: a column that cancels there (ChebConv's 2,000-sized
    # terms summing to ~1) keeps only that much precision in any half-precision arithmetic
    error = (out[0].float() - expected[0]).abs().max() / expected[0].abs().max()
    assert error <= UNITS * torch.finfo(dtype).eps, f"{name} {dtype}: hub off by {float(error):.3g}"
