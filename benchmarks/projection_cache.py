"""What re-checking the sparse-input projection's CSR copy costs, next to the products.

A dense, mostly-zero input (Cora's bag-of-words) reaching a layer's input projection is multiplied
as a CSR copy, cached per tensor (``unigraph.nn.projection.sparse_if_mostly_zero``); every cache
hit re-checks the copy against the tensor exactly (non-zero count, then the values at their
positions), so writes that bypass torch's version counter are seen. Rows, forward only, one call
each in turn (interleaved, so a load change hits all alike):

- ``dense product``: ``F.linear(x, W)``, what the projection costs without the sparse path;
- ``sparse product, cache hit``: ``projection.linear(x, W)`` as a layer calls it (check included);
- ``exact re-check alone``: what a hit adds;
- ``rebuilding the copy``: ``x.to_sparse_csr()``, what re-converting on every call would cost.

    python benchmarks/projection_cache.py            # Cora, 200 rounds, W of 64 rows (GAT's 8 x 8)
    python benchmarks/projection_cache.py --quick    # a smoke run (synthetic features without Cora)
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time
import warnings

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from benchmarks.environment import machine, set_threads, versions  # noqa: E402
from unigraph.data import Planetoid  # noqa: E402
from unigraph.nn import projection  # noqa: E402

DEFAULT_ROOT = REPO_ROOT.parent / "shared" / "datasets" / "planetoid" / "raw"


def features(args) -> torch.Tensor:
    if args.quick and not pathlib.Path(args.root).is_dir():
        gen = torch.Generator().manual_seed(0)
        return (torch.rand(2708, 1433, generator=gen) < 0.0127).float()  # Cora's shape and density
    return Planetoid(args.root, "cora").x


def run(args) -> dict:
    set_threads(args.threads)
    x = features(args)
    weight = torch.randn(args.out_features, x.shape[1])
    assert projection.is_sparse(projection.sparse_if_mostly_zero(x)), "the input is not mostly zeros"
    _, csr, rows = projection._SPARSE_COPIES[next(reversed(projection._SPARSE_COPIES))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        calls = {"dense product": lambda: F.linear(x, weight),
                 "sparse product, cache hit": lambda: projection.linear(x, weight),
                 "exact re-check alone": lambda: projection._copy_is_current(x, csr, rows),
                 "rebuilding the copy": lambda: x.to_sparse_csr()}
        times = {name: [] for name in calls}
        with torch.no_grad():
            for _ in range(args.rounds):
                for name, call in calls.items():
                    start = time.perf_counter()
                    call()
                    times[name].append(1e3 * (time.perf_counter() - start))
    warm = min(args.warmup, args.rounds - 1)
    rows_out = [{"row": name, "ms_median": statistics.median(t[warm:]), "ms_min": min(t[warm:])}
                for name, t in times.items()]
    return {"machine": machine(torch.device("cpu")), "versions": versions(), "threads": args.threads,
            "shape": list(x.shape), "density": float(torch.count_nonzero(x)) / x.numel(),
            "out_features": args.out_features, "rounds": args.rounds, "warmup": warm, "rows": rows_out,
            "command": "python benchmarks/projection_cache.py " + " ".join(sys.argv[1:])}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(DEFAULT_ROOT), help="Planetoid raw folder")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out-features", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 rounds")
    parser.add_argument("--out", help="write the JSON result here (nothing is written without it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup = 5, 1
    result = run(args)
    for row in result["rows"]:
        print(f"{row['row']:<28} median {row['ms_median']:8.3f} ms   min {row['ms_min']:8.3f} ms")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
