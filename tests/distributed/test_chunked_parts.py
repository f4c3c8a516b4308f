"""Partition sets in the chunked layout: the streaming pipeline writes what the in-memory partitioner
writes for the same assignment (the halo's in-edges included), a machine holding one part maps its
node arrays, parts serve the distributed sampler exactly (two hops without a request), and damaged or mixed-up parts are refused naming the file."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from test_dist_sampler import PARTS, World, assert_same_blocks
from unigraph.data import planted_partition
from unigraph.distributed import format as fmt
from unigraph.distributed import reservation
from unigraph.distributed.layout import JobLayout
from unigraph.distributed.local import LocalPartition
from unigraph.distributed.partition import partition_dataset
from unigraph.distributed.sampler import DistNeighborSampler
from unigraph.distributed.server import GraphServer
from unigraph.distributed.store import DistFeatureStore
from unigraph.distributed.streaming import partition_chunked
from unigraph.sampling import NeighborSampler
from unigraph.storage.convert import write_dataset


@pytest.fixture(scope="module")
def dataset():
    return planted_partition(1200, num_features=6, avg_degree=12, train_per_class=40, num_val=100, num_test=200, seed=7)


@pytest.fixture(scope="module")
def chunked(dataset, tmp_path_factory):
    return write_dataset(dataset, tmp_path_factory.mktemp("graph"), chunk_bytes=2048)


def _same_sets(a: fmt.PartitionSetInfo, b: fmt.PartitionSetInfo) -> None:
    assert a.offsets == b.offsets and a.report["edge_cut"] == b.report["edge_cut"]
    for part in range(a.num_parts):
        left, right = fmt.load_part_arrays(a, part), fmt.load_part_arrays(b, part)
        assert sorted(left) == sorted(right)
        for name in left:
            np.testing.assert_array_equal(left[name], right[name], err_msg=f"part {part} {name}")


def test_streaming_writer_equals_the_in_memory_partitioner(dataset, chunked, tmp_path):
    """Same assignment (random, seed 2), so the relabel/shuffle pass must give identical parts;
    blocks of 128 rows, far smaller than a part."""
    reference = partition_dataset(dataset, PARTS, tmp_path / "npz", method="random", seed=2)
    streamed = partition_chunked(chunked, PARTS, tmp_path / "chunked", method="random", seed=2, chunk_bytes=3072)
    assert streamed.layout == "chunked" and fmt.read_metadata(tmp_path / "chunked").layout == "chunked"
    _same_sets(reference, fmt.read_metadata(tmp_path / "chunked"))
    assert streamed.report["balance"] == reference.report["balance"]
    same_layout = partition_dataset(dataset, PARTS, tmp_path / "mem-chunked", method="random", seed=2, layout="chunked")
    _same_sets(reference, same_layout)


def mapped_file(tensor: torch.Tensor) -> str | None:
    """The file whose mapping holds ``tensor``'s data (from /proc/self/maps), or None."""
    address = tensor.data_ptr()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            low, high = (int(v, 16) for v in fields[0].split("-"))
            if low <= address < high:
                return fields[5] if len(fields) > 5 else None
    return None


def test_ldg_parts_serve_the_sampler_exactly(dataset, chunked, tmp_path, monkeypatch):
    """A machine holding one chunked part maps its node arrays (the file's pages, not a copy) and
    copies the structure merged with the halo's in-edges the streaming pass wrote; a machine with
    two parts copies everything; a copy this machine's memory cannot hold is refused first."""
    info = partition_chunked(chunked, PARTS, tmp_path, method="ldg", block_nodes=100)
    assert info.method["name"] == "ldg" and info.method["peak_rss_anon_bytes"] > 0
    assert sum(entry["halo_edges"] for entry in info.parts) > 0
    part = LocalPartition.load(tmp_path, 1, eids=True)
    for name in ("x", "y", "orig_ids", "train_mask"):
        assert mapped_file(getattr(part, name)) == str(tmp_path / "part-1" / f"{name}.bin"), name
    assert mapped_file(part.indptr) != str(tmp_path / "part-1" / "in_indptr.bin")
    arrays = fmt.load_part_arrays(info, 1)
    np.testing.assert_array_equal(part.eids.numpy(), np.concatenate([arrays["eids"], arrays["halo_eids"]]))
    two = GraphServer.load(tmp_path, JobLayout(PARTS, 2), 0, shared=False).local
    assert two.parts == [0, 1] and "part-" not in str(mapped_file(two.x))
    np.testing.assert_array_equal(two.x[part.first - two.first:].numpy(), part.x.numpy())
    monkeypatch.setattr(reservation, "available_bytes", lambda: 1024)   # MemAvailable: 1 KiB
    with pytest.raises(ValueError, match="machine 1's chunked parts: .* needed in memory.* copies its machine's parts into shared"):
        LocalPartition.load(tmp_path, 1)
    monkeypatch.undo()
    world = World(tmp_path, dataset)
    seeds = torch.tensor([3, 400, 401, 900, 1199])
    owned = torch.arange(world.info.offsets[0], world.info.offsets[1], 37)
    for replace in (False, True):
        sampler = DistNeighborSampler([4, 3], replace=replace)
        reference = NeighborSampler([4, 3], replace=replace, return_eids=False).sample(world.graph, seeds, key=11)
        assert_same_blocks(sampler.sample(world.dist_graph(0), seeds, key=11), reference)
        local_ref = NeighborSampler([4, 3], replace=replace, return_eids=False).sample(world.graph, owned, key=11)
        before = world.peers.traffic()["requests"]
        assert_same_blocks(sampler.sample(world.dist_graph(0), owned, key=11), local_ref)
        assert world.peers.traffic()["requests"] == before   # two hops of owned seeds: the halo's in-edges
    store = DistFeatureStore(world.dist_graph(2))
    ids = torch.arange(0, 1200, 7)
    assert torch.equal(store.gather(ids), world.x[ids])


def _corrupt(path, offset=0):
    with open(path, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)
        file.seek(offset)
        file.write(bytes([byte[0] ^ 1]))


def test_damaged_and_mixed_up_parts_are_refused(chunked, tmp_path):
    a = partition_chunked(chunked, 2, tmp_path / "a", method="ldg")
    partition_chunked(chunked, 2, tmp_path / "b", method="fennel", imbalance=0.2)
    _corrupt(tmp_path / "a" / "part-0" / "x.bin", 40)
    with pytest.raises(fmt.PartitionFormatError, match=r"x.bin: chunk 0 .* does not match its SHA-256"):
        LocalPartition.load(tmp_path / "a", 0)
    shutil.rmtree(tmp_path / "a" / "part-1")
    shutil.copytree(tmp_path / "b" / "part-1", tmp_path / "a" / "part-1")
    with pytest.raises(fmt.PartitionFormatError, match=f"identifies itself as set {fmt.read_metadata(tmp_path / 'b').set_id}"):
        fmt.load_part_arrays(a, 1, names=())
    shutil.rmtree(tmp_path / "a" / "part-1")
    with pytest.raises(FileNotFoundError, match="part-1 is missing"):
        fmt.load_part_arrays(a, 1)


def test_halo_order_is_checked(chunked, tmp_path):
    """A part whose manifest and checksums are consistent (rewritten) but whose halo is unsorted."""
    from unigraph.storage.chunked import ChunkedGraph, ChunkedWriter
    from unigraph.data.checked_file import sha256_file
    info = partition_chunked(chunked, 2, tmp_path, method="ldg")
    directory = tmp_path / "part-0"
    graph = ChunkedGraph(directory)
    halo = graph.load("halo_ids")[::-1].copy()
    writer = ChunkedWriter.extend(graph)
    writer.entries.pop("halo_ids")
    writer.add("halo_ids", halo)
    writer.finish()
    info.parts[0]["sha256"] = sha256_file(directory / "graph.json")
    fmt.write_metadata(info)
    with pytest.raises(fmt.PartitionFormatError, match="halo_ids must be sorted"):
        LocalPartition.load(tmp_path, 0)


def test_parts_without_edge_ids(chunked, tmp_path):
    info = partition_chunked(chunked, 2, tmp_path, method="fennel", eids=False)
    assert LocalPartition.load(tmp_path, 0).eids is None
    with pytest.raises(fmt.PartitionFormatError, match="written without edge ids"):
        fmt.load_part_arrays(info, 0, names=("eids",))
