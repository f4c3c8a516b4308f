"""Full-batch node classification, the same model in unigraph, PyG and DGL, trained side by side.

One :class:`Trainee` per implementation; :func:`train_interleaved` trains them all for the same
epochs with the shared timing rule (one epoch of each in turn, rotating; evaluation untimed after
every epoch) and reports ms per epoch (min / median / max) and the test accuracy at the epoch of
best validation accuracy.

Models (the peers built to match unigraph's, layer for layer):

* ``gcn``: 2 GCN layers (self-loops, symmetric normalization, cached), ReLU, dropout before each
  layer (PyG ``GCNConv(cached=True)``, DGL ``GraphConv(norm="both")`` on the graph with self-loops).
* ``sage``: 2 GraphSAGE layers, mean aggregation with root weight, ReLU and dropout between them
  (PyG ``SAGEConv(aggr="mean")``, DGL ``SAGEConv("mean")``).
* ``gat``: 2 GAT layers, 8 heads of 8 (concatenated, ELU) then ``out_heads`` averaged heads,
  dropout on every layer's input and on the attention (PyG ``GATConv``, DGL ``GATConv`` with
  ``feat_drop``/``attn_drop``; both add self-loops as unigraph's does).

PyG runs twice where torch-sparse is installed: on ``edge_index`` (gather/scatter) and on a
``SparseTensor`` ``adj_t`` (sparse-matrix products); reports keep the faster as "PyG at its best",
labelled. DGL runs with the same thread count (set by the caller).

Input projections: unigraph's models read mostly-zero (bag-of-words) features as a sparse matrix in
their first layer. :func:`dense_input` turns that off for one trainee, so the same model can be
timed on the sparse path and on equal dense input, as separate rows.

Dropout: unigraph's models draw their masks with a counter-based CPU kernel
(:mod:`unigraph.nn.dropout`), the peers with ``F.dropout``; ``unigraph_trainee(...,
torch_dropout=True)`` is the same model with torch's masks, so the kernel's share is its own row.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import time
from typing import Callable

import torch
import torch.nn.functional as F

import unigraph
from unigraph.benchmarking.peers import as_run_by
from unigraph.benchmarking.timing import interleaved
from unigraph.nn import dropout, projection

MODELS = ("gcn", "sage", "gat")


@dataclasses.dataclass
class Hyper:
    """What every implementation of a model shares."""

    hidden: int = 256          # gcn, sage: hidden width; gat: features per head
    heads: int = 8
    out_heads: int = 1
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 0.0


class Trainee:
    """One implementation under test: ``train_step()`` trains one epoch, ``evaluate()`` keeps the
    test accuracy at the best validation accuracy so far; ``step()`` does both and records the
    training time in ``step_ms`` (for callers that do their own interleaving)."""

    def __init__(self, name: str, model: torch.nn.Module, forward: Callable[[], torch.Tensor], y, masks,
                 backend: str | None = None, lr: float = 0.005, weight_decay: float = 5e-4):
        self.name, self.model, self.forward, self.y, self.masks = name, model, forward, y, masks
        self.backend = backend
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        self.step_ms: list[float] = []
        self.best_val, self.test_at_best_val = -1.0, 0.0

    def _context(self):
        return unigraph.use_backend(self.backend) if self.backend else contextlib.nullcontext()

    def train_step(self) -> None:
        with self._context():
            self.model.train()
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.forward()[self.masks["train"]], self.y[self.masks["train"]])
            loss.backward()
            self.optimizer.step()

    def evaluate(self) -> None:
        with self._context():
            self.model.eval()
            with torch.no_grad():
                predicted = self.forward().argmax(-1)
        val, test = (float((predicted[self.masks[s]] == self.y[self.masks[s]]).float().mean()) for s in ("val", "test"))
        if val > self.best_val:
            self.best_val, self.test_at_best_val = val, test

    def step(self) -> None:
        start = time.perf_counter()
        self.train_step()
        self.step_ms.append((time.perf_counter() - start) * 1e3)
        self.evaluate()


def masks(ds) -> dict:
    return {"train": ds.train_mask, "val": ds.val_mask, "test": ds.test_mask}


@contextlib.contextmanager
def dense_input():
    """unigraph's first layers take dense input as it is (no sparse bag-of-words projection) inside
    this block. Checked, so a change in :mod:`unigraph.nn.projection` fails here loudly instead of
    silently timing the sparse path twice."""
    with projection.sparse_input(False):
        probe = torch.zeros(4, 64)
        if projection.sparse_if_mostly_zero(probe) is not probe:
            raise RuntimeError("unigraph.nn.projection.sparse_input(False) let a zero matrix through as sparse")
        yield


def check_input_paths_differ(x: torch.Tensor) -> None:
    """The sparse-input row and the dense-input row really take different paths for ``x``."""
    probe = x.clone()   # a fresh tensor (not cached), seen twice: a mostly-zero input is converted on its second use
    projection.sparse_if_mostly_zero(probe)
    if not projection.is_sparse(projection.sparse_if_mostly_zero(probe)):
        raise RuntimeError("these features are not mostly zero: unigraph would not project them sparsely, so a "
                           "'sparse input projection' row would be the dense row again")
    with dense_input():
        probe = x.clone()
        projection.sparse_if_mostly_zero(probe)
        if projection.is_sparse(projection.sparse_if_mostly_zero(probe)):
            raise RuntimeError("dense_input() did not keep the features dense")


# ---------------------------------------------------------------------- unigraph
def unigraph_model(kind: str, in_channels: int, classes: int, h: Hyper) -> torch.nn.Module:
    if kind == "gcn":
        return unigraph.GCN(in_channels, out_channels=classes, hidden_channels=h.hidden, num_layers=2,
                            dropout=h.dropout, cached=True)
    if kind == "sage":
        return unigraph.GraphSAGE(in_channels, out_channels=classes, hidden_channels=h.hidden, num_layers=2,
                                  aggr="mean", dropout=h.dropout)
    return unigraph.GAT(in_channels, out_channels=classes, hidden_channels=h.hidden, heads=h.heads, num_layers=2,
                        out_heads=h.out_heads, dropout=h.dropout)


def unigraph_trainee(kind: str, ds, h: Hyper, backend: str, dense: bool = False, label: str = "",
                     torch_dropout: bool = False) -> Trainee:
    """``dense``: equal dense input (no sparse input projection); ``torch_dropout``: dropout masks
    from torch's generator (``rand >= p``) instead of unigraph's counter-based CPU kernel, the
    row that shows what the kernel contributes."""
    model = unigraph_model(kind, ds.num_features, ds.num_classes, h)
    graph = ds.graph
    x = ds.x.clone() if dense else ds.x  # dense: its own tensor, never in the projection's cache of sparse copies

    def forward():
        with dense_input() if dense else contextlib.nullcontext(), dropout.counter_based(not torch_dropout):
            return model(graph, x)
    return Trainee(f"unigraph:{backend}{label}", model, forward, ds.y, masks(ds), backend=backend, lr=h.lr,
                   weight_decay=h.weight_decay)


# ---------------------------------------------------------------------- PyG
def pyg_trainees(kind: str, ds, h: Hyper, pyg) -> list[Trainee]:
    """PyG on edge_index, and on a SparseTensor adj_t where torch-sparse is installed."""
    nn = pyg.nn
    classes = ds.num_classes

    class PygModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            if kind == "gcn":
                self.conv1, self.conv2 = nn.GCNConv(ds.num_features, h.hidden, cached=True), nn.GCNConv(
                    h.hidden, classes, cached=True)
            elif kind == "sage":
                self.conv1, self.conv2 = nn.SAGEConv(ds.num_features, h.hidden, aggr="mean"), nn.SAGEConv(
                    h.hidden, classes, aggr="mean")
            else:
                self.conv1 = nn.GATConv(ds.num_features, h.hidden, heads=h.heads, dropout=h.dropout)
                self.conv2 = nn.GATConv(h.hidden * h.heads, classes, heads=h.out_heads, concat=False,
                                        dropout=h.dropout)

        def forward(self, x, adj):
            if kind == "sage":
                x = F.dropout(F.relu(self.conv1(x, adj)), h.dropout, self.training)
                return self.conv2(x, adj)
            activation = F.relu if kind == "gcn" else F.elu
            x = activation(self.conv1(F.dropout(x, h.dropout, self.training), adj))
            return self.conv2(F.dropout(x, h.dropout, self.training), adj)

    out = []
    structures = [("pyg (edge_index)", ds.graph.edge_index)]
    if importlib.util.find_spec("torch_sparse") is not None:
        import torch_sparse
        n = ds.graph.num_nodes
        adj_t = torch_sparse.SparseTensor(row=ds.graph.dst, col=ds.graph.src, sparse_sizes=(n, n))
        structures.append(("pyg (SparseTensor)", adj_t))
    for name, adj in structures:
        torch.manual_seed(0)
        model, x = PygModel(), ds.x
        out.append(Trainee(name, model, lambda m=model, a=adj: m(x, a), ds.y, masks(ds), lr=h.lr,
                           weight_decay=h.weight_decay))
    return out


# ---------------------------------------------------------------------- DGL
def dgl_trainee(kind: str, ds, h: Hyper, dgl) -> Trainee:
    nn = dgl.nn
    classes = ds.num_classes
    g = dgl.graph((ds.graph.src, ds.graph.dst), num_nodes=ds.graph.num_nodes)
    if kind in ("gcn", "gat"):
        g = dgl.add_self_loop(dgl.remove_self_loop(g))
    g.create_formats_()

    class DglModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            if kind == "gcn":
                self.conv1, self.conv2 = nn.GraphConv(ds.num_features, h.hidden), nn.GraphConv(h.hidden, classes)
            elif kind == "sage":
                self.conv1, self.conv2 = nn.SAGEConv(ds.num_features, h.hidden, "mean"), nn.SAGEConv(
                    h.hidden, classes, "mean")
            else:
                self.conv1 = nn.GATConv(ds.num_features, h.hidden, h.heads, feat_drop=h.dropout, attn_drop=h.dropout,
                                        activation=F.elu)
                self.conv2 = nn.GATConv(h.hidden * h.heads, classes, h.out_heads, feat_drop=h.dropout,
                                        attn_drop=h.dropout)

        def forward(self, x):
            if kind == "gat":
                return self.conv2(g, self.conv1(g, x).flatten(1)).mean(1)
            if kind == "sage":
                return self.conv2(g, F.dropout(F.relu(self.conv1(g, x)), h.dropout, self.training))
            x = F.relu(self.conv1(g, F.dropout(x, h.dropout, self.training)))
            return self.conv2(g, F.dropout(x, h.dropout, self.training))

    torch.manual_seed(0)
    model, x = DglModel(), ds.x
    return Trainee("dgl", model, lambda: model(x), ds.y, masks(ds), lr=h.lr, weight_decay=h.weight_decay)


# ---------------------------------------------------------------------- the run
def train_interleaved(trainees: list[Trainee], epochs: int, warmup: int, log: Callable[[str], None] | None = None,
                      sync: Callable[[], None] | None = None) -> list[dict]:
    """Train every trainee ``epochs`` epochs, interleaved; rows with min/median/max ms per epoch
    (over the epochs after ``warmup``) and test accuracy at the best validation epoch. ``sync``
    (``torch.cuda.synchronize`` on a GPU) runs before each epoch's clock stops."""
    if not 0 <= warmup < epochs:
        raise ValueError(f"need 0 <= warmup < epochs, got warmup={warmup}, epochs={epochs}")
    by_name = {t.name: t for t in trainees}
    if len(by_name) != len(trainees):
        raise ValueError(f"trainee names must be unique, got {[t.name for t in trainees]}")
    done = {"runs": 0}

    def progress(_name):
        done["runs"] += 1
        if log is not None and done["runs"] % (10 * len(trainees)) == 0:
            log(f"epoch {warmup + done['runs'] // len(trainees)}/{epochs}")

    timings = interleaved({t.name: as_run_by(t.name, t.train_step) for t in trainees}, epochs - warmup, warmup=warmup,
                          sync=sync, after=lambda name: as_run_by(name, by_name[name].evaluate)(), progress=progress)
    return [{"impl": t.name, **timings[t.name].summary(), "test_acc": t.test_at_best_val, "best_val_acc": t.best_val}
            for t in trainees]
