"""`unigraph chunk`, `unigraph partition --chunked` and `unigraph train --chunked` end to end (in process)."""
from __future__ import annotations

import pytest

from unigraph.cli import main
from unigraph.distributed import format as fmt
from unigraph.storage.chunked import ChunkedGraph


def test_generate_verify_partition_and_train(tmp_path, capsys):
    g = str(tmp_path / "g")
    assert main(["chunk", "generate", "--out", g, "--nodes", "4000", "--features", "8", "--degree", "6",
                 "--chunk-mib", "0.01", "--seed", "1"]) == 0
    assert ChunkedGraph(g).meta["seed"] == 1 and ChunkedGraph(g).num_features == 8
    assert main(["chunk", "verify", g]) == 0
    assert main(["partition", "--chunked", g, "--parts", "2", "--out", str(tmp_path / "p"), "--chunk-mib", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "method: ldg" in out and "edge cut" in out
    assert fmt.read_metadata(tmp_path / "p").layout == "chunked"
    assert main(["train", "--chunked", g, "--model", "sage", "--batch-size", "256", "--fanouts", "3,3", "--epochs", "1",
                 "--cache-rows", "100", "--progress", "off"]) == 0
    out = capsys.readouterr().out
    assert "done: 1 epochs" in out and "peak private (RssAnon)" in out


def test_convert_sources(tmp_path):
    (tmp_path / "e.txt").write_text("0 1\n1 2\n2 0\n")
    assert main(["chunk", "convert", "--edge-list", str(tmp_path / "e.txt"), "--undirected", "--out",
                 str(tmp_path / "e")]) == 0
    assert ChunkedGraph(tmp_path / "e").num_edges == 6
    assert main(["chunk", "convert", "--dataset", "synthetic", "--nodes", "500", "--out", str(tmp_path / "s")]) == 0
    assert ChunkedGraph(tmp_path / "s").num_nodes == 500


@pytest.mark.parametrize("argv, message", [
    (["chunk", "verify", "/nonexistent"], "does not exist"),
    (["chunk", "generate", "--out", "X", "--nodes", "0"], "num_nodes must be an int >= 1"),
    (["chunk", "convert", "--ogb", "ogbn-arxiv", "--out", "X"], "--ogb needs --root"),
    (["partition", "--parts", "2", "--out", "X", "--method", "ldg"], "give --chunked DIR"),
    (["train", "--chunked", "G", "--nproc", "2"], "--nproc does not apply with --chunked"),
])
def test_usage_errors_are_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and message in capsys.readouterr().err
