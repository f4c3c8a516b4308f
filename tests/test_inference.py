"""Layer-wise inference (unigraph.train.inference) against the model on the whole graph, in float64."""
from __future__ import annotations

import pytest
import torch

from unigraph.data import planted_partition
from unigraph.graph import Graph
from unigraph.train import TrainConfig, Trainer, build_node_classifier
from unigraph.train.inference import MIN_BATCH_EDGES, edge_batches, graph_outputs, sampled_batch_edges


@pytest.fixture(scope="module")
def dataset():
    data = planted_partition(500, num_features=5, avg_degree=6, train_per_class=20, num_val=60, num_test=60, seed=4)
    hub = torch.arange(1, 500)                                     # node 0 receives an edge from every node
    graph = Graph(torch.stack([torch.cat([data.graph.src, hub]), torch.cat([data.graph.dst, torch.zeros_like(hub)])]),
                  num_nodes=500)
    return data, graph


@pytest.mark.parametrize("name", ["sage", "gat", "gin"])
@pytest.mark.parametrize("layers", [2, 3])
def test_layer_by_layer_equals_the_whole_graph(dataset, name, layers):
    data, graph = dataset
    torch.manual_seed(0)
    model = build_node_classifier(name, 5, 4, num_layers=layers, hidden_channels=6, dropout=0.5).double()
    x = data.x.double()
    nodes = torch.tensor([0, 7, 3, 499, 250, 8])                  # any order, the hub included
    model.train()                                                  # layer-wise runs in eval mode and restores this
    out = graph_outputs(model, graph, x, nodes, batch_edges=40)    # the hub (499 in-edges) is a batch by itself
    assert model.training
    reference = model.eval()(graph, x)[nodes]
    torch.testing.assert_close(out, reference, rtol=1e-12, atol=1e-12)


def test_gcn_is_refused_not_approximated(dataset):
    data, graph = dataset
    model = build_node_classifier("gcn", 5, 4)
    with pytest.raises(ValueError, match="exact for GraphSAGE, GAT and GIN only, not GCN"):
        graph_outputs(model, graph, data.x, torch.arange(3))


def test_edge_batches_hold_at_most_the_budget_unless_one_node_exceeds_it():
    degrees = torch.tensor([3, 3, 3, 10, 0, 0, 2, 5])
    runs = edge_batches(degrees, 6)
    assert runs == [(0, 2), (2, 3), (3, 4), (4, 7), (7, 8)]
    assert [s for s, _ in runs[1:]] == [e for _, e in runs[:-1]]  # consecutive, covering every node once
    assert edge_batches(torch.zeros(0, dtype=torch.int64), 6) == []
    with pytest.raises(ValueError, match="batch_edges must be an int >= 1"):
        edge_batches(degrees, 0)


def test_sampled_batch_edges_count_every_hop_of_a_training_batch():
    # 256 seeds take 10 in-edges each (2,560), reaching at most 256 * 11 nodes; those take 5 each
    assert sampled_batch_edges(256, [10, 5]) == 256 * 10 + 256 * 11 * 5
    assert sampled_batch_edges(1000, [15, 10, 5]) == 1000 * 15 + 16000 * 10 + 176000 * 5
    assert sampled_batch_edges(2, [2]) == MIN_BATCH_EDGES   # tiny batches are not worth their round trips


def test_the_trainer_evaluates_layer_by_layer_as_on_the_whole_graph(dataset):
    data, _ = dataset
    metrics = {}
    for evaluation in ("full", "layerwise"):
        torch.manual_seed(0)
        model = build_node_classifier("sage", 5, 4, hidden_channels=8).double()
        config = TrainConfig(epochs=2, batch_size=32, fanouts=(3, 3), patience=None, progress="off",
                             evaluation=evaluation)
        history = Trainer(model, data, config).fit().history
        metrics[evaluation] = [(m.train_acc, m.val_acc, m.test_acc, round(m.val_loss, 9)) for m in history]
    assert metrics["full"] == metrics["layerwise"]
    with pytest.raises(ValueError, match="evaluation must be one of"):
        TrainConfig(evaluation="sampled")
