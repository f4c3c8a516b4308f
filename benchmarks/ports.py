"""Users' scripts, ported: PyG's and DGL's own example models and training loops, each run with the
original library's layers and with unigraph's, in one process, interleaved.

The built-in-model figures (``e2e.py``) say what unigraph's own models do. A PyG or DGL user who
keeps their script and changes the imports gets these instead. Each port below re-states one
example as its users run it (same layers, widths, dropout, optimizer, data and loop; our own code,
written from the examples' recipes, not their text), with the graph layer as the only thing that
changes between rows:

==========================  ==================================================================
port                        the example it follows (tags PyG 2.8.0, DGL v2.1.0)
==========================  ==================================================================
``pyg_gcn``                 PyG ``examples/gcn.py``: 2 GCNConv, 16 hidden, dropout 0.5 on the
                            input and the hidden layer, Adam 0.01 (weight decay 5e-4 on the
                            first layer), row-normalized Cora features, 200 epochs; test
                            accuracy at the best validation epoch
``pyg_gat``                 PyG ``examples/gat.py``: GATConv(8 x 8 heads, dropout 0.6), ELU,
                            GATConv(1 head, concat=False), input/hidden dropout 0.6, Adam 0.005
                            with weight decay 5e-4, 200 epochs
``pyg_gin``                 PyG ``examples/mutag_gin.py``: 5 GINConv(MLP([in, 32, 32])), ReLU,
                            global_add_pool, MLP([32, 32, C], dropout 0.5), batches of 128 small
                            graphs from PyG's DataLoader, Adam 0.01; on generated motif graphs
                            (``unigraph.data.motif_graphs``, one-hot degree features: MUTAG is not
                            on this machine)
``pyg_link_pred``           PyG ``examples/link_pred.py``: RandomLinkSplit(0.05, 0.1) of Cora,
                            GCNConv 128 -> 64, dot-product decoder, new negative samples every
                            epoch, BCE, Adam 0.01, 100 epochs; test AUC at the best validation AUC
``pyg_sage_neighbor``       PyG's NeighborLoader GraphSAGE (``examples/reddit.py``' recipe): 2
                            SAGEConv, 256 hidden, [25, 10] neighbours, batches of 1,024, dropout
                            0.5, Adam 0.01, on the arxiv-sized generated graph; a step is one batch
``dgl_gcn``                 DGL ``examples/pytorch/gcn/train.py``: GraphConv(16, ReLU),
                            GraphConv, dropout 0.5 between, AddSelfLoop, Adam 0.01 / 5e-4, 200
                            epochs
``dgl_gat``                 DGL ``examples/pytorch/gat/train.py``: GATConv(8 x 8 heads,
                            feat/attn dropout 0.6, ELU), GATConv(1 head), mean over heads
``dgl_sage``                DGL ``examples/pytorch/graphsage/train_full.py``: 2 SAGEConv("gcn"),
                            16 hidden, dropout 0.5 on input and hidden
``dgl_sage_minibatch``      DGL ``examples/pytorch/graphsage/node_classification.py``: 3
                            SAGEConv("mean"), 256 hidden, [10, 10, 10] neighbours, batches of
                            1,024 from DGL's DataLoader, Adam 0.001 / 5e-4, on an
                            ogbn-products-sized generated graph (``--products-scale``)
``user_arxiv``              a user's own 2-layer GCN, GraphSAGE and GAT (layers + ``F.relu`` +
                            ``F.dropout``) on the arxiv-sized generated graph, full batch: PyG on
                            edge_index and on a SparseTensor, DGL, unigraph
==========================  ==================================================================

Rows: ``unigraph`` (unigraph's layer, ``auto`` backend, the call form the script already uses:
``conv(x, edge_index)`` for PyG ports; for DGL ports the whole script on ``import unigraph.dgl as
dgl``: its graph, transforms, layers and DataLoader), the original library, and for PyG's
full-batch examples the original model under
``torch.compile`` (what a PyG user gets without changing library; compilation happens in the
warm-up steps and is not timed). The ``unigraph`` row's ``F.dropout`` draws torch's own masks
with the faster kernel importing unigraph installs (``unigraph.torch_bernoulli``: the same bits);
every other library's row runs with torch's kernel (``unigraph.benchmarking.peers``), as its
users without unigraph do. Where the script's dropout is most of a step (the Cora
examples, the mini-batch SAGE ports and ``user_arxiv``), ``unigraph + its dropout`` is the documented one-line opt-in on top (``F.dropout`` ->
``unigraph.nn.dropout.dropout``, ``nn.Dropout`` -> ``unigraph.nn.Dropout``, and for DGL's GATConv
its ``feat_drop`` module: the same distribution, other masks); it is shown, not counted against
the targets.

Timing: every row's steps interleaved (one of each in turn, rotating; :mod:`unigraph.benchmarking.timing`),
min / median / max of the timed train steps (a full-batch epoch, or one mini-batch including its
sampling and loading) and of the evaluation forward (``no_grad``); the score after training
(accuracy or AUC) beside them. The whole run is repeated at each ``--threads`` setting (torch,
numba and DGL get the same count). The machine, versions, thread pools and load average are written
beside the figures.

    python benchmarks/ports.py --out benchmarks/results          # the committed result (quiet machine)
    python benchmarks/ports.py --quick                           # a smoke run, seconds (scratch folder)
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import itertools
import json
import pathlib
import sys
import time
from typing import Callable

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/ports.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import unigraph  # noqa: E402
from benchmarks.environment import add_out_argument, finish_arguments  # noqa: E402
from benchmarks.peers import load_dgl, load_pyg  # noqa: E402
from unigraph.benchmarking import environment, output  # noqa: E402
from unigraph.benchmarking.peers import as_run_by  # noqa: E402
from unigraph.benchmarking.timing import interleaved  # noqa: E402
from unigraph.data import Planetoid, arxiv_like as arxiv_like_module, motif_graphs, planted_partition  # noqa: E402
from unigraph.nn.dropout import dropout as unigraph_dropout  # noqa: E402

DEFAULT_ROOT = REPO_ROOT.parent / "shared" / "datasets" / "planetoid" / "raw"
PORTS = ("pyg_gcn", "pyg_gat", "pyg_gin", "pyg_link_pred", "pyg_sage_neighbor", "dgl_gcn", "dgl_gat", "dgl_sage",
         "dgl_sage_minibatch", "user_arxiv")
# unigraph time / the original library's best time must reach these (medians of the train step)
TARGETS = {"pyg_sage_neighbor": 2.0, "dgl_sage_minibatch": 1.3}
USER_ARXIV_TARGETS = {"dgl": 1.5, "pyg": 3.0}
DEFAULT_TARGET = 1.0


def log(message: str) -> None:
    print(f"[ports {datetime.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# ====================================================================== what runs
@dataclasses.dataclass
class Contestant:
    """One row: ``train_step()`` one training step (a full-batch epoch or one mini-batch, as the
    script loops), ``eval_forward()`` the script's evaluation forward, ``score()`` the metric after
    training (untimed), ``after_step()`` what the script does after each step that is not training
    (its per-epoch evaluation; untimed)."""

    name: str
    library: str                  # "unigraph", "pyg" or "dgl": whose layers
    train_step: Callable[[], object]
    eval_forward: Callable[[], object]
    score: Callable[[], float]
    after_step: Callable[[], object] | None = None
    note: str = ""


@dataclasses.dataclass
class Sizes:
    """What the run reads and generates (``--quick`` shrinks everything)."""

    root: pathlib.Path
    quick: bool
    arxiv_scale: float
    products_scale: float
    gin_graphs: int
    epochs: int          # full-batch examples (200 in gcn.py/gat.py; link_pred.py uses half)
    batches: int         # mini-batch ports: timed steps
    warmup: int
    eval_repeats: int
    eval_batches: int    # mini-batch ports: batches the score is taken over
    arxiv_epochs: int
    compile: bool
    seed: int


def _cycle(make_iterator: Callable[[], object]):
    """An endless stream of batches from a loader: a new pass (re-shuffled) when one ends."""
    while True:
        yield from make_iterator()


def _accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return float((logits.argmax(-1) == y).float().mean()) if y.numel() else 0.0


# ====================================================================== data
def planetoid(sizes: Sizes, name: str = "cora"):
    """Row-normalized Planetoid features (PyG's NormalizeFeatures), or in a quick run a small
    generated graph with sparse binary features."""
    if sizes.quick:
        ds = planted_partition(240, num_classes=4, num_features=64, num_val=60, num_test=80, seed=sizes.seed)
        return dataclasses.replace(ds, x=(ds.x > 1.5).float()).normalize_features()
    return Planetoid(sizes.root, name, normalize_features=True)


def pyg_data(pyg, ds):
    return pyg.data.Data(x=ds.x, edge_index=ds.graph.edge_index, y=ds.y, train_mask=ds.train_mask,
                         val_mask=ds.val_mask, test_mask=ds.test_mask, num_nodes=ds.num_nodes)


def dgl_graph(dgl, ds, self_loops: bool):
    """The DGL graph a DGL example builds: ``AddSelfLoop()`` (existing self-loops removed first),
    int32 ids (``g.int()``), features and labels in ndata."""
    g = dgl.graph((ds.graph.src, ds.graph.dst), num_nodes=ds.num_nodes)
    if self_loops:
        g = dgl.add_self_loop(dgl.remove_self_loop(g))
    g = g.int()
    g.ndata["feat"], g.ndata["label"] = ds.x, ds.y
    return g


def arxiv_graph(sizes: Sizes):
    size = arxiv_like_module.scaled(arxiv_like_module.ARXIV_SIZE, sizes.arxiv_scale)
    return arxiv_like_module.arxiv_like(**size, seed=sizes.seed)


def products_graph(sizes: Sizes):
    size = arxiv_like_module.scaled(arxiv_like_module.PRODUCTS_SIZE, sizes.products_scale)
    return arxiv_like_module.arxiv_like(**size, train_fraction=0.08, val_fraction=0.02, seed=sizes.seed)


def small_graphs(pyg, sizes: Sizes) -> list:
    """Motif graphs as PyG ``Data``: one-hot degree features (7, as MUTAG's atom types), the motif
    as the label."""
    ds = motif_graphs(sizes.gin_graphs, seed=sizes.seed)
    out = []
    for i in range(len(ds)):
        first, last = int(ds.node_ptr[i]), int(ds.node_ptr[i + 1])
        edges = ds.edge_index[:, int(ds.edge_ptr[i]):int(ds.edge_ptr[i + 1])]
        edges = edges - first if edges.numel() and int(edges.max()) >= last - first else edges
        degree = torch.bincount(edges[1], minlength=last - first).clamp(max=6)
        out.append(pyg.data.Data(x=F.one_hot(degree, 7).float(), edge_index=edges, y=ds.y[i:i + 1]))
    return out


# ====================================================================== full-batch node classification
class BestValidation:
    """The examples' bookkeeping: evaluate after every epoch, keep the test score of the best
    validation score."""

    def __init__(self, evaluate: Callable[[], tuple[float, float]]):
        self.evaluate, self.best_val, self.test = evaluate, -1.0, 0.0

    def __call__(self) -> None:
        val, test = self.evaluate()
        if val > self.best_val:
            self.best_val, self.test = val, test


def node_classifier(name: str, library: str, model: torch.nn.Module, forward: Callable[[], torch.Tensor], ds,
                    optimizer: torch.optim.Optimizer, best_val: bool = True, note: str = "") -> Contestant:
    """A full-batch node-classification row: one epoch per step; the score is the test accuracy at
    the best validation epoch (PyG's examples) or after the last epoch (``best_val=False``, DGL's)."""
    def train_step():
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(forward()[ds.train_mask], ds.y[ds.train_mask])
        loss.backward()
        optimizer.step()

    def eval_forward():
        model.eval()
        with torch.no_grad():
            return forward()

    def evaluate():
        logits = eval_forward()
        return _accuracy(logits[ds.val_mask], ds.y[ds.val_mask]), _accuracy(logits[ds.test_mask], ds.y[ds.test_mask])

    tracker = BestValidation(evaluate)
    return Contestant(name, library, train_step, eval_forward,
                      (lambda: tracker.test) if best_val else (lambda: evaluate()[1]), tracker if best_val else None,
                      note)


def port_pyg_gcn(libs, sizes: Sizes) -> list[Contestant]:
    ds = planetoid(sizes)
    edge_index = ds.graph.edge_index   # once, as the example's data.edge_index (Graph.edge_index builds a new tensor)

    class GCN(torch.nn.Module):
        def __init__(self, conv, drop=F.dropout):
            super().__init__()
            self.conv1, self.conv2 = conv(ds.num_features, 16), conv(16, ds.num_classes)
            self.drop = drop

        def forward(self, x, edge_index):
            x = self.drop(x, p=0.5, training=self.training)
            x = self.conv1(x, edge_index).relu()
            x = self.drop(x, p=0.5, training=self.training)
            return self.conv2(x, edge_index)

    def row(name, library, model, call=None):
        optimizer = torch.optim.Adam([dict(params=model.conv1.parameters(), weight_decay=5e-4),
                                      dict(params=model.conv2.parameters(), weight_decay=0)], lr=0.01)
        call = model if call is None else call
        return node_classifier(name, library, model, lambda: call(ds.x, edge_index), ds, optimizer,
                               note=COMPILED_NOTE if call is not model else "")

    return _pyg_full_batch_rows(libs, sizes, "GCNConv", GCN, row)


COMPILED_NOTE = "torch.compile(model), default settings; compiled during the warm-up steps"


OPT_IN = "unigraph + its dropout"   # the row of the documented one-line opt-in
OPT_IN_NOTE = ("one more line changed: F.dropout -> unigraph.nn.dropout.dropout (nn.Dropout -> unigraph.nn.Dropout), "
               "the same distribution from a counter-based kernel")


def _pyg_full_batch_rows(libs, sizes: Sizes, layer: str, module, row) -> list[Contestant]:
    """unigraph's layer and PyG's in the script's module, unigraph's with its dropout too, and
    PyG's model under torch.compile."""
    rows = []
    for name, library, conv in _pyg_layers(libs, layer):
        torch.manual_seed(sizes.seed)
        model = module(conv)
        rows.append(row(name, library, model))
        if library == "unigraph":
            torch.manual_seed(sizes.seed)
            rows.append(row(OPT_IN, "unigraph", module(conv, unigraph_dropout)))
            rows[-1].note = OPT_IN_NOTE
        if library == "pyg" and sizes.compile:
            torch.manual_seed(sizes.seed)
            model = module(conv)
            rows.append(row("pyg (compiled)", "pyg", model, torch.compile(model)))
    return rows


def _pyg_layers(libs, layer: str):
    """(row name, library, layer class) for a PyG script: unigraph's layer and PyG's."""
    out = [("unigraph", "unigraph", getattr(unigraph.nn, layer))]
    if libs.get("pyg") is not None:
        out.append(("pyg", "pyg", getattr(libs["pyg"].nn, layer)))
    return out


def port_pyg_gat(libs, sizes: Sizes) -> list[Contestant]:
    ds = planetoid(sizes)
    edge_index = ds.graph.edge_index   # once, as the example's data.edge_index (Graph.edge_index builds a new tensor)

    class GAT(torch.nn.Module):
        def __init__(self, conv, drop=F.dropout):
            super().__init__()
            self.conv1 = conv(ds.num_features, 8, heads=8, dropout=0.6)
            self.conv2 = conv(8 * 8, ds.num_classes, heads=1, concat=False, dropout=0.6)
            self.drop = drop

        def forward(self, x, edge_index):
            x = self.drop(x, p=0.6, training=self.training)
            x = F.elu(self.conv1(x, edge_index))
            x = self.drop(x, p=0.6, training=self.training)
            return self.conv2(x, edge_index)

    def row(name, library, model, call=None):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
        call = model if call is None else call
        return node_classifier(name, library, model, lambda: call(ds.x, edge_index), ds, optimizer,
                               note=COMPILED_NOTE if call is not model else "")

    return _pyg_full_batch_rows(libs, sizes, "GATConv", GAT, row)


# ====================================================================== batches of small graphs
def port_pyg_gin(libs, sizes: Sizes) -> list[Contestant]:
    pyg = libs.get("pyg")
    if pyg is None:
        return []
    from torch_geometric.loader import DataLoader
    from torch_geometric.nn import MLP, global_add_pool
    graphs = small_graphs(pyg, sizes)
    split = int(0.9 * len(graphs))
    classes = int(max(int(g.y) for g in graphs)) + 1

    class GIN(torch.nn.Module):
        def __init__(self, conv, in_channels, hidden, out_channels, layers):
            super().__init__()
            self.convs = torch.nn.ModuleList()
            for _ in range(layers):
                self.convs.append(conv(nn=MLP([in_channels, hidden, hidden]), train_eps=False))
                in_channels = hidden
            self.mlp = MLP([hidden, hidden, out_channels], norm=None, dropout=0.5)

        def forward(self, x, edge_index, batch):
            for conv in self.convs:
                x = conv(x, edge_index).relu()
            return self.mlp(global_add_pool(x, batch))

    rows = []
    for name, library, conv in _pyg_layers(libs, "GINConv"):
        torch.manual_seed(sizes.seed)
        model = GIN(conv, 7, 32, classes, 5)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        generator = torch.Generator().manual_seed(sizes.seed)
        train_loader = DataLoader(graphs[:split], 128, shuffle=True, generator=generator)
        test_loader = DataLoader(graphs[split:], 128)
        stream = _cycle(lambda loader=train_loader: iter(loader))

        def train_step(model=model, optimizer=optimizer, stream=stream):
            data = next(stream)
            model.train()
            optimizer.zero_grad()
            F.cross_entropy(model(data.x, data.edge_index, data.batch), data.y).backward()
            optimizer.step()

        def eval_forward(model=model, loader=test_loader):
            model.eval()
            with torch.no_grad():
                return [(model(d.x, d.edge_index, d.batch), d.y) for d in loader]

        def score(eval_forward=eval_forward):
            results = eval_forward()
            return sum(int((out.argmax(-1) == y).sum()) for out, y in results) / max(1, sum(y.numel() for _, y in results))
        rows.append(Contestant(name, library, train_step, eval_forward, score,
                               note="a step is one batch of 128 graphs (PyG's DataLoader collates it)"))
    return rows


# ====================================================================== link prediction
def port_pyg_link_pred(libs, sizes: Sizes) -> list[Contestant]:
    pyg = libs.get("pyg")
    if pyg is None:
        return []
    from sklearn.metrics import roc_auc_score
    from torch_geometric.utils import negative_sampling
    ds = planetoid(sizes)
    torch.manual_seed(sizes.seed)
    split = pyg.transforms.RandomLinkSplit(num_val=0.05, num_test=0.1, is_undirected=True,
                                           add_negative_train_samples=False)
    train_data, val_data, test_data = split(pyg_data(pyg, ds))

    class Net(torch.nn.Module):
        def __init__(self, conv):
            super().__init__()
            self.conv1, self.conv2 = conv(ds.num_features, 128), conv(128, 64)

        def encode(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

        def decode(self, z, edge_label_index):
            return (z[edge_label_index[0]] * z[edge_label_index[1]]).sum(dim=-1)

    rows = []
    for name, library, conv in _pyg_layers(libs, "GCNConv"):
        torch.manual_seed(sizes.seed)
        model = Net(conv)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

        def train_step(model=model, optimizer=optimizer):
            model.train()
            optimizer.zero_grad()
            z = model.encode(train_data.x, train_data.edge_index)
            negatives = negative_sampling(edge_index=train_data.edge_index, num_nodes=train_data.num_nodes,
                                          num_neg_samples=train_data.edge_label_index.size(1), method="sparse")
            labels_index = torch.cat([train_data.edge_label_index, negatives], dim=-1)
            labels = torch.cat([train_data.edge_label, train_data.edge_label.new_zeros(negatives.size(1))])
            F.binary_cross_entropy_with_logits(model.decode(z, labels_index).view(-1), labels).backward()
            optimizer.step()

        def auc(data, model=model):
            model.eval()
            with torch.no_grad():
                out = model.decode(model.encode(data.x, data.edge_index), data.edge_label_index).view(-1).sigmoid()
            return float(roc_auc_score(data.edge_label.numpy(), out.numpy()))

        tracker = BestValidation(lambda auc=auc: (auc(val_data), auc(test_data)))
        rows.append(Contestant(name, library, train_step, lambda auc=auc: auc(val_data), lambda t=tracker: t.test,
                               tracker, note="score: test AUC at the best validation AUC"))
    return rows


# ====================================================================== neighbour-sampled mini-batches
def port_pyg_sage_neighbor(libs, sizes: Sizes) -> list[Contestant]:
    pyg = libs.get("pyg")
    if pyg is None:
        return []
    if importlib.util.find_spec("torch_sparse") is None and importlib.util.find_spec("pyg_lib") is None:
        log("pyg_sage_neighbor: PyG's NeighborLoader needs pyg-lib or torch-sparse; skipped")
        return []
    from torch_geometric.loader import NeighborLoader
    ds = arxiv_graph(sizes)
    data = pyg_data(pyg, ds)

    class SAGE(torch.nn.Module):
        def __init__(self, conv, in_channels, hidden, out_channels, drop=F.dropout):
            super().__init__()
            self.convs = torch.nn.ModuleList([conv(in_channels, hidden), conv(hidden, out_channels)])
            self.drop = drop

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i < len(self.convs) - 1:
                    x = self.drop(x.relu(), p=0.5, training=self.training)
            return x

    rows = []
    variants = [(name, library, conv, F.dropout) for name, library, conv in _pyg_layers(libs, "SAGEConv")]
    variants.insert(1, (OPT_IN, "unigraph", unigraph.nn.SAGEConv, unigraph_dropout))
    for name, library, conv, drop in variants:
        torch.manual_seed(sizes.seed)
        model = SAGE(conv, ds.num_features, 256, ds.num_classes, drop)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        train_loader = NeighborLoader(data, num_neighbors=[25, 10], batch_size=1024, input_nodes=ds.train_mask,
                                      shuffle=True)
        test_loader = NeighborLoader(data, num_neighbors=[25, 10], batch_size=1024, input_nodes=ds.test_mask)
        stream = _cycle(lambda loader=train_loader: iter(loader))
        test_stream = _cycle(lambda loader=test_loader: iter(loader))

        def train_step(model=model, optimizer=optimizer, stream=stream):
            batch = next(stream)
            model.train()
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            F.cross_entropy(out, batch.y[:batch.batch_size]).backward()
            optimizer.step()

        def eval_forward(model=model, stream=test_stream):
            batch = next(stream)
            model.eval()
            with torch.no_grad():
                return model(batch.x, batch.edge_index)[:batch.batch_size], batch.y[:batch.batch_size]

        rows.append(Contestant(name, library, train_step, eval_forward,
                               _batched_score(test_loader, lambda b, m=model: m(b.x, b.edge_index)[:b.batch_size],
                                              lambda b: b.y[:b.batch_size], model, sizes.eval_batches),
                               note=(OPT_IN_NOTE + "; " if name == OPT_IN else "")
                               + "a step is one batch: sampling, feature gather, forward, backward"))
    return rows


def _batched_score(loader, forward, labels, model, limit: int) -> Callable[[], float]:
    """Accuracy over the first ``limit`` batches of ``loader`` (untimed)."""
    def score():
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for batch in itertools.islice(iter(loader), limit):
                out, y = forward(batch), labels(batch)
                correct, total = correct + int((out.argmax(-1) == y).sum()), total + y.numel()
        return correct / max(total, 1)
    return score


def port_dgl_sage_minibatch(libs, sizes: Sizes) -> list[Contestant]:
    """DGL's node_classification.py on the real DGL and, with only the import changed, on
    ``unigraph.dgl`` (its graph, NeighborSampler, DataLoader and SAGEConv)."""
    real = libs.get("dgl")
    if real is None:
        return []
    import unigraph.dgl as unigraph_dgl
    ds = products_graph(sizes)
    train_idx, test_idx = ds.train_mask.nonzero().flatten(), ds.test_mask.nonzero().flatten()

    class SAGE(torch.nn.Module):
        def __init__(self, dgl, opt_in=False):
            super().__init__()
            widths = [ds.num_features, 256, 256, ds.num_classes]
            self.layers = torch.nn.ModuleList(dgl.nn.SAGEConv(widths[i], widths[i + 1], "mean") for i in range(3))
            self.dropout = _dropout_module(opt_in, 0.5)

        def forward(self, blocks, x):
            h = x
            for i, (layer, block) in enumerate(zip(self.layers, blocks)):
                h = layer(block, h)
                if i != len(self.layers) - 1:
                    h = self.dropout(F.relu(h))
            return h

    rows = []
    for name, library, dgl, opt_in in (("unigraph", "unigraph", unigraph_dgl, False),
                                       (OPT_IN, "unigraph", unigraph_dgl, True), ("dgl", "dgl", real, False)):
        g = dgl.graph((ds.graph.src, ds.graph.dst), num_nodes=ds.num_nodes)
        g.ndata["feat"], g.ndata["label"] = ds.x, ds.y
        torch.manual_seed(sizes.seed)
        model = SAGE(dgl, opt_in)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=5e-4)
        sampler = dgl.dataloading.NeighborSampler([10, 10, 10])
        train_loader = dgl.dataloading.DataLoader(g, train_idx, sampler, batch_size=1024, shuffle=True,
                                                  drop_last=False, num_workers=0)
        test_loader = dgl.dataloading.DataLoader(g, test_idx, sampler, batch_size=1024, shuffle=False,
                                                 drop_last=False, num_workers=0)
        stream = _cycle(lambda loader=train_loader: iter(loader))
        test_stream = _cycle(lambda loader=test_loader: iter(loader))
        feat, label = g.ndata["feat"], g.ndata["label"]

        def train_step(model=model, optimizer=optimizer, stream=stream, feat=feat, label=label):
            input_nodes, output_nodes, blocks = next(stream)
            model.train()
            optimizer.zero_grad()
            F.cross_entropy(model(blocks, feat[input_nodes]), label[output_nodes]).backward()
            optimizer.step()

        def eval_forward(model=model, stream=test_stream, feat=feat):
            input_nodes, _, blocks = next(stream)
            model.eval()
            with torch.no_grad():
                return model(blocks, feat[input_nodes])

        rows.append(Contestant(
            name, library, train_step, eval_forward,
            _batched_score(test_loader, lambda b, m=model, feat=feat: m(b[2], feat[b[0]]),
                           lambda b, label=label: label[b[1]], model, sizes.eval_batches),
            note=(OPT_IN_NOTE + "; " if opt_in else "")
                 + "a step is one batch from the DataLoader: sampling, feature gather, forward, backward"
                 + ("; import unigraph.dgl as dgl" if library == "unigraph" else "")))
    return rows


# ====================================================================== DGL's full-graph examples
def _dgl_rows(libs, sizes: Sizes, build: Callable[[object, bool, object], torch.nn.Module], lr: float,
              weight_decay: float) -> list[Contestant]:
    """A DGL full-graph example run on the real DGL and, with only the import changed
    (``import unigraph.dgl as dgl``), on unigraph: the same module, graph construction
    (``AddSelfLoop``, ``g.int()``) and loop; and on unigraph with its dropout (the opt-in). The
    score is the test accuracy after the last epoch, as DGL's scripts report it."""
    real = libs.get("dgl")
    if real is None:
        return []
    import unigraph.dgl as unigraph_dgl
    ds = planetoid(sizes)
    rows = []
    for name, library, dgl, opt_in in (("unigraph", "unigraph", unigraph_dgl, False),
                                       (OPT_IN, "unigraph", unigraph_dgl, True), ("dgl", "dgl", real, False)):
        g = dgl_graph(dgl, ds, self_loops=True)
        torch.manual_seed(sizes.seed)
        model = build(dgl, opt_in, ds)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        rows.append(node_classifier(name, library, model, lambda m=model, g=g: m(g, g.ndata["feat"]), ds, optimizer,
                                    best_val=False, note=OPT_IN_NOTE if opt_in else
                                    ("import unigraph.dgl as dgl" if library == "unigraph" else "")))
    return rows


def _dropout_module(opt_in: bool, p: float) -> torch.nn.Module:
    return unigraph.nn.Dropout(p) if opt_in else torch.nn.Dropout(p)


def port_dgl_gcn(libs, sizes: Sizes) -> list[Contestant]:
    def build(dgl, opt_in, ds):
        class GCN(torch.nn.Module):
            def __init__(self, in_size, hid_size, out_size):
                super().__init__()
                self.layers = torch.nn.ModuleList([dgl.nn.GraphConv(in_size, hid_size, activation=F.relu),
                                                   dgl.nn.GraphConv(hid_size, out_size)])
                self.dropout = _dropout_module(opt_in, 0.5)

            def forward(self, g, features):
                h = features
                for i, layer in enumerate(self.layers):
                    if i != 0:
                        h = self.dropout(h)
                    h = layer(g, h)
                return h
        return GCN(ds.num_features, 16, ds.num_classes)
    return _dgl_rows(libs, sizes, build, lr=1e-2, weight_decay=5e-4)


def port_dgl_gat(libs, sizes: Sizes) -> list[Contestant]:
    def build(dgl, opt_in, ds):
        class GAT(torch.nn.Module):
            def __init__(self, in_size, hid_size, out_size, heads):
                super().__init__()
                self.gat_layers = torch.nn.ModuleList([
                    dgl.nn.GATConv(in_size, hid_size, heads[0], feat_drop=0.6, attn_drop=0.6, activation=F.elu),
                    dgl.nn.GATConv(hid_size * heads[0], out_size, heads[1], feat_drop=0.6, attn_drop=0.6)])
                if opt_in:   # the layers' input dropout (feat_drop) drawn by unigraph's kernel
                    for layer in self.gat_layers:
                        layer.feat_drop = _dropout_module(True, 0.6)

            def forward(self, g, inputs):
                h = inputs
                for i, layer in enumerate(self.gat_layers):
                    h = layer(g, h)
                    h = h.mean(1) if i == 1 else h.flatten(1)
                return h
        return GAT(ds.num_features, 8, ds.num_classes, heads=[8, 1])
    return _dgl_rows(libs, sizes, build, lr=5e-3, weight_decay=5e-4)


def port_dgl_sage(libs, sizes: Sizes) -> list[Contestant]:
    def build(dgl, opt_in, ds):
        class SAGE(torch.nn.Module):
            def __init__(self, in_size, hid_size, out_size):
                super().__init__()
                self.layers = torch.nn.ModuleList([dgl.nn.SAGEConv(in_size, hid_size, "gcn"),
                                                   dgl.nn.SAGEConv(hid_size, out_size, "gcn")])
                self.dropout = _dropout_module(opt_in, 0.5)

            def forward(self, graph, x):
                h = self.dropout(x)
                for i, layer in enumerate(self.layers):
                    h = layer(graph, h)
                    if i != len(self.layers) - 1:
                        h = self.dropout(F.relu(h))
                return h
        return SAGE(ds.num_features, 16, ds.num_classes)
    return _dgl_rows(libs, sizes, build, lr=1e-2, weight_decay=5e-4)


# ====================================================================== a user's own model, arxiv-sized
def port_user_arxiv(libs, sizes: Sizes) -> list[tuple[str, list[Contestant]]]:
    """Three groups (GCN, GraphSAGE, GAT), each a 2-layer model composed from a library's layers
    with ``F.relu``/``F.elu`` and ``F.dropout`` as a user writes it; PyG on edge_index and on a
    SparseTensor (its best counts), DGL with the same modules on a DGL graph, unigraph."""
    ds = arxiv_graph(sizes)
    pyg, dgl = libs.get("pyg"), libs.get("dgl")
    hidden, dropout_p = 256, 0.5
    groups = []
    adjacencies = [("unigraph", "unigraph", ds.graph.edge_index)]
    if pyg is not None:
        adjacencies.append(("pyg", "pyg", ds.graph.edge_index))
        if importlib.util.find_spec("torch_sparse") is not None:
            import torch_sparse
            n = ds.num_nodes
            adjacencies.append(("pyg (SparseTensor)", "pyg",
                                torch_sparse.SparseTensor(row=ds.graph.dst, col=ds.graph.src, sparse_sizes=(n, n))))
    dgl_g = None
    if dgl is not None:
        dgl_g = dgl.graph((ds.graph.src, ds.graph.dst), num_nodes=ds.num_nodes)
        dgl_looped = dgl.add_self_loop(dgl.remove_self_loop(dgl_g))
    for kind in ("gcn", "sage", "gat"):
        rows = []

        def layers(library, kind=kind):
            nn = {"unigraph": unigraph.nn, "pyg": pyg.nn if pyg else None}.get(library)
            if library == "dgl":
                if kind == "gcn":
                    return dgl.nn.GraphConv(ds.num_features, hidden), dgl.nn.GraphConv(hidden, ds.num_classes)
                if kind == "sage":
                    return dgl.nn.SAGEConv(ds.num_features, hidden, "mean"), dgl.nn.SAGEConv(hidden, ds.num_classes, "mean")
                return (dgl.nn.GATConv(ds.num_features, 8, 8, attn_drop=dropout_p),
                        dgl.nn.GATConv(64, ds.num_classes, 1, attn_drop=dropout_p))
            if kind == "gcn":
                return nn.GCNConv(ds.num_features, hidden), nn.GCNConv(hidden, ds.num_classes)
            if kind == "sage":
                return nn.SAGEConv(ds.num_features, hidden), nn.SAGEConv(hidden, ds.num_classes)
            return (nn.GATConv(ds.num_features, 8, heads=8, dropout=dropout_p),
                    nn.GATConv(64, ds.num_classes, heads=1, concat=False, dropout=dropout_p))

        class Model(torch.nn.Module):
            def __init__(self, library, kind=kind, layers=layers, drop=F.dropout):
                super().__init__()
                self.library, self.kind, self.drop = library, kind, drop
                self.conv1, self.conv2 = layers(library)

            def forward(self, x, adj):
                act, drop = (F.elu if self.kind == "gat" else F.relu), self.drop
                if self.library == "dgl":
                    h = self.conv1(adj, drop(x, dropout_p, self.training))
                    h = act(h.flatten(1))
                    h = self.conv2(adj, drop(h, dropout_p, self.training))
                    return h.mean(1) if self.kind == "gat" else h
                h = act(self.conv1(drop(x, dropout_p, self.training), adj))
                return self.conv2(drop(h, dropout_p, self.training), adj)

        entries = list(adjacencies)
        if dgl is not None:
            entries.append(("dgl", "dgl", dgl_looped if kind in ("gcn", "gat") else dgl_g))
        entries.insert(1, (OPT_IN, "unigraph", adjacencies[0][2]))   # the unigraph row's own edge_index
        for name, library, adj in entries:
            torch.manual_seed(sizes.seed)
            model = Model(library, drop=unigraph_dropout if name == OPT_IN else F.dropout)
            optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
            rows.append(node_classifier(name, library, model, lambda m=model, a=adj: m(ds.x, a), ds, optimizer,
                                        note=OPT_IN_NOTE if name == OPT_IN else ""))
        groups.append((kind, rows))
    return groups


# ====================================================================== running and reporting
PORT_GRAPHS = {
    "pyg_gcn": "Cora", "pyg_gat": "Cora", "pyg_link_pred": "Cora (RandomLinkSplit)", "dgl_gcn": "Cora",
    "dgl_gat": "Cora", "dgl_sage": "Cora", "pyg_gin": "motif graphs", "pyg_sage_neighbor": "arxiv-sized",
    "dgl_sage_minibatch": "products-sized", "user_arxiv": "arxiv-sized"}
BUILDERS = {"pyg_gcn": port_pyg_gcn, "pyg_gat": port_pyg_gat, "pyg_gin": port_pyg_gin,
            "pyg_link_pred": port_pyg_link_pred, "pyg_sage_neighbor": port_pyg_sage_neighbor,
            "dgl_gcn": port_dgl_gcn, "dgl_gat": port_dgl_gat, "dgl_sage": port_dgl_sage,
            "dgl_sage_minibatch": port_dgl_sage_minibatch}
MINI_BATCH = ("pyg_gin", "pyg_sage_neighbor", "dgl_sage_minibatch")


def steps_of(port: str, sizes: Sizes) -> int:
    if port in MINI_BATCH:
        return sizes.batches
    if port == "user_arxiv":
        return sizes.arxiv_epochs
    return max(sizes.warmup + 1, sizes.epochs // 2 if port == "pyg_link_pred" else sizes.epochs)


def own_random_stream(step: Callable[[], object], seed: int) -> Callable[[], object]:
    """``step`` run on a torch random stream of its own, seeded with ``seed``: interleaved rows
    would otherwise take their dropout masks (and torch-drawn samples) from one shared stream in
    turn, so two equal models would train on different masks and score differently."""
    state = [torch.Generator().manual_seed(seed).get_state()]

    def call():
        saved = torch.get_rng_state()
        torch.set_rng_state(state[0])
        try:
            return step()
        finally:
            state[0] = torch.get_rng_state()
            torch.set_rng_state(saved)
    return call


def run_rows(rows: list[Contestant], steps: int, sizes: Sizes) -> list[dict]:
    """Train every row ``steps`` steps, interleaved (the first ``warmup`` untimed), each on its own
    torch random stream from the same seed, then time the evaluation forward, interleaved; score each."""
    by_name = {r.name: r for r in rows}
    if len(by_name) != len(rows):
        raise ValueError(f"row names must be unique, got {[r.name for r in rows]}")
    warmup = min(sizes.warmup, steps - 1)
    train = interleaved({r.name: as_run_by(r.library, own_random_stream(r.train_step, sizes.seed)) for r in rows},
                        steps - warmup, warmup=warmup,
                        after=lambda name: by_name[name].after_step() if by_name[name].after_step else None)
    evaluation = interleaved({r.name: as_run_by(r.library, r.eval_forward) for r in rows}, sizes.eval_repeats, warmup=1)
    out = []
    for r in rows:
        out.append({"impl": r.name, "library": r.library, "note": r.note, "train": train[r.name].summary(),
                    "eval": evaluation[r.name].summary(), "score": round(float(as_run_by(r.library, r.score)()), 4),
                    "steps": steps, "warmup_steps": warmup})
    return out


def compare(rows: list[dict], target: float | dict) -> list[dict]:
    """unigraph (the imports-only row; and the dropout opt-in row, shown but not counted) against
    the original library at its best (eager), and against a compiled row where there is one:
    speedup of the train-step and evaluation medians, the score difference."""
    out = []
    for ours in (r for r in rows if r["library"] == "unigraph"):
        for library in sorted({r["library"] for r in rows} - {"unigraph"}):
            compiled = [r for r in rows if r["library"] == library and "compiled" in r["impl"]]
            eager = [r for r in rows if r["library"] == library and r not in compiled]
            for group, kind in ((eager, "eager"), (compiled, "compiled")):
                if not group:
                    continue
                best = min(group, key=lambda r: r["train"]["median_ms"])
                wanted = target.get(library, DEFAULT_TARGET) if isinstance(target, dict) else target
                speedup = best["train"]["median_ms"] / ours["train"]["median_ms"]
                counted = ours["impl"] == "unigraph" and kind == "eager"
                out.append({"ours": ours["impl"], "vs": best["impl"], "kind": kind, "counted": counted,
                            "train_speedup": round(speedup, 3),
                            "eval_speedup": round(best["eval"]["median_ms"] / ours["eval"]["median_ms"], 3),
                            "target": wanted, "met": speedup >= wanted,
                            "score_difference": round(best["score"] - ours["score"], 4)})
    return out


def run(args, libs) -> dict:
    sizes = args.sizes
    results = []
    for threads in args.threads:
        environment.set_threads(threads, libs.get("dgl"))
        log(f"--- {threads} thread(s)")
        for port in args.ports:
            started = time.perf_counter()
            loadavg = environment.load_average()
            if port == "user_arxiv":
                groups = port_user_arxiv(libs, sizes)
                target = USER_ARXIV_TARGETS
            else:
                groups = [(None, BUILDERS[port](libs, sizes))]
                target = TARGETS.get(port, DEFAULT_TARGET)
            for model, rows in groups:
                if len(rows) < 2:
                    log(f"{port}: the original library is not installed; skipped")
                    continue
                log(f"{port}{' ' + model if model else ''}: {', '.join(r.name for r in rows)}, "
                    f"{steps_of(port, sizes)} steps")
                measured = run_rows(rows, steps_of(port, sizes), sizes)
                results.append({"port": port, "model": model, "graph": PORT_GRAPHS[port], "threads": threads,
                                "loadavg_start": loadavg, "loadavg_end": environment.load_average(),
                                "seconds": round(time.perf_counter() - started, 1), "rows": measured,
                                "comparisons": compare(measured, target)})
    return {"results": results}


def merge_results(path: pathlib.Path, new: dict) -> dict:
    """``new``'s sections in place of the same (port, model, threads) sections of the results in
    ``path``; the others kept, each with the date and command of the run that measured it."""
    if not path.is_file():
        return new
    old = json.loads(path.read_text())
    if old.get("config") != new["config"]:
        raise SystemExit(f"--merge: {path} was measured with other settings ({old.get('config')}) than this run "
                         f"({new['config']}); run every port again instead")
    for entry in old["results"]:
        entry.setdefault("run", {"started": old["started"], "command": old["environment"]["command"]})
    key = lambda entry: (entry["port"], entry["model"], entry["threads"])   # noqa: E731
    fresh = {key(entry): entry for entry in new["results"]}
    merged = [fresh.pop(key(entry), entry) for entry in old["results"]] + list(fresh.values())
    return {**new, "results": merged}


def markdown(result: dict) -> str:
    env = result["environment"]
    m = env["machine"]
    lines = [f"# Users' scripts, ported: unigraph's layers beside the original library's ({m['device']})", "",
             f"Generated by `{env['command']}` on {result['started']} in {result['seconds']:.0f} s"
             + (" (**--quick smoke run: not a measurement**)" if result["quick"] else "") + "; a section kept "
             "from an earlier run (`--merge`) names its own command and date.", "",
             f"Machine: {m['cpu']}, {m['cpu_count']} cores, {m['memory_gb']} GiB; thread pools at the start: "
             f"{environment.threads_text(env['threads'])}; load average at start / end {env['loadavg_start']} / "
             f"{env['loadavg_end']}; peak memory {env['peak_memory_gb']} GiB.", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v), "",
             "Every row's steps interleaved (one of each in turn, rotating); times are the median (min - max) of "
             "the timed steps after the warm-up. A step is one epoch of a full-batch script, one batch of a "
             "mini-batch script. Speedup = the other row's median / unigraph's (> 1: unigraph faster). The target "
             "counts the `unigraph` row (only the layers' imports changed) against the library's fastest eager row; "
             f"`{OPT_IN}` (one more line: unigraph's dropout) and comparisons with compiled rows are shown in "
             "parentheses, not counted.", ""]
    for entry in result["results"]:
        title = entry["port"] + (f" ({entry['model']})" if entry["model"] else "")
        earlier = entry.get("run", {}).get("started", result["started"]) != result["started"]
        lines += [f"## {title} on {entry['graph']}, {entry['threads']} thread(s)", ""]
        if earlier:   # kept from an earlier run by --merge
            lines += [f"Measured by an earlier run: `{entry['run']['command']}` on {entry['run']['started']}.", ""]
        lines += [f"{m['cpu']}, torch {env['versions'].get('torch')}; load average {entry['loadavg_start']} -> "
                  f"{entry['loadavg_end']}; {entry['rows'][0]['steps']} steps ({entry['rows'][0]['warmup_steps']} "
                  f"warm-up).", "",
                  "| row | train step ms | eval forward ms | score | note |", "|---|---|---|---|---|"]
        for r in entry["rows"]:
            t, e = r["train"], r["eval"]
            lines.append(f"| {r['impl']} | {t['median_ms']:.2f} ({t['min_ms']:.2f} - {t['max_ms']:.2f}) | "
                         f"{e['median_ms']:.2f} ({e['min_ms']:.2f} - {e['max_ms']:.2f}) | {r['score']:.3f} | {r['note']} |")
        if entry["comparisons"]:
            lines += ["", "| row | vs | train speedup | eval speedup | target | met | score difference (theirs - ours) |",
                      "|---|---|---|---|---|---|---|"]
            for c in entry["comparisons"]:
                met = ("yes" if c["met"] else "**no**") if c["counted"] else ("(yes)" if c["met"] else "(no)")
                vs = c["vs"] if c["kind"] in c["vs"] else f"{c['vs']} ({c['kind']})"   # not "pyg (compiled) (compiled)"
                lines.append(f"| {c['ours']} | {vs} | {c['train_speedup']:.2f}x | "
                             f"{c['eval_speedup']:.2f}x | >= {c['target']}x | {met} | "
                             f"{100 * c['score_difference']:+.1f} pts |")
        lines.append("")
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ports", nargs="+", default=list(PORTS), choices=PORTS)
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, few steps (results go to scratch)")
    parser.add_argument("--threads", nargs="+", type=int, default=None,
                        help="thread counts to run at, in turn (default: torch's default count, then 1)")
    parser.add_argument("--root", type=pathlib.Path, default=DEFAULT_ROOT, help="folder with the Planetoid raw files")
    parser.add_argument("--arxiv-scale", type=float, default=1.0, help="fraction of ogbn-arxiv's size (default 1)")
    parser.add_argument("--products-scale", type=float, default=0.25,
                        help="fraction of ogbn-products' size for dgl_sage_minibatch (default 0.25: ~30M edges)")
    parser.add_argument("--gin-graphs", type=int, default=1000, help="small graphs in pyg_gin (default 1000)")
    parser.add_argument("--epochs", type=int, default=200, help="full-batch epochs (the examples' 200)")
    parser.add_argument("--arxiv-epochs", type=int, default=20, help="epochs of the user_arxiv models")
    parser.add_argument("--batches", type=int, default=60, help="mini-batch ports: steps (batches) per row")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation, caches)")
    parser.add_argument("--eval-repeats", type=int, default=10)
    parser.add_argument("--eval-batches", type=int, default=20, help="mini-batch ports: test batches scored")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="leave out the torch.compile rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--merge", action="store_true",
                        help="replace only the sections this run measures (port and thread count) in the ports_cpu.json "
                             "already in --out, keeping the others with their own run's date and command (the sizes "
                             "must be the same)")
    add_out_argument(parser)
    args = parser.parse_args(argv)
    if args.threads is None:
        args.threads = sorted({torch.get_num_threads(), 1}, reverse=True)
    if any(t < 1 for t in args.threads):
        parser.error(f"--threads must be >= 1, got {args.threads}")
    if args.quick:
        args.arxiv_scale, args.products_scale = min(args.arxiv_scale, 0.003), min(args.products_scale, 0.0005)
        args.gin_graphs, args.epochs, args.arxiv_epochs = min(args.gin_graphs, 40), min(args.epochs, 3), 2
        args.batches, args.warmup, args.eval_repeats, args.eval_batches = 2, 1, 2, 1
        args.compile = False
    elif not args.root.is_dir() and any(p in args.ports for p in ("pyg_gcn", "pyg_gat", "pyg_link_pred", "dgl_gcn",
                                                                   "dgl_gat", "dgl_sage")):
        parser.error(f"--root {args.root} is not a folder with the Planetoid raw files (ind.cora.x ...)")
    if args.warmup < 0:
        parser.error(f"--warmup must be >= 0, got {args.warmup}")
    finish_arguments(parser, args, ("epochs", "arxiv_epochs", "batches", "eval_repeats", "eval_batches", "gin_graphs"))
    args.sizes = Sizes(args.root, args.quick, args.arxiv_scale, args.products_scale, args.gin_graphs, args.epochs,
                       args.batches, args.warmup, args.eval_repeats, args.eval_batches, args.arxiv_epochs,
                       args.compile, args.seed)
    return args


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    libs = {"pyg": load_pyg(), "dgl": load_dgl()}
    saved = torch.get_num_threads()
    started, t0 = datetime.datetime.now().isoformat(timespec="seconds"), time.perf_counter()
    env = environment.describe("python benchmarks/ports.py " + " ".join(argv), "cpu", libs["dgl"])
    try:
        body = run(args, libs)
    finally:
        environment.set_threads(saved, libs["dgl"])
    result = {"benchmark": "ports", "quick": args.quick, "started": started, "seconds": round(time.perf_counter() - t0, 1),
              "environment": environment.finish(env), "config": {k: (str(v) if isinstance(v, pathlib.Path) else v)
                                                                  for k, v in dataclasses.asdict(args.sizes).items()},
              **body}
    for entry in result["results"]:
        entry["run"] = {"started": started, "command": env["command"]}
    if args.merge:
        result = merge_results(pathlib.Path(args.out) / "ports_cpu.json", result)
    output.write_report(result, args.out, "ports_cpu", markdown(result))
    log(f"wrote ports_cpu.json and ports_cpu.md to {args.out}")
    return result


if __name__ == "__main__":
    main()
