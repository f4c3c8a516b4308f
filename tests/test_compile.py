"""torch.compile(fullgraph=True) traces a unigraph model with no graph break and matches eager."""
from __future__ import annotations

import pytest
import torch

import unigraph
from op_cases import cpu_test_backends
from unigraph import ops


class TwoLayerNet(torch.nn.Module):
    """A GCN-like layer then a GAT-like attention layer: gspmm, gsddmm and edge_softmax."""

    def __init__(self, graph, in_dim=6, hidden=8, heads=2, classes=3):
        super().__init__()
        self.graph = graph
        self.lin1 = torch.nn.Linear(in_dim, hidden)
        self.lin2 = torch.nn.Linear(hidden, heads * classes)
        self.att_src = torch.nn.Parameter(torch.randn(1, heads, classes))
        self.att_dst = torch.nn.Parameter(torch.randn(1, heads, classes))
        self.heads, self.classes = heads, classes

    def forward(self, x):
        g = self.graph
        h = torch.relu(ops.gspmm(g, "copy_u", "mean", self.lin1(x)))
        h = self.lin2(h).view(-1, self.heads, self.classes)
        el = (h * self.att_src).sum(-1, keepdim=True)
        er = (h * self.att_dst).sum(-1, keepdim=True)
        scores = torch.nn.functional.leaky_relu(ops.gsddmm(g, "add", el, er, "u", "v"), 0.2)
        alpha = ops.edge_softmax(g, scores)
        out = ops.gspmm(g, "u_mul_e", "sum", h, alpha)
        return out.mean(1) + ops.gspmm(g, "copy_u", "max", h).mean(1)


def make_graph(n=30, e=90, seed=0):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n, (2, e), generator=gen)
    return unigraph.Graph(edge_index, num_nodes=n).add_self_loops()


def run_and_grad(model, x):
    model.zero_grad()
    out = model(x)
    out.square().sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("backend", cpu_test_backends())
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_fullgraph_compile_matches_eager(backend, compiler):
    torch.manual_seed(0)
    graph = make_graph().prepare()
    model = TwoLayerNet(graph)
    x = torch.randn(graph.num_nodes, 6)
    torch._dynamo.reset()
    with unigraph.use_backend(backend):
        eager_out, eager_grads = run_and_grad(model, x)
        compiled = torch.compile(model, fullgraph=True, backend=compiler)
        out, grads = run_and_grad(compiled, x)
    torch.testing.assert_close(out, eager_out, rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_compile_without_prepare_explains_itself():
    graph = make_graph()
    model = TwoLayerNet(graph)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match="call g.prepare"):
        compiled(torch.randn(graph.num_nodes, 6))


@pytest.mark.parametrize("backend", cpu_test_backends())
def test_custom_operators_pass_torch_opcheck(backend):
    """Schema, fake (shape-only) implementation and autograd registration agree with the real op."""
    graph = make_graph(n=8, e=20).prepare()
    tensors = graph.tensors().tensor_list()
    n, e = graph.num_nodes, graph.num_edges
    h = torch.randn(n, 2, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(e, 2, 1, dtype=torch.float64, requires_grad=True)
    for reduce in ("sum", "mean", "max"):
        torch.library.opcheck(torch.ops.unigraph.gspmm.default, (tensors, n, n, backend, "u_mul_e", reduce, h, w))
    torch.library.opcheck(torch.ops.unigraph.gsddmm.default, (tensors, n, n, backend, "dot", h, h, "u", "v"))
    torch.library.opcheck(torch.ops.unigraph.edge_softmax.default, (tensors, n, n, backend, w))


def test_eager_and_custom_operator_paths_agree():
    graph = make_graph(n=8, e=20).prepare()
    h = torch.randn(graph.num_nodes, 4, dtype=torch.float64, requires_grad=True)
    eager = ops.gspmm(graph, "copy_u", "max", h, backend="scatter")
    (eager_grad,) = torch.autograd.grad(eager.sum(), h)
    via_op = torch.ops.unigraph.gspmm(graph.tensors().tensor_list(), graph.num_nodes, graph.num_nodes,
                                      "scatter", "copy_u", "max", h, None)[0]
    (op_grad,) = torch.autograd.grad(via_op.sum(), h)
    torch.testing.assert_close(via_op, eager)
    torch.testing.assert_close(op_grad, eager_grad)
