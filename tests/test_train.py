"""The single-process trainer: full graph and mini-batches, determinism, metrics, early stopping,
progress display, backends, configuration errors."""
from __future__ import annotations

import io
import math

import pytest
import torch

import unigraph
from unigraph.data import planted_partition
from unigraph.sampling import NeighborSampler
from unigraph.train import TrainConfig, Trainer, build_node_classifier, seed_everything
from unigraph.train import progress as progress_module
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.metrics import EpochMetrics, accuracy
from unigraph.train.progress import Progress
from unigraph.train.trainer import resolve_fanouts


@pytest.fixture(scope="module")
def dataset():
    return planted_partition(400, num_features=16, num_val=100, num_test=150, seed=4)


def train(dataset, model_name="gcn", seed_model=0, **config):
    seed_everything(seed_model)
    model = build_node_classifier(model_name, dataset.num_features, dataset.num_classes)
    config.setdefault("progress", "off")
    return Trainer(model, dataset, TrainConfig(**config)).fit(), model


def test_full_graph_training_learns_and_is_deterministic(dataset):
    first, _ = train(dataset, epochs=30, patience=None)
    second, _ = train(dataset, epochs=30, patience=None)
    assert first.losses == second.losses  # bit for bit
    assert first.losses[-1] < 0.6 * first.losses[0]
    assert first.test_acc > 0.9  # far above the 0.25 of guessing among 4 classes
    other, _ = train(dataset, epochs=30, patience=None, seed=1)
    assert other.losses != first.losses, "the seed must reach the training randomness (dropout)"


@pytest.mark.parametrize("model_name", ["sage", "gat"])
def test_mini_batch_training_learns_and_is_deterministic(dataset, model_name):
    config = dict(epochs=6, batch_size=16, fanouts=(5, 5), patience=None, lr=0.01)
    first, _ = train(dataset, model_name, **config)
    second, _ = train(dataset, model_name, **config)
    assert first.losses == second.losses
    assert first.losses[-1] < first.losses[0]
    assert first.history[-1].train_acc > 0.6


def test_every_epoch_has_its_metrics(dataset):
    result, model = train(dataset, epochs=5, eval_every=2, patience=None)
    assert [m.epoch for m in result.history] == [1, 2, 3, 4, 5]
    evaluated = [m for m in result.history if not math.isnan(m.val_acc)]
    assert [m.epoch for m in evaluated] == [2, 4, 5]  # every 2nd epoch and the last
    for m in result.history:
        assert m.loss > 0 and m.seconds > 0
    for m in evaluated:
        assert 0 <= m.train_acc <= 1 and 0 <= m.val_acc <= 1 and 0 <= m.test_acc <= 1 and m.val_loss > 0
    logits = model(dataset.graph, dataset.x)  # restored best weights: their test accuracy was recorded
    assert accuracy(logits[dataset.test_mask], dataset.y[dataset.test_mask]) == result.test_acc


def test_early_stopping_stops_and_keeps_the_best_epoch(dataset):
    result, _ = train(dataset, epochs=50, lr=0.0, patience=3)  # lr 0: nothing ever improves after epoch 1
    assert result.stopped_early and result.epochs_run == 4 and result.best_epoch == 1

    stopper = EarlyStopping(patience=2)
    model = torch.nn.Linear(1, 1)
    decisions = [stopper.update(e, acc, loss, 0.0, model)
                 for e, (acc, loss) in enumerate([(0.5, 1.0), (0.6, 0.9), (0.6, 0.8), (0.6, 0.85), (0.55, 0.7)], 1)]
    assert decisions == [False, False, False, False, True]
    assert stopper.best_epoch == 3  # equal accuracy, lower loss: better
    never = EarlyStopping(patience=None)
    assert not any(never.update(e, 0.1, 1.0, 0.0, model) for e in range(1, 20))


def test_restore_best_loads_the_best_weights(dataset):
    result, model = train(dataset, epochs=12, lr=0.05, patience=None)
    best = result.history[result.best_epoch - 1]
    logits = model(dataset.graph, dataset.x)
    assert accuracy(logits[dataset.val_mask], dataset.y[dataset.val_mask]) == best.val_acc == result.best_val_acc


def test_any_backend_trains_the_same_model(dataset):
    losses = {}
    for backend in ("scatter", "sparse", "numba"):
        with unigraph.use_backend(backend):
            losses[backend] = train(dataset, "gat", epochs=3, patience=None)[0].losses
    for backend in ("sparse", "numba"):
        assert losses[backend] == pytest.approx(losses["scatter"], rel=1e-4)


def test_fanout_minus_one_keeps_every_in_edge(dataset):
    seed_everything(0)
    model = build_node_classifier("sage", dataset.num_features, dataset.num_classes)
    fanouts = resolve_fanouts(TrainConfig(batch_size=8, fanouts=(-1, 3)), model, dataset.graph)
    assert fanouts == [dataset.graph.stats().max_in_degree, 3]
    blocks = NeighborSampler(fanouts).sample(dataset.graph, torch.arange(8), key=1)
    first = blocks.blocks[0]
    in_degree = dataset.graph.in_degrees()
    assert torch.equal(first.in_degrees(), in_degree[blocks.input_nodes[:first.num_dst_nodes]])


def test_progress_text_and_bar_fallback(monkeypatch):
    stream = io.StringIO()
    progress = Progress(25, mode="auto", log_every=10, stream=stream)  # not a terminal: text lines
    assert progress.mode == "text"
    for epoch in range(1, 26):
        progress.update(EpochMetrics(epoch, loss=1.0 / epoch, train_acc=0.5, val_acc=0.5, test_acc=0.5, seconds=0.01))
    lines = stream.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == ["1/25", "10/25", "20/25", "25/25"]
    assert "loss 0.0400" in lines[-1] and "10.0 ms" in lines[-1]
    monkeypatch.setattr(progress_module, "tqdm_installed", lambda: False)
    with pytest.raises(ValueError, match="progress='bar' needs tqdm"):
        Progress(5, mode="bar", stream=io.StringIO())
    assert Progress(5, mode="auto", stream=io.StringIO()).mode == "text"
    silent = io.StringIO()
    off = Progress(5, mode="off", stream=silent)
    off.update(EpochMetrics(1, 1.0))
    off.message("hello")
    assert silent.getvalue() == ""


def test_progress_bar_when_tqdm_is_there():
    pytest.importorskip("tqdm")
    stream = io.StringIO()
    bar = Progress(3, mode="bar", stream=stream)
    for epoch in (1, 2, 3):
        bar.update(EpochMetrics(epoch, loss=0.5, val_acc=0.75, test_acc=0.7))
    bar.close()
    assert "3/3" in stream.getvalue() and "val=0.750" in stream.getvalue()


@pytest.mark.parametrize("field, value, error, match", [
    ("epochs", 0, ValueError, "epochs must be >= 1, got 0"),
    ("epochs", 2.5, TypeError, "epochs must be an int"),
    ("lr", -1.0, ValueError, "lr must be a number >= 0"),
    ("optimizer", "rmsprop", ValueError, "optimizer must be one of 'adam', 'sgd'; got 'rmsprop'"),
    ("batch_size", 0, ValueError, "batch_size must be >= 1"),
    ("fanouts", [5, 0], ValueError, r"fanouts\[1\] must be a positive int or -1"),
    ("fanouts", "10,10", TypeError, "fanouts must be None or a non-empty list"),
    ("patience", 0, ValueError, "patience must be >= 1"),
    ("progress", "fancy", ValueError, "progress must be one of"),
    ("resume", True, ValueError, "resume=True needs checkpoint_dir"),
])
def test_config_errors_name_the_field(field, value, error, match):
    with pytest.raises(error, match=match):
        TrainConfig(**{field: value})


def test_trainer_checks_its_arguments(dataset):
    model = build_node_classifier("gcn", dataset.num_features, dataset.num_classes)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        Trainer("gcn", dataset, TrainConfig())
    with pytest.raises(TypeError, match="dataset must be a unigraph.data.NodeDataset"):
        Trainer(model, dataset.graph, TrainConfig())
    with pytest.raises(TypeError, match="config must be a TrainConfig"):
        Trainer(model, dataset, {"epochs": 3})
    with pytest.raises(TypeError, match="has no `convs`; pass explicit fanouts"):
        Trainer(torch.nn.Linear(16, 4), dataset, TrainConfig(batch_size=8))
