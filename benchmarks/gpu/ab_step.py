"""A/B of one change on the GPU mini-batch step: the code as it is beside the code with some
functions swapped back, interleaved in one process on one machine.

    python -m benchmarks.gpu.ab_step OUTFILE --patch unigraph.graph.count_index=benchmarks.gpu.ab_step.bincount_count \
        [--patch ...] [--steps 30] [--dry-run]

Each GPU machine of a lease is another host (the same step read 4.0-5.6 ms for PyG on three
H100s of one day), so a change is judged only beside its baseline in the same call. Both
variants train the same ``step_e2e`` GraphSAGE on blocks sampled once, each step on a batch met
for the first time (even batches for one variant, odd for the other, as training meets them);
``--patch TARGET=REPLACEMENT`` (dotted paths) is applied around each of variant B's steps and
undone after it. Writes min / median / max ms per step of each and their ratio into OUTFILE.

Baselines kept here (the code a change replaced), for ``--patch``:
``bincount_count``: ``structure.count_index`` before it counted by adding on a GPU.
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


def resolve(dotted: str):
    """``(owner, attribute)`` of a dotted path ``package.module.attribute``."""
    module, _, attribute = dotted.rpartition(".")
    owner = importlib.import_module(module)
    if not hasattr(owner, attribute):
        raise SystemExit(f"--patch: {module} has no attribute {attribute!r}")
    return owner, attribute


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
    setup = step_e2e.mini_batch_setup(device, dict(plan, batches=2 * (warmup + steps)))   # one epoch holds them
    model = setup["models"]["unigraph"]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches, position = setup["batches"], {"as is": 0, "patched": 1}

    def step(name):
        batch = batches[position[name] % len(batches)]
        position[name] += 2
        with patched(patches) if name == "patched" else contextlib.nullcontext():
            model.train()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(batch.blocks, batch.x), batch.y).backward()
            optimizer.step()
    timings = interleaved({name: (lambda name=name: step(name)) for name in position}, steps, warmup=warmup,
                          sync=lambda: synchronize(device))
    gpu = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    lines = [f"# A/B of the GPU mini-batch GraphSAGE step, {gpu}", "",
             f"patched: {', '.join(args.patch)}; {steps} steps each, interleaved, every step on a new batch", "",
             "| variant | min ms | median ms | max ms |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {name} | {t.min_ms:.3f} | {t.median_ms:.3f} | {t.max_ms:.3f} |" for name, t in timings.items()]
    lines += ["", f"patched / as is (medians): {timings['patched'].median_ms / timings['as is'].median_ms:.3f}", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
