"""GCNConv aggregates at the narrower width (in < out: aggregate, then project): both orders give
the dense formula D^-1/2 (A + I) D^-1/2 X W + b, values and gradients, with and without edge
weights, on a graph with a multi-edge and an isolated node."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph.nn import GCNConv


def _dense_gcn(edge_index, num_nodes, x, weight, bias, edge_weight):
    a = torch.zeros(num_nodes, num_nodes, dtype=x.dtype)
    w = edge_weight if edge_weight is not None else torch.ones(edge_index.shape[1], dtype=x.dtype)
    a.index_put_((edge_index[1], edge_index[0]), w, accumulate=True)   # a[dst, src]
    a = a + torch.eye(num_nodes, dtype=x.dtype)                         # one added self-loop per node
    d = a.sum(1).pow(-0.5)
    return (d[:, None] * a * d[None, :]) @ x @ weight.T + bias


@pytest.mark.parametrize("in_ch, out_ch", [(4, 24), (24, 4), (8, 8)])
@pytest.mark.parametrize("weighted", [False, True])
def test_either_order_is_the_dense_formula(in_ch, out_ch, weighted):
    gen = torch.Generator().manual_seed(in_ch * 100 + out_ch)
    edge_index = torch.tensor([[0, 1, 2, 2, 5, 3, 5], [1, 2, 0, 0, 3, 1, 0]])   # a multi-edge; 4 isolated
    g = unigraph.Graph(edge_index, num_nodes=6)
    conv = GCNConv(in_ch, out_ch).double()
    torch.nn.init.normal_(conv.bias, generator=gen)
    x = torch.randn(6, in_ch, dtype=torch.float64, generator=gen, requires_grad=True)
    ew = torch.rand(7, dtype=torch.float64, generator=gen) + 0.5 if weighted else None
    out = conv(g, x, ew)
    expected = _dense_gcn(edge_index, 6, x, conv.lin.weight, conv.bias, ew)
    torch.testing.assert_close(out, expected)
    grad = torch.randn(out.shape, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad(out, (x, conv.lin.weight, conv.bias), grad)
    want = torch.autograd.grad(expected, (x, conv.lin.weight, conv.bias), grad)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("bias", [True, False])
def test_aggregate_first_with_the_bias_in_the_pooled_product(bias):
    """Outputs large enough for the pooled projection (its addmm carries the bias when the layer
    aggregates first): the dense formula, values and gradients of x, weight and bias."""
    gen = torch.Generator().manual_seed(7)
    n, in_ch, out_ch = 1100, 16, 512            # 1100 x 512 float64 = 4.3 MiB: pooled
    edge_index = torch.randint(0, n, (2, 5000), generator=gen)
    conv = GCNConv(in_ch, out_ch, bias=bias).double()
    if bias:
        torch.nn.init.normal_(conv.bias, generator=gen)
    x = torch.randn(n, in_ch, dtype=torch.float64, generator=gen, requires_grad=True)
    out = conv(x, edge_index)
    zero = torch.zeros(out_ch, dtype=torch.float64)
    expected = _dense_gcn(torch.cat([edge_index[:, edge_index[0] != edge_index[1]]], 1), n, x, conv.lin.weight,
                          conv.bias if bias else zero, None)
    torch.testing.assert_close(out, expected)
    params = (x, conv.lin.weight) + ((conv.bias,) if bias else ())
    grad = torch.randn(out.shape, dtype=torch.float64, generator=gen)
    for a, b in zip(torch.autograd.grad(out, params, grad), torch.autograd.grad(expected, params, grad)):
        torch.testing.assert_close(a, b)
