"""Graph classification: batching, global pooling, the GIN classifier, the loader, the motif data, training."""
from __future__ import annotations

import pickle

import pytest
import torch

import unigraph
from unigraph import Graph
from unigraph.data import GraphDataset, collate, collate_dataset, motif_graphs, split_graphs
from unigraph.loader import GraphLoader
from unigraph.models import GINClassifier
from unigraph.nn.pool import AttentionPool, global_add_pool, global_max_pool, global_mean_pool, global_pool
from unigraph.train import TrainConfig
from unigraph.train.graph_trainer import GraphTrainer

from op_cases import cpu_test_backends


def random_graphs(sizes=(4, 0, 7, 1, 5), seed=0, features=3, edge_features=2):
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for n in sizes:
        e = int(torch.randint(0, 3 * n + 1, (), generator=gen)) if n else 0
        g = Graph(torch.randint(0, max(n, 1), (2, e), generator=gen), num_nodes=n)
        g.ndata["x"] = torch.randn(n, features, generator=gen)
        g.edata["edge_attr"] = torch.randn(e, edge_features, generator=gen)
        graphs.append(g)
    return graphs


def test_collate_matches_pyg_batch():
    pyg_data = pytest.importorskip("torch_geometric.data")
    graphs = random_graphs()
    ours = collate([(g, torch.tensor(i)) for i, g in enumerate(graphs)])
    theirs = pyg_data.Batch.from_data_list([pyg_data.Data(x=g.ndata["x"], edge_index=g.edge_index, num_nodes=g.num_nodes,
                                                          edge_attr=g.edata["edge_attr"]) for g in graphs])
    assert torch.equal(ours.edge_index, theirs.edge_index) and torch.equal(ours.batch, theirs.batch)
    assert torch.equal(ours.ptr, theirs.ptr) and torch.equal(ours.x, theirs.x)
    assert torch.equal(ours.edge_attr, theirs.edge_attr) and ours.num_graphs == theirs.num_graphs == 5
    assert ours.y.tolist() == [0, 1, 2, 3, 4]
    graph, labels = ours  # DGL-style unpacking
    assert graph is ours.graph and labels is ours.y


def test_collate_dataset_equals_collate_of_items_and_pickles():
    graphs = random_graphs(sizes=(3, 6, 0, 2, 4, 5))
    dataset = GraphDataset.from_graphs(graphs, torch.arange(6) % 2)
    ids = torch.tensor([4, 2, 0, 5])
    fast, slow = collate_dataset(dataset, ids), collate([dataset[i] for i in ids.tolist()])
    for a, b in ((fast.edge_index, slow.edge_index), (fast.batch, slow.batch), (fast.ptr, slow.ptr),
                 (fast.x, slow.x), (fast.edge_attr, slow.edge_attr), (fast.y, slow.y)):
        assert torch.equal(a, b)
    back = pickle.loads(pickle.dumps(fast))
    assert torch.equal(back.edge_index, fast.edge_index) and torch.equal(back.x, fast.x) and back.num_graphs == 4
    sub = dataset.subset(ids)
    assert len(sub) == 4 and torch.equal(collate_dataset(sub, torch.arange(4)).edge_index, fast.edge_index)


def test_graph_dataset_rejects_inconsistent_tensors():
    good = dict(name="t", edge_index=torch.tensor([[0, 1], [1, 0]]), node_ptr=torch.tensor([0, 2, 3]),
                edge_ptr=torch.tensor([0, 2, 2]), y=torch.tensor([0, 1]))
    GraphDataset(**good)
    with pytest.raises(ValueError, match="outside the graph's 1 nodes"):
        GraphDataset(**{**good, "edge_ptr": torch.tensor([0, 0, 2])})
    with pytest.raises(ValueError, match="node_ptr has 3 entries but y labels 3 graphs"):
        GraphDataset(**{**good, "y": torch.tensor([0, 1, 1])})
    with pytest.raises(ValueError, match="x must be"):
        GraphDataset(**good, x=torch.ones(2, 1))
    with pytest.raises(ValueError, match=">= 0"):
        GraphDataset(**{**good, "y": torch.tensor([0, -1])})
    with pytest.raises(ValueError, match="outside 0..1"):
        collate_dataset(GraphDataset(**good), [2])


# ---------------------------------------------------------------- pooling
@pytest.mark.parametrize("backend", cpu_test_backends())
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_global_pool_matches_pyg_with_empty_graphs(backend, reduce):
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    batch = collate(random_graphs(sizes=(4, 0, 7, 1, 0, 5)))
    x = batch.x.double().requires_grad_()
    with unigraph.use_backend(backend):
        ours = global_pool(x, batch, reduce)
    theirs = {"sum": pyg_nn.global_add_pool, "mean": pyg_nn.global_mean_pool,
              "max": pyg_nn.global_max_pool}[reduce](x, batch.batch, size=batch.num_graphs)
    assert ours.shape == (6, 3)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    assert torch.equal(ours[1], torch.zeros(3, dtype=torch.float64)) and torch.equal(ours[4], ours[1])
    grad = torch.randn_like(ours)
    ours_grad, = torch.autograd.grad(ours, x, grad)
    theirs_grad, = torch.autograd.grad(theirs, x, grad)
    torch.testing.assert_close(ours_grad, theirs_grad, rtol=1e-12, atol=1e-12)


def test_pool_takes_an_unsorted_batch_vector_and_checks_it():
    x = torch.arange(10.0).view(5, 2)
    vector = torch.tensor([1, 0, 1, 2, 0])
    assert global_add_pool(x, vector).tolist() == [[10.0, 12.0], [4.0, 6.0], [6.0, 7.0]]
    assert global_max_pool(x, vector, size=4)[3].tolist() == [0.0, 0.0]
    assert global_mean_pool(x, None).tolist() == [[4.0, 5.0]]
    with pytest.raises(ValueError, match="x has 5 rows but the batch has 4 nodes"):
        global_add_pool(x, vector[:4])
    with pytest.raises(ValueError, match="size=2"):
        global_add_pool(x, vector, size=2)
    with pytest.raises(TypeError, match="integer"):
        global_add_pool(x, vector.float())
    with pytest.raises(ValueError, match="reduce must be one of"):
        global_pool(x, vector, "min")


def test_attention_pool_matches_pyg():
    aggr = pytest.importorskip("torch_geometric.nn.aggr")
    torch.manual_seed(0)
    batch = collate(random_graphs(sizes=(4, 0, 7, 3)))
    gate, nn = torch.nn.Linear(3, 1), torch.nn.Linear(3, 5)
    ours, alpha = AttentionPool(gate, nn)(batch.x, batch, return_attention=True)
    theirs = aggr.AttentionalAggregation(gate, nn)(batch.x, batch.batch, dim_size=4)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert torch.equal(ours[1], torch.zeros(5))
    sums = global_add_pool(alpha, batch).flatten()
    torch.testing.assert_close(sums, torch.tensor([1.0, 0.0, 1.0, 1.0]))  # softmax over each graph's nodes
    per_channel = AttentionPool(torch.nn.Linear(3, 3))(batch.x, batch.batch)
    assert per_channel.shape == (4, 3)
    with pytest.raises(ValueError, match="gate_nn must give"):
        AttentionPool(torch.nn.Linear(3, 2))(batch.x, batch)


# ---------------------------------------------------------------- the model
def test_gin_classifier_matches_pyg_gin_with_the_same_weights():
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    from unigraph.models.gin import gin_mlp
    torch.manual_seed(0)
    batch = collate(random_graphs(sizes=(4, 6, 0, 5), features=3))
    ours = GINClassifier(3, hidden_channels=8, num_classes=4, num_layers=3).eval()

    class PyGGIN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList(pyg_nn.GINConv(gin_mlp(w, 8, 8)) for w in (3, 8, 8))
            self.lin1, self.lin2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

        def forward(self, x, edge_index, batch, size):
            for conv in self.convs:
                x = torch.relu(conv(x, edge_index))
            return self.lin2(torch.relu(self.lin1(pyg_nn.global_add_pool(x, batch, size))))

    theirs = PyGGIN().eval()
    theirs.load_state_dict(ours.state_dict(), strict=False)
    missing = set(ours.state_dict()) - set(theirs.state_dict())
    assert missing <= {f"convs.{i}.eps" for i in range(3)}
    torch.testing.assert_close(ours(batch), theirs(batch.x, batch.edge_index, batch.batch, batch.num_graphs),
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours(batch.graph, batch.x, batch.batch), ours(batch))  # PyG-style arguments


def test_gin_classifier_checks_its_settings():
    with pytest.raises(ValueError, match="pool must be one of"):
        GINClassifier(3, hidden_channels=8, num_classes=2, pool="min")
    with pytest.raises(ValueError, match="num_layers"):
        GINClassifier(3, hidden_channels=8, num_classes=2, num_layers=0)
    batch = collate([Graph(torch.tensor([[0], [1]]), num_nodes=2)])
    with pytest.raises(ValueError, match="no node features"):
        GINClassifier(1, hidden_channels=4, num_classes=2)(batch)


# ---------------------------------------------------------------- the loader
def test_graph_loader_order_coverage_and_workers():
    dataset = motif_graphs(40, seed=1)
    loader = GraphLoader(dataset, torch.arange(40) < 30, batch_size=8, shuffle=True, seed=3)
    epoch1 = [b.y.clone() for b in loader]
    assert len(loader) == 4 and [b.numel() for b in epoch1] == [8, 8, 8, 6]
    ids1 = torch.cat([collate_dataset(dataset, ids).y for ids in loader._epoch_batches(1)])
    assert torch.equal(torch.cat(epoch1), ids1)
    epoch2 = [b.y for b in loader]
    assert not all(torch.equal(a, b) for a, b in zip(epoch1, epoch2))  # a new order each epoch
    again = GraphLoader(dataset, torch.arange(40) < 30, batch_size=8, shuffle=True, seed=3)
    assert all(torch.equal(a, b.y) for a, b in zip(epoch1, again))  # the same seed, the same order
    assert sorted(torch.cat([ids for ids in loader._epoch_batches(5)]).tolist()) == list(range(30))
    assert len(GraphLoader(dataset, batch_size=8, drop_last=True, indices=torch.arange(30))) == 3
    with GraphLoader(dataset, torch.arange(30), batch_size=8, shuffle=True, seed=3, num_workers=1) as workers:
        for a, b in zip(epoch1, workers):
            assert torch.equal(a, b.y)
    with_bar = list(GraphLoader(dataset, batch_size=16, progress=True))
    assert sum(b.num_graphs for b in with_bar) == 40


# ---------------------------------------------------------------- the generator and training
def test_motif_graphs_are_deterministic_balanced_and_simple():
    a, b = motif_graphs(50, seed=7), motif_graphs(50, seed=7)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.y, b.y)
    assert not torch.equal(motif_graphs(50, seed=8).y, a.y)
    assert torch.bincount(a.y).tolist() == [10] * 5
    for i in range(len(a)):
        g, _ = a[i]
        assert bool((g.src != g.dst).all())
        keys = g.src * g.num_nodes + g.dst
        assert keys.unique().numel() == g.num_edges  # no duplicates
        assert torch.equal(torch.sort(keys).values, torch.sort(g.dst * g.num_nodes + g.src).values)  # symmetric
    with pytest.raises(ValueError, match="motifs must be"):
        motif_graphs(10, motifs=("cycle", "hexagon"))


def test_split_graphs_is_stratified_and_disjoint():
    labels = torch.arange(100) % 4
    train, val, test = split_graphs(100, (0.6, 0.2, 0.2), seed=1, labels=labels)
    assert sorted(torch.cat([train, val, test]).tolist()) == list(range(100))
    assert torch.bincount(labels[train]).tolist() == [15] * 4 and torch.bincount(labels[val]).tolist() == [5] * 4
    with pytest.raises(ValueError, match="summing to 1"):
        split_graphs(10, (0.5, 0.2, 0.2))


def test_gin_learns_the_motifs():
    dataset = motif_graphs(300, seed=0)
    splits = split_graphs(len(dataset), (0.7, 0.15, 0.15), seed=0, labels=dataset.y)
    torch.manual_seed(0)
    model = GINClassifier(1, hidden_channels=32, num_classes=dataset.num_classes, num_layers=4)
    config = TrainConfig(epochs=25, lr=0.01, weight_decay=0.0, batch_size=32, patience=None, progress="off")
    seen = []
    result = GraphTrainer(model, dataset, splits, config, on_epoch=seen.append).fit()
    assert len(seen) == 25 and result.history[-1].loss < result.history[0].loss
    assert result.best_val_acc >= 0.8 and result.test_acc >= 0.7  # chance is 0.2


# ---------------------------------------------------------------- fuzzing
from hypothesis import given, strategies as st  # noqa: E402


@given(sizes=st.lists(st.integers(0, 6), min_size=1, max_size=6), seed=st.integers(0, 2 ** 16),
       special=st.sampled_from([None, "nan", "inf", "-inf"]))
def test_pooling_equals_a_plain_reference_on_drawn_batches(sizes, seed, special):
    batch = collate(random_graphs(sizes=tuple(sizes), seed=seed, features=2))
    x = batch.x.double()
    if special is not None and x.shape[0]:
        x[seed % x.shape[0], 0] = float(special)
    for reduce, fold in (("sum", lambda r: r.sum(0)), ("mean", lambda r: r.mean(0)), ("max", lambda r: r.max(0).values)):
        out = global_pool(x, batch, reduce)
        for k in range(batch.num_graphs):
            rows = x[batch.ptr[k]:batch.ptr[k + 1]]
            expected = fold(rows) if rows.shape[0] else torch.zeros(2, dtype=torch.float64)
            torch.testing.assert_close(out[k], expected, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_gin_classifier_sizes_are_keyword_only():
    """Like the node classifiers: PyG's GIN reads (in, hidden, num_layers, out) positionally."""
    with pytest.raises(TypeError, match="positional argument"):
        GINClassifier(3, 8, 2)
    with pytest.raises(TypeError, match="num_classes"):
        GINClassifier(3)
