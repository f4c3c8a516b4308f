"""OGB node datasets from a folder the tests write in OGB's layout; OGB's evaluator metrics without ogb."""
from __future__ import annotations

import gzip
import pathlib

import numpy as np
import pytest
import torch

from unigraph.data import DataFormatError, read_ogb_node
from unigraph.tasks.metrics import Evaluator, accuracy, multitask_roc_auc


def write_csv_gz(path: pathlib.Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join(str(v) for v in (row if isinstance(row, (list, tuple, np.ndarray)) else [row])) for row in rows]
    with gzip.open(path, "wt") as file:
        file.write("\n".join(lines) + "\n")


def write_ogb(root: pathlib.Path, name: str, *, tasks: int = 1, edge_feat: bool = False, species: bool = False,
              node_feat: bool = True, split: str = "time", num_nodes: int = 7) -> pathlib.Path:
    folder = root / name.replace("-", "_")
    raw = folder / "raw"
    gen = np.random.default_rng(0)
    edges = [(0, 1), (1, 2), (2, 0), (3, 4), (5, 3), (6, 5), (4, 6), (0, 6)]
    write_csv_gz(raw / "edge.csv.gz", edges)
    write_csv_gz(raw / "num-node-list.csv.gz", [num_nodes])
    write_csv_gz(raw / "num-edge-list.csv.gz", [len(edges)])
    if node_feat:
        write_csv_gz(raw / "node-feat.csv.gz", np.round(gen.normal(size=(num_nodes, 3)), 4))
    if edge_feat:
        write_csv_gz(raw / "edge-feat.csv.gz", np.round(gen.random(size=(len(edges), 2)), 4))
    if species:
        write_csv_gz(raw / "node_species.csv.gz", [3702, 3702, 4932, 4932, 4932, 3702, 4932])
    else:
        write_csv_gz(raw / "node_year.csv.gz", [2010 + i for i in range(num_nodes)])
    labels = gen.integers(0, 3 if tasks == 1 else 2, size=(num_nodes, tasks))
    write_csv_gz(raw / "node-label.csv.gz", labels)
    for part, ids in (("train", [0, 1, 2, 3]), ("valid", [4, 5]), ("test", [6])):
        write_csv_gz(folder / "split" / split / f"{part}.csv.gz", ids)
    (folder / "RELEASE_v1.txt").write_text("# OGB release\n")  # OGB's own reader asks to re-download without it
    (folder / "processed").mkdir()  # where OGB's reader saves
    return folder


def ogb_reference(root: pathlib.Path, name: str):
    nodeproppred = pytest.importorskip("ogb.nodeproppred")
    dataset = nodeproppred.NodePropPredDataset(name=name, root=str(root))
    return dataset[0], dataset.get_idx_split()


def test_arxiv_layout_matches_ogb(tmp_path):
    write_ogb(tmp_path, "ogbn-arxiv")
    data = read_ogb_node(tmp_path, "ogbn-arxiv")
    assert data.eval_metric == "acc" and data.num_tasks == 1 and data.graph.num_edges == 8  # no inverse edges
    node_dataset = data.to_node_dataset()
    assert node_dataset.train_mask.nonzero().flatten().tolist() == [0, 1, 2, 3]
    assert node_dataset.test_mask.nonzero().flatten().tolist() == [6]
    (graph, labels), split = ogb_reference(tmp_path, "ogbn-arxiv")
    assert np.array_equal(data.graph.edge_index.numpy(), graph["edge_index"])
    assert np.allclose(data.x.numpy(), graph["node_feat"]) and np.array_equal(data.y.numpy(), labels)
    assert np.array_equal(data.graph.ndata["node_year"].numpy(), graph["node_year"])
    for part in ("train", "valid", "test"):
        assert np.array_equal(data.split_idx[part].numpy(), split[part])


def test_proteins_layout_inverse_edges_edge_features_and_tasks(tmp_path):
    write_ogb(tmp_path, "ogbn-proteins", tasks=4, edge_feat=True, species=True, node_feat=False, split="species")
    data = read_ogb_node(tmp_path / "ogbn_proteins", "ogbn-proteins")  # the dataset folder itself works too
    assert data.x is None and data.num_tasks == 4 and data.graph.num_edges == 16
    assert data.graph.edge_index[:, :2].tolist() == [[0, 1], [1, 0]]  # edge 0, then its reverse
    assert torch.equal(data.graph.edata["edge_attr"][0], data.graph.edata["edge_attr"][1])
    assert data.graph.ndata["node_species"].shape == (7, 1)
    with pytest.raises(ValueError, match="no node features"):
        data.to_node_dataset()
    (graph, labels), _ = ogb_reference(tmp_path, "ogbn-proteins")
    assert np.array_equal(data.graph.edge_index.numpy(), graph["edge_index"])
    assert np.allclose(data.graph.edata["edge_attr"].numpy(), graph["edge_feat"])
    assert np.array_equal(data.y.numpy(), labels)


def test_unlabelled_rows_keep_nan(tmp_path):
    folder = write_ogb(tmp_path, "ogbn-arxiv")
    write_csv_gz(folder / "raw" / "node-label.csv.gz", [1, "nan", 2, 0, 1, "nan", 2])
    data = read_ogb_node(tmp_path, "ogbn-arxiv")
    assert data.y.dtype == torch.float32 and int(torch.isnan(data.y).sum()) == 2
    with pytest.raises(ValueError, match="one integer class per node"):
        data.to_node_dataset()


@pytest.mark.parametrize("breakage, message", [
    (lambda f: write_csv_gz(f / "raw" / "num-edge-list.csv.gz", [9]), "edge.csv.gz has 8 rows but the dataset has 9"),
    (lambda f: write_csv_gz(f / "raw" / "edge.csv.gz", [(0, 1)] * 7 + [(0, 7)]), r"edge.csv.gz: row 8: node id 7 is outside 0..6"),
    (lambda f: write_csv_gz(f / "split" / "time" / "test.csv.gz", [6, -1]), r"test.csv.gz: row 2: node id -1"),
    (lambda f: write_csv_gz(f / "raw" / "node-feat.csv.gz", [[0.5, 1.0, 2.0]] * 6), "node-feat.csv.gz has 6 rows"),
    (lambda f: (f / "raw" / "node-label.csv.gz").write_bytes(b"\x1f\x8b\x08garbage"), "not a readable gzip file"),
    (lambda f: write_csv_gz(f / "raw" / "num-node-list.csv.gz", [7, 3]), "must hold one count"),
])
def test_malformed_ogb_folders_are_refused(tmp_path, breakage, message):
    breakage(write_ogb(tmp_path, "ogbn-arxiv"))
    with pytest.raises(DataFormatError, match=message):
        read_ogb_node(tmp_path, "ogbn-arxiv")


def test_missing_data_unknown_names_and_size_bound(tmp_path):
    with pytest.raises(DataFormatError, match="no OGB dataset 'ogbn-arxiv'"):
        read_ogb_node(tmp_path, "ogbn-arxiv")
    folder = write_ogb(tmp_path, "ogbn-arxiv")
    with pytest.raises(DataFormatError, match="split folder .* not found"):
        read_ogb_node(tmp_path, "ogbn-arxiv", split="random")
    with pytest.raises(ValueError, match="heterogeneous"):
        read_ogb_node(tmp_path, "ogbn-mag")
    with pytest.raises(ValueError, match="pass split= and add_inverse_edge="):
        read_ogb_node(tmp_path, "ogbn-mine")
    (folder.parent / "ogbn_mine").symlink_to(folder)
    assert read_ogb_node(tmp_path, "ogbn-mine", split="time", add_inverse_edge=True).graph.num_edges == 16
    write_csv_gz(folder / "raw" / "node-feat.csv.gz", [[0.5] * 40] * 7)  # compresses well: ~600 bytes of text
    with pytest.raises(DataFormatError, match="decompresses to more than 500 bytes"):
        read_ogb_node(tmp_path, "ogbn-arxiv", max_bytes=500)


# ---------------------------------------------------------------- OGB's evaluator, without ogb
def test_accuracy_and_rocauc_match_ogb():
    gen = torch.Generator().manual_seed(0)
    y_true = torch.randint(0, 5, (100, 1), generator=gen)
    y_pred = torch.randint(0, 5, (100, 1), generator=gen)
    expected = float((y_true == y_pred).double().mean())
    assert Evaluator("ogbn-arxiv").eval({"y_true": y_true, "y_pred": y_pred})["acc"] == pytest.approx(expected)
    multi_true = torch.randint(0, 2, (60, 3), generator=gen).float()
    multi_true[:10, 1] = float("nan")          # unlabelled rows are left out of task 1
    multi_true[:, 2] = 1.0                     # task 2 has one class only: skipped, as OGB does
    scores = torch.rand(60, 3, generator=gen)
    ours = multitask_roc_auc(multi_true, scores)
    metrics = pytest.importorskip("sklearn.metrics")
    labelled = ~torch.isnan(multi_true[:, 1])
    by_hand = (metrics.roc_auc_score(multi_true[:, 0], scores[:, 0])
               + metrics.roc_auc_score(multi_true[labelled, 1], scores[labelled, 1])) / 2
    assert ours == pytest.approx(by_hand, abs=1e-12)
    nodeproppred = pytest.importorskip("ogb.nodeproppred")
    assert Evaluator("ogbn-arxiv").eval({"y_true": y_true, "y_pred": y_pred}) == \
        pytest.approx(nodeproppred.Evaluator("ogbn-arxiv").eval({"y_true": y_true, "y_pred": y_pred}))
    theirs = nodeproppred.Evaluator("ogbn-proteins")
    assert ours == pytest.approx(theirs._eval_rocauc(multi_true.numpy(), scores.numpy())["rocauc"], abs=1e-12)


def test_evaluator_checks_its_input():
    with pytest.raises(ValueError, match="unknown dataset or metric"):
        Evaluator("ogbn-foo")
    with pytest.raises(ValueError, match="missing \\['y_pred'\\]"):
        Evaluator("ogbn-arxiv").eval({"y_true": torch.zeros(3, 1)})
    with pytest.raises(ValueError, match="same shape"):
        accuracy(torch.zeros(3, 1), torch.zeros(4, 1))
    with pytest.raises(ValueError, match="no task has both"):
        multitask_roc_auc(torch.ones(4, 2), torch.rand(4, 2))
    assert Evaluator("hits@10").eval({"y_pred_pos": torch.tensor([1.0]), "y_pred_neg": torch.rand(20)}) == {"hits@10": 1.0}
