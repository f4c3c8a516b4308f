"""`unigraph train --task graph|link`, dataset names in any case, PyG's root layout, OGB folders, metric logs."""
from __future__ import annotations

import csv
import json

import pytest

from unigraph.cli import main
from unigraph.train import task_jobs

from test_ogb_dataset import write_ogb
from test_tu_dataset import write_tu

QUICK = ["--progress", "off"]


def test_graph_task_trains_and_logs_metrics(tmp_path, capsys):
    log_dir = tmp_path / "run"
    assert main(["train", "--task", "graph", "--epochs", "2", "--hidden", "8", "--log-dir", str(log_dir), *QUICK]) == 0
    out = capsys.readouterr().out
    assert "GINClassifier (4 layers of 8)" in out and "GraphDataset('motifs', num_graphs=1000" in out
    assert "test acc" in out
    rows = list(csv.DictReader((log_dir / "metrics.csv").open()))
    assert [r["epoch"] for r in rows] == ["1", "2"] and {"loss", "val_acc", "test_acc"} <= set(rows[0])
    assert json.loads((log_dir / "metrics.json").read_text())[1]["epoch"] == 2
    assert (log_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_link_task_runs_on_the_built_in_graph(capsys):
    assert main(["train", "--task", "link", "--epochs", "2", *QUICK]) == 0
    out = capsys.readouterr().out
    assert "GAE with a gcn encoder" in out and "test AUC" in out and "Hits@50" in out


def test_tu_dataset_from_the_command_line_in_any_case(tmp_path, capsys):
    write_tu(tmp_path / "TOY" / "raw")  # PyG's layout: root/TOY/raw/TOY_A.txt
    assert main(["train", "--task", "graph", "--dataset", "toy", "--root", str(tmp_path), "--epochs", "1",
                 "--hidden", "4", "--batch-size", "2", *QUICK]) == 0
    assert "GraphDataset('TOY', num_graphs=3" in capsys.readouterr().out


def test_ogb_folder_from_the_command_line(tmp_path, capsys):
    write_ogb(tmp_path, "ogbn-arxiv")
    assert main(["train", "--dataset", "OGBN-Arxiv", "--root", str(tmp_path), "--model", "gcn", "--epochs", "2",
                 *QUICK]) == 0
    assert "'ogbn-arxiv', num_nodes=7" in capsys.readouterr().out


@pytest.mark.dataset
def test_cora_in_pyg_layout_and_any_case(planetoid_root, tmp_path, capsys):
    raw = tmp_path / "Cora" / "raw"
    raw.mkdir(parents=True)
    for path in planetoid_root.glob("ind.cora.*"):
        (raw / path.name).symlink_to(path)
    assert main(["train", "--dataset", "Cora", "--root", str(tmp_path), "--model", "gcn", "--epochs", "1", *QUICK]) == 0
    assert "on NodeDataset('cora'" in capsys.readouterr().out
    assert main(["train", "--task", "link", "--dataset", "CORA", "--root", str(tmp_path), "--epochs", "1", *QUICK]) == 0
    assert "on cora: LinkSplit(" in capsys.readouterr().out


@pytest.mark.parametrize("arguments, message", [
    (["--task", "graph", "--dataset", "MUTAG"], "--dataset MUTAG reads files from a folder: pass --root DIR"),
    (["--task", "graph", "--dataset", "MUTAG", "--root", "/nonexistent"], "MUTAG_graph_indicator.txt not found"),
    (["--task", "graph", "--model", "gat"], "--task graph trains --model gin"),
    (["--task", "graph", "--fanouts", "5,5"], "--fanouts applies to --task node and --task link"),
    (["--task", "link", "--fanouts", "5,5,5"], "--fanouts has 3 entries but the model has 2 layers"),
    (["--task", "link", "--pipeline-stages", "2"], "--pipeline-stages is not supported with --task link"),
    (["--task", "link", "--checkpoint", "ckpt"], "--checkpoint is not supported with --task link"),
    (["--task", "link", "--dataset", "motifs"], "invalid choice: 'motifs' for --task link"),
    (["--task", "link", "--dataset", "pubmed"], "pass --root DIR"),
    (["--dataset", "ogbn-arxiv"], "--dataset ogbn-arxiv reads OGB's unpacked folder: pass --root DIR"),
    (["--dataset", "ogbn-arxiv", "--root", "/nonexistent"], "no OGB dataset 'ogbn-arxiv' under /nonexistent"),
    (["--tensorboard"], "--tensorboard needs --log-dir DIR"),
    (["--task", "graph", "--tensorboard"], "--tensorboard needs --log-dir DIR"),
])
def test_user_mistakes_end_with_a_message_not_a_traceback(capsys, arguments, message):
    with pytest.raises(SystemExit) as stop:
        main(["train", *arguments, "--epochs", "1", *QUICK])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_malformed_tu_file_is_a_message(tmp_path, capsys):
    write_tu(tmp_path, files={"A": ["1, 2", "2, x"], "graph_indicator": ["1", "1"], "graph_labels": ["0"]})
    with pytest.raises(SystemExit):
        main(["train", "--task", "graph", "--dataset", "TOY", "--root", str(tmp_path), *QUICK])
    assert "TOY_A.txt: line 2: 'x' is not a number" in capsys.readouterr().err


def test_tensorboard_requested_but_missing_is_refused(tmp_path, capsys, monkeypatch):
    import unigraph.train.metrics_log as metrics_log

    def missing(module, purpose, install):
        raise ImportError(f"{purpose} needs the optional package {module!r}. Install it with: {install}")
    monkeypatch.setattr(metrics_log, "require", missing)
    with pytest.raises(SystemExit):
        main(["train", "--task", "graph", "--log-dir", str(tmp_path), "--tensorboard", "--epochs", "1", *QUICK])
    assert "pip install 'unigraph[tensorboard]'" in capsys.readouterr().err


def test_task_defaults_fill_only_unset_flags():
    import argparse
    args = argparse.Namespace(task="graph", model=None, layers=None, lr=0.5, weight_decay=None, epochs=None,
                              hidden=None, dropout=None)
    task_jobs.apply_task_defaults(args)
    assert (args.model, args.layers, args.lr, args.weight_decay, args.epochs) == ("gin", 4, 0.5, 0.0, 100)
    assert task_jobs.canonical_dataset("node", "PubMed") == "pubmed"
    assert task_jobs.canonical_dataset("graph", "Motifs") == "synthetic"
    assert task_jobs.canonical_dataset("graph", "PROTEINS") == "PROTEINS"
