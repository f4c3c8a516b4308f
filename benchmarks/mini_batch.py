"""Mini-batch GraphSAGE training epochs: unigraph's pipeline beside DGL's and PyG's, batch by batch.

Workload (issue 13): a 3-layer GraphSAGE (mean, hidden 256, ReLU, dropout 0.5), neighbour sampling
of 15, 10 and 5 neighbours per hop from the seeds outwards, batches of 1,024 training seeds,
on an ogbn-products-sized labelled graph (:data:`unigraph.data.arxiv_like.PRODUCTS_SIZE`, scaled by
``scale``). One step = the next batch from the library's own loader (sampling + relabelling +
feature and label gather) + forward + backward + Adam step.

Pipelines, each as its users write it:

* unigraph: ``NodeLoader(graph, seeds, NeighborSampler([5, 10, 15]), features=x, labels=y)``
  (fanouts in layer order) and ``unigraph.GraphSAGE`` on the blocks.
* DGL: ``dgl.dataloading.DataLoader(g, seeds, NeighborSampler([5, 10, 15]))`` (layer order),
  ``x[input_nodes]``, and three ``dgl.nn.SAGEConv(..., "mean")`` on the blocks.
* PyG: ``NeighborLoader(data, num_neighbors=[15, 10, 5])`` (hop order) and
  ``torch_geometric.nn.GraphSAGE`` on the batch, the first ``batch_size`` rows scored; also with
  ``transform=ToSparseTensor()`` (SparseTensor products) where torch-sparse is installed, the faster
  kept as "PyG at its best", labelled.

Timing (the shared rule): after a few warm-up batches each, the pipelines take one batch each in
turn (rotating), for ``epochs`` epochs of ``batches`` batches; an epoch's time is the sum of its
batches' times, reported as min / median / max over the epochs.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import math
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

import unigraph
from unigraph.benchmarking.peers import as_run_by
from unigraph.benchmarking.timing import Timing, interleaved
from unigraph.data import arxiv_like as arxiv_like_module
from unigraph.sampling import NeighborSampler, NodeLoader

HOPS = (15, 10, 5)            # neighbours per hop, from the seeds outwards (PyG's order)
LAYER_ORDER = HOPS[::-1]      # unigraph's and DGL's order: the first layer's fanout first
HIDDEN, DROPOUT, LR = 256, 0.5, 0.003


@dataclasses.dataclass
class Workload:
    scale: float = 1.0
    degrees: str = "power_law"
    batch_size: int = 1024
    train_fraction: float = 0.08   # ogbn-products trains on ~8% of its nodes
    seed: int = 0

    def sizes(self) -> dict:
        return arxiv_like_module.scaled(arxiv_like_module.PRODUCTS_SIZE, self.scale)


# ---------------------------------------------------------------------- memory
# Measured with /proc/self/statm (rounded up): bytes per directed edge each library's sampling
# structures took and the generator's peak per pair (at --mb-scale 0.1, 11.4M edges); the sampled
# input nodes of a batch of 1,024 were 0.34x / 0.46x the no-overlap bound 1024 x (1 + 15 + 150 + 750)
# at scale 0.25 / 0.5 (hubs are shared), and a step held about (features + 8 x hidden) x 4 bytes
# per input node; the allocator kept ~25% more than the sum (measured peak 4.3 GiB at scale 0.1).
BYTES_PER_EDGE = {"unigraph": 32, "dgl": 16, "pyg": 24}
BYTES_PER_GENERATED_PAIR = 200
LIBRARIES_GB = 0.6  # torch, numba, DGL and PyG imported
INPUT_NODES_OF_BOUND, ALLOCATOR_MARGIN = 0.6, 1.25


def memory_needed(w: Workload, impls: list[str]) -> dict[str, int]:
    """Bytes the run needs at its peak, by part: the generator's temporaries, or (all at once) the
    dataset, each library's graph structures and one training step's working set (a batch's input
    nodes times the widths they carry through three layers and back, bounded by the fanouts)."""
    s = w.sizes()
    directed = 2 * s["num_edges"]
    base = int(LIBRARIES_GB * 2**30)
    bound = w.batch_size * (1 + HOPS[0] + HOPS[0] * HOPS[1] + HOPS[0] * HOPS[1] * HOPS[2])
    input_nodes = int(min(0.9 * s["num_nodes"], INPUT_NODES_OF_BOUND * bound))
    steady = {"libraries": base, "dataset: src, dst (int64)": directed * 16,
              "dataset: features (float32)": s["num_nodes"] * s["num_features"] * 4}
    for lib in ("unigraph", "dgl", "pyg"):
        if any(i.startswith(lib) for i in impls):
            steady[f"{lib}: sampling structures"] = directed * BYTES_PER_EDGE[lib]
    steady["one training step"] = input_nodes * (s["num_features"] + 8 * HIDDEN) * 4
    steady["allocator margin (25%)"] = int((ALLOCATOR_MARGIN - 1) * sum(steady.values()))
    generation = base + s["num_edges"] * BYTES_PER_GENERATED_PAIR
    return {"generation peak (temporary)": generation, **steady, "peak": max(generation, sum(steady.values()))}


def describe_memory(parts: dict[str, int]) -> str:
    lines = [f"  {name:<52}{value / 2**30:8.2f} GiB" for name, value in parts.items() if name != "peak"]
    return "\n".join(lines + [f"  {'peak (estimate)':<52}{parts['peak'] / 2**30:8.2f} GiB"])


# ---------------------------------------------------------------------- pipelines
class Pipeline:
    """A library's loader and model: ``step()`` trains on the next batch (a new epoch's loader
    when ``batches`` batches of this one are done)."""

    def __init__(self, name: str, make_batches: Callable[[], Iterator], train_one: Callable[[object], None],
                 batches: int):
        self.name, self.make_batches, self.train_one, self.batches = name, make_batches, train_one, batches
        self.iterator, self.done = None, batches

    def restart(self) -> None:
        self.iterator, self.done = iter(self.make_batches()), 0

    def step(self) -> None:
        if self.done == self.batches:
            self.restart()
        batch = next(self.iterator)
        self.done += 1
        self.train_one(batch)


def unigraph_pipeline(ds, seeds, w: Workload, batches: int) -> Pipeline:
    torch.manual_seed(w.seed)
    model = unigraph.GraphSAGE(ds.num_features, out_channels=ds.num_classes, hidden_channels=HIDDEN, num_layers=3,
                               aggr="mean", dropout=DROPOUT)
    loader = NodeLoader(ds.graph, seeds, NeighborSampler(list(LAYER_ORDER)), batch_size=w.batch_size, features=ds.x,
                        labels=ds.y, seed=w.seed)

    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    def train_one(batch):
        optimizer.zero_grad()
        F.cross_entropy(model(batch.blocks, batch.x), batch.y).backward()
        optimizer.step()
    return Pipeline("unigraph", lambda: loader, train_one, batches)


def dgl_pipeline(ds, seeds, w: Workload, batches: int, dgl) -> Pipeline:
    # only the in-edge CSC its sampler reads (DGL's advice for sampling; all formats would triple the memory)
    g = dgl.graph((ds.graph.src, ds.graph.dst), num_nodes=ds.graph.num_nodes).formats(["csc"])
    g.create_formats_()
    torch.manual_seed(w.seed)

    class DglSage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            widths = [ds.num_features, HIDDEN, HIDDEN, ds.num_classes]
            self.convs = torch.nn.ModuleList(dgl.nn.SAGEConv(widths[i], widths[i + 1], "mean") for i in range(3))

        def forward(self, blocks, x):
            for i, (conv, block) in enumerate(zip(self.convs, blocks)):
                x = conv(block, x)
                if i < 2:
                    x = F.dropout(F.relu(x), DROPOUT, self.training)
            return x

    model = DglSage()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    loader = dgl.dataloading.DataLoader(g, seeds, dgl.dataloading.NeighborSampler(list(LAYER_ORDER)),
                                        batch_size=w.batch_size, shuffle=True, drop_last=False, num_workers=0)
    x, y = ds.x, ds.y

    def train_one(batch):
        input_nodes, output_nodes, blocks = batch
        optimizer.zero_grad()
        F.cross_entropy(model(blocks, x[input_nodes]), y[output_nodes]).backward()
        optimizer.step()
    return Pipeline("dgl", lambda: loader, train_one, batches)


def pyg_pipelines(ds, seeds, w: Workload, batches: int, pyg) -> list[Pipeline]:
    from torch_geometric.loader import NeighborLoader
    data = pyg.data.Data(x=ds.x, y=ds.y, edge_index=ds.graph.edge_index, num_nodes=ds.graph.num_nodes)
    variants = [("pyg (edge_index)", None)]
    if importlib.util.find_spec("torch_sparse") is not None:
        variants.append(("pyg (SparseTensor)", pyg.transforms.ToSparseTensor()))
    out = []
    for name, transform in variants:
        torch.manual_seed(w.seed)
        model = pyg.nn.GraphSAGE(ds.num_features, HIDDEN, num_layers=3, out_channels=ds.num_classes, dropout=DROPOUT)
        optimizer = torch.optim.Adam(model.parameters(), lr=LR)
        loader = NeighborLoader(data, num_neighbors=list(HOPS), batch_size=w.batch_size, input_nodes=seeds,
                                shuffle=True, transform=transform)

        def train_one(batch, model=model, optimizer=optimizer, sparse=transform is not None):
            optimizer.zero_grad()
            out = model(batch.x, batch.adj_t if sparse else batch.edge_index)[: batch.batch_size]
            F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
            optimizer.step()
        out.append(Pipeline(name, lambda loader=loader: loader, train_one, batches))
    return out


# ---------------------------------------------------------------------- the run
def dataset(w: Workload):
    s = w.sizes()
    return arxiv_like_module.arxiv_like(s["num_nodes"], s["num_edges"], s["num_features"], s["num_classes"],
                                        degrees=w.degrees, train_fraction=w.train_fraction, val_fraction=0.02,
                                        seed=w.seed)


def run(pipelines: list[Pipeline], epochs: int, warmup_batches: int, log: Callable[[str], None] | None = None
        ) -> dict[str, dict]:
    """Epoch times of every pipeline, their batches interleaved (see the module docstring)."""
    batches = pipelines[0].batches
    if any(p.batches != batches for p in pipelines):
        raise ValueError("every pipeline must run the same number of batches per epoch")
    calls = {p.name: as_run_by(p.name, p.step) for p in pipelines}
    if warmup_batches:
        interleaved(calls, warmup_batches, warmup=0)
    for p in pipelines:
        p.restart()
    done = {"runs": 0}

    def progress(_name):
        done["runs"] += 1
        if log is not None and done["runs"] % (max(1, batches // 4) * len(pipelines)) == 0:
            log(f"batch {done['runs'] // len(pipelines)}/{epochs * batches}")

    timings = interleaved(calls, epochs * batches, warmup=0, progress=progress)
    out = {}
    for name, per_batch in timings.items():
        epoch: Timing = per_batch.grouped(batches)
        out[name] = {"epoch_ms": epoch.summary(), "batch_ms": {"median_ms": round(per_batch.median_ms, 3),
                                                               "min_ms": round(per_batch.min_ms, 3),
                                                               "max_ms": round(per_batch.max_ms, 3)}}
    return out


def batches_per_epoch(num_seeds: int, batch_size: int, limit: int | None) -> int:
    full = math.ceil(num_seeds / batch_size)
    return full if limit is None else min(full, limit)
