"""``unigraph.ops.custom.apply``, the front door's ``Function.apply``: it skips torch's per-call
``inspect.signature`` binding (which only fills in default arguments) and, for calls autograd will
not record, ``apply`` itself. Both must return what ``Function.apply`` returns."""
from __future__ import annotations

import inspect

import pytest
import torch

from unigraph import Graph, ops
from unigraph.ops import custom


FUNCTIONS = [custom.GSpMM, custom.GSDDMM, custom.EdgeSoftmax, custom.GATAttention]


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_forwards_have_no_default_arguments(function):
    """What the skipped binding would add: nothing, as long as no forward has defaults."""
    defaults = [p.name for p in inspect.signature(function.forward).parameters.values()
                if p.default is not inspect.Parameter.empty]
    assert defaults == [], f"{function.__name__}.forward has defaults {defaults}: custom.apply must bind them"


def _graph() -> Graph:
    return Graph(torch.tensor([[0, 1, 2, 2, 3, 0], [1, 2, 0, 1, 1, 3]]), num_nodes=4).prepare(self_loops=False)


@pytest.mark.parametrize("backend", ["scatter", "numba"])
def test_apply_equals_function_apply_forward_and_backward(backend):
    pytest.importorskip("numba") if backend == "numba" else None
    g = _graph()
    tensors = g.tensors()
    from unigraph import backends as registry
    chosen = registry.get(backend)
    for mode in ("grad", "no_grad", "no_operand_requires_grad"):
        u = torch.randn(4, 3, dtype=torch.float64, requires_grad=mode != "no_operand_requires_grad")
        e = torch.rand(6, 3, dtype=torch.float64, requires_grad=mode != "no_operand_requires_grad")
        results = []
        for run in (custom.apply, lambda f, *a: f.apply(*a)):
            u.grad = e.grad = None
            with torch.set_grad_enabled(mode != "no_grad"):
                out, arg_u, arg_e = run(custom.GSpMM, tensors, chosen, "u_mul_e", "max", u, e)
            assert out.requires_grad == (mode == "grad")
            if mode == "grad":
                out.pow(2).sum().backward()
                results.append((out.detach(), arg_u, arg_e, u.grad.clone(), e.grad.clone()))
            else:
                results.append((out, arg_u, arg_e))
        for a, b in zip(*results):
            assert torch.equal(a, b)


def test_a_backward_pass_records_nothing_but_double_backward_still_works():
    """Backward passes run the ops with grad mode off (the direct path); with create_graph they
    are recorded and differentiable again."""
    g = _graph()
    u = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    out = ops.gspmm(g, "copy_u", "sum", u=u, backend="scatter")
    (grad,) = torch.autograd.grad(out.pow(2).sum(), u, create_graph=True)
    (second,) = torch.autograd.grad(grad.sum(), u)
    reference_u = u.detach().clone().requires_grad_(True)
    adjacency = torch.zeros(4, 4, dtype=torch.float64)
    adjacency.index_put_((g.dst, g.src), torch.ones(6, dtype=torch.float64), accumulate=True)
    (ref_grad,) = torch.autograd.grad((adjacency @ reference_u).pow(2).sum(), reference_u, create_graph=True)
    (ref_second,) = torch.autograd.grad(ref_grad.sum(), reference_u)
    assert torch.allclose(grad, ref_grad, rtol=1e-12, atol=1e-12)
    assert torch.allclose(second, ref_second, rtol=1e-12, atol=1e-12)
