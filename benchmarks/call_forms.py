"""What the calling conventions and the sparse input projection cost, on a model built from GATConv.

The model is PyG's ``examples/gat.py`` network written with ``unigraph.GATConv`` (2 layers, 8 heads of
8, ELU, dropout 0.6 on features and attention, Adam lr 0.005, weight decay 5e-4), trained full batch
on Cora. Rows, one training epoch each in turn (interleaved, so a load change hits all alike):

- ``conv(g, x)``: the graph passed as a prepared ``unigraph.Graph``;
- ``conv(x, edge_index)``: PyG's form, the [2, E] tensor converted by ``unigraph.call_forms``
  (once: the conversion is cached on the tensor's identity and version); target: within 5% of the
  row above;
- ``GATConv-built model, sparse input``: the features as a torch sparse CSR tensor, which every
  layer's input projection multiplies as sparse (``unigraph.nn.projection.linear``);
- ``GATConv-built model, dense input``: the same features dense with the sparse projection switched
  off (equal dense input, as PyG and DGL get it).

Reported: median, min and max milliseconds per epoch over the timed epochs, and the ratio of the
PyG form to the graph form.

A second table times what re-checking the sparse input's CSR copy costs (a dense, mostly-zero
input is multiplied as a cached CSR copy, ``projection.sparse_if_mostly_zero``, and every cache
hit re-checks the copy against the tensor exactly), forward only, one call each in turn, with a
64-column weight (GAT's 8 x 8): the dense product ``F.linear(x, W)``; the sparse product on a
cache hit, check included (``projection.linear``); the exact re-check alone; and rebuilding the
copy (``x.to_sparse_csr()``), what re-converting on every call would cost.

    python benchmarks/call_forms.py                  # Cora, 200 epochs
    python benchmarks/call_forms.py --quick          # a smoke run (few epochs; synthetic graph without Cora)
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import unigraph  # noqa: E402
from benchmarks.environment import machine, set_threads, versions  # noqa: E402
from unigraph.data import Planetoid, planted_partition  # noqa: E402
from unigraph.nn import projection  # noqa: E402

DEFAULT_ROOT = REPO_ROOT.parent / "shared" / "datasets" / "planetoid" / "raw"
DROPOUT, LR, WEIGHT_DECAY = 0.6, 0.005, 5e-4


class GATConvModel(torch.nn.Module):
    def __init__(self, in_channels: int, classes: int):
        super().__init__()
        self.conv1 = unigraph.GATConv(in_channels, 8, heads=8, dropout=DROPOUT)
        self.conv2 = unigraph.GATConv(64, classes, heads=1, concat=False, dropout=DROPOUT)

    def forward(self, a, b):  # (g, x) or (x, edge_index): the layers take either
        x_first = isinstance(a, torch.Tensor) and not isinstance(b, unigraph.Graph) and a.is_floating_point()
        x, rest = (a, b) if x_first else (b, a)
        x = projection.dropout(x, DROPOUT, self.training)  # keeps a sparse x sparse
        x = F.elu(self.conv1(x, rest) if x_first else self.conv1(rest, x))
        x = F.dropout(x, DROPOUT, self.training)
        return self.conv2(x, rest) if x_first else self.conv2(rest, x)


class Row:
    def __init__(self, name: str, model: torch.nn.Module, args: tuple, y, mask, sparse: bool = True):
        self.name, self.model, self.args, self.y, self.mask, self.sparse = name, model, args, y, mask, sparse
        self.optimizer = torch.optim.Adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
        self.ms: list[float] = []

    def step(self) -> None:
        with projection.sparse_input(self.sparse):
            start = time.perf_counter()
            self.model.train()
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.model(*self.args)[self.mask], self.y[self.mask])
            loss.backward()
            self.optimizer.step()
            self.ms.append(1e3 * (time.perf_counter() - start))


def load(args):
    if args.quick and not pathlib.Path(args.root).is_dir():
        data = planted_partition(num_nodes=2000, seed=0)  # the split needs 1,580 nodes
        return data.graph, data.x, data.y, data.train_mask
    ds = Planetoid(args.root, "cora")
    return ds.graph, ds.x, ds.y, ds.train_mask


def run(args) -> dict:
    graph, x, y, mask = load(args)
    graph.prepare()
    edge_index = graph.edge_index.clone()  # the user's own tensor, as PyG code holds it
    classes = int(y.max()) + 1

    def model():
        torch.manual_seed(args.seed)
        return GATConvModel(x.shape[1], classes)

    rows = [Row("conv(g, x)", model(), (graph, x), y, mask),
            Row("conv(x, edge_index)", model(), (x, edge_index), y, mask),
            Row("GATConv-built model, sparse input", model(), (graph, x.to_sparse_csr()), y, mask),
            Row("GATConv-built model, dense input", model(), (graph, x.clone()), y, mask, sparse=False)]
    for _ in range(args.epochs):
        for row in rows:
            row.step()
    warm = min(args.warmup, args.epochs - 1)
    results = [{"row": row.name, "ms_median": statistics.median(row.ms[warm:]), "ms_min": min(row.ms[warm:]),
                "ms_max": max(row.ms[warm:])} for row in rows]
    ratio = results[1]["ms_median"] / results[0]["ms_median"]
    return {"machine": machine(torch.device("cpu")), "versions": versions(), "threads": args.threads, "epochs": args.epochs,
            "warmup": warm, "rows": results, "edge_index_over_graph": ratio,
            "sparse_copy_check": sparse_copy_check(x, args.epochs, warm),
            "command": "python benchmarks/call_forms.py " + " ".join(sys.argv[1:])}


def sparse_copy_check(x: torch.Tensor, rounds: int, warm: int) -> list[dict]:
    """The second table of the module docstring, on the dense features ``x`` (empty when they are
    not mostly zeros, as the synthetic ones of ``--quick``)."""
    if not projection.is_sparse(projection.sparse_if_mostly_zero(x, first_use=True)):   # the cached copy, now
        return []
    weight = torch.randn(64, x.shape[1])
    _, csr, rows = projection._SPARSE_COPIES[next(reversed(projection._SPARSE_COPIES))]
    calls = {"dense product": lambda: F.linear(x, weight),
             "sparse product, cache hit": lambda: projection.linear(x, weight),
             "exact re-check alone": lambda: projection._copy_is_current(x, csr, rows),
             "rebuilding the copy": lambda: projection._csr_of_dense(x)}
    times: dict[str, list[float]] = {name: [] for name in calls}
    with torch.no_grad():
        for _ in range(rounds):
            for name, call in calls.items():
                start = time.perf_counter()
                call()
                times[name].append(1e3 * (time.perf_counter() - start))
    return [{"row": name, "ms_median": statistics.median(t[warm:]), "ms_min": min(t[warm:])}
            for name, t in times.items()]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(DEFAULT_ROOT), help="Planetoid raw folder")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 epochs")
    parser.add_argument("--out", help="write the JSON result here (nothing is written without it)")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.warmup = 3, 1
    saved = torch.get_num_threads()
    set_threads(args.threads, None)
    try:
        result = run(args)
    finally:
        torch.set_num_threads(saved)  # the caller's thread count back
    for row in result["rows"]:
        print(f"{row['row']:40s} median {row['ms_median']:8.2f} ms  (min {row['ms_min']:.2f}, max {row['ms_max']:.2f})")
    print(f"conv(x, edge_index) / conv(g, x): {result['edge_index_over_graph']:.3f}")
    for row in result["sparse_copy_check"]:
        print(f"{row['row']:40s} median {row['ms_median']:8.3f} ms  (min {row['ms_min']:.3f})")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
