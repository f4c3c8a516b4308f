"""Run in a fresh process by tests/test_compile_models.py: compile each case of
``benchmarks/compile.py`` with ``fullgraph=True`` right after ``g.prepare()`` (its first call is
compiled: no eager warm-up) and train it beside an eager copy for a few optimizer steps, on graphs
of their own. Prints one JSON line per case: outputs, gradients and parameters agree or why not,
and how many graphs dynamo compiled. With ``--vary`` every step runs on a new graph of another
size (mini-batch training): a case then compiles twice (docs/ops.md), more is reported as a problem.

    python tests/compile_check.py BACKEND[,BACKEND...] COMPILER [--vary] CASE [CASE ...]
"""
from __future__ import annotations

import copy
import json
import pathlib
import sys
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import unigraph  # noqa: E402
from benchmarks.compile import make_case, synthetic_graph, train_step  # noqa: E402

STEPS = 3
RTOL, ATOL = 1e-6, 1e-8
SIZES = [(40, 160), (55, 230), (33, 120)]  # (nodes, edges) of each step's graph with --vary


def largest_difference(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """None when ``a`` and ``b`` agree within tolerance, else the largest absolute difference."""
    try:
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)
        return None
    except AssertionError:
        return float((a - b).abs().max()) if a.shape == b.shape else float("inf")


def check(name: str, backend: str, compiler: str, vary: bool = False) -> dict:
    # one graph each (no shared caches), the same every step; with vary, new ones of another size every step
    pairs = [[synthetic_graph(n, e, seed=step).prepare() for _ in range(2)] for step, (n, e) in enumerate(SIZES)]
    graphs = pairs if vary else pairs[:1] * STEPS
    eager, _ = make_case(name, graphs[0][0], 6, 5, torch.float64)
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model, fullgraph=True, backend=compiler)
    eager_opt = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.5)
    compiled_opt = torch.optim.SGD(compiled_model.parameters(), lr=0.1, momentum=0.5)
    problems = []
    counters.clear()
    with unigraph.use_backend(backend):
        for step, (eager_graph, compiled_graph) in enumerate(graphs):
            eager_inputs = make_case(name, eager_graph, 6, 5, torch.float64, seed=step if vary else 0)[1]
            compiled_inputs = (compiled_graph,) + eager_inputs[1:]
            got = train_step(compiled, compiled_opt, compiled_inputs)  # compiled first: no warm-up
            want = train_step(eager, eager_opt, eager_inputs)
            if (diff := largest_difference(got, want)) is not None:
                problems.append(f"step {step}: output differs by {diff:.3g}")
            for (pname, p), q in zip(compiled_model.named_parameters(), eager.parameters()):
                if (p.grad is None) != (q.grad is None):
                    problems.append(f"step {step}: gradient of {pname} reached one model only")
                elif p.grad is not None and (diff := largest_difference(p.grad, q.grad)) is not None:
                    problems.append(f"step {step}: gradient of {pname} differs by {diff:.3g}")
    for (pname, p), q in zip(compiled_model.named_parameters(), eager.parameters()):
        if (diff := largest_difference(p.detach(), q.detach())) is not None:
            problems.append(f"parameter {pname} after {STEPS} steps differs by {diff:.3g}")
    compiles = counters["stats"]["unique_graphs"]
    if vary and compiles > 2:  # (on one graph, a layer writing g.ndata changes it: one recompile, as in eager)
        problems.append(f"{compiles} graphs compiled for {len(graphs)} steps")
    return {"problems": problems, "compiles": compiles}


def main(argv: list[str]) -> None:
    backends, compiler, *names = argv
    vary = "--vary" in names
    names = [name for name in names if name != "--vary"]
    for backend in backends.split(","):
        for name in names:
            torch._dynamo.reset()
            try:
                result = check(name, backend, compiler, vary)
            except Exception as err:  # report every case, not only the first failure
                result = {"problems": [f"{type(err).__name__}: {str(err)[:2000]}"],
                          "traceback": traceback.format_exc()[-3000:]}
            print(json.dumps({"case": f"{name} on {backend}", **result}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
