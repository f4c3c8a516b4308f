"""The built-in academic graph carries its planted signal; R-GCN learns it full batch and on typed
mini-batches, deterministically; ``unigraph train --model rgcn`` runs and refuses what it cannot do."""
from __future__ import annotations

import pytest
import torch

from unigraph.cli import main
from unigraph.data import HeteroNodeDataset, academic_graph
from unigraph.models import RGCN
from unigraph.train import TrainConfig, build_node_classifier
from unigraph.train.hetero import HeteroTrainer


@pytest.fixture(scope="module")
def small() -> HeteroNodeDataset:
    return academic_graph(400, seed=1)


def area_guess(dataset: HeteroNodeDataset, relation, width: int) -> torch.Tensor:
    """Each paper's guess of a category from the one-hot signal of its neighbours over ``relation``."""
    graph = dataset.graph[relation]
    x = dataset.graph.ndata[relation[0]]["x"][:, :width]
    summed = torch.zeros(graph.num_dst_nodes, width).index_add_(0, graph.dst, x[graph.src])
    return summed.argmax(1)


def test_the_label_is_the_authors_area_and_the_fields_topic(small):
    assert small.num_classes == 4 and small.target == "paper"
    authors = area_guess(small, ("author", "writes", "paper"), 2)
    fields = area_guess(small, ("field", "topic_of", "paper"), 2)
    area, topic = small.y // 2, small.y % 2
    assert float((authors == area).float().mean()) > 0.8          # the authors tell the area
    assert float((fields == topic).float().mean()) > 0.8          # the fields tell the topic
    assert abs(float((authors == topic).float().mean()) - 0.5) < 0.1   # and nothing about the other half
    again = academic_graph(400, seed=1)
    for relation in small.graph.relations:
        assert torch.equal(again.graph[relation].edge_index, small.graph[relation].edge_index)
    assert torch.equal(again.y, small.y) and not torch.equal(academic_graph(400, seed=2).y, small.y)


def test_dataset_is_checked():
    data = academic_graph(100, seed=0)
    with pytest.raises(ValueError, match="target 'venue'"):
        HeteroNodeDataset("x", data.graph, "venue", data.y, data.train_mask, data.val_mask, data.test_mask)
    with pytest.raises(ValueError, match="y must be an int64"):
        HeteroNodeDataset("x", data.graph, "paper", data.y[:5], data.train_mask, data.val_mask, data.test_mask)
    with pytest.raises(ValueError, match="train \\+ val"):
        academic_graph(100, train=0.8, val=0.3)


def fit(dataset, **config):
    torch.manual_seed(0)
    model = RGCN(dataset.num_features, 32, dataset.num_classes, dataset.graph.relations, dataset.target,
                 num_bases=4, dropout=0.2)
    settings = dict(epochs=40, lr=0.01, patience=None, progress="off", seed=3)
    settings.update(config)
    return HeteroTrainer(model, dataset, TrainConfig(**settings)).fit()


def test_rgcn_learns_the_signal_full_batch_and_mini_batch(small):
    full = fit(small)
    assert full.test_acc > 0.7, full.test_acc                    # chance is 0.25, one relation alone ~0.5
    batched = fit(small, batch_size=64, fanouts=(5, 5), epochs=15)
    assert batched.test_acc > 0.7, batched.test_acc
    again = fit(small, batch_size=64, fanouts=(5, 5), epochs=3)
    assert again.losses == batched.losses[:3]                     # deterministic under the seed


def test_unigraph_train_model_rgcn(capsys):
    assert main(["train", "--model", "rgcn", "--nodes", "200", "--epochs", "3", "--progress", "text",
                 "--log-every", "1", "--batch-size", "64", "--fanouts", "4,4"]) == 0
    captured = capsys.readouterr()
    assert "rgcn (2 layers) on HeteroNodeDataset('academic'" in captured.out
    assert "kernels: copy_u/mean over all 7 relations at once -> " in captured.out
    assert "done: 3 epochs" in captured.out and "epoch 3/3  loss" in captured.err


@pytest.mark.parametrize("arguments, message", [
    (["--dataset", "cora", "--root", "x"], "not supported with it: --dataset cora"),
    (["--nproc", "2"], "data parallelism"),
    (["--checkpoint", "ckpt"], "--checkpoint / --resume"),
    (["--heads", "2"], "--heads"),
    (["--fanouts", "5"], "--fanouts has 1 entries but the model has 2 layers"),
])
def test_unigraph_train_rgcn_refuses_by_name(capsys, arguments, message):
    with pytest.raises(SystemExit) as stop:
        main(["train", "--model", "rgcn", "--nodes", "200", *arguments])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_homogeneous_builder_points_to_rgcn():
    with pytest.raises(ValueError, match="heterogeneous graphs: build unigraph.models.RGCN"):
        build_node_classifier("rgcn", 8, 3)
