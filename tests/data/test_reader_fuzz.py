"""Every reader of issue 28 under random damage: byte mutations of real files (bit flips, bytes set
to 0x00/0xff, 8-byte words set to huge sizes, truncation, deleted or repeated runs) either load or
raise the reader's own error naming the file; nothing else escapes (no KeyError, UnicodeDecodeError,
RecursionError, MemoryError ...), nothing hangs, nothing allocates beyond the file's allowance.

Checked files (datasets, checkpoints, partition metadata) are fuzzed *inside* the checksum (the
payload is mutated and the checksum recomputed, as anyone can), so the content checks are what is
tested. The default run tries a few examples per reader (``UNIGRAPH_READER_FUZZ_EXAMPLES``, default
8; one DGL file, read in a child process); ``pytest -m slow`` runs 300 per reader (DGL 30).
"""
from __future__ import annotations

import functools
import gzip
import io
import json
import os
import shutil

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from unigraph.backends import autotune
from unigraph.benchmarking.graph_source import GraphSourceError, load
from unigraph.data import DataFormatError, load_dataset, planted_partition, read_ogb_node, save_dataset
from unigraph.data.checked_file import read_checked, write_checked, sha256_file
from unigraph.data.errors import DataFileError
from unigraph.distributed import format as fmt
from unigraph.distributed.local import LocalPartition
from unigraph.distributed.partition import partition_dataset
from unigraph.train import TrainConfig, Trainer, build_node_classifier, load_checkpoint, seed_everything
from unigraph.train import checkpoint as ckpt
from unigraph.train.trainer import make_optimizer

DEFAULT = int(os.environ.get("UNIGRAPH_READER_FUZZ_EXAMPLES", "8"))
SLOW = 300
EDGES = torch.tensor([[0, 1, 2, 2, 3, 4, 5, 6], [1, 2, 0, 3, 4, 0, 6, 5]])

# one mutation: (what, where in [0, 1), a byte, a length)
MUTATION = st.tuples(st.sampled_from(["flip", "zero", "ff", "byte", "huge", "truncate", "delete", "repeat"]),
                     st.floats(0, 1, exclude_max=True), st.integers(0, 255), st.integers(1, 64))
MUTATIONS = st.lists(MUTATION, min_size=1, max_size=4)


def mutate(data: bytes, mutations) -> bytes:
    data = bytearray(data)
    for what, where, byte, length in mutations:
        if not data:
            break
        at = int(where * len(data))
        if what == "flip":
            data[at] ^= 1 << (byte % 8)
        elif what in ("zero", "ff", "byte"):
            data[at] = {"zero": 0, "ff": 255, "byte": byte}[what]
        elif what == "huge":   # a size field becoming enormous
            data[at:at + 8] = (2 ** (31 + byte % 33) - 1).to_bytes(8, "little")
        elif what == "truncate":
            del data[at:]
        elif what == "delete":
            del data[at:at + length]
        else:
            data[at:at] = data[at:at + length]
    return bytes(data)


def fuzz(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def both(body, *, dgl: bool = False, **strategies):
    """``body`` as a hypothesis test with the default budget, and a slow twin with the long one."""
    def make(examples: int):
        @functools.wraps(body)
        def test(*args, **kwargs):
            return body(*args, **kwargs)
        return fuzz(examples)(given(**strategies)(test))
    return make(1 if dgl else DEFAULT), pytest.mark.slow(make(30 if dgl else SLOW))


def _starts_with(err: BaseException, path) -> None:
    assert str(err).startswith(str(path)), f"{type(err).__name__}: {err}"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


# ---------------------------------------------------------------------------------------------- unigraph bench
def _bench_sources() -> dict[str, bytes]:
    from torch_geometric.data import Data
    import scipy.sparse as sp
    out = {}
    for name, obj in (("dict.pt", {"edge_index": EDGES, "num_nodes": 7}), ("tensor.pt", EDGES),
                      ("data.pt", Data(edge_index=EDGES, num_nodes=7, x=torch.randn(7, 2)))):
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        out[name] = buffer.getvalue()
    buffer = io.BytesIO()
    np.savez(buffer, edge_index=EDGES.numpy(), num_nodes=np.int64(7))
    out["edges.npz"] = buffer.getvalue()
    buffer = io.BytesIO()
    sp.save_npz(buffer, sp.coo_matrix((np.ones(8), (EDGES[0].numpy(), EDGES[1].numpy())), shape=(7, 7)).tocsr())
    out["scipy.npz"] = buffer.getvalue()   # compressed, as scipy writes by default
    buffer = io.BytesIO()
    np.save(buffer, EDGES.numpy())
    out["edges.npy"] = buffer.getvalue()
    return out


BENCH = _bench_sources()


def _bench_case(folder, source, mutations):
    path = folder / f"bench-{source}"
    path.write_bytes(mutate(BENCH[source], mutations))
    try:
        load(str(path))
    except GraphSourceError as err:
        _starts_with(err, path)


test_bench_files, test_bench_files_long = both(_bench_case, source=st.sampled_from(sorted(BENCH)), mutations=MUTATIONS)


def _dgl_case(folder, dgl, mutations):
    path = folder / "graph.bin"
    if not path.exists():
        dgl.save_graphs(str(path), [dgl.graph((EDGES[0], EDGES[1]), num_nodes=7)])
    damaged = folder / "damaged.bin"
    data = path.read_bytes()
    damaged.write_bytes(data[:8] + mutate(data[8:], mutations))   # keep the magic: DGL's reader must see it
    try:
        load(str(damaged))
    except GraphSourceError as err:
        _starts_with(err, damaged)


test_dgl_files, test_dgl_files_long = both(_dgl_case, dgl=True, mutations=MUTATIONS)


# ---------------------------------------------------------------------------------------------- checked files
@pytest.fixture(scope="module")
def dataset_payload(folder):
    save_dataset(planted_partition(200, num_features=4, num_val=20, num_test=30, seed=1), folder / "d.pt")
    return read_checked(folder / "d.pt", "unigraph.NodeDataset")


def _dataset_case(folder, dataset_payload, mutations):
    path = folder / "mutated.pt"
    write_checked(path, "unigraph.NodeDataset", mutate(dataset_payload, mutations))   # checksum recomputed
    try:
        load_dataset(path)
    except DataFileError as err:
        _starts_with(err, path)


test_datasets, test_datasets_long = both(_dataset_case, mutations=MUTATIONS)


@pytest.fixture(scope="module")
def run(folder):
    """(payload of a real checkpoint, a fresh model and optimizer of the same run)."""
    data = planted_partition(200, num_features=4, num_val=20, num_test=30, seed=1)
    config = TrainConfig(epochs=1, batch_size=20, fanouts=(3, 3), progress="off", checkpoint_dir=str(folder / "run"))

    def model():
        seed_everything(0)
        return build_node_classifier("sage", 4, data.num_classes, hidden_channels=4)
    Trainer(model(), data, config).fit()
    fresh = model()
    return read_checked(ckpt.checkpoint_path(folder / "run"), ckpt.FORMAT), fresh, make_optimizer(fresh.parameters(),
                                                                                                    config)


def _checkpoint_case(folder, run, mutations):
    payload, model, optimizer = run
    directory = folder / "mutated-run"
    directory.mkdir(exist_ok=True)
    path = ckpt.checkpoint_path(directory)
    write_checked(path, ckpt.FORMAT, mutate(payload, mutations))
    try:
        state = load_checkpoint(directory, epochs=5)
        ckpt.check_restorable(state, model, optimizer)
    except ckpt.CheckpointError as err:
        _starts_with(err, path)


test_checkpoints, test_checkpoints_long = both(_checkpoint_case, mutations=MUTATIONS)


# ---------------------------------------------------------------------------------------------- partition sets
@pytest.fixture(scope="module")
def part_set(folder):
    out = folder / "parts"
    partition_dataset(planted_partition(200, num_features=4, num_val=30, num_test=40, seed=0), 2, out, method="random")
    return out


def _part_case(folder, part_set, which, mutations):
    copy = folder / "parts-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(part_set, copy)
    if which == "metadata":
        path = copy / fmt.METADATA
        write_checked(path, fmt.FORMAT, mutate(read_checked(path, fmt.FORMAT), mutations))
    else:
        path = copy / "part-0.npz"
        path.write_bytes(mutate(path.read_bytes(), mutations))
        meta = json.loads(read_checked(copy / fmt.METADATA, fmt.FORMAT))
        meta["parts"][0].update(sha256=sha256_file(path), bytes=path.stat().st_size)   # listed as if written so
        write_checked(copy / fmt.METADATA, fmt.FORMAT, json.dumps(meta).encode())
    try:
        LocalPartition.load(copy, 0)
    except fmt.PartitionFormatError as err:
        _starts_with(err, path)


test_partition_sets, test_partition_sets_long = both(_part_case, which=st.sampled_from(["metadata", "part"]),
                                                     mutations=MUTATIONS)


# ---------------------------------------------------------------------------------------------- OGB folders
@pytest.fixture(scope="module")
def ogb_root(folder):
    from test_ogb_dataset import write_ogb
    root = folder / "ogb"
    write_ogb(root, "ogbn-arxiv")
    return root


def _ogb_case(folder, ogb_root, part, compressed, mutations):
    copy = folder / "ogb-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(ogb_root, copy)
    path = copy / "ogbn_arxiv" / "raw" / part
    if compressed:   # the gzip bytes themselves
        path.write_bytes(mutate(path.read_bytes(), mutations))
    else:            # the text inside
        path.write_bytes(gzip.compress(mutate(gzip.decompress(path.read_bytes()), mutations)))
    try:
        read_ogb_node(copy, "ogbn-arxiv")
    except DataFormatError as err:
        assert part in str(err), str(err)


test_ogb_folders, test_ogb_folders_long = both(
    _ogb_case, part=st.sampled_from(["edge.csv.gz", "num-node-list.csv.gz", "num-edge-list.csv.gz", "node-feat.csv.gz",
                                     "node-label.csv.gz", "node_year.csv.gz"]),
    compressed=st.booleans(), mutations=MUTATIONS)


# ---------------------------------------------------------------------------------------------- auto-tune cache
CACHE = json.dumps({"version": autotune.FORMAT_VERSION, "entries": [
    {"kind": f"kind {i}", "winner": "scatter", "timings_us": {"scatter": 1.5, "sparse": 2.0 + i}, "timed": "fwd"}
    for i in range(3)]}).encode()


def _cache_case(folder, mutations):
    path = folder / "cache.json"
    path.write_bytes(mutate(CACHE, mutations))
    try:
        autotune.Tuner().enable_disk_cache(path)
    except ValueError as err:
        assert not isinstance(err, (json.JSONDecodeError, UnicodeDecodeError)), repr(err)
        _starts_with(err, path)


test_autotune_caches, test_autotune_caches_long = both(_cache_case, mutations=MUTATIONS)
