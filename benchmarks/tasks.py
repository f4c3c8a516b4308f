"""Accuracy of the tasks beyond node classification, beside PyG with the same recipe, in one run.

Part 1, graph classification: GIN on the built-in motif dataset (:func:`unigraph.data.motif_graphs`,
5 classes, chance 0.2). unigraph's :class:`~unigraph.models.GINClassifier` and the same network
built from PyG's ``GINConv`` and ``global_add_pool`` (same widths, MLPs, head, initialisation
scheme), trained with the same recipe: the same stratified 80/10/10 split, Adam, batches of 32,
fixed epochs, the test accuracy at the epoch of best validation accuracy. One run per seed (the
seed fixes the split, the initialisation and the shuffling of each library).

Part 2, link prediction: GAE (two GCN layers of 32 and 16, inner-product decoder, Adam lr 0.01,
no weight decay, one fresh negative per training edge each epoch) on Cora's link split (85/5/10,
undirected, fixed validation/test negatives), beside PyG's ``GAE`` with the same encoder on the
same split tensors. Test ROC-AUC (and Hits@50) at the epoch of best validation AUC.

Only accuracies are reported: they do not depend on the load of the machine (timings would).

    python benchmarks/tasks.py                 # writes benchmarks/results/tasks_cpu.{md,json}
    python benchmarks/tasks.py --quick         # a smoke run (small data, few epochs)
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import statistics
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import unigraph  # noqa: E402
from benchmarks.environment import machine, versions  # noqa: E402
from unigraph.data import Planetoid, collate_dataset, motif_graphs, split_graphs  # noqa: E402
from unigraph.models import GAE, GINClassifier  # noqa: E402
from unigraph.models.gin import gin_mlp  # noqa: E402
from unigraph.tasks.link import split_edges  # noqa: E402
from unigraph.tasks.metrics import hits_at_k, link_auc  # noqa: E402
from unigraph.train import TrainConfig  # noqa: E402
from unigraph.train.graph_trainer import GraphTrainer  # noqa: E402
from unigraph.train.link_trainer import LinkTrainer  # noqa: E402

RESULTS = REPO_ROOT / "benchmarks" / "results"
PLANETOID = REPO_ROOT.parent / "shared" / "datasets" / "planetoid" / "raw"


def mean_std(values: list[float]) -> str:
    return f"{statistics.mean(values):.3f} +- {statistics.pstdev(values):.3f}"


# ---------------------------------------------------------------- part 1: GIN
class PyGGIN(torch.nn.Module):
    """GINClassifier's network from PyG's parts."""

    def __init__(self, pyg_nn, in_channels: int, hidden: int, classes: int, layers: int, dropout: float):
        super().__init__()
        widths = [in_channels] + [hidden] * layers
        self.convs = torch.nn.ModuleList(pyg_nn.GINConv(gin_mlp(widths[i], hidden, hidden)) for i in range(layers))
        self.lin1, self.lin2 = torch.nn.Linear(hidden, hidden), torch.nn.Linear(hidden, classes)
        self.pool, self.dropout = pyg_nn.global_add_pool, dropout

    def forward(self, data):
        x = data.x
        for conv in self.convs:
            x = F.relu(conv(x, data.edge_index))
        x = self.pool(x, data.batch, size=data.num_graphs)
        return self.lin2(F.dropout(F.relu(self.lin1(x)), self.dropout, self.training))


def pyg_gin_run(dataset, splits, recipe: dict, seed: int) -> float:
    from torch_geometric import nn as pyg_nn
    from torch_geometric.data import Data
    from torch_geometric.loader import DataLoader
    graphs = []
    for i in range(len(dataset)):
        graph, label = dataset[i]
        graphs.append(Data(x=graph.ndata["x"], edge_index=graph.edge_index, y=label.view(1), num_nodes=graph.num_nodes))
    torch.manual_seed(seed)
    model = PyGGIN(pyg_nn, dataset.num_features, recipe["hidden"], dataset.num_classes, recipe["layers"],
                   recipe["dropout"])
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe["lr"])
    train = DataLoader([graphs[i] for i in splits[0].tolist()], batch_size=recipe["batch_size"], shuffle=True)
    evals = [DataLoader([graphs[i] for i in ids.tolist()], batch_size=256) for ids in splits[1:]]
    best_val, best_test = -1.0, 0.0
    for _ in range(recipe["epochs"]):
        model.train()
        for data in train:
            optimizer.zero_grad()
            F.cross_entropy(model(data), data.y).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val, test = (sum(int((model(d).argmax(-1) == d.y).sum()) for d in loader) / len(loader.dataset)
                         for loader in evals)
        if val > best_val:
            best_val, best_test = val, test
    return best_test


def unigraph_gin_run(dataset, splits, recipe: dict, seed: int) -> float:
    torch.manual_seed(seed)
    model = GINClassifier(dataset.num_features, hidden_channels=recipe["hidden"], num_classes=dataset.num_classes,
                          num_layers=recipe["layers"], dropout=recipe["dropout"])
    config = TrainConfig(epochs=recipe["epochs"], lr=recipe["lr"], weight_decay=0.0, batch_size=recipe["batch_size"],
                         patience=None, progress="off", seed=seed)
    return GraphTrainer(model, dataset, splits, config).fit().test_acc


def gin_part(quick: bool, seeds: list[int], graphs: int, epochs: int) -> dict:
    recipe = dict(graphs=200 if quick else graphs, hidden=32, layers=4, dropout=0.5, lr=0.01, batch_size=32,
                  epochs=3 if quick else epochs)
    dataset = motif_graphs(recipe["graphs"], seed=0)
    rows = []
    for seed in seeds:
        splits = split_graphs(len(dataset), (0.8, 0.1, 0.1), seed=seed, labels=dataset.y)
        ours = unigraph_gin_run(dataset, splits, recipe, seed)
        theirs = pyg_gin_run(dataset, splits, recipe, seed)
        rows.append({"seed": seed, "unigraph": ours, "pyg": theirs})
        print(f"GIN seed {seed}: unigraph {ours:.3f}  PyG {theirs:.3f}", flush=True)
    return {"recipe": recipe, "runs": rows}


# ---------------------------------------------------------------- part 2: GAE
def pyg_gae_run(dataset, split, recipe: dict, seed: int) -> tuple[float, float]:
    from torch_geometric import nn as pyg_nn
    from torch_geometric.utils import negative_sampling

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg_nn.GCNConv(dataset.num_features, 32)
            self.conv2 = pyg_nn.GCNConv(32, 16)

        def forward(self, x, edge_index):
            return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)

    torch.manual_seed(seed)
    model = pyg_nn.GAE(Encoder())
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe["lr"])
    edge_index, x = split.graph.edge_index, dataset.x
    best = (-1.0, 0.0, 0.0)
    for epoch in range(1, recipe["epochs"] + 1):
        model.train()
        optimizer.zero_grad()
        z = model.encode(x, edge_index)
        neg = negative_sampling(edge_index, num_nodes=x.shape[0], num_neg_samples=split.train_pos.shape[1])
        model.recon_loss(z, split.train_pos, neg).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            z = model.encode(x, edge_index)
            score = lambda pairs: model.decoder(z, pairs, sigmoid=False)  # noqa: E731
            val = link_auc(score(split.val_pos), score(split.val_neg))
            if val > best[0]:
                # test pairs on the training + validation edges, as LinkTrainer (and PyG's RandomLinkSplit)
                z = model.encode(x, split.test_graph.edge_index)
                best = (val, link_auc(score(split.test_pos), score(split.test_neg)),
                        hits_at_k(score(split.test_pos), score(split.test_neg), 50))
    return best[1], best[2]


def unigraph_gae_run(dataset, split, recipe: dict, seed: int) -> tuple[float, float]:
    torch.manual_seed(seed)
    model = GAE(in_channels=dataset.num_features)
    config = TrainConfig(epochs=recipe["epochs"], lr=recipe["lr"], weight_decay=0.0, patience=None, progress="off",
                         seed=seed)
    result = LinkTrainer(model, split, dataset.x, config).fit()
    return result.test_auc, result.test_hits


def gae_part(quick: bool, seeds: list[int]) -> dict | None:
    if not PLANETOID.is_dir():
        print(f"GAE part skipped: Cora's raw files are not at {PLANETOID}", flush=True)
        return None
    recipe = dict(epochs=5 if quick else 400, lr=0.01, val_ratio=0.05, test_ratio=0.1, features="row-normalized")
    dataset = Planetoid(PLANETOID, "cora", normalize_features=True)
    rows = []
    for seed in seeds:
        split = split_edges(dataset.graph, recipe["val_ratio"], recipe["test_ratio"], seed=seed)
        ours, theirs = unigraph_gae_run(dataset, split, recipe, seed), pyg_gae_run(dataset, split, recipe, seed)
        rows.append({"seed": seed, "unigraph_auc": ours[0], "unigraph_hits50": ours[1], "pyg_auc": theirs[0],
                     "pyg_hits50": theirs[1]})
        print(f"GAE seed {seed}: unigraph AUC {ours[0]:.4f} (Hits@50 {ours[1]:.3f})  PyG AUC {theirs[0]:.4f} "
              f"(Hits@50 {theirs[1]:.3f})", flush=True)
    return {"recipe": recipe, "runs": rows}


def markdown(report: dict) -> str:
    lines = ["# Tasks beyond node classification: accuracy beside PyG", "",
             f"Run {report['date']} with `{report['command']}`; {report['versions']}.",
             "Accuracies only (they do not depend on the machine's load). Each seed fixes the split, the "
             "initialisation and the shuffling; the two libraries share the split.", ""]
    gin = report["gin"]
    lines += [] if gin is None else ["## GIN on the motif dataset (5 classes, chance 0.2)", "", f"Recipe: {gin['recipe']}", "",
              "| seed | unigraph GINClassifier | PyG GINConv + global_add_pool |", "| --- | --- | --- |"]
    if gin is not None:
        lines += [f"| {r['seed']} | {r['unigraph']:.3f} | {r['pyg']:.3f} |" for r in gin["runs"]]
        lines += [f"| mean +- std | {mean_std([r['unigraph'] for r in gin['runs']])} | "
                  f"{mean_std([r['pyg'] for r in gin['runs']])} |", ""]
    gae = report.get("gae")
    if gae:
        lines += ["## GAE on Cora's link split (test ROC-AUC at the best validation epoch; published GAE: 0.910)", "",
                  f"Recipe: {gae['recipe']}", "", "| seed | unigraph AUC | unigraph Hits@50 | PyG AUC | PyG Hits@50 |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r['seed']} | {r['unigraph_auc']:.4f} | {r['unigraph_hits50']:.3f} | {r['pyg_auc']:.4f} | "
                  f"{r['pyg_hits50']:.3f} |" for r in gae["runs"]]
        lines += [f"| mean +- std | {mean_std([r['unigraph_auc'] for r in gae['runs']])} | "
                  f"{mean_std([r['unigraph_hits50'] for r in gae['runs']])} | "
                  f"{mean_std([r['pyg_auc'] for r in gae['runs']])} | "
                  f"{mean_std([r['pyg_hits50'] for r in gae['runs']])} |", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: small data, few epochs, one seed")
    parser.add_argument("--seeds", type=int, default=5, help="runs per library: seeds 0..N-1 (default 5)")
    parser.add_argument("--seed-list", help="comma-separated seeds instead of --seeds, e.g. 1,2")
    parser.add_argument("--parts", default="gin,gae", help="comma-separated parts to run (default gin,gae)")
    parser.add_argument("--gin-graphs", type=int, default=1000, help="motif graphs for the GIN part (default 1000)")
    parser.add_argument("--gin-epochs", type=int, default=100, help="GIN epochs (default 100)")
    parser.add_argument("--out", default=str(RESULTS / "tasks_cpu"), help="output path without extension")
    args = parser.parse_args(argv)
    seeds = [0] if args.quick else ([int(v) for v in args.seed_list.split(",")] if args.seed_list
                                    else list(range(args.seeds)))
    command = " ".join(["python benchmarks/tasks.py"] + (argv if argv is not None else sys.argv[1:]))
    report = {"date": datetime.date.today().isoformat(), "command": command,
              "machine": machine(torch.device("cpu")), "versions": versions(),
              "gin": gin_part(args.quick, seeds, args.gin_graphs, args.gin_epochs) if "gin" in args.parts else None,
              "gae": gae_part(args.quick, seeds) if "gae" in args.parts else None}
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    out.with_suffix(".md").write_text(markdown(report))
    print(f"wrote {out.with_suffix('.md')}", flush=True)


if __name__ == "__main__":
    main()
