"""The end-to-end benchmark at tiny sizes: every part reports every implementation (PyG in both
configurations, DGL), interleaved min/median/max, accuracy, the targets against each peer's best, and
the environment; the sparse-input and dense-input rows really take different paths; the peers' models
are the same models; results never replace the committed ones by accident."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from benchmarks import e2e, full_batch, mini_batch
from benchmarks.environment import RESULTS
from unigraph.data.arxiv_like import arxiv_like
from unigraph.nn import projection

HAS_TORCH_SPARSE = importlib.util.find_spec("torch_sparse") is not None
# PyG's SparseTensor row needs torch-sparse (CI without ../shared/wheels has none)
PEERS = {"dgl", "pyg (edge_index)"} | ({"pyg (SparseTensor)"} if HAS_TORCH_SPARSE else set())
PYG_SAMPLER = pytest.mark.skipif(not HAS_TORCH_SPARSE and importlib.util.find_spec("pyg_lib") is None,
                                 reason="PyG's NeighborLoader needs pyg-lib or torch-sparse, and neither is installed")


def _load(tmp_path, part):
    result = json.loads((tmp_path / f"e2e_{part}_cpu.json").read_text())
    return result, (tmp_path / f"e2e_{part}_cpu.md").read_text()


def _check_targets(group, ours):
    rows = {r["impl"]: r for r in group["rows"]}
    for t in group["targets"]:
        assert t["impl"] in ours
        family = "dgl" if t["peer"] == "dgl" else "pyg"
        fastest = min((r for name, r in rows.items() if name.startswith(family)), key=lambda r: r["median_ms"])
        assert t["peer"] == fastest["impl"]                                   # the peer at its best
        assert t["speedup"] == pytest.approx(fastest["median_ms"] / rows[t["impl"]]["median_ms"], rel=1e-3)
        assert t["speed_met"] == (t["speedup"] >= t["target"])


def test_arxiv_part_trains_every_library_interleaved(tmp_path, dgl):
    pytest.importorskip("torch_geometric")
    e2e.main(["--parts", "arxiv", "--arxiv-scale", "0.004", "--arxiv-models", "gcn", "--arxiv-degrees", "power_law",
              "--arxiv-epochs", "3", "--arxiv-warmup", "1", "--out", str(tmp_path)])
    result, markdown = _load(tmp_path, "arxiv")
    (group,) = result["groups"]
    reference = "unigraph:auto (torch dropout)"
    assert {r["impl"] for r in group["rows"]} == {"unigraph:auto", reference} | PEERS
    for r in group["rows"]:
        assert len(r["runs_ms"]) == 2 and r["min_ms"] <= r["median_ms"] <= r["max_ms"]
        assert 0 <= r["test_acc"] <= 1
    _check_targets(group, {"unigraph:auto", reference})
    assert {t["target"] for t in group["targets"]} == {1.5, 3.0}
    # the torch-dropout row is compared but never counted as a met or missed target
    assert {t["impl"] for t in group["targets"] if t["reference"]} == {reference}
    counted = [t for t in group["targets"] if not t["reference"]]
    assert ("All targets met" in markdown) == all(t["speed_met"] and t["accuracy_met"] for t in counted)
    env = result["environment"]
    assert env["threads"]["dgl"] == env["threads"]["torch_intra_op"] == 2
    assert env["loadavg_end"] and env["peak_memory_gb"] > 0 and result["bandwidth"]["threads"]
    assert "interleaved" in markdown and "STREAM-like" in markdown and "power_law" in markdown


def test_planetoid_part_has_sparse_and_dense_input_rows(tmp_path, planetoid_root):
    e2e.main(["--parts", "planetoid", "--datasets", "cora", "--planetoid-epochs", "2", "--planetoid-warmup", "1",
              "--planetoid-backends", "auto", "--no-peers", "--root", str(planetoid_root), "--out", str(tmp_path)])
    result, markdown = _load(tmp_path, "planetoid")
    impls = [r["impl"] for r in result["groups"][0]["rows"]]
    assert impls == ["unigraph:auto (sparse input projection)", "unigraph:auto (dense input)"]
    assert "(dense input)" in markdown and result["groups"][0]["targets"] == []   # no peers, no comparisons


def test_dense_input_switch_changes_the_path_and_is_checked(planetoid_root):
    from unigraph.data import Planetoid
    x = Planetoid(planetoid_root, "cora").x
    full_batch.check_input_paths_differ(x)
    probe = x.clone()
    with full_batch.dense_input():
        assert projection.sparse_if_mostly_zero(probe) is probe
        assert projection.sparse_if_mostly_zero(probe) is probe
    projection.sparse_if_mostly_zero(probe)                                   # first use after: dense
    assert projection.is_sparse(projection.sparse_if_mostly_zero(probe))     # restored afterwards
    with pytest.raises(RuntimeError, match="not mostly zero"):
        full_batch.check_input_paths_differ(torch.randn(50, 30))


@PYG_SAMPLER
def test_minibatch_part_sums_interleaved_batches_into_epochs(tmp_path, dgl):
    pytest.importorskip("torch_geometric")
    e2e.main(["--parts", "minibatch", "--mb-scale", "0.0006", "--mb-batch-size", "32", "--mb-epochs", "2",
              "--mb-batches", "2", "--mb-warmup-batches", "1", "--out", str(tmp_path)])
    result, markdown = _load(tmp_path, "minibatch")
    (group,) = result["groups"]
    assert {r["impl"] for r in group["rows"]} == {"unigraph"} | PEERS
    for r in group["rows"]:
        assert len(r["runs_ms"]) == 2                                         # 2 epochs
        assert r["min_ms"] >= 2 * r["batch_min_ms"] * 0.9999                  # each the sum of its 2 batches
    _check_targets(group, {"unigraph"})
    config = result["config"]
    assert config["batches_per_epoch"] == 2 and config["hops"] == [15, 10, 5]
    assert config["memory_estimate_bytes"]["peak"] > 0 and "sum of its batches" in markdown


def test_pipelines_take_epochs_of_equal_batches_in_turn():
    order = []
    pipes = [mini_batch.Pipeline(name, lambda: iter(range(3)), lambda b, n=name: order.append((n, b)), batches=3)
             for name in ("a", "b")]
    timed = mini_batch.run(pipes, epochs=2, warmup_batches=1)
    assert order[:2] == [("a", 0), ("b", 0)]                                 # the warm-up batch
    assert order[2:8] == [("a", 0), ("b", 0), ("b", 1), ("a", 1), ("a", 2), ("b", 2)]   # restarted, rotating
    assert all(len(t["epoch_ms"]["runs_ms"]) == 2 for t in timed.values())


def test_peer_models_are_the_same_models(dgl):
    pyg = pytest.importorskip("torch_geometric")
    ds = arxiv_like(300, 900, 12, 5, seed=0)
    for model in full_batch.MODELS:
        h = e2e.ARXIV[model]
        counts = {t.name: sum(p.numel() for p in t.model.parameters())
                  for t in [full_batch.unigraph_trainee(model, ds, h, "auto"), *full_batch.pyg_trainees(model, ds, h, pyg),
                            full_batch.dgl_trainee(model, ds, h, dgl)]}
        assert len(set(counts.values())) == 1, (model, counts)


def test_memory_estimate_grows_with_the_scale():
    small = mini_batch.memory_needed(mini_batch.Workload(scale=0.1), ["unigraph", "dgl", "pyg"])
    full = mini_batch.memory_needed(mini_batch.Workload(scale=1.0), ["unigraph", "dgl", "pyg"])
    edges = 2 * 61_859_140
    assert full["dgl: sampling structures"] == mini_batch.BYTES_PER_EDGE["dgl"] * edges
    assert full["dataset: features (float32)"] == 2_449_029 * 100 * 4
    assert 4 * small["peak"] < full["peak"] < 22 * 2**30                    # products size may fit 24 GiB
    # a step's working set follows the fanouts at full size, the graph at a small scale
    assert full["one training step"] == int(0.6 * 1024 * (1 + 15 + 150 + 750)) * (100 + 8 * 256) * 4
    assert small["one training step"] == int(0.9 * 244_903) * (100 + 8 * 256) * 4


def test_results_never_replace_committed_ones_by_accident(capsys):
    args = e2e.parse_args(["--parts", "arxiv"])
    assert args.out == RESULTS / "scratch"
    with pytest.raises(SystemExit):
        e2e.parse_args(["--quick", "--parts", "arxiv", "--out", str(RESULTS)])
    assert "may not replace the committed results" in capsys.readouterr().err


def test_allocator_benchmark_runs_each_setting_in_its_own_process(tmp_path, dgl):
    """benchmarks/allocator.py: one child per malloc setting, the environment really reaches the
    child (glibc reads it at start), every library in both tables."""
    pytest.importorskip("torch_geometric")
    from benchmarks import allocator
    seen = []
    real = allocator.run_setting

    def spy(extra, args, folder):
        seen.append(dict(extra))
        return real(extra, args, folder)

    allocator.run_setting = spy
    try:
        result = allocator.main(["--model", "gcn", "--epochs", "3", "--warmup", "1", "--scale", "0.004",
                                 "--out", str(tmp_path)])
    finally:
        allocator.run_setting = real
    assert seen == [{}, allocator.KEEP_FREED]
    names = list(result["runs"])
    rows = [{r["impl"] for r in result["runs"][n]["groups"][0]["rows"]} for n in names]
    assert rows[0] == rows[1] == {"unigraph:auto"} | PEERS
    # the children recorded the settings they started with: the environment reached glibc's reader
    recorded = [{k: v for k, v in result["runs"][n]["environment"]["allocator"].items() if k.startswith("MALLOC_")}
                for n in names]
    assert recorded == [{}, allocator.KEEP_FREED]
    text = (tmp_path / "allocator_cpu.md").read_text()
    assert all(name in text for name in names) and "default / kept" in text
    with pytest.raises(SystemExit):  # a --quick run never aims at the committed results
        allocator.main(["--quick", "--out", str(RESULTS)])
