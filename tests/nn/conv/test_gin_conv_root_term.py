"""GIN's root term ``(1 + eps) * x`` (GINConv, GINEConv, unigraph.dgl's GINConv): a fixed eps of 0
adds ``x`` itself (two elementwise passes fewer), bit for bit what the formula gives; every other
case runs the formula. eps is read on every call, so changing it between calls (in place, through
``.data``, or replacing the buffer) changes the next output."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from unigraph.nn.gin_conv import root_term

EXACT = dict(rtol=0, atol=0, equal_nan=True)


def _graph_and_features(dtype=torch.float32):
    torch.manual_seed(0)
    edge_index = torch.randint(0, 12, (2, 40))
    x = torch.randn(12, 5, dtype=dtype)
    x[0, 0], x[1, 1], x[2, 2], x[3, 3] = float("inf"), float("-inf"), float("nan"), -0.0
    return edge_index, x


def _formula(conv, x, edge_index):
    """The layer's equation written out, with the same aggregation call the layer makes."""
    g = unigraph.Graph(edge_index, num_nodes=x.shape[0])
    return conv.nn(unigraph.ops.gspmm(g, "copy_u", "sum", u=x) + (1 + conv.eps) * x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_zero_eps_adds_x_itself_bit_for_bit_values_and_gradients(dtype):
    edge_index, x = _graph_and_features(dtype)
    conv = U.GINConv(torch.nn.Identity())
    assert root_term(conv.eps, x) is x                      # the shortcut is taken
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, want = conv(x1, edge_index), _formula(conv, x2, edge_index)
    assert out.dtype == want.dtype
    torch.testing.assert_close(out, want, **EXACT)
    grad = torch.randn_like(out)
    out.backward(grad)
    want.backward(grad)
    torch.testing.assert_close(x1.grad, x2.grad, **EXACT)


def test_eps_changed_between_calls_is_read_again():
    edge_index, x = _graph_and_features()
    x = torch.nan_to_num(x)
    conv = U.GINConv(torch.nn.Identity())
    first = conv(x, edge_index)
    torch.testing.assert_close(first, _formula(conv, x, edge_index), **EXACT)
    conv.eps.fill_(0.5)                                  # in place: its version moves
    torch.testing.assert_close(conv(x, edge_index), _formula(conv, x, edge_index), **EXACT)
    conv.eps.data.fill_(0.0)                             # through .data: no version change
    torch.testing.assert_close(conv(x, edge_index), first, **EXACT)
    conv.eps.data.fill_(-0.25)
    assert not torch.equal(conv(x, edge_index), first)
    torch.testing.assert_close(conv(x, edge_index), _formula(conv, x, edge_index), **EXACT)
    conv.eps = torch.full((1,), 2.0)                     # a new buffer object
    torch.testing.assert_close(conv(x, edge_index), _formula(conv, x, edge_index), **EXACT)
    conv.eps = torch.full((1,), -0.0)                    # 1 + (-0.0) is 1: the shortcut again
    assert root_term(conv.eps, x) is x


def test_where_the_formula_differs_or_is_needed_it_runs():
    conv = U.GINConv(torch.nn.Identity())
    half = torch.randn(4, 3, dtype=torch.float16)
    assert root_term(conv.eps, half).dtype == torch.float32  # eps (float32, one element) widens it, as the formula
    assert root_term(conv.eps, torch.ones(4, 3, dtype=torch.float64)).dtype == torch.float64
    trained = U.GINConv(torch.nn.Identity(), train_eps=True)
    x = torch.randn(4, 3)
    assert root_term(trained.eps, x) is not x                # eps is a parameter: its gradient needs the product
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    trained(x, edge_index).sum().backward()
    assert trained.eps.grad is not None and torch.isclose(trained.eps.grad, x.sum()).all()


def test_gine_conv_takes_the_same_root_term():
    torch.manual_seed(0)
    edge_index = torch.randint(0, 8, (2, 20))
    x, edge_attr = torch.randn(8, 4), torch.randn(20, 4)
    conv = U.GINEConv(torch.nn.Identity())
    assert root_term(conv.eps, x) is x
    messages = (x[edge_index[0]] + edge_attr).relu()
    want = torch.zeros(8, 4).index_add_(0, edge_index[1], messages) + (1 + conv.eps) * x
    torch.testing.assert_close(conv(x, edge_index, edge_attr), want)


def test_dgl_gin_conv_takes_the_same_root_term():
    from unigraph.dgl.nn.pytorch.conv.ginconv import GINConv as DGLGINConv
    edge_index, x = _graph_and_features()
    g = unigraph.Graph(edge_index, num_nodes=x.shape[0])
    conv = DGLGINConv(torch.nn.Identity())
    assert root_term(conv.eps, x) is x
    want = (1 + conv.eps) * x + unigraph.ops.gspmm(g, "copy_u", "sum", u=x)
    torch.testing.assert_close(conv(g, x), want, **EXACT)
    conv.eps.data.fill_(0.5)
    torch.testing.assert_close(conv(g, x), (1 + conv.eps) * x + unigraph.ops.gspmm(g, "copy_u", "sum", u=x), **EXACT)
