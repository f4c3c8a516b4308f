"""``g.prepare()`` then ``torch.compile(model, fullgraph=True)`` works for every layer and model, a
custom MessagePassing layer and an update_all layer, under ``auto`` and every CPU backend by name,
in a fresh process with no eager warm-up; compiled == eager in outputs, gradients and parameters
after optimizer steps (tests/compile_check.py does the work; the cases are benchmarks/compile.py's).

The default run compiles every case under ``auto`` with ``aot_eager`` (dynamo and AOTAutograd: the
part that traces unigraph), a few cases on each backend by name and one model with inductor. The
full matrix (every case, every backend, both compilers: about ten minutes) and every case trained
on a new graph of another size each step (``--vary``: at most two compiles each) are marked slow:
``pytest -m slow tests/test_compile_models.py``. (Graphs of any size in the default run:
``tests/test_compile_dynamic_shapes.py``.)"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from benchmarks.compile import CASES, CPU_BACKENDS
from op_cases import cpu_test_backends

CHECKER = pathlib.Path(__file__).with_name("compile_check.py")
NAMED_BACKENDS = ",".join(b for b in CPU_BACKENDS if b != "auto" and b in cpu_test_backends())


def run_checker(backends: str, compiler: str, cases: list[str], timeout: int = 1500, vary: bool = False) -> None:
    """Run the checker in a fresh interpreter and fail with every case's problems."""
    flags = ["--vary"] if vary else []
    done = subprocess.run([sys.executable, str(CHECKER), backends, compiler, *flags, *cases], capture_output=True,
                          text=True, timeout=timeout, cwd=CHECKER.parents[1])
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    expected = len(cases) * len(backends.split(","))
    assert done.returncode == 0 and len(results) == expected, \
        f"checker exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    failures = {r["case"]: r["problems"] + ([r["traceback"]] if "traceback" in r else [])
                for r in results if r["problems"]}
    assert not failures, f"{compiler}:\n" + "\n".join(f"{k}: {v}" for k, v in failures.items())


def test_every_layer_and_model_compiles_under_auto():
    run_checker("auto", "aot_eager", list(CASES))


@pytest.mark.skipif(not NAMED_BACKENDS, reason="no CPU backend by name runs here")
def test_a_model_and_custom_layers_compile_on_each_backend_by_name():
    run_checker(NAMED_BACKENDS, "aot_eager", ["GAT", "CustomMessagePassing", "UpdateAllLayer"])


def test_inductor_compiles_a_model():
    run_checker("auto", "inductor", ["GCN"])


@pytest.mark.slow
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
@pytest.mark.parametrize("backend", ["auto"] + [b for b in NAMED_BACKENDS.split(",") if b])
def test_every_case_on_every_backend(backend, compiler):
    run_checker(backend, compiler, list(CASES), timeout=3600)


@pytest.mark.slow
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_every_case_trains_on_a_new_graph_of_another_size_each_step(compiler):
    """Mini-batch training: each step a new graph of another size; two compiles per case at most."""
    run_checker("auto", compiler, list(CASES), timeout=3600, vary=True)


@pytest.mark.parametrize("name, expected", [("GCNConv", "'u_mul_e', 'sum'"), ("GraphConv", "'u_mul_e', 'mean'"),
                                            ("MRConv", "'copy_u', 'max'"), ("GINConv", "'copy_u', 'sum'"),
                                            ("CustomMessagePassing", "'copy_e', 'sum'")])
def test_compiled_messages_that_read_only_their_arguments_stay_fused(name, expected):
    """A message that reads only its arguments runs from its cached trace under compile (one g-SpMM,
    no E x F message tensor); one that reads attributes runs as written, on gathered inputs."""
    import torch

    from benchmarks.compile import make_case, synthetic_graph

    captured = []

    def capture(gm, example_inputs):
        captured.append(gm.code)
        return gm.forward

    torch._dynamo.reset()
    model, inputs = make_case(name, synthetic_graph(30, 90).prepare(), 4, 3, torch.float32)
    torch.compile(model, fullgraph=True, backend=capture)(*inputs)
    calls = [line for code in captured for line in code.splitlines() if "ops.unigraph.gspmm" in line]
    assert len(calls) == 1 and expected in calls[0], calls
