"""``benchmarks/custom_layers.py --quick``: each user-written layer runs a training step per round
with the peer (PyG's MessagePassing, DGL) and with unigraph, at each thread count asked; rows carry
min/median/max and the speedup; the layers compute the same function on both."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks import custom_layers
from benchmarks.peers import load_dgl, load_pyg
from conftest import REPO_ROOT


@pytest.mark.timeout(300)
def test_quick_run_times_every_layer_at_each_thread_count(tmp_path):
    if load_pyg() is None:
        pytest.skip("the benchmark compares with PyG's MessagePassing")
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "custom_layers.py"), "--quick",
                           "--threads", "1", "2", "--out", str(tmp_path)], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "custom_layers_cpu.json").read_text())
    assert [(s["threads"], s["workload"]) for s in result["sections"]] == [(1, "small graphs"), (2, "small graphs")]
    for section in result["sections"]:
        expected = list(custom_layers.LAYERS) + (list(custom_layers.DGL_LAYERS) if load_dgl() is not None else [])
        assert [row["layer"] for row in section["rows"]] == expected
        for row in section["rows"]:
            for library in ("unigraph", row["peer"]):
                assert 0 < row[library]["ms_min"] <= row[library]["ms_median"] <= row[library]["ms_max"]
            assert row["speedup"] == pytest.approx(row[row["peer"]]["ms_median"] / row["unigraph"]["ms_median"])
    assert "| `edge` |" in (tmp_path / "custom_layers_cpu.md").read_text()


def test_the_layers_compute_the_same_function_on_both_bases():
    pyg = load_pyg()
    if pyg is None:
        pytest.skip("needs PyG's MessagePassing")
    import torch
    import torch_geometric.utils as utils
    import unigraph
    edge_index = torch.randint(0, 9, (2, 30))
    x = torch.randn(9, 5, dtype=torch.float64)
    for name in custom_layers.LAYERS:
        layers = []
        for base in (pyg.nn.MessagePassing, unigraph.MessagePassing):
            torch.manual_seed(0)
            layers.append(custom_layers.layer_classes(base, utils)[name](5, 4).double())
        torch.testing.assert_close(layers[1](x, edge_index), layers[0](x, edge_index))


def test_the_dgl_modules_compute_the_same_function_on_both():
    dgl = load_dgl()
    if dgl is None:
        pytest.skip("needs DGL")
    import torch
    import unigraph.dgl
    edge_index = torch.randint(0, 9, (2, 30))
    x = torch.randn(9, 5)
    step = (x, edge_index, None)
    for name in custom_layers.DGL_LAYERS:
        outputs = []
        for module in (dgl, unigraph.dgl):
            torch.manual_seed(0)
            layer = custom_layers.dgl_layer_classes(module)[name](5, 4)
            outputs.append(layer(custom_layers.dgl_graph(module, step, 0), x))
        torch.testing.assert_close(outputs[1], outputs[0])
