"""NodeDataset, the safe save/load format, and the synthetic generators."""
from __future__ import annotations

import dataclasses
import pytest
import torch
import torch.nn.functional as F

import unigraph
from unigraph.data import NodeDataset, load_dataset, planted_partition, random_geometric_graph, rmat, save_dataset
from unigraph.data.checked_file import save_torch
from unigraph.data.errors import DataFileError
from unigraph.data.storage import FORMAT


@pytest.fixture(scope="module")
def planted():
    return planted_partition()


# ---------------------------------------------------------------- planted partition
def test_planted_partition_fields_and_split(planted):
    ds = planted
    assert (ds.name, ds.num_nodes, ds.num_features, ds.num_classes) == ("planted_partition", 2000, 32, 4)
    assert ds.x.dtype == torch.float32 and ds.y.dtype == torch.int64
    assert torch.equal(torch.bincount(ds.y[ds.train_mask]), torch.full((4,), 20))
    assert [int(m.sum()) for m in (ds.train_mask, ds.val_mask, ds.test_mask)] == [80, 500, 1000]
    assert int((ds.train_mask.int() + ds.val_mask.int() + ds.test_mask.int()).max()) == 1  # disjoint
    g = ds.graph
    pairs = set(zip(g.src.tolist(), g.dst.tolist()))
    assert len(pairs) == g.num_edges and pairs == {(d, s) for s, d in pairs}  # simple and symmetric
    assert not bool((g.src == g.dst).any())
    homophily = float((ds.y[g.src] == ds.y[g.dst]).float().mean())
    assert 0.75 < homophily < 0.85
    assert 6.5 < g.num_edges / g.num_nodes < 8.0


def test_planted_partition_is_deterministic_under_the_seed(planted):
    again = planted_partition(seed=0)
    other = planted_partition(seed=1)
    for field in ("x", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(again, field), getattr(planted, field))
    assert torch.equal(again.graph.edge_index, planted.graph.edge_index)
    assert not torch.equal(other.y, planted.y) and not torch.equal(other.x, planted.x)


def _normalized_adjacency(ds: NodeDataset) -> torch.Tensor:
    n = ds.num_nodes
    loops = torch.arange(n)
    src, dst = torch.cat([ds.graph.src, loops]), torch.cat([ds.graph.dst, loops])
    deg = torch.bincount(dst, minlength=n).float()
    weight = deg[src].rsqrt() * deg[dst].rsqrt()
    return torch.sparse_coo_tensor(torch.stack([dst, src]), weight, (n, n), check_invariants=True).coalesce()


def _train_two_layers(ds: NodeDataset, propagate, epochs: int = 100) -> float:
    """A plain-torch 2-layer GCN (Kipf & Welling) when ``propagate`` is the normalized adjacency,
    a 2-layer MLP when it is the identity; returns test accuracy."""
    torch.manual_seed(0)
    lin1, lin2 = torch.nn.Linear(ds.num_features, 16), torch.nn.Linear(16, ds.num_classes)
    opt = torch.optim.Adam([*lin1.parameters(), *lin2.parameters()], lr=0.01, weight_decay=5e-4)

    def forward(train: bool):
        h = F.dropout(torch.relu(propagate(lin1(ds.x))), 0.5, training=train)
        return propagate(lin2(h))

    for _ in range(epochs):
        opt.zero_grad()
        F.cross_entropy(forward(True)[ds.train_mask], ds.y[ds.train_mask]).backward()
        opt.step()
    with torch.no_grad():
        return float((forward(False).argmax(1) == ds.y)[ds.test_mask].float().mean())


def test_planted_partition_is_learnable_by_a_gcn_but_not_from_features_alone(planted):
    adjacency = _normalized_adjacency(planted)
    gcn = _train_two_layers(planted, lambda h: torch.sparse.mm(adjacency, h))
    features_only = _train_two_layers(planted, lambda h: h)
    chance = 1 / planted.num_classes
    assert gcn > 0.9, gcn
    assert chance + 0.1 < features_only < 0.75, features_only   # class-correlated, far from trivial
    assert gcn > features_only + 0.2


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(num_nodes=100, num_val=500), ValueError, "the split needs"),
    (dict(num_classes=1), ValueError, "num_classes must be >= 2"),
    (dict(num_nodes=2.5), TypeError, "num_nodes must be an int"),
    (dict(homophily=1.5), ValueError, "homophily must be a number in"),
    (dict(avg_degree=-1), ValueError, "avg_degree"),
    (dict(avg_degree=float("inf")), ValueError, r"avg_degree must be a number >= 0 \(finite\), got inf"),
    (dict(class_separation=float("nan")), ValueError, r"class_separation must be a number >= 0 \(finite\), got nan"),
    (dict(homophily=float("nan")), ValueError, "homophily must be a number in"),
])
def test_planted_partition_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        planted_partition(**kwargs)


def test_random_geometric_graph_refuses_a_nan_radius():
    with pytest.raises(ValueError, match=r"radius must be a number >= 0 \(finite\), got nan"):
        random_geometric_graph(10, float("nan"))


# ---------------------------------------------------------------- NodeDataset and storage
def test_node_dataset_validates_its_fields(planted):
    with pytest.raises(ValueError, match=r"x must be a floating-point tensor of shape \[2000, F\]"):
        dataclasses.replace(planted, x=planted.x[:10])
    with pytest.raises(ValueError, match="y must be an int64"):
        dataclasses.replace(planted, y=planted.y.int())
    with pytest.raises(ValueError, match="train_mask must be a bool"):
        dataclasses.replace(planted, train_mask=planted.train_mask.long())
    with pytest.raises(TypeError, match="homogeneous"):
        dataclasses.replace(planted, graph=unigraph.Graph([[0], [0]], num_src_nodes=2000, num_dst_nodes=2000))


def test_save_and_load_round_trip(planted, tmp_path):
    path = tmp_path / "planted.pt"
    save_dataset(planted, path)
    loaded = load_dataset(path)
    assert loaded.name == planted.name
    assert torch.equal(loaded.graph.edge_index, planted.graph.edge_index)
    assert loaded.num_nodes == planted.num_nodes
    for field in ("x", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(loaded, field), getattr(planted, field))


class _NotATensor:
    def __init__(self):
        self.payload = 1


def test_load_refuses_foreign_and_damaged_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset(tmp_path / "absent.pt")
    foreign = tmp_path / "foreign.pt"  # a valid checksum over a payload that is not plain data
    save_torch(foreign, FORMAT, {"format": FORMAT, "version": 2, "x": _NotATensor()})
    with pytest.raises(DataFileError, match="refused by the safe loader"):
        load_dataset(foreign)
    untagged = tmp_path / "untagged.pt"
    save_torch(untagged, FORMAT, {"x": torch.zeros(2)})
    with pytest.raises(DataFileError, match="format tag"):
        load_dataset(untagged)
    damaged = tmp_path / "damaged.pt"
    save_torch(damaged, FORMAT, {"format": FORMAT, "version": 2, "name": "d", "num_nodes": 2})
    with pytest.raises(DataFileError, match="damaged dataset file"):
        load_dataset(damaged)
    legacy = tmp_path / "legacy.pt"  # a plain torch.save archive (format version 1): no checksum to verify
    torch.save({"format": FORMAT, "version": 1}, legacy)
    with pytest.raises(DataFileError, match="no checksum header"):
        load_dataset(legacy)


# ---------------------------------------------------------------- R-MAT
def test_rmat_sizes_range_determinism_and_skew():
    g = rmat(1000, 20000, seed=3)
    assert g.num_nodes == 1000 and g.num_edges == 20000
    assert int(g.src.min()) >= 0 and int(torch.cat([g.src, g.dst]).max()) < 1000
    again = rmat(1000, 20000, seed=3)
    assert torch.equal(g.edge_index, again.edge_index)
    assert not torch.equal(g.edge_index, rmat(1000, 20000, seed=4).edge_index)
    assert g.stats().cv_in_degree > 1.5                            # power-law: far from Erdos-Renyi's ~0.2
    unpermuted = rmat(1000, 20000, permute=False, seed=3)
    assert int(unpermuted.out_degrees().argmax()) == 0             # R-MAT's hub is node 0 before relabelling
    assert torch.equal(torch.sort(unpermuted.out_degrees()).values, torch.sort(g.out_degrees()).values)


def test_rmat_bad_probabilities():
    with pytest.raises(ValueError, match="a \\+ b \\+ c must be <= 1"):
        rmat(100, 10, a=0.6, b=0.3, c=0.3)


# ---------------------------------------------------------------- spatial graphs
def test_random_geometric_graph_joins_exactly_the_close_pairs():
    g = random_geometric_graph(150, 0.15, seed=5)
    pos = g.ndata["pos"]
    close = torch.cdist(pos, pos) <= 0.15
    close.fill_diagonal_(False)
    expected = set(map(tuple, close.nonzero().tolist()))
    assert set(zip(g.src.tolist(), g.dst.tolist())) == expected and len(expected) == g.num_edges
    assert torch.equal(random_geometric_graph(150, 0.15, seed=5).edge_index, g.edge_index)
