"""Conversions into the chunked format (datasets, edge lists, npz, OGB folders) and the bounded-memory
in-CSR builder, each against the in-memory Graph of the same edges."""
from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from test_ogb_dataset import write_ogb
from unigraph.data import planted_partition, read_ogb_node
from unigraph.data.errors import DataFileError
from unigraph.graph import Graph
from unigraph.storage.chunked import ChunkedGraph, ChunkedWriter
from unigraph.storage.convert import from_edge_list, from_npz, from_ogb, to_node_dataset, write_dataset
from unigraph.storage.csr import build_in_csr


def _coo(tmp_path, src, dst, n, chunk_bytes=64):
    with ChunkedWriter(tmp_path, name="g", num_nodes=n, num_edges=len(src), chunk_bytes=chunk_bytes) as writer:
        writer.add("src", np.asarray(src, dtype=np.int64))
        writer.add("dst", np.asarray(dst, dtype=np.int64))
        writer.finish()
    return ChunkedGraph(tmp_path)


@pytest.mark.parametrize("bucket_edges", [1, 7, 1000])
def test_in_csr_equals_graph_in_csr(tmp_path, bucket_edges):
    """Multi-edges, self-loops, isolated nodes and a hub; buckets of one edge to all edges at once;
    inside a row the edges keep their edge-id order (a stable sort)."""
    rng = np.random.default_rng(1)
    n, e = 60, 500
    src, dst = rng.integers(0, n, e), rng.integers(0, n // 2, e)   # nodes 30..59 have no in-edges
    dst[::5] = 3                                                    # a hub
    src[:10] = dst[:10]                                             # self-loops
    graph = build_in_csr(_coo(tmp_path, src, dst, n), bucket_edges=bucket_edges)
    ptr, indices, eids = Graph(torch.from_numpy(np.stack([src, dst])), num_nodes=n).in_csr()
    np.testing.assert_array_equal(graph.load("in_indptr"), ptr.numpy())
    np.testing.assert_array_equal(graph.load("in_indices"), indices.numpy())
    np.testing.assert_array_equal(graph.load("in_eids"), eids.numpy())
    np.testing.assert_array_equal(graph.load("out_degree"), np.bincount(src, minlength=n))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".csr-")]   # temporary buckets removed


def test_in_csr_of_a_graph_without_edges(tmp_path):
    graph = build_in_csr(_coo(tmp_path, [], [], 5))
    assert graph.load("in_indptr").tolist() == [0] * 6 and graph.shape("in_indices") == (0,)


def test_dataset_round_trip(tmp_path):
    dataset = planted_partition(600, num_val=100, num_test=100, seed=3)
    back = to_node_dataset(write_dataset(dataset, tmp_path, chunk_bytes=512))
    for field in ("x", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(back, field), getattr(dataset, field))
    assert torch.equal(back.graph.edge_index, dataset.graph.edge_index)


def test_edge_list_streams_comments_separators_and_gzip(tmp_path):
    text = "# SNAP-style header\n0 1\n1\t2\n\n% another comment\n2,0\r\n5   3\n4 4"   # no final newline
    (tmp_path / "e.txt").write_text(text)
    with gzip.open(tmp_path / "e.txt.gz", "wt") as file:
        file.write(text)
    for name in ("e.txt", "e.txt.gz"):
        for chunk_bytes in (8, 1 << 20):   # blocks of text much smaller than the file, and one block
            graph = from_edge_list(tmp_path / name, tmp_path / f"out-{name}-{chunk_bytes}", chunk_bytes=chunk_bytes)
            assert graph.num_nodes == 6 and graph.load("src").tolist() == [0, 1, 2, 5, 4]
            assert graph.load("dst").tolist() == [1, 2, 0, 3, 4]
    graph = from_edge_list(tmp_path / "e.txt", tmp_path / "und", undirected=True, num_nodes=10)
    assert graph.num_nodes == 10 and graph.load("src").tolist()[:4] == [0, 1, 1, 2]


@pytest.mark.parametrize("text, message", [
    ("0 1\n1 2 0.5\n", "line 2: 3 fields"),
    ("0 1\n1 x\n", "line 2: 'x' is not a node id"),
    ("0 1\n-1 2\n", "line 2: -1 is not a node id"),
    ("0 1\n\xff 2\n", "non-ASCII"),
])
def test_bad_edge_lists_are_refused_naming_the_line(tmp_path, text, message):
    (tmp_path / "e.txt").write_text(text, encoding="latin-1")
    with pytest.raises(DataFileError, match=message) as info:
        from_edge_list(tmp_path / "e.txt", tmp_path / "out")
    assert "e.txt" in str(info.value)
    with pytest.raises(DataFileError, match="not below num_nodes=2"):
        (tmp_path / "ok.txt").write_text("0 1\n1 2\n")
        from_edge_list(tmp_path / "ok.txt", tmp_path / "out", num_nodes=2)


def test_npz(tmp_path):
    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1, 3], [1, 2, 0]]), x=x, y=np.array([0, 1, 1, 0]),
             num_nodes=np.array(5) - 1, train_mask=np.array([True, False, False, True]))
    graph = from_npz(tmp_path / "g.npz", tmp_path / "out")
    assert graph.num_nodes == 4 and graph.num_classes == 2 and graph.load("train_mask").tolist() == [1, 0, 0, 1]
    np.testing.assert_array_equal(graph.load("x"), x)
    np.savez(tmp_path / "bad.npz", edge_index=np.array([[0, 9], [1, 2]]), num_nodes=np.array(5))
    with pytest.raises(DataFileError, match="'num_nodes' must be one integer above the largest node id 9"):
        from_npz(tmp_path / "bad.npz", tmp_path / "out2")
    np.savez(tmp_path / "bad.npz", edge_index=np.array([[0, 1], [1, 2]]), x=np.zeros((2, 2)))
    with pytest.raises(DataFileError, match=r"'x' must be floats of shape \[3, F\]"):
        from_npz(tmp_path / "bad.npz", tmp_path / "out2")


def test_ogb_folder(tmp_path):
    write_ogb(tmp_path, "ogbn-arxiv")
    graph = from_ogb(tmp_path, "ogbn-arxiv", tmp_path / "out")
    reference = read_ogb_node(tmp_path, "ogbn-arxiv").to_node_dataset()
    back = to_node_dataset(graph)
    assert torch.equal(back.graph.edge_index, reference.graph.edge_index) and torch.equal(back.x, reference.x)
    assert torch.equal(back.train_mask, reference.train_mask)
