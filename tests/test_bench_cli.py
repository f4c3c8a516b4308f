"""`unigraph bench GRAPH` on small graphs: every input format reads the same graph, hostile and corrupt
files and bad specs are refused with a message naming them (and nothing they hold is executed), the
table says what auto picks and why, JSON and PNG are written, and a wrong implementation is reported,
not ranked."""
from __future__ import annotations

import io
import json
import os
import pathlib
import zipfile

import numpy as np
import pytest
import torch

import unigraph
from unigraph import bench, cli
from unigraph.benchmarking import graph_source, op_cases
from unigraph.benchmarking.graph_source import GraphSourceError, load

EDGES = torch.tensor([[0, 1, 2, 2, 3, 4], [1, 2, 0, 3, 4, 0]])
FAST = ["--repeats", "1", "--warmup", "1", "--min-run-ms", "0", "--no-bandwidth", "--progress", "off"]


def _same_graph(graph, num_nodes=5):
    assert graph.num_nodes == num_nodes
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist())) == sorted(zip(*EDGES.tolist()))


# ---------------------------------------------------------------------- formats
def test_every_format_reads_the_same_graph(tmp_path, dgl):
    torch.save(EDGES, tmp_path / "tensor.pt")
    torch.save({"edge_index": EDGES.int(), "num_nodes": 5}, tmp_path / "dict.pt")
    np.savez(tmp_path / "edges.npz", edge_index=EDGES.numpy(), num_nodes=np.int64(5))
    np.savez(tmp_path / "srcdst.npz", src=EDGES[0].numpy(), dst=EDGES[1].numpy())
    np.save(tmp_path / "edges.npy", EDGES.numpy())
    from torch_geometric.data import Data
    torch.save(Data(edge_index=EDGES, num_nodes=5, x=torch.randn(5, 2)), tmp_path / "data.pt")
    import scipy.sparse as sp
    matrix = sp.coo_matrix((np.ones(6), (EDGES[0].numpy(), EDGES[1].numpy())), shape=(5, 5))
    for fmt in ("csr", "csc", "coo"):
        sp.save_npz(tmp_path / f"scipy_{fmt}.npz", matrix.asformat(fmt))
    dgl.save_graphs(str(tmp_path / "graph.bin"), [dgl.graph((EDGES[0], EDGES[1]), num_nodes=5)])
    for name in ("tensor.pt", "dict.pt", "edges.npz", "srcdst.npz", "edges.npy", "data.pt", "scipy_csr.npz",
                 "scipy_csc.npz", "scipy_coo.npz", "graph.bin"):
        loaded = load(str(tmp_path / name))
        _same_graph(loaded.graph)
        assert name in loaded.description
    rect = sp.csr_matrix((np.ones(2), ([0, 2], [1, 0])), shape=(3, 2))
    sp.save_npz(tmp_path / "bipartite.npz", rect)
    g = load(str(tmp_path / "bipartite.npz")).graph
    assert g.is_bipartite and (g.num_src_nodes, g.num_dst_nodes) == (3, 2)


def test_generator_specs_and_their_errors():
    g = load("rmat:300:4:7").graph
    assert (g.num_nodes, g.num_edges) == (300, 1200)
    assert torch.equal(g.edge_index, load("rmat:300:4:7").graph.edge_index)     # the seed is honoured
    assert load("uniform:200:3").graph.num_edges == 600
    assert load("arxiv_like:400:6").graph.num_nodes == 400
    for spec, match in [("rmat:abc:4", "N must be a non-negative integer"), ("rmat:100", "neither a file nor"),
                        ("mesh:10:2", "neither a file nor"), ("rmat:1:4", r"N must be in \[2"),
                        ("uniform:10:0", "DEG must be >= 1"), ("rmat:100000:100000", "edges"),
                        ("nothing_here.pt", "no such file")]:
        with pytest.raises(GraphSourceError, match=match):
            load(spec)


# ---------------------------------------------------------------------- hostile and corrupt files
class _Payload:
    """Unpickling this runs a shell command that creates a marker file."""

    def __init__(self, marker: pathlib.Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_pickle_payload_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "PWNED"
    torch.save({"edge_index": EDGES, "extra": _Payload(marker)}, tmp_path / "evil.pt")
    with pytest.raises(GraphSourceError, match=r"evil\.pt.*no arbitrary pickle.*system"):
        load(str(tmp_path / "evil.pt"))
    np.savez(tmp_path / "evil.npz", edge_index=np.array([_Payload(marker)], dtype=object))
    with pytest.raises(GraphSourceError, match=r"evil\.npz.*Python objects"):
        load(str(tmp_path / "evil.npz"))
    assert not marker.exists()


def _npz_with_header(path: pathlib.Path, shape: tuple, payload: bytes = b"") -> None:
    """An .npz whose edge_index header claims ``shape`` but holds only ``payload``."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<i8", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("edge_index.npy", header.getvalue() + payload)


@pytest.mark.parametrize("case, match", [
    ("huge_header", "more than the limit"), ("truncated_npz", "truncated or corrupt"),
    ("truncated_pt", "corrupt"), ("random_bytes", "unrecognized format"), ("out_of_range", "not a valid edge_index"),
    ("float_index", "not a valid edge_index"), ("wrong_shape", r"shape \[2, E\]"), ("too_many_edges", "exceed the limit"),
    ("bad_num_nodes", "num_nodes must be an integer"), ("huge_node_id", "imply more than the limit"), ("scipy_bad_indptr", "indptr"), ("scipy_bsr", "not supported"),
    ("zip_of_other_things", "neither a torch.save file nor an .npz"), ("big_file", "over the limit"),
])
def test_corrupt_and_hostile_files_are_refused_naming_the_file(tmp_path, case, match):
    path = tmp_path / f"{case}.bin"
    limits = {}
    if case == "huge_header":
        _npz_with_header(path, (2, 10**12))
    elif case == "truncated_npz":
        _npz_with_header(path, (2, 3), np.zeros(2, dtype=np.int64).tobytes())   # 6 entries declared, 2 present
    elif case == "truncated_pt":
        buffer = io.BytesIO()
        torch.save(EDGES, buffer)
        path.write_bytes(buffer.getvalue()[:-40])
    elif case == "random_bytes":
        path.write_bytes(os.urandom(64).replace(b"\x80", b"\x00").replace(b"PK", b"pk").replace(b"\x93", b"\x00"))
    elif case == "out_of_range":
        torch.save({"edge_index": EDGES, "num_nodes": 3}, path)
    elif case == "float_index":
        torch.save(EDGES.float(), path)
    elif case == "wrong_shape":
        torch.save(EDGES.t().contiguous(), path)
    elif case == "too_many_edges":
        torch.save(EDGES, path)
        limits["max_edges"] = 5
    elif case == "huge_node_id":
        torch.save(torch.tensor([[0], [2**40]]), path)
    elif case == "bad_num_nodes":
        np.savez(path.with_suffix(".npz"), edge_index=EDGES.numpy(), num_nodes=np.float64(5.5))
        path = path.with_suffix(".npz")
    elif case == "scipy_bad_indptr":
        np.savez(path.with_suffix(".npz"), format=np.array(b"csr"), shape=np.array([5, 5]),
                 indptr=np.array([0, 3, 1, 6, 6, 6]), indices=EDGES[1].numpy(), data=np.ones(6))
        path = path.with_suffix(".npz")
    elif case == "scipy_bsr":
        np.savez(path.with_suffix(".npz"), format=np.array(b"bsr"), shape=np.array([5, 5]))
        path = path.with_suffix(".npz")
    elif case == "zip_of_other_things":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("readme.txt", "hello")
    elif case == "big_file":
        path.write_bytes(b"\0" * 100)
        limits["max_file_bytes"] = 10
    with pytest.raises(GraphSourceError, match=match) as err:
        load(str(path), **limits)
    assert str(path) in str(err.value)


def test_cli_exits_with_status_2_and_the_reason(tmp_path, capsys):
    torch.save({"edge_index": torch.tensor([[0, 7]]), "num_nodes": 2}, tmp_path / "bad.pt")
    for argv, match in [(["bench", str(tmp_path / "bad.pt")], "bad.pt: edge_index must have shape"),
                        (["bench", "rmat:x:4"], "N must be a non-negative integer"),
                        (["bench", "rmat:100:2", "--backends", "nonexistent"], "unknown backend 'nonexistent'"),
                        (["bench", "rmat:100:2", "--width", "0"], "--width must be >= 1"),
                        (["bench", "rmat:100:2", "--model", "gat", "--width", "10", "--heads", "3"],
                         "width divisible by heads")]:
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv + FAST)
        assert exit_info.value.code == 2
        assert match in capsys.readouterr().err


# ---------------------------------------------------------------------- the run and its report
def test_bench_times_backends_and_peers_and_says_what_auto_picks(tmp_path, capsys, dgl):
    pytest.importorskip("torch_geometric")
    assert cli.main(["bench", "rmat:400:4", "--model", "gcn", "--width", "8", "--out", str(tmp_path)] + FAST) == 0
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / "rmat_400_4.json").read_text())
    assert (tmp_path / "rmat_400_4.png").stat().st_size > 1000
    assert [(c["op"], c["mode"]) for c in result["cases"]] == [("u_mul_e/sum", "fwd"), ("u_mul_e/sum", "fwd+bwd")]
    for case in result["cases"]:
        assert {"auto", "dgl", op_cases.PYG_SCATTER} <= set(case["timings"])
        assert case["auto_choice"] in case["timings"] or case["auto_choice"] in case["not_run"]
        assert case["errors"] == {}
        expected = unigraph.explain(load("rmat:400:4").graph, "u_mul_e", "sum", 8, grad=case["mode"] == "fwd+bwd")
        assert (case["auto_choice"], case["auto_reason"]) == (expected.backend, expected.reason)
        timings = case["timings"]
        assert case["fastest_unigraph"] == min((n for n in timings if n != "auto" and not n.startswith(("dgl", "pyg"))),
                                               key=lambda n: timings[n]["median_ms"])
        assert case["auto_regret"] == pytest.approx(timings["auto"]["median_ms"]
                                                    / timings[case["fastest_unigraph"]]["median_ms"], rel=1e-3)
    assert result["environment"]["command"].startswith("unigraph bench rmat:400:4")
    assert "why auto picks what it picks" in printed and "u_mul_e/sum: " + result["cases"][0]["auto_choice"] in printed


def test_floor_and_bandwidth_columns_when_bandwidth_is_measured(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench.bandwidth, "default_elements", lambda: 1 << 16)
    argv = ["rmat:300:4", "--ops", "copy_u/sum", "--modes", "fwd", "--peers", "--out", str(tmp_path)]
    assert bench.main(argv + [a for a in FAST if a != "--no-bandwidth"]) == 0
    case = json.loads((tmp_path / "rmat_300_4.json").read_text())["cases"][0]
    assert case["floor_ms"] > 0 and case["achieved_gbps"]["auto"] > 0
    assert "floor ms" in capsys.readouterr().out


def test_a_wrong_implementation_is_reported_not_ranked(tmp_path, capsys, monkeypatch):
    real = op_cases.peer_calls

    def with_a_wrong_peer(op, peers, t):
        return {**real(op, peers, t), "dgl (broken)": lambda: torch.zeros(peers.n_dst, t["x"].shape[1])}
    monkeypatch.setattr(op_cases, "peer_calls", with_a_wrong_peer)
    assert bench.main(["rmat:300:4", "--ops", "copy_u/sum", "--modes", "fwd", "--peers", "--out", str(tmp_path)]
                      + FAST) == 0
    case = json.loads((tmp_path / "rmat_300_4.json").read_text())["cases"][0]
    assert "dgl (broken)" not in case["timings"]
    assert case["errors"]["dgl (broken)"].startswith("WRONG RESULT")
    assert "WRONG" in capsys.readouterr().out


def test_without_matplotlib_the_json_is_written_and_the_reason_given(tmp_path, capsys, monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert bench.main(["uniform:200:3", "--ops", "copy_u/sum", "--modes", "fwd", "--peers", "--out", str(tmp_path),
                       "--progress", "text"] + FAST[:-2]) == 0
    captured = capsys.readouterr()
    assert (tmp_path / "uniform_200_3.json").exists() and not (tmp_path / "uniform_200_3.png").exists()
    assert "matplotlib is not installed" in captured.out
    assert "[bench 1/1] copy_u/sum fwd" in captured.err                # the plain progress fallback


def test_model_ops_are_the_ops_each_models_layer_calls(monkeypatch):
    """MODEL_OPS against the layers themselves: every op the layer sends through unigraph.ops."""
    called = set()
    spied = {"gspmm": lambda g, op, reduce, *a, **k: called.add(f"{op}/{reduce}"),
             "gsddmm": lambda g, op, *a, **k: called.add(f"u_{op}_v"),
             "edge_softmax": lambda *a, **k: called.add("edge_softmax"),
             "gat_attention": lambda *a, **k: called.add("gat")}
    for name, record in spied.items():
        real = getattr(unigraph.ops, name)
        monkeypatch.setattr(unigraph.ops, name, lambda *a, _real=real, _record=record, **k: (_record(*a, **k),
                                                                                           _real(*a, **k))[1])
    g = unigraph.Graph(EDGES, num_nodes=5)
    x = torch.randn(5, 8)
    layers = {"gcn": unigraph.GCNConv(8, 4), "sage": unigraph.SAGEConv(8, 4, aggr="mean"),
              "gat": unigraph.GATConv(8, 2, heads=2), "gin": unigraph.GINConv(torch.nn.Linear(8, 4))}
    for model, layer in layers.items():
        called.clear()
        layer(g, x).sum().backward()
        assert called == set(op_cases.MODEL_OPS[model]), model


@pytest.mark.dataset
def test_planetoid_spec_reads_the_real_graph_and_names_bad_specs(planetoid_root, tmp_path):
    cora = load(f"planetoid:cora:{planetoid_root}")
    assert (cora.name, cora.graph.num_src_nodes, cora.graph.num_edges) == ("cora", 2708, 10556)
    with pytest.raises(GraphSourceError, match="planetoid:NAME:ROOT"):
        load("planetoid:cora")
    with pytest.raises(GraphSourceError, match="unknown Planetoid dataset 'nope'"):
        load(f"planetoid:nope:{planetoid_root}")
    with pytest.raises(GraphSourceError, match="planetoid:cora:"):
        load(f"planetoid:cora:{tmp_path}")  # no files there
