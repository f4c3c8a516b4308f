"""``unigraph.ops.custom.apply``, the front door's ``Function.apply``: it skips torch's per-call
``inspect.signature`` binding (which only fills in default arguments) and, for calls autograd will
not record, ``apply`` itself. Both must return what ``Function.apply`` returns."""
from __future__ import annotations

import inspect

import pytest
import torch

from unigraph import Graph, ops
from unigraph.ops import custom


FUNCTIONS = [custom.GSpMM, custom.GSpMMSum, custom.GSDDMM, custom.EdgeSoftmax, custom.GATAttention]


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


SUM_CASES = [("copy_u", "sum"), ("copy_u", "mean"), ("u_mul_e", "sum"), ("u_mul_e", "mean"), ("copy_e", "sum"),
             ("u_sub_e", "mean"), ("u_div_e", "sum")]


@pytest.mark.parametrize("backend", ["scatter", "sparse", "numba"])
@pytest.mark.parametrize("op, reduce", SUM_CASES)
def test_the_one_output_sum_function_equals_gspmm_forward_backward_and_double_backward(backend, op, reduce):
    """``GSpMMSum`` (the eager path of sum and mean) against ``GSpMM``'s first output (what
    traced programs run), bit for bit: values, gradients, and gradients of gradients."""
    pytest.importorskip("numba") if backend == "numba" else None
    from unigraph import backends as registry
    g = _graph()
    tensors, chosen = g.tensors(), registry.get(backend)
    gen = torch.Generator().manual_seed(3)
    u0 = torch.randn(4, 3, dtype=torch.float64, generator=gen)
    e0 = torch.rand(6, 3, dtype=torch.float64, generator=gen) + 0.5
    results = []
    for function in (custom.GSpMMSum, custom.GSpMM):
        u, e = u0.clone().requires_grad_(), e0.clone().requires_grad_()
        uu = None if op == "copy_e" else u
        ee = None if op == "copy_u" else e
        out = function.apply(tensors, chosen, op, reduce, uu, ee)
        out = out[0] if function is custom.GSpMM else out
        leaves = [t for t in (uu, ee) if t is not None]
        grads = torch.autograd.grad(out.pow(2).sum(), leaves, create_graph=True)
        seconds = torch.autograd.grad(sum(gr.pow(2).sum() for gr in grads), leaves, allow_unused=True)
        results.append((out.detach(), *[gr.detach() for gr in grads], *seconds))
    for ours, theirs in zip(*results):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert torch.equal(ours, theirs)


def test_eager_sum_and_mean_take_the_one_output_function_and_max_the_three_output_one(monkeypatch):
    g = _graph()
    seen = []
    for function in (custom.GSpMM, custom.GSpMMSum):
        monkeypatch.setattr(function, "forward", staticmethod(
            lambda *a, f=function, forward=function.forward: seen.append(f.__name__) or forward(*a)))
    u = torch.randn(4, 3, requires_grad=True)
    for reduce in ("sum", "mean", "max"):
        ops.gspmm(g, "u_mul_e", reduce, u, torch.rand(6, 3), backend="scatter")
    assert seen == ["GSpMMSum", "GSpMMSum", "GSpMM"]
