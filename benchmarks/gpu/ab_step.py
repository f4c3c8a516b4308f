"""A/B of one change on a GPU training step: the code as it is beside the code with some
functions swapped back, interleaved in one process on one machine.

    python -m benchmarks.gpu.ab_step OUTFILE --patch unigraph.graph.count_index=benchmarks.gpu.ab_step.bincount_count \
        [--patch ...] [--step mini-batch|gcn] [--steps 30] [--dry-run]

Each GPU machine of a lease is another host (the same step read 4.0-5.6 ms for PyG on three
H100s of one day), so a change is judged only beside its baseline in the same call. ``--step
mini-batch`` (default): both variants train the same ``step_e2e`` GraphSAGE on blocks sampled
once, each step on a batch met for the first time (even batches for one variant, odd for the
other, as training meets them); ``--step gcn``: ``step_e2e``'s full-batch GCN on the Cora-sized
graph (one model, the same graph every step);
``--patch TARGET=REPLACEMENT`` (dotted paths) is applied around each of variant B's steps and
undone after it. Writes min / median / max ms per step of each and their ratio into OUTFILE.

Baselines kept here (the code a change replaced), for ``--patch``:
``bincount_count``: ``structure.count_index`` before it counted by adding on a GPU;
``no_fast_path``: a method that always answers None (a fast path such as
``MessagePassing._weighted_copy`` switched off).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import pathlib
import sys

from benchmarks.gpu.common import device_for, ensure_repo_on_path

WARMUP = 3


def bincount_count(index, size):
    """``count_index`` as it was: ``torch.bincount`` on every device."""
    import torch
    return torch.bincount(index, minlength=size)


def no_fast_path(*args, **kwargs):
    """A fast path that is never taken (its caller goes the general way)."""
    return None


def resolve(dotted: str):
    """``(owner, attribute)`` of a dotted path: a module's attribute, or a class's in a module
    (``package.module.Class.method``)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:-1]:
            owner = getattr(owner, name, None)
        if owner is None or not hasattr(owner, parts[-1]):
            break
        return owner, parts[-1]
    raise SystemExit(f"--patch: cannot find {dotted!r} (no attribute {parts[-1]!r} there)")


@contextlib.contextmanager
def patched(patches: list[tuple[object, str, object]]):
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--patch", action="append", default=[], metavar="TARGET=REPLACEMENT", required=True)
    parser.add_argument("--step", choices=["mini-batch", "gcn"], default="mini-batch")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    args = parser.parse_args(argv)
    ensure_repo_on_path()
    import torch
    from benchmarks.gpu import step_e2e
    from unigraph.benchmarking.environment import synchronize
    from unigraph.benchmarking.timing import interleaved
    patches = []
    for spec in args.patch:
        target, sep, replacement = spec.partition("=")
        if not sep:
            raise SystemExit(f"--patch wants TARGET=REPLACEMENT, got {spec!r}")
        owner, name = resolve(target)
        patches.append((owner, name, getattr(*resolve(replacement))))
    device = device_for(args.dry_run)
    steps, warmup = (1, 1) if args.dry_run else (args.steps, WARMUP)
    plan = step_e2e.MINI_DRY if args.dry_run else step_e2e.MINI
    position = {"as is": 0, "patched": 1}
    if args.step == "gcn":
        from benchmarks import full_batch
        sizes = step_e2e.FULL_DRY if args.dry_run else step_e2e.FULL
        trainee = full_batch.unigraph_trainee("gcn", step_e2e.dataset(sizes["cora_like"]["size"], device),
                                              full_batch.Hyper(hidden=256), "auto")
        trainee.model.to(device)
        train_step = lambda name: trainee.train_step()  # noqa: E731
    else:
        setup = step_e2e.mini_batch_setup(device, dict(plan, batches=2 * (warmup + steps)))   # one epoch holds them
        model = setup["models"]["unigraph"]
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        batches = setup["batches"]

        def train_step(name):
            batch = batches[position[name] % len(batches)]
            position[name] += 2
            model.train()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(batch.blocks, batch.x), batch.y).backward()
            optimizer.step()

    def step(name):
        with patched(patches) if name == "patched" else contextlib.nullcontext():
            train_step(name)
    timings = interleaved({name: (lambda name=name: step(name)) for name in position}, steps, warmup=warmup,
                          sync=lambda: synchronize(device))
    gpu = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    what = ("the mini-batch GraphSAGE step", "every step on a new batch") if args.step == "mini-batch" else (
        "the Cora-sized full-batch GCN step", "the same graph every step")
    lines = [f"# A/B of {what[0]}, {gpu}", "",
             f"patched: {', '.join(args.patch)}; {steps} steps each, interleaved, {what[1]}", "",
             "| variant | min ms | median ms | max ms |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {name} | {t.min_ms:.3f} | {t.median_ms:.3f} | {t.max_ms:.3f} |" for name, t in timings.items()]
    lines += ["", f"patched / as is (medians): {timings['patched'].median_ms / timings['as is'].median_ms:.3f}", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
