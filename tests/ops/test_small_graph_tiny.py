"""The small-graph rule's tiny CPU calls (backends/small_graph.py: ``tiny_applies``): under ``auto``
a ``copy_u`` or per-edge ``u_mul_e`` sum or mean of at most ``TINY_WORK`` edges x width (and, when
differentiated, at most ``CPU_GRAD_EDGES`` edges) runs torch's ``index_select`` + ``index_add_``
on the native lane instead of the COO kernel. For ``copy_u`` the same bits as the COO kernel (the
rule's other side), forward and backward; for ``u_mul_e`` equal within rounding (the kernel may
fuse a product into its addition; the weights' gradient sums its dot in another order); both equal
to a float64 reference; the bound and the gradient's edge limit
hold at their edges; ``explain`` states what runs."""
from __future__ import annotations

from unittest import mock

import pytest
import torch
from hypothesis import given, settings, strategies as st

import unigraph
from graph_strategies import graphs
from op_cases import coo_kernel_calls, features
from reference import gspmm_ref
from unigraph import ops

pytest.importorskip("numba")
from unigraph.backends import small_graph  # noqa: E402
from unigraph.ops import small_graph_lane  # noqa: E402

CASES = [("copy_u", "sum"), ("copy_u", "mean"), ("u_mul_e", "sum"), ("u_mul_e", "mean")]


def run(g, op, reduce, u, e, grad_out):
    """The call through ``ops.gspmm`` and the gradients of ``<out, grad_out>`` for u (and e)."""
    out = ops.gspmm(g, op, reduce, u, e)
    operands = [t for t in (u, e) if t is not None and t.requires_grad]
    grads = torch.autograd.grad(out, operands, grad_out) if operands else ()
    return out, grads


@pytest.mark.parametrize("op, reduce", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_tiny_calls_equal_the_coo_kernel_forward_and_backward(op, reduce, dtype, data):
    drawn = data.draw(graphs(max_nodes=12, max_edges=40))
    g, gen = drawn.graph, drawn.generator()
    width = data.draw(st.integers(1, 6))
    u = features(gen, g.num_src_nodes, (width,), dtype=dtype).requires_grad_()
    e = features(gen, g.num_edges, (), dtype=dtype).requires_grad_() if op == "u_mul_e" else None
    grad_out = features(gen, g.num_dst_nodes, (width,), dtype=dtype)
    assert small_graph.tiny_applies(g.num_edges, width, u.device, True)
    with mock.patch.object(small_graph_lane, "_sum", side_effect=AssertionError("the COO kernel ran")):
        out, grads = run(g, op, reduce, u, e, grad_out)
    with mock.patch.object(small_graph, "TINY_WORK", -1):   # the rule's COO side, same call
        kernel_out, kernel_grads = run(g, op, reduce, u, e, grad_out)
    if op == "copy_u":   # the same sums in edge order, forward and backward
        assert torch.equal(out, kernel_out) and torch.equal(grads[0], kernel_grads[0])
    else:   # the kernel may fuse each product into its addition (one rounding, not two); the weights'
        # gradient is a dot over the features, summed in another order: equal within rounding
        tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
        for a, b in zip((out, *grads), (kernel_out, *kernel_grads)):
            torch.testing.assert_close(a, b, **tol)
    torch.testing.assert_close(out, gspmm_ref(g, op, reduce, u.double(), None if e is None else e.double()).to(dtype),
                               rtol=1e-5, atol=1e-5)


def test_the_bound_is_the_work_and_a_differentiated_calls_edges():
    with coo_kernel_calls() as kernel_calls:   # every call of the COO kernel (the rule's other side)
        edges = small_graph.CPU_GRAD_EDGES + 1
        g = unigraph.Graph(torch.randint(0, 50, (2, edges), generator=torch.Generator().manual_seed(0)), num_nodes=50)
        width = small_graph.TINY_WORK // edges   # within the work bound: 1
        u = torch.randn(50, width)
        ops.gspmm(g, "copy_u", "sum", u)                        # not differentiated: torch's ops
        assert kernel_calls == []
        out = ops.gspmm(g, "copy_u", "sum", u.requires_grad_())  # differentiated, > CPU_GRAD_EDGES edges: the kernel
        assert kernel_calls == [(edges, width, False)] and type(out.grad_fn).__name__ == "CooSumBackward"
        small = unigraph.Graph(torch.randint(0, 10, (2, 64), generator=torch.Generator().manual_seed(1)), num_nodes=10)
        at = torch.randn(10, small_graph.TINY_WORK // 64, requires_grad=True)
        past = torch.randn(10, small_graph.TINY_WORK // 64 + 1, requires_grad=True)
        assert type(ops.gspmm(small, "copy_u", "sum", at).grad_fn).__name__ == "IndexAddBackward0"
        assert len(kernel_calls) == 1
        assert type(ops.gspmm(small, "copy_u", "sum", past).grad_fn).__name__ == "CooSumBackward"
        assert kernel_calls[1:] == [(64, past.shape[1], False)]


def test_explain_names_torchs_ops_for_a_tiny_call():
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 4, requires_grad=True)
    explanation = unigraph.explain(g, "copy_u", "mean", x)
    assert explanation.backend == "scatter"
    assert explanation.reason.startswith("small-graph rule, a tiny call: 3 edges x 4 features <= 4,096, 3 edges <= 2,048")
    assert "the cost model's pick otherwise" in explanation.reason
    big = unigraph.Graph(torch.randint(0, 50, (2, 3000)), num_nodes=50)
    assert unigraph.explain(big, "copy_u", "sum", torch.randn(50, 1)).backend == "scatter"   # not differentiated
    differentiated = unigraph.explain(big, "copy_u", "sum", torch.randn(50, 1, requires_grad=True))
    assert differentiated.backend == "numba" and differentiated.reason.startswith("small-graph rule: 3000 edges")


@pytest.mark.parametrize("choice", ["numba", "sparse"])
def test_a_named_backend_is_not_replaced_by_torchs_ops(choice):
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 4, requires_grad=True)
    with unigraph.use_backend(choice):
        out = ops.gspmm(g, "copy_u", "sum", x)
    assert type(out.grad_fn).__name__ != "IndexAddBackward0"
    assert type(ops.gspmm(g, "copy_u", "sum", x, backend=choice).grad_fn).__name__ != "IndexAddBackward0"


def test_a_graph_changed_in_place_after_a_tiny_forward_is_refused():
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 4, requires_grad=True)
    out = ops.gspmm(g, "copy_u", "sum", x)
    src, _ = g._coo()
    with torch.no_grad():
        src.add_(0)   # a new version of the index autograd saved
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
