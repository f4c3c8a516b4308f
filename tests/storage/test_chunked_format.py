"""The chunked on-disk format: round trips across chunk boundaries, copy-on-write mapping, and every
refusal (interrupted writes, truncated files, corrupted chunks, out-of-range values, edited manifests)
naming the file before anything is mapped or allocated."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from unigraph.data.checked_file import write_checked
from unigraph.data.errors import DataFileError
from unigraph.storage.chunked import FORMAT, MANIFEST, ChunkedFormatError, ChunkedGraph, ChunkedWriter
from unigraph.storage.mapped import map_array, memory_status


def _graph(directory, *, n=50, f=3, chunk_bytes=64, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {"x": rng.standard_normal((n, f)).astype(np.float32), "y": rng.integers(0, 3, n),
              "train_mask": rng.random(n) < 0.5, "in_indptr": np.arange(n + 1, dtype=np.int64) * 2,
              "in_indices": rng.integers(0, n, 2 * n)}
    with ChunkedWriter(directory, name="g", num_nodes=n, num_edges=2 * n, chunk_bytes=chunk_bytes) as writer:
        for name, array in arrays.items():
            out = writer.array(name, array.dtype, array.shape)
            for piece in np.array_split(array, 7):       # blocks that straddle chunk boundaries
                out.append(piece)
        writer.finish(num_classes=3, meta={"note": "test"})
    return arrays


def test_round_trip_chunks_checksums_and_mapping(tmp_path):
    arrays = _graph(tmp_path)
    graph = ChunkedGraph(tmp_path)
    assert graph.num_nodes == 50 and graph.num_edges == 100 and graph.num_classes == 3 and graph.meta == {"note": "test"}
    entry = graph.manifest["arrays"]["x"]
    assert entry["chunk_rows"] == 5 and len(entry["chunks"]) == 10 and entry["dtype"] == "<f4"
    for name, array in arrays.items():
        np.testing.assert_array_equal(graph.array(name), array)
        np.testing.assert_array_equal(graph.load(name), array)
        firsts = [first for first, _ in graph.chunks(name)]
        assert firsts == list(range(0, len(array), graph.manifest["arrays"][name]["chunk_rows"]))
    # raw little-endian files that numpy.memmap reads with the manifest's dtype and shape alone
    raw = np.memmap(tmp_path / "x.bin", dtype="<f4", mode="r", shape=(50, 3))
    np.testing.assert_array_equal(raw, arrays["x"])
    assert sorted(os.listdir(tmp_path)) == sorted([MANIFEST] + [f"{n}.bin" for n in arrays])  # no temporaries left


def test_mapping_is_copy_on_write_and_shares_the_page_cache(tmp_path):
    _graph(tmp_path, n=4096, f=64, chunk_bytes=1 << 16)
    graph = ChunkedGraph(tmp_path)
    x = graph.tensor("x")
    assert x.data_ptr() == graph.array("x").ctypes.data          # the tensor is the mapping, not a copy
    before = open(tmp_path / "x.bin", "rb").read()
    x[0, 0] = 1e6                                                 # a write stays in this process
    assert open(tmp_path / "x.bin", "rb").read() == before
    if memory_status():  # Linux: reading the mapped features adds file pages, not private memory
        fresh = ChunkedGraph(tmp_path, verify=False)
        anon = memory_status()["RssAnon"]
        float(fresh.tensor("x").sum())
        assert memory_status()["RssAnon"] - anon < 512 << 10


def test_interrupted_write_leaves_a_refused_directory_and_no_temporaries(tmp_path):
    _graph(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        with ChunkedWriter(tmp_path, name="g", num_nodes=50, num_edges=100) as writer:
            writer.array("x", np.float32, (50, 3)).append(np.zeros((10, 3), np.float32))
            raise RuntimeError("boom")
    with pytest.raises(ChunkedFormatError, match="holds no graph.json"):
        ChunkedGraph(tmp_path)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_writer_refuses_wrong_rows_dtypes_and_counts(tmp_path):
    with ChunkedWriter(tmp_path, name="g", num_nodes=4, num_edges=2) as writer:
        out = writer.array("src", np.int32, (2,))
        with pytest.raises(TypeError, match="does not convert"):
            out.append(np.array([0.5, 1.0]))
        with pytest.raises(TypeError, match="does not convert"):
            out.append(np.array([2 ** 40, 1]))
        with pytest.raises(ValueError, match="has 2 rows; 3 were written"):
            out.append(np.array([0, 1, 2]))
        out.append(np.array([0, 1], dtype=np.int64))              # int64 values that fit an int32: cast
        writer.close_array("src")
        writer.add("y", np.zeros(3, dtype=np.int64))
        with pytest.raises(ValueError, match="'y' has 3 rows, the graph's nodes give 4"):
            writer.finish()


@pytest.mark.parametrize("breakage, message", [
    (lambda d: open(d / "x.bin", "r+b").truncate(100), "holds 100 bytes; array 'x'"),
    (lambda d: os.remove(d / "y.bin"), "is missing"),
    (lambda d: _poke(d / "x.bin", 13), "chunk 0 .* does not match its SHA-256"),
    (lambda d: _poke(d / MANIFEST, -5), "checksum does not match"),
    (lambda d: _edit(d, lambda m: m["arrays"]["x"].update(shape=[40, 3], chunks=m["arrays"]["x"]["chunks"][:8])),
     "'x' has 40 rows, the graph's nodes give 50"),
    (lambda d: _edit(d, lambda m: m.update(num_classes=51)), "num_classes=51 is more than the 50 nodes"),
    (lambda d: _edit(d, lambda m: m["arrays"]["y"].update(dtype="|O")), "not a raw dtype"),
    (lambda d: _edit(d, lambda m: m["arrays"]["x"]["chunks"].pop()), "need 10 SHA-256 entries"),
    (lambda d: _edit(d, lambda m: m["arrays"]["x"].update(file="../y.bin")), "must be stored in x.bin"),
])
def test_damaged_directories_are_refused_naming_the_file(tmp_path, breakage, message):
    _graph(tmp_path)
    breakage(tmp_path)
    with pytest.raises((ChunkedFormatError, DataFileError), match=message) as info:
        ChunkedGraph(tmp_path).array("x")
    assert str(tmp_path) in str(info.value)


def _poke(path, offset):
    with open(path, "r+b") as file:
        file.seek(offset, os.SEEK_END if offset < 0 else os.SEEK_SET)
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 0x55]))


def _edit(directory, change):
    """A hand-edited manifest that is still a valid checked file (the checksum recomputed)."""
    from unigraph.data.checked_file import read_checked
    manifest = json.loads(read_checked(directory / MANIFEST, FORMAT))
    change(manifest)
    write_checked(directory / MANIFEST, FORMAT, json.dumps(manifest).encode())


@pytest.mark.parametrize("name, values, message", [
    ("in_indices", lambda a: a.__setitem__(7, 50), "'in_indices' holds values .*50 in rows 0..7, outside 0..49"),
    ("in_indices", lambda a: a.__setitem__(7, -1), "outside 0..49"),
    ("in_indptr", lambda a: a.__setitem__(20, 0), "decreases"),
    ("in_indptr", lambda a: a.__setitem__(50, 99), "ends at 99; the graph has 100 edges"),
    ("y", lambda a: a.__setitem__(3, 3), "'y' holds values 0..3"),
    ("train_mask", lambda a: a.view(np.uint8).__setitem__(3, 2), "'train_mask' holds values 0..2"),
])
def test_out_of_range_values_are_refused_even_without_checksums(tmp_path, name, values, message):
    """The ranges that keep samplers in bounds are checked whatever ``verify`` says (the checksum
    would catch these edits too; here the file is rewritten with a matching checksum)."""
    _graph(tmp_path)
    graph = ChunkedGraph(tmp_path)
    array = graph.load(name)
    values(array)
    _rewrite(tmp_path, name, array)
    for verify in (True, False):
        with pytest.raises(ChunkedFormatError, match=message):
            ChunkedGraph(tmp_path, verify=verify).array(name)


def test_non_finite_features_are_refused_when_verifying(tmp_path):
    _graph(tmp_path)
    x = ChunkedGraph(tmp_path).load("x")
    x[9, 1] = np.nan
    _rewrite(tmp_path, "x", x)
    with pytest.raises(ChunkedFormatError, match="non-finite values .* rows 5..9"):
        ChunkedGraph(tmp_path).array("x")
    assert np.isnan(ChunkedGraph(tmp_path, verify=False).array("x")[9, 1])   # the documented cost of verify=False


def _rewrite(directory, name, array):
    graph = ChunkedGraph(directory, verify=False)
    writer = ChunkedWriter.extend(graph)
    writer.entries.pop(name)
    os.remove(directory / f"{name}.bin")
    writer.add(name, array)
    writer.finish()


def test_only_regular_files_are_mapped(tmp_path):
    _graph(tmp_path)
    os.remove(tmp_path / "y.bin")
    os.mkfifo(tmp_path / "y.bin")
    with pytest.raises(DataFileError, match="fifo"):
        ChunkedGraph(tmp_path)
    with pytest.raises(DataFileError, match="holds 408 bytes, but \\[51, 2\\] values of int64 need 816"):
        map_array(tmp_path / "in_indptr.bin", np.int64, (51, 2))


def test_extend_keeps_the_old_manifest_valid_until_the_new_one(tmp_path):
    _graph(tmp_path)
    graph = ChunkedGraph(tmp_path)
    writer = ChunkedWriter.extend(graph)
    writer.array("out_degree", np.int64, (50,)).append(np.zeros(10, np.int64))
    assert ChunkedGraph(tmp_path).names() == graph.names()        # still readable while it is written
    writer.abort()
    with ChunkedWriter.extend(graph) as writer:
        writer.add("out_degree", np.full(50, 2, dtype=np.int64))
        writer.finish()
    assert ChunkedGraph(tmp_path).load("out_degree").sum() == 100
    assert torch.equal(ChunkedGraph(tmp_path).tensor("y"), torch.from_numpy(graph.load("y")))
