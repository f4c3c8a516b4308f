"""The GPU run's kernels step: the kernel suite (``benchmarks/kernels.py``) on the GPU.

Every op (g-SpMM copy_u sum/mean/max, u_mul_e sum, g-SDDMM u_dot_v and u_add_v, edge softmax, GAT)
on uniform and R-MAT graphs of :data:`GPU` nodes at mean in-degree 1 to 256 and F = 16/64/256,
forward and forward+backward, on every unigraph backend, ``auto``, and the peers a GPU machine has:
``torch.sparse`` CSR (cuSPARSE), torch-native gather/scatter, PyG (``torch_geometric.utils``, its
``MessagePassing`` path) and PyG under ``torch.compile``; each case's bytes moved, its floor at the
measured device-copy bandwidth and every implementation's achieved GB/s.

The dry run times the CPU backends and peers on tiny graphs (the Triton backends run there only
in Triton's interpreter, seconds a call; the suite calls every backend through the same line, and
the tests and tuning steps run them interpreted).

Graphs are drawn on the GPU, densest last (``--degree-major``), every density at the narrowest
width (which the element budget admits at every degree) before the other widths (``--width-first``;
the first GPU run, in width order, reached in-degree 4 of 256), and no graph or case starts once
the step's budget is nearly spent: what did not run is listed under ``not_run``. The results
are saved after every case, in the suite's own JSON format (``benchmarks/kernels.py``), so
``benchmarks.gpu.ingest`` writes them as ``benchmarks/results/kernels_cuda.{json,md,png}`` and the
GPU cost model is fitted to them.
"""
from __future__ import annotations

import sys

from benchmarks.gpu.common import freeze_imports, log, step_main

STEP = "kernels"
# 2^16 nodes (R-MAT draws no rejections); E x width <= 2^28 elements (1 GiB of float32 messages per
# tensor) keeps degree 256 at F = 16, 64 at F <= 64, 16 and below at every F.
GPU = dict(nodes=65_536, degrees=[1, 4, 16, 64, 256], widths=[16, 64, 256], budget=2**28, repeats=5,
           min_run_ms=1.0)
DRY_RUN = dict(nodes=48, degrees=[2], widths=[8], budget=10**6, repeats=1, min_run_ms=0.0)
PEERS = ["torch_native", "torch_sparse_csr", "pyg", "pyg_compiled"]
FINISH_S = 15  # the suite's budget ends this long before the step's (the last case, the final save)


def suite_arguments(dry_run: bool, budget_s: float) -> list[str]:
    preset = DRY_RUN if dry_run else GPU
    argv = ["--device", "cpu" if dry_run else "cuda", "--nodes", str(preset["nodes"]),
            "--degrees", *map(str, preset["degrees"]), "--widths", *map(str, preset["widths"]),
            "--budget", str(preset["budget"]), "--repeats", str(preset["repeats"]),
            "--min-run-ms", str(preset["min_run_ms"]), "--peers", *PEERS, "--degree-major",
            "--width-first", str(preset["widths"][0]), "--on-device",
            "--budget-s", f"{max(1.0, budget_s):.0f}"]
    if dry_run:  # the GPU's code paths on the CPU: dynamo without codegen, the GPU's bandwidth measurement
        argv += ["--compile-backend", "eager", "--bandwidth", "device-copy"]
    return argv


def body(results, deadline, dry_run: bool) -> None:
    from benchmarks import kernels
    from benchmarks.peers import load_pyg
    import torch
    load_pyg()  # imported by the first case otherwise: imported first, frozen with the rest
    freeze_imports()
    argv = suite_arguments(dry_run, deadline.left() - FINISH_S)
    args = kernels.parse_args(argv)
    results["suite_command"] = "python benchmarks/kernels.py " + " ".join(argv)
    log(STEP, results["suite_command"])

    def save(partial: dict) -> None:
        results["suite"] = partial
        results.save()
    suite = kernels.run_benchmark(args, on_case=save)
    results["suite"] = suite
    regrets = [c["regret"] for c in suite["cases"] if c["regret"] is not None]
    log(STEP, f"{len(suite['cases'])} cases, {len(suite['skipped'])} over the memory budget, {len(suite['not_run'])} "
              f"not run (time); auto within 1.1x of the best unigraph backend in "
              f"{sum(r <= 1.1 for r in regrets)} of {len(regrets)}; peak GPU memory "
              f"{torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else 0:.1f} GiB")


if __name__ == "__main__":
    sys.exit(step_main(STEP, __doc__, body))
