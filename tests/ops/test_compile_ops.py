"""``torch.compile(fullgraph=True)`` traces every op after ``g.prepare()`` alone (no eager
warm-up), under ``auto`` and every CPU backend named explicitly (``use_backend`` and the
``backend=`` argument), and the compiled values and gradients equal eager ones. (Inductor and
``torch.library.opcheck``: ``tests/test_compile.py``.)"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import unigraph
from conftest import REPO_ROOT
from op_cases import cpu_test_backends
from unigraph import backends as registry
from unigraph import ops
from unigraph.backends.scatter import ScatterBackend


def every_op(g, x, w, h, el, er, backend=None):
    """All four ops in one program: gspmm (mean, max), gsddmm dot, edge_softmax, gat_attention."""
    mean = ops.gspmm(g, "copy_u", "mean", x, backend=backend)
    top = ops.gspmm(g, "u_mul_e", "max", x, w, backend=backend)
    scores = ops.gsddmm(g, "dot", mean, top, "v", "u", backend=backend)
    alpha = ops.edge_softmax(g, scores, backend=backend)
    weighted = ops.gspmm(g, "u_mul_e", "sum", x, alpha, backend=backend)
    attended = ops.gat_attention(g, h, el, er, backend=backend)
    return weighted.sum(-1) + attended.sum((1, 2)) + top.sum(-1)


def inputs(seed=0, n=12, e=40):
    gen = torch.Generator().manual_seed(seed)
    g = unigraph.Graph(torch.randint(0, n, (2, e), generator=gen), num_nodes=n).prepare()
    leaves = [torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True)
              for shape in ((n, 4), (e, 1), (n, 2, 3), (n, 2), (n, 2))]
    return g, leaves


def values_and_grads(fn, leaves):
    out = fn(*leaves)
    return [out.detach()] + list(torch.autograd.grad(out.square().sum(), leaves))


CHOICES = [("use_backend", "auto")] + [("use_backend", b) for b in cpu_test_backends()] \
    + [("argument", b) for b in cpu_test_backends()]


@pytest.mark.parametrize("how,backend", CHOICES)
def test_every_op_compiles_without_warm_up(how, backend):
    torch._dynamo.reset()
    g, leaves = inputs()  # a fresh graph: no decision is cached on it, nothing ran eagerly
    argument = backend if how == "argument" else None

    def fn(*t):
        return every_op(g, *t, backend=argument)

    context = unigraph.use_backend(backend) if how == "use_backend" else unigraph.use_backend("auto")
    with context:
        compiled = values_and_grads(torch.compile(fn, fullgraph=True, backend="aot_eager"), leaves)
        eager = values_and_grads(fn, leaves)
    for got, want in zip(compiled, eager):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


def test_a_fresh_process_compiles_an_explicit_backend_with_no_eager_call():
    """Nothing cached anywhere: not the backend's availability, not a decision, not a kernel."""
    script = textwrap.dedent("""
        import torch, unigraph
        from unigraph import ops
        g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3).prepare()
        x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
        fn = lambda x: ops.gspmm(g, "copy_u", "max", x) + ops.gspmm(g, "copy_u", "sum", x, backend="sparse")
        with unigraph.use_backend("numba"):
            out = torch.compile(fn, fullgraph=True, backend="aot_eager")(x)
            (grad,) = torch.autograd.grad(out.sum(), x)
            expected = fn(x)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(grad, torch.autograd.grad(expected.sum(), x)[0])
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_the_constant_choice_marker_is_what_torch_sets():
    """The selector marks its traced choice as torch.compiler.assume_constant_result would,
    without importing torch._dynamo at import time: the two must stay the same."""
    from unigraph.backends import selector

    def probe():
        return None

    marked = torch.compiler.assume_constant_result(probe)
    assert vars(marked) == vars(selector._assume_constant_result(lambda: None)) == {"_dynamo_marked_constant": True}


class _Counting(ScatterBackend):
    def __init__(self):
        self.name, self.calls = "counting", 0

    def gspmm(self, g, op, reduce, u, e):
        self.calls += 1
        return super().gspmm(g, op, reduce, u, e)

    def estimate_us(self, stats, request):
        return 1e9  # auto never picks it


def test_another_backend_choice_recompiles():
    """The compiled graph keeps the backend chosen while tracing, guarded on the choice: leaving the
    ``use_backend`` block runs auto's choice, entering it again runs the named backend."""
    counting = registry.register(_Counting())
    try:
        torch._dynamo.reset()
        g, (x, *_) = inputs(seed=2)
        fn = torch.compile(lambda x: ops.gspmm(g, "copy_u", "sum", x), fullgraph=True, backend="aot_eager")
        with unigraph.use_backend("counting"):
            fn(x)
        assert counting.calls == 1
        fn(x)
        assert counting.calls == 1  # outside the block: auto's choice
        with unigraph.use_backend("counting"):
            fn(x)
        assert counting.calls == 2
    finally:
        registry.unregister("counting")
