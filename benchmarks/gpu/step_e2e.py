"""The GPU run's e2e step: end to end on the GPU, unigraph (``auto``) beside PyG, with accuracy.

* ``full_batch``: GCN and GAT (``benchmarks/full_batch.py``'s models and hyper-parameters) on a
  Cora-sized and an arxiv-sized generated graph (:func:`unigraph.data.arxiv_like.arxiv_like`:
  2,708 nodes / 1,433 features / 7 classes, and 169k nodes / 2.3M directed edges / 128 features /
  40 classes), epochs interleaved with a device synchronization before each clock stop; ms per
  epoch (median), test accuracy at the best validation epoch, PyG's time over unigraph's.
* ``mini_batch``: one GraphSAGE step (3 layers, mean, hidden 256; [15, 10, 5] neighbours, batches
  of 1,024) on the arxiv-sized graph, everything on the GPU. unigraph samples with its
  ``NodeLoader`` on the GPU; PyG's ``NeighborLoader`` needs pyg-lib or torch-sparse, which the GPU
  machine lacks, so both models train on the same batches (unigraph's blocks, given to PyG's
  ``SAGEConv`` as bipartite ``(x_src, x_dst)`` layers): the step without sampling is compared,
  and unigraph's sampling is timed beside it. Test accuracy on the same sampled test batches.
* ``profile`` (:mod:`benchmarks.gpu.profiling`): a few steps of each row of the Cora-sized groups
  and of the mini-batch step under ``torch.profiler``: top operators, host waits, aten calls.
"""
from __future__ import annotations

import dataclasses
import sys
import time

import torch
import torch.nn.functional as F

from benchmarks.gpu.common import device_for, freeze_imports, log, run_parts, step_main
from benchmarks.gpu.profiling import profile_steps

STEP = "e2e"
CORA_SIZE = dict(num_nodes=2_708, num_edges=5_278, num_features=1_433, num_classes=7)
FULL = {"cora_like": dict(size=CORA_SIZE, epochs=100, warmup=5), "arxiv_like": dict(size=None, epochs=30, warmup=3)}
FULL_DRY = {"cora_like": dict(size=dict(num_nodes=60, num_edges=150, num_features=12, num_classes=3), epochs=3,
                              warmup=1)}
MODELS = ("gcn", "gat")
MINI = dict(batches=20, warmup=3, test_batches=5, batch_size=1024)
MINI_DRY = dict(batches=2, warmup=1, test_batches=1, batch_size=16, size=dict(num_nodes=200, num_edges=800,
                                                                             num_features=8, num_classes=3))


def dataset(size, device):
    from unigraph.data.arxiv_like import arxiv_like
    return (arxiv_like(**size) if size else arxiv_like()).to(device)


def part_full_batch(results, deadline, device, dry_run: bool) -> None:
    from benchmarks import full_batch
    from benchmarks.peers import load_pyg
    from unigraph.benchmarking.environment import synchronize
    pyg = load_pyg()
    freeze_imports()
    record = results["full_batch"] = {"groups": [], "status": "running", "pyg": pyg is not None}
    hyper = {"gcn": full_batch.Hyper(hidden=256), "gat": full_batch.Hyper(hidden=8, heads=8, out_heads=1)}
    for name, plan in (FULL_DRY if dry_run else FULL).items():
        ds = dataset(plan["size"], device)
        stats = ds.graph.stats()
        for model in MODELS:
            if not deadline.allows(12):  # a group took 3-13 s on the H200 (2026-11-26)
                record["status"] = "cut short by the step's budget"
                return
            torch.manual_seed(0)
            trainees = [full_batch.unigraph_trainee(model, ds, hyper[model], "auto")]
            if pyg is not None:
                trainees += full_batch.pyg_trainees(model, ds, hyper[model], pyg)
            for trainee in trainees:  # built on the CPU; moved in place, so their optimizers keep the parameters
                trainee.model.to(device)
            rows = full_batch.train_interleaved(trainees, plan["epochs"], plan["warmup"],
                                                sync=lambda: synchronize(device))
            ours = rows[0]
            for row in rows[1:]:
                row["time_over_unigraph"] = round(row["median_ms"] / ours["median_ms"], 3)
                row["accuracy_gap"] = round(row["test_acc"] - ours["test_acc"], 4)
            record["groups"].append({"graph": name, "nodes": stats.num_dst_nodes, "edges": stats.num_edges,
                                     "max_in_degree": stats.max_in_degree, "model": model, "epochs": plan["epochs"],
                                     "hyper": dataclasses.asdict(hyper[model]), "rows": rows})
            if name == "cora_like" and deadline.allows(8):  # where per-call costs show
                results.setdefault("profile", {})[f"{model} full batch, {name}"] = profile_steps(
                    {t.name: t.train_step for t in trainees}, device, sync=lambda: synchronize(device))
            results.save()
            log(STEP, f"{name} {model}: " + "; ".join(f"{r['impl']} {r['median_ms']:.2f} ms/epoch, acc "
                                                      f"{r['test_acc']:.3f}" for r in rows))
    record["status"] = "ok"


class PygSage(torch.nn.Module):
    """PyG's SAGEConv stack (mean, root weight) applied block by block: layer ``i`` reads block
    ``i`` as a bipartite graph whose destinations are the first ``num_dst`` of its sources (the
    blocks' convention)."""

    def __init__(self, pyg, widths, dropout):
        super().__init__()
        self.convs = torch.nn.ModuleList(pyg.nn.SAGEConv(widths[i], widths[i + 1], aggr="mean")
                                         for i in range(len(widths) - 1))
        self.dropout = dropout

    def forward(self, blocks, x):
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            edge_index = torch.stack([block.src, block.dst])
            x = conv((x, x[: block.num_dst_nodes]), edge_index, size=(block.num_src_nodes, block.num_dst_nodes))
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


def mini_batch_setup(device, plan: dict) -> dict:
    """The mini-batch GraphSAGE comparison's pieces (also :mod:`benchmarks.gpu.host_profile`'s):
    ``batches``/``test_batches`` sampled by unigraph's ``NodeLoader`` on ``device``, ``sample_ms``,
    ``models`` (unigraph's GraphSAGE, and PyG's SAGEConv on the same blocks where PyG imports) and
    ``step(name)``: forward, backward and Adam on the model's next batch."""
    import unigraph
    from benchmarks import mini_batch
    from benchmarks.peers import load_pyg
    from unigraph.benchmarking.environment import synchronize
    from unigraph.sampling import NeighborSampler, NodeLoader
    ds = dataset(plan.get("size"), device)
    train = ds.train_mask.nonzero().flatten()
    test = ds.test_mask.nonzero().flatten()
    sampler = NeighborSampler(list(mini_batch.LAYER_ORDER))
    loader = NodeLoader(ds.graph, train, sampler, batch_size=plan["batch_size"], features=ds.x, labels=ds.y, seed=0)
    test_loader = NodeLoader(ds.graph, test, sampler, batch_size=plan["batch_size"], features=ds.x, labels=ds.y,
                             seed=1, shuffle=False)
    batches_iter = iter(loader)
    sample_ms = []
    batches = []
    for _ in range(plan["batches"]):
        start = time.perf_counter()
        batch = next(batches_iter)
        synchronize(device)
        sample_ms.append((time.perf_counter() - start) * 1e3)
        batches.append(batch)
    test_batches = [b for _, b in zip(range(plan["test_batches"]), iter(test_loader))]
    widths = [ds.num_features, mini_batch.HIDDEN, mini_batch.HIDDEN, ds.num_classes]
    torch.manual_seed(0)
    ours = unigraph.GraphSAGE(ds.num_features, out_channels=ds.num_classes, hidden_channels=mini_batch.HIDDEN,
                              num_layers=3, aggr="mean", dropout=mini_batch.DROPOUT).to(device)
    models = {"unigraph": ours}
    pyg = load_pyg()
    if pyg is not None:
        torch.manual_seed(0)
        theirs = PygSage(pyg, widths, mini_batch.DROPOUT).to(device)
        models["pyg (SAGEConv on the same blocks)"] = theirs
    optimizers = {name: torch.optim.Adam(m.parameters(), lr=mini_batch.LR) for name, m in models.items()}
    position = dict.fromkeys(models, 0)

    def step(name):
        model, optimizer = models[name], optimizers[name]
        batch = batches[position[name] % len(batches)]
        position[name] += 1
        model.train()
        optimizer.zero_grad()
        F.cross_entropy(model(batch.blocks, batch.x), batch.y).backward()
        optimizer.step()
    return dict(batches=batches, test_batches=test_batches, sample_ms=sample_ms, models=models, step=step)


def part_mini_batch(results, deadline, device, dry_run: bool) -> None:
    from unigraph.benchmarking.environment import synchronize
    from unigraph.benchmarking.timing import interleaved
    plan = MINI_DRY if dry_run else MINI
    record = results["mini_batch"] = {"status": "running", "plan": {k: v for k, v in plan.items()}}
    if not deadline.allows(12):
        record["status"] = "skipped: too little of the step's budget left"
        return
    setup = mini_batch_setup(device, plan)
    models, step, test_batches, sample_ms = setup["models"], setup["step"], setup["test_batches"], setup["sample_ms"]
    timings = interleaved({name: (lambda name=name: step(name)) for name in models}, plan["batches"] - plan["warmup"],
                          warmup=plan["warmup"], sync=lambda: synchronize(device))
    rows = []
    for name, model in models.items():
        model.train(False)
        with torch.no_grad():
            correct = sum(int((model(b.blocks, b.x).argmax(-1) == b.y).sum()) for b in test_batches)
        total = sum(int(b.y.numel()) for b in test_batches)
        rows.append({"impl": name, **timings[name].summary(), "test_acc": round(correct / max(total, 1), 4)})
    for row in rows[1:]:
        row["time_over_unigraph"] = round(row["median_ms"] / rows[0]["median_ms"], 3)
    record.update(rows=rows, sample_ms={"median_ms": round(sorted(sample_ms)[len(sample_ms) // 2], 3),
                                        "min_ms": round(min(sample_ms), 3), "max_ms": round(max(sample_ms), 3)},
                  status="ok", note="a step = forward, backward, Adam on one batch already sampled (unigraph's "
                                    "NodeLoader on the GPU, sample_ms); PyG's NeighborLoader needs pyg-lib or "
                                    "torch-sparse")
    log(STEP, "mini-batch GraphSAGE: " + "; ".join(f"{r['impl']} {r['median_ms']:.2f} ms/step, acc {r['test_acc']:.3f}"
                                                   for r in rows) + f"; unigraph's sampling {record['sample_ms']}")
    if deadline.allows(15):  # after the scores (it trains a few more steps): batches seen, formats cached
        results.setdefault("profile", {})["GraphSAGE mini-batch step"] = profile_steps(
            {name: (lambda name=name: step(name)) for name in models}, device, sync=lambda: synchronize(device))


def body(results, deadline, dry_run: bool) -> None:
    device = device_for(dry_run)
    run_parts(STEP, results, [("full_batch", lambda: part_full_batch(results, deadline, device, dry_run)),
                              ("mini_batch", lambda: part_mini_batch(results, deadline, device, dry_run))])


if __name__ == "__main__":
    sys.exit(step_main(STEP, __doc__, body))
