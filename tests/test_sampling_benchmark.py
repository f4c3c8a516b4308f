"""The sampling benchmark runs end to end (tiny graph) and measures the same work for every library."""
from __future__ import annotations

import importlib.util
import json

import pytest


@pytest.mark.skipif(importlib.util.find_spec("torch_sparse") is None and importlib.util.find_spec("pyg_lib") is None,
                    reason="PyG's NeighborSampler needs pyg-lib or torch-sparse, and neither is installed")
@pytest.mark.timeout(300)
def test_quick_benchmark_writes_results_with_a_verdict(tmp_path, dgl):
    pytest.importorskip("torch_geometric")
    from benchmarks import sampling
    result = sampling.main(["--quick", "--rounds", "1", "--batches", "2", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "sampling_cpu.json").read_text())
    assert set(written["results"]) >= {"unigraph", "unigraph (torch path)", "dgl", "dgl (1 thread)", "pyg"}
    edges = {name: r["sampled_edges_per_batch"] for name, r in result["results"].items()}
    assert edges["unigraph"] == edges["unigraph (torch path)"]                 # bit-identical paths
    assert abs(edges["unigraph"] / edges["dgl"] - 1) < 0.1                      # same sampling as DGL
    assert written["target"]["text"].startswith(("TARGET MET", "TARGET MISSED"))
    markdown = (tmp_path / "sampling_cpu.md").read_text()
    assert "load average" in markdown and written["target"]["text"] in markdown
