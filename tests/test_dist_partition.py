"""Partition sets: what each part holds, the report, and refusing sets that do not match their metadata."""
from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest
import torch

from unigraph.cli import main
from unigraph.data.checked_file import read_checked, write_checked
from unigraph.data import planted_partition
from unigraph.distributed import format as fmt
from unigraph.distributed.local import LocalPartition
from unigraph.data import NodeDataset, rmat
from unigraph.distributed.balance import balance_of, rebalance
from unigraph.distributed.partition import assign_parts, format_report, partition_dataset, undirected_adjacency

METHODS = ["metis", "lp", "random"]


@pytest.fixture(scope="module")
def dataset():
    return planted_partition(600, num_features=8, train_per_class=30, num_val=100, num_test=200, seed=3)


@pytest.fixture(scope="module")
def part_set(dataset, tmp_path_factory):
    """A set written by the built-in partitioner (the format tests need no optional package)."""
    out = tmp_path_factory.mktemp("parts")
    return partition_dataset(dataset, 3, out, method="lp"), out


def _edit_metadata(directory, edit) -> None:
    """Rewrite ``partitions.json`` with ``edit`` applied, as a well-formed checked file (so what is
    refused is the content, not the checksum)."""
    path = directory / fmt.METADATA
    meta = json.loads(read_checked(path, fmt.FORMAT))
    edit(meta)
    write_checked(path, fmt.FORMAT, json.dumps(meta).encode())


@pytest.mark.parametrize("method", METHODS)
def test_each_part_holds_its_nodes_halo_csr_features_and_labels(dataset, tmp_path, method):
    if method == "metis":
        pytest.importorskip("pymetis", reason="the `partition` extra (pymetis) is not installed")
    info = partition_dataset(dataset, 3, tmp_path, method=method, seed=1)
    assert info.method["name"] == method
    assert fmt.read_metadata(tmp_path).set_id == info.set_id
    orig = torch.from_numpy(fmt.original_ids(info))
    assert torch.equal(torch.sort(orig).values, torch.arange(dataset.num_nodes))   # a permutation
    new_of_orig = torch.empty_like(orig)
    new_of_orig[orig] = torch.arange(orig.numel())
    # the original graph renumbered: its in-CSR rows are the parts' rows, in edge order
    ptr, src, eids = dataset.graph.in_csr()
    cut = 0
    for p in range(3):
        part = LocalPartition.load(tmp_path, p, eids=True)
        first, end = part.first, part.end
        owned = orig[first:end]
        assert torch.equal(part.orig_ids, owned)
        assert torch.equal(part.x, dataset.x[owned]) and torch.equal(part.y, dataset.y[owned])
        for name in ("train_mask", "val_mask", "test_mask"):
            assert torch.equal(getattr(part, name), getattr(dataset, name)[owned])
        assert torch.equal(part.out_degree, dataset.graph.out_degrees()[owned])
        for row, v in enumerate(owned.tolist()):
            lo, hi = int(part.indptr[row]), int(part.indptr[row + 1])
            assert torch.equal(part.indices[lo:hi].long(), new_of_orig[src[ptr[v]:ptr[v + 1]]])
            assert torch.equal(part.eids[lo:hi], eids[ptr[v]:ptr[v + 1]])
        owned_edges = int(part.indptr[part.num_owned])
        sources = part.indices[:owned_edges].long()
        remote = (sources < first) | (sources >= end)
        assert torch.equal(part.halo_ids, torch.unique(sources[remote]))
        assert torch.equal(part.halo_out_degree, dataset.graph.out_degrees()[orig[part.halo_ids]])
        for row, v in enumerate(orig[part.halo_ids].tolist(), start=part.num_owned):   # the halo's own in-edges
            lo, hi = int(part.indptr[row]), int(part.indptr[row + 1])
            assert torch.equal(part.indices[lo:hi].long(), new_of_orig[src[ptr[v]:ptr[v + 1]]])
            assert torch.equal(part.eids[lo:hi], eids[ptr[v]:ptr[v + 1]])
        cut += int(remote.sum())
        entry = info.parts[p]
        assert (entry["nodes"], entry["edges"], entry["halo"], entry["train"], entry["halo_edges"]) == (
            end - first, sources.numel(), part.halo_ids.numel(), int(part.train_mask.sum()),
            part.indices.numel() - owned_edges)
    # the report, recomputed from the assignment: edges whose endpoints lie in different parts
    part_of = torch.from_numpy(np.searchsorted(info.offsets[1:], new_of_orig.numpy(), side="right"))
    assert cut == info.report["edge_cut"] == int((part_of[dataset.graph.src] != part_of[dataset.graph.dst]).sum())
    sizes = [e["nodes"] for e in info.parts]
    assert info.report["balance"]["nodes"] == pytest.approx(max(sizes) / (sum(sizes) / 3))


def test_metis_cuts_far_fewer_edges_than_random_and_balances_three_constraints(dataset, tmp_path):
    pytest.importorskip("pymetis", reason="the `partition` extra (pymetis) is not installed")
    metis = partition_dataset(dataset, 4, tmp_path / "m", method="metis").report
    random = partition_dataset(dataset, 4, tmp_path / "r", method="random").report
    assert metis["edge_cut_fraction"] < 0.6 * random["edge_cut_fraction"]
    assert random["edge_cut_fraction"] > 0.6                                   # (P-1)/P = 0.75 expected
    assert metis["balanced"] and metis["tolerance"] == 1.03
    for what in ("nodes", "edges", "train"):
        assert metis["balance"][what] <= 1.03, (what, metis["balance"])


def rmat_dataset(nodes: int, edges: int) -> NodeDataset:
    graph = rmat(nodes, edges, seed=0)
    generator = torch.Generator().manual_seed(0)
    return NodeDataset(name="rmat", graph=graph, x=torch.randn(nodes, 4, generator=generator),
                       y=torch.randint(0, 3, (nodes,), generator=generator),
                       train_mask=torch.rand(nodes, generator=generator) < 0.1,
                       val_mask=torch.zeros(nodes, dtype=torch.bool), test_mask=torch.zeros(nodes, dtype=torch.bool))


def test_metis_balances_the_edges_of_a_power_law_graph(tmp_path):
    """On R-MAT METIS's own multi-constraint partitioning left a part with 2.5x the mean in-edges
    (module docstring of unigraph.distributed.balance); after the moves, every count is within 3%."""
    pytest.importorskip("pymetis", reason="the `partition` extra (pymetis) is not installed")
    dataset = rmat_dataset(4000, 60000)
    assert int(dataset.graph.in_degrees().max()) > 20 * 15                   # hubs: 20x the mean degree and more
    info = partition_dataset(dataset, 4, tmp_path, method="metis")
    report = info.report
    assert report["balanced"], report["balance"]
    edges = [e["edges"] for e in info.parts]
    assert max(edges) <= 1.03 * sum(edges) / 4 and sum(edges) == dataset.graph.num_edges
    assert "NOT WITHIN" not in format_report(info)


def test_rebalancing_moves_nodes_until_every_count_is_within_the_tolerance():
    rng = np.random.default_rng(0)
    in_degree = rng.zipf(1.8, 3000).clip(max=400)
    train = rng.random(3000) < 0.2
    part = np.zeros(3000, dtype=np.int64)                                     # everything in part 0
    part[:300] = 1
    moved = rebalance(part, 3, in_degree=in_degree, train=train, neighbours=in_degree, tolerance=1.05)
    assert moved["balanced"] and sum(moved["moves"].values()) > 0
    for weight in (in_degree, train.astype(np.int64), np.ones(3000, dtype=np.int64)):
        assert balance_of(part, weight, 3) <= 1.05
    with pytest.raises(ValueError, match="tolerance must be >= 1.0"):
        rebalance(part, 3, in_degree=in_degree, train=train, neighbours=in_degree, tolerance=0.9)


def test_undirected_adjacency_is_symmetric_simple_and_sorted():
    src, dst = np.array([0, 1, 1, 2, 2, 3]), np.array([1, 0, 2, 2, 1, 0])   # duplicates, a self-loop
    xadj, adjncy = undirected_adjacency(src, dst, 4)
    rows = [sorted(adjncy[xadj[v]:xadj[v + 1]].tolist()) for v in range(4)]
    assert rows == [[1, 3], [0, 2], [1], [0]]


def test_missing_pymetis_says_how_to_install_it(dataset, monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)   # import pymetis now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'unigraph\[partition\]'.*or partition without it: --method lp"):
        assign_parts(dataset, 2, "metis")


@pytest.mark.parametrize("method, parts, message", [("kmeans", 2, "method must be one of"),
                                                    ("random", 0, "num_parts must be an int in 1..600"),
                                                    ("random", 601, "num_parts must be an int in 1..600")])
def test_bad_arguments(dataset, method, parts, message):
    with pytest.raises(ValueError, match=message):
        assign_parts(dataset, parts, method)


# ---------------------------------------------------------------------- refusing what does not match
def _copy(part_set, tmp_path):
    info, out = part_set
    target = tmp_path / "copy"
    shutil.copytree(out, target)
    return target


def test_round_trip_of_a_copied_set(part_set, tmp_path):
    copy = _copy(part_set, tmp_path)
    info = fmt.read_metadata(copy)
    arrays = fmt.load_part_arrays(info, 2)
    original = np.load(part_set[1] / "part-2.npz", allow_pickle=False)
    assert set(arrays) == set(fmt.ALL_ARRAYS) - {"set_id", "part_id"}
    for name, array in arrays.items():
        assert np.array_equal(array, original[name]) and array.dtype == original[name].dtype


def test_corrupted_bytes_are_refused(part_set, tmp_path):
    copy = _copy(part_set, tmp_path)
    path = copy / "part-1.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF                                 # one flipped byte inside an array
    path.write_bytes(bytes(data))
    with pytest.raises(fmt.PartitionFormatError, match="part-1.npz: does not match partitions.json .its SHA-256 differs"):
        LocalPartition.load(copy, 1)
    LocalPartition.load(copy, 0)                                 # the other parts still load


def test_a_missing_part_is_refused(part_set, tmp_path):
    copy = _copy(part_set, tmp_path)
    (copy / "part-2.npz").unlink()
    with pytest.raises(FileNotFoundError, match="part-2.npz is missing"):
        LocalPartition.load(copy, 2)


def test_a_part_of_another_set_is_refused_and_named(dataset, part_set, tmp_path):
    other = partition_dataset(dataset, 3, tmp_path / "other", method="metis", seed=5)
    copy = _copy(part_set, tmp_path)
    shutil.copy(tmp_path / "other" / "part-1.npz", copy / "part-1.npz")
    with pytest.raises(fmt.PartitionFormatError, match=f"identifies itself as set {other.set_id}, part 1"):
        LocalPartition.load(copy, 1)
    # even with its checksum copied over, the embedded set id gives it away
    _edit_metadata(copy, lambda m: m["parts"][1].update(sha256=other.parts[1]["sha256"], bytes=other.parts[1]["bytes"]))
    with pytest.raises(fmt.PartitionFormatError, match=f"belongs to set {other.set_id}, part 1"):
        LocalPartition.load(copy, 1)


@pytest.mark.parametrize("name, bad, message", [
    ("indices", 607, r"array 'indices' holds values in .*outside 0\.\.599"),            # a source outside the graph
    ("halo_indices", 607, r"array 'halo_indices' holds values in .*outside 0\.\.599"),  # streamed in chunks
    ("x", float("nan"), "array 'x' holds non-finite features"),
    ("halo_ids", -1, r"array 'halo_ids' holds values in -1\.\."),
])
def test_arrays_that_contradict_the_metadata_are_refused(part_set, tmp_path, name, bad, message):
    """Whether a part is read whole or streamed into a machine's (shared) memory: the same checks."""
    copy = _copy(part_set, tmp_path)
    info = fmt.read_metadata(copy)
    arrays = fmt.load_part_arrays(info, 0)
    arrays[name] = arrays[name].copy()
    arrays[name].reshape(-1)[0] = bad
    entry = fmt.write_part(copy, info.set_id, 0, arrays)          # a well-formed file with a valid checksum
    info.parts[0].update(sha256=entry["sha256"], bytes=entry["bytes"])
    fmt.write_metadata(info)
    with pytest.raises(fmt.PartitionFormatError, match=message):
        LocalPartition.load(copy, 0)
    with pytest.raises(fmt.PartitionFormatError, match=message):
        fmt.load_part_arrays(fmt.read_metadata(copy), 0)


def test_a_fortran_ordered_array_is_not_streamed_transposed(part_set, tmp_path):
    copy = _copy(part_set, tmp_path)
    info = fmt.read_metadata(copy)
    arrays = fmt.load_part_arrays(info, 0)
    arrays["x"] = np.asfortranarray(arrays["x"])                  # the same values, stored column by column
    entry = fmt.write_part(copy, info.set_id, 0, arrays)
    info.parts[0].update(sha256=entry["sha256"], bytes=entry["bytes"])
    fmt.write_metadata(info)
    with pytest.raises(fmt.PartitionFormatError, match="stored in Fortran order"):
        LocalPartition.load(copy, 0)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(version=99), "format version 99"),
    (lambda m: m.update(num_nodes=5), "offsets end at 600, num_nodes=5"),
    (lambda m: m["parts"][0].update(nodes=1), "part 0 lists 1 nodes"),
    (lambda m: m["parts"].pop(), "num_parts=3 but 2 part entries"),
    (lambda m: m.pop("format"), "no 'unigraph.partitions' format tag"),
])
def test_metadata_that_does_not_add_up_is_refused(part_set, tmp_path, edit, message):
    copy = _copy(part_set, tmp_path)
    _edit_metadata(copy, edit)
    with pytest.raises(fmt.PartitionFormatError, match=message):
        fmt.read_metadata(copy)


def test_a_truncated_part_is_refused(part_set, tmp_path):
    copy = _copy(part_set, tmp_path)
    path = copy / "part-0.npz"
    path.write_bytes(path.read_bytes()[:-100])                   # a write cut short (the zip index is lost)
    with pytest.raises(fmt.PartitionFormatError, match=r"part-0.npz: does not match partitions.json \(it holds \d+ bytes"):
        LocalPartition.load(copy, 0)


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-10], "is truncated"),
    (lambda b: b[:-40] + bytes([b[-40] ^ 0x01]) + b[-39:], "is corrupted: its checksum does not match"),
    (lambda b: b[b.index(b"\n{") + 1:], "no checksum header"),   # plain JSON, e.g. edited by hand
])
def test_damaged_metadata_is_refused(part_set, tmp_path, damage, message):
    copy = _copy(part_set, tmp_path)
    path = copy / fmt.METADATA
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(fmt.PartitionFormatError, match=message):
        fmt.read_metadata(copy)


def test_an_interrupted_write_leaves_a_set_that_is_refused(part_set, tmp_path):
    copy = _copy(part_set, tmp_path)
    write_checked(copy / fmt.METADATA, fmt.FORMAT, b'{"format": "unigraph.partitions", "vers')  # a writer's bad JSON
    with pytest.raises(fmt.PartitionFormatError, match="is not valid JSON"):
        fmt.read_metadata(copy)
    fmt.begin_write(copy)                                         # a new write starts by removing the metadata
    with pytest.raises(fmt.PartitionFormatError, match="holds no partitions.json"):
        fmt.read_metadata(copy)


def test_partition_command(tmp_path, capsys):
    assert main(["partition", "--parts", "2", "--out", str(tmp_path), "--nodes", "300", "--method", "random"]) == 0
    out = capsys.readouterr().out
    assert "method: random" in out and "edge cut:" in out and "halo/nodes" in out
    assert fmt.read_metadata(tmp_path).num_parts == 2
    with pytest.raises(SystemExit):
        main(["partition", "--parts", "0", "--out", str(tmp_path / "x"), "--nodes", "300", "--method", "random"])
    assert "num_parts must be an int in 1..300" in capsys.readouterr().err
