"""The TU reader on files the tests write: PyG's TUDataset as the oracle, and every malformed file refused."""
from __future__ import annotations

import pathlib

import pytest
import torch

from unigraph.data import TUFormatError, read_tu

# Three graphs: graph 1 has nodes 1-3 (with a self-loop 2-2 and the edge 1-2 listed twice), graph 2
# nodes 4-5, graph 3 nodes 6-8. Edge lines are 1-based, both directions listed as TU files do.
EDGES = ["1, 2", "2, 1", "2, 3", "3, 2", "2, 2", "1, 2", "4, 5", "5, 4", "6, 7", "7, 6", "7, 8", "8, 7"]
FILES = {
    "A": EDGES,
    "graph_indicator": ["1", "1", "1", "2", "2", "3", "3", "3"],
    "graph_labels": ["-1", "1", "-1"],
    "node_labels": ["0, 3", "2, 3", "1, 4", "0, 3", "0, 5", "2, 3", "1, 3", "0, 4"],
    "node_attributes": ["0.5, 1.0", "-1.5, 2.0", "0.25, 0.0", "1.0, 1.0", "2.0, -2.0", "0.0, 0.5", "3.0, 1.5",
                        "-0.5, -1.0"],
    "edge_labels": ["1", "1", "0", "0", "2", "1", "0", "0", "2", "2", "1", "1"],
    "edge_attributes": [f"{i / 4}" for i in range(12)],
}


def write_tu(folder: pathlib.Path, name: str = "TOY", files: dict | None = None, drop=()) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    for part, lines in (files or FILES).items():
        if part not in drop:
            (folder / f"{name}_{part}.txt").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize("use_attr", [False, True])
def test_read_tu_matches_pyg(tmp_path, use_attr):
    pyg_datasets = pytest.importorskip("torch_geometric.datasets")
    write_tu(tmp_path / "TOY" / "raw")
    ours = read_tu(tmp_path, "TOY", use_node_attr=use_attr, use_edge_attr=use_attr)  # finds root/TOY/raw
    theirs = pyg_datasets.TUDataset(str(tmp_path), "TOY", use_node_attr=use_attr, use_edge_attr=use_attr)
    assert len(ours) == len(theirs) == 3 and ours.num_classes == theirs.num_classes == 2
    for i in range(3):
        graph, label = ours[i]
        data = theirs[i]
        assert torch.equal(graph.edge_index, data.edge_index), i
        assert torch.equal(graph.ndata["x"], data.x) and torch.equal(graph.edata["edge_attr"], data.edge_attr)
        assert int(label) == int(data.y)
    assert ours[0][0].num_edges == 4  # the self-loop dropped, the duplicate 1-2 merged (labels summed)
    assert ours[0][0].edata["edge_attr"][0, -3:].tolist() == [0.0, 2.0, 0.0]


def test_read_tu_without_optional_files(tmp_path):
    write_tu(tmp_path, files={k: FILES[k] for k in ("A", "graph_indicator", "graph_labels")})
    dataset = read_tu(tmp_path, "TOY")
    assert dataset.x is None and dataset.edge_attr is None and dataset.y.tolist() == [0, 1, 0]
    assert dataset.graph_sizes().tolist() == [3, 2, 3]


def test_read_tu_regression_targets(tmp_path):
    write_tu(tmp_path, files={**FILES, "graph_attributes": ["0.5", "1.5", "-2"]})
    assert read_tu(tmp_path, "TOY").y.tolist() == [[0.5], [1.5], [-2.0]]


def test_a_graph_without_edges_and_an_empty_graph(tmp_path):
    files = {"A": ["1, 2", "2, 1"], "graph_indicator": ["1", "1", "3"], "graph_labels": ["0", "1", "0"]}
    dataset = read_tu(write_tu(tmp_path, files=files), "TOY")
    assert dataset.graph_sizes().tolist() == [2, 0, 1] and dataset.edge_counts().tolist() == [2, 0, 0]


BAD_CASES = [
    ("edges across graphs", {"A": EDGES + ["3, 4"]}, r"TOY_A.txt: line 13: edge 3, 4 joins graph 1 to graph 2"),
    ("node id 0", {"A": ["0, 1"] + EDGES[1:]}, r"TOY_A.txt: line 1: node id 0 is outside 1..8"),
    ("node id too large", {"A": EDGES + ["9, 1"]}, r"TOY_A.txt: line 13: node id 9 is outside 1..8"),
    ("three fields", {"A": EDGES[:3] + ["1, 2, 3"]}, r"TOY_A.txt: line 4 has 3 fields but line 1 has 2"),
    ("not a number", {"A": EDGES[:5] + ["1, x"]}, r"TOY_A.txt: line 6: 'x' is not a number"),
    ("float id", {"A": EDGES[:2] + ["1.5, 2"]}, r"TOY_A.txt: line 3: '1.5' is not an integer"),
    ("decreasing graph ids", {"graph_indicator": ["1", "2", "1", "2", "2", "3", "3", "3"]},
     r"TOY_graph_indicator.txt: line 3: graph ids must not decrease"),
    ("graph id beyond labels", {"graph_indicator": ["1", "1", "1", "2", "2", "3", "3", "4"]},
     r"TOY_graph_indicator.txt: line 8: graph id 4 is outside 1..3"),
    ("node labels short", {"node_labels": FILES["node_labels"][:7]}, r"TOY_node_labels.txt has 7 lines but there are 8"),
    ("edge labels long", {"edge_labels": FILES["edge_labels"] + ["1"]}, r"TOY_edge_labels.txt has 13 lines"),
    ("non-finite attribute", {"node_attributes": FILES["node_attributes"][:7] + ["nan, 1"]},
     r"TOY_node_attributes.txt: line 8: 'nan' is not finite"),
    ("empty file", {"graph_labels": []}, r"TOY_graph_labels.txt is empty"),
    ("binary", {"graph_labels": ["\u00ff"]}, r"TOY_graph_labels.txt: not a text file"),
]


@pytest.mark.parametrize("case, change, message", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_malformed_files_are_refused_naming_file_and_line(tmp_path, case, change, message):
    files = {**FILES, **change}
    folder = tmp_path
    folder.mkdir(exist_ok=True)
    for part, lines in files.items():
        (folder / f"TOY_{part}.txt").write_bytes(("\n".join(lines) + ("\n" if lines else "")).encode("latin-1"))
    with pytest.raises(TUFormatError, match=message):
        read_tu(folder, "TOY", use_node_attr=True)


def test_missing_files_and_size_bound(tmp_path):
    write_tu(tmp_path, drop=("graph_labels",))
    with pytest.raises(TUFormatError, match="neither TOY_graph_labels.txt nor TOY_graph_attributes.txt"):
        read_tu(tmp_path, "TOY")
    with pytest.raises(TUFormatError, match="TOY_graph_indicator.txt not found"):
        read_tu(tmp_path / "elsewhere", "TOY")
    write_tu(tmp_path)
    with pytest.raises(TUFormatError, match=r"TOY_graph_indicator.txt is 16 bytes, over the limit of 10"):
        read_tu(tmp_path, "TOY", max_bytes=10)


# ---------------------------------------------------------------- fuzzing: write random graphs, read them back
from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=15)
@given(data=st.data())
def test_random_datasets_round_trip(tmp_path_factory, data):
    sizes = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=5))
    indicator, edges, expected = [], [], []
    offset = 0
    for g, n in enumerate(sizes):
        indicator += [str(g + 1)] * n
        pairs = data.draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, max(n - 1, 0))),
                                   max_size=8)) if n else []
        edges += [f"{u + offset + 1}, {v + offset + 1}" for u, v in pairs]
        expected.append(sorted({(u, v) for u, v in pairs if u != v}))
        offset += n
    labels = [str(data.draw(st.sampled_from([-1, 1, 7]))) for _ in sizes]
    folder = tmp_path_factory.mktemp("tu")
    files = {"graph_indicator": indicator, "graph_labels": labels, "A": edges}
    if not indicator or not edges:  # an empty file is refused: that case is tested elsewhere
        return
    write_tu(folder, files=files)
    dataset = read_tu(folder, "TOY")
    assert len(dataset) == len(sizes)
    for g in range(len(sizes)):
        graph, label = dataset[g]
        assert graph.num_nodes == sizes[g]
        assert list(map(tuple, graph.edge_index.t().tolist())) == expected[g]
    ranks = {v: i for i, v in enumerate(sorted({int(y) for y in labels}))}
    assert dataset.y.tolist() == [ranks[int(y)] for y in labels]
