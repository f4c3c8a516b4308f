"""Where the host's time of a training step goes, by Python function: unigraph beside PyG.

    python -m benchmarks.gpu.host_profile OUTFILE [--steps 30] [--dry-run]

The GPU runs found unigraph's steps slower than PyG's where the device is not the limit (a
Cora-sized GCN 0.80-0.84x, the mini-batch GraphSAGE step 0.54-0.59x) with fewer or as many aten
calls and the same host waits (``benchmarks/gpu/profiling.py``), so the difference is host-side
Python. ``torch.profiler`` sees operators, not Python; this tool times each step group
(``step_e2e``'s Cora-sized GCN and GAT trainees and its mini-batch GraphSAGE models: the same
models, data and steps; each mini-batch step on a batch it has not met before, as in training),
then runs the same steps under ``cProfile`` and writes, per
implementation, ms per step, Python calls per step and the top functions by own time and (for
unigraph's own files) by cumulative time, as text into OUTFILE.

Not a step of the prepared run (``run.sh``): a short call of its own on a warm machine, e.g.
``python -m benchmarks.gpu.host_profile "$OUT/host_profile.txt"`` (about a minute on an H100).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pathlib
import pstats
import sys
import time

from benchmarks.gpu.common import device_for, ensure_repo_on_path

TOP_OWN, TOP_CUMULATIVE = 30, 25
WARMUP = 3
OP_NODES, OP_WIDTH = 65_536, 16  # the kernel suite's graphs


def profile_calls(name: str, call, steps: int, sync, out: io.StringIO) -> None:
    """Time ``steps`` calls (a sync at the end), then profile as many; report both into ``out``."""
    for _ in range(WARMUP):
        call()
    sync()
    began = time.perf_counter()
    for _ in range(steps):
        call()
    sync()
    plain_ms = (time.perf_counter() - began) * 1e3 / steps
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        call()
    sync()
    profiler.disable()
    stats = pstats.Stats(profiler)
    out.write(f"\n## {name}: {plain_ms:.3f} ms / step unprofiled, {stats.total_tt * 1e3 / steps:.3f} ms profiled, "
              f"{stats.total_calls / steps:.0f} Python calls / step\n")
    rows = [(where, calls / steps, own * 1e6 / steps, cumulative * 1e6 / steps)
            for where, (_, calls, own, cumulative, _) in stats.stats.items()]
    for title, key, limit, keep in (("own time", 2, TOP_OWN, lambda where: True),
                                    ("unigraph's functions, cumulative", 3, TOP_CUMULATIVE, _ours)):
        chosen = sorted((r for r in rows if keep(r[0])), key=lambda r: -r[key])[:limit]
        out.write(f"\n### {title}, per step\n\n| us own | us cumulative | calls | function |\n|---:|---:|---:|---|\n")
        out.writelines(f"| {own:.1f} | {cumulative:.1f} | {calls:g} | {_name(where)} |\n"
                       for where, calls, own, cumulative in chosen)


def _name(where: tuple[str, int, str]) -> str:
    file, line, function = where
    if file == "~":
        return function
    parts = pathlib.Path(file).parts
    for root in ("unigraph", "kernels", "backends", "torch", "torch_geometric", "triton", "benchmarks"):
        if root in parts:
            file = "/".join(parts[len(parts) - 1 - parts[::-1].index(root):])
            break
    return f"{file}:{line}({function})"


def _ours(where: tuple[str, int, str]) -> bool:
    parts = pathlib.Path(where[0]).parts
    return "site-packages" not in parts and any(p in parts for p in ("unigraph", "kernels", "backends"))


def profile_gat_op(device, num_nodes: int, steps: int, sync, out: io.StringIO) -> None:
    """The kernel suite's GAT forward+backward case at in-degree 1 (``benchmarks/kernels.py``: the
    host, not the device, is its limit) on ``triton_node``, ``auto`` and PyG's ops."""
    from benchmarks import kernels
    g = kernels.make_graph("uniform", num_nodes, 1, device=device)
    inputs = kernels.make_inputs("gat", g, OP_WIDTH, device)
    calls = {"triton_node": lambda: kernels.op_cases.unigraph_call("gat", g, inputs.leaves, "triton_node"),
             "auto": lambda: kernels.op_cases.unigraph_call("gat", g, inputs.leaves, None)}
    pyg = kernels.peer_op("pyg", "gat", kernels.PeerGraph(g, device, None), inputs.leaves)
    if pyg is not None:
        calls["pyg"] = pyg
    for name, forward in calls.items():
        if name == "triton_node" and device.type != "cuda":
            continue
        profile_calls(f"GAT op forward+backward, uniform, {num_nodes} nodes, in-degree 1, F={OP_WIDTH}: {name}",
                      kernels.with_backward(forward, inputs), steps, sync, out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    args = parser.parse_args(argv)
    ensure_repo_on_path()
    import torch
    from benchmarks import full_batch
    from benchmarks.gpu import step_e2e
    from benchmarks.peers import load_pyg
    from unigraph.benchmarking.environment import synchronize
    device = device_for(args.dry_run)
    steps = 2 if args.dry_run else args.steps
    out = io.StringIO()
    out.write(f"# Host time by Python function, {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}\n")
    sync = lambda: synchronize(device)  # noqa: E731
    pyg = load_pyg()
    hyper = {"gcn": full_batch.Hyper(hidden=256), "gat": full_batch.Hyper(hidden=8, heads=8, out_heads=1)}
    plan = step_e2e.FULL_DRY["cora_like"] if args.dry_run else step_e2e.FULL["cora_like"]
    ds = step_e2e.dataset(plan["size"], device)
    for model in step_e2e.MODELS:
        torch.manual_seed(0)
        trainees = [full_batch.unigraph_trainee(model, ds, hyper[model], "auto")]
        trainees += full_batch.pyg_trainees(model, ds, hyper[model], pyg) if pyg is not None else []
        for trainee in trainees:
            trainee.model.to(device)
            profile_calls(f"{model} full batch, cora_like, {trainee.name}", trainee.train_step, steps, sync, out)
    # as many batches as the steps below take, so that every timed and profiled step meets a batch
    # for the first time, as in training (and in step_e2e's timing): per-graph first-call work shows
    plan = step_e2e.MINI_DRY if args.dry_run else step_e2e.MINI
    setup = step_e2e.mini_batch_setup(device, dict(plan, batches=WARMUP + 2 * steps))
    for name in setup["models"]:
        profile_calls(f"GraphSAGE mini-batch step, {name}", lambda name=name: setup["step"](name), steps, sync, out)
    profile_gat_op(device, 64 if args.dry_run else OP_NODES, steps, sync, out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(out.getvalue())
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
