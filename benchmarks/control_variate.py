"""Control-variate GCN (VR-GCN) with 1-2 sampled neighbours against full-neighbourhood GCN.

Workload: a generated planted-partition graph (:mod:`unigraph.storage.generate`, in memory:
``--nodes`` nodes, mean in-degree ``--degree``, ``--features`` features, 4 classes, homophily and
class separation as given; 30% training, 10% validation, 50% test nodes), GCN with ``--layers``
layers (hidden ``--hidden``, no dropout) on ``P X`` preprocessed once
(:func:`unigraph.sampling.control_variate.precompute_ax`), Adam (lr 0.01), mini-batches of
``--batch-size`` seeds, ``--epochs`` epochs, evaluated exactly. The same seeds and batches for
every fanout: ``full`` (every neighbour: the estimator is then the exact aggregation), 2 and 1.

Reported per fanout: test and validation accuracy (mean and spread over ``--repeats`` graph
seeds), training seconds per epoch (median), its fraction of the full-neighbourhood epoch, and the
rows of ``P X`` one epoch reads (the receptive field).

    python benchmarks/control_variate.py --quick          # smoke run
    python benchmarks/control_variate.py --out benchmarks/results   # 200k nodes, 3 graph seeds (quiet machine)
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import environment  # noqa: E402

FANOUTS = (None, 2, 1)


def run(args) -> dict:
    import torch

    from unigraph.sampling.control_variate import precompute_ax, train_control_variate
    from unigraph.storage.generate import PlantedSpec, planted_stream_dataset
    torch.set_num_threads(args.threads)
    runs = {str(f or "full"): [] for f in FANOUTS}
    preprocess = []
    for seed in range(args.repeats):
        spec = PlantedSpec(args.nodes, num_features=args.features, avg_degree=args.degree, homophily=args.homophily,
                           class_separation=args.separation, train_fraction=0.3, val_fraction=0.1,
                           test_fraction=0.5, seed=seed)
        data = planted_stream_dataset(spec)
        began = time.perf_counter()
        ax = precompute_ax(data.graph, data.x)
        preprocess.append(time.perf_counter() - began)
        masks = (data.train_mask, data.val_mask, data.test_mask)
        for fanout in FANOUTS:
            _, result = train_control_variate(data.graph, ax, data.y, masks, fanout=fanout, hidden=args.hidden,
                                              num_layers=args.layers, epochs=args.epochs, batch_size=args.batch_size)
            runs[str(fanout or "full")].append(result)
            print(f"seed {seed} fanout {fanout or 'full'}: test {result.test_acc:.4f}, "
                  f"{statistics.median(result.epoch_seconds):.2f} s/epoch", flush=True)
    full_epoch = statistics.median(s for r in runs["full"] for s in r.epoch_seconds)
    table = {}
    for name, results in runs.items():
        epoch = statistics.median(s for r in results for s in r.epoch_seconds)
        tests = [r.test_acc for r in results]
        table[name] = {"test_acc_mean": statistics.mean(tests), "test_acc": tests,
                       "val_acc": [r.val_acc for r in results], "epoch_seconds": epoch,
                       "epoch_fraction_of_full": epoch / full_epoch, "ax_rows_per_epoch": results[-1].ax_rows,
                       "final_loss": [r.losses[-1] for r in results]}
    return {"preprocess_seconds": preprocess, "fanouts": table}


def write_markdown(result: dict, path: pathlib.Path) -> None:
    env, s = result["environment"], result["settings"]
    lines = [f"# Control-variate GCN ({env['machine']['cpu_count']} cores; load {env['loadavg_start']} -> "
             f"{env.get('loadavg_end')})", "",
             f"{s['nodes']:,} nodes, degree {s['degree']}, {s['features']} features, GCN {s['layers']} layers, hidden "
             f"{s['hidden']}, batch {s['batch_size']}, {s['epochs']} epochs, {s['repeats']} graph seeds; P X "
             f"preprocessed in {statistics.median(result['preprocess_seconds']):.2f} s.", "",
             "| fanout | test acc (mean) | test acc per seed | s / epoch | fraction of full | P X rows / epoch |",
             "| --- | ---: | --- | ---: | ---: | ---: |"]
    for name, row in result["fanouts"].items():
        lines.append(f"| {name} | {row['test_acc_mean']:.4f} | {', '.join(f'{a:.4f}' for a in row['test_acc'])} | "
                     f"{row['epoch_seconds']:.2f} | {row['epoch_fraction_of_full']:.2f} | {row['ax_rows_per_epoch']:,} |")
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--degree", type=int, default=16)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--homophily", type=float, default=0.75)
    parser.add_argument("--separation", type=float, default=0.4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: small ops)")
    parser.add_argument("--quick", action="store_true")
    environment.add_out_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.epochs, args.repeats, args.hidden = 6000, 3, 1, 32
    out = environment.out_dir(args)
    env = environment.describe(" ".join(["python", "benchmarks/control_variate.py", *(argv or sys.argv[1:])]))
    result = run(args)
    result.update(environment=environment.finish(env), settings={k: v for k, v in vars(args).items() if k != "out"})
    environment.write_report(result, out, "control_variate_cpu", write_markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
