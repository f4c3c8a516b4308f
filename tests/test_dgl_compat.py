"""DGL- and PyG-style code on unigraph graphs: counts, edges(), local_scope(), the DGL loop, from_pyg."""
from __future__ import annotations

import pickle

import pytest
import torch

import unigraph
from unigraph import Graph, dataloading
from unigraph.graph_compat import Count
from unigraph.sampling import NeighborSampler, NodeLoader


def multigraph() -> Graph:
    # unsorted, with a multi-edge (2 -> 0 twice), a self-loop and an isolated node 5
    return Graph(torch.tensor([[2, 0, 3, 2, 1, 4, 2, 3], [0, 1, 3, 0, 2, 0, 1, 0]]), num_nodes=6)


# ---------------------------------------------------------------- counts
def test_counts_are_ints_and_callable():
    g = multigraph()
    assert g.num_nodes == 6 and g.num_nodes() == 6 and g.num_edges() == 8 and g.num_edges == 8
    assert isinstance(g.num_nodes, int) and type(g.num_nodes()) is int
    assert torch.arange(g.num_nodes).numel() == 6 and g.num_nodes + 1 == 7 and type(g.num_nodes + 1) is int
    block = Graph(torch.tensor([[0, 3], [1, 0]]), num_src_nodes=4, num_dst_nodes=2)
    assert block.num_dst_nodes() == 2 and block.num_src_nodes() == 4 and block.is_block
    x = torch.randn(4, 3)
    assert x[:block.num_dst_nodes()].shape == (2, 3)  # the DGL idiom for destination features
    with pytest.raises(TypeError, match="one node and one edge type"):
        g.num_nodes("user")


def test_counts_pickle_as_plain_ints():
    g = multigraph()
    for value in (g.num_nodes, g.num_edges, g.num_src_nodes):
        back = pickle.loads(pickle.dumps(value))
        assert type(back) is int and back == value
    assert b"Count" not in pickle.dumps({"n": g.num_nodes})


def test_counts_in_files_load_with_weights_only(tmp_path):
    g = multigraph()
    torch.save({"num_nodes": g.num_nodes, "sizes": [g.num_src_nodes, g.num_edges]}, tmp_path / "f.pt")
    loaded = torch.load(tmp_path / "f.pt", weights_only=True)
    assert loaded == {"num_nodes": 6, "sizes": [6, 8]} and type(loaded["num_nodes"]) is int


def test_count_survives_transforms():
    g = multigraph().add_self_loops().to("cpu").reverse()
    assert isinstance(g.num_nodes, Count) and g.num_nodes() == 6 and g.num_edges() == 14


# ---------------------------------------------------------------- edges()
@pytest.mark.parametrize("order", ["eid", "srcdst"])
@pytest.mark.parametrize("form", ["uv", "eid", "all"])
def test_edges_matches_dgl(dgl, form, order):
    g = multigraph()
    dg = g.to_dgl()
    ours, theirs = g.edges(form=form, order=order), dg.edges(form=form, order=order)
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b.to(torch.int64))


def test_edges_rejects_unknown_form_and_order():
    g = multigraph()
    with pytest.raises(ValueError, match="form must be one of"):
        g.edges(form="coo")
    with pytest.raises(ValueError, match="order must be one of"):
        g.edges(order="dst")


def test_nodes():
    assert torch.equal(multigraph().nodes(), torch.arange(6))


# ---------------------------------------------------------------- local_scope
def test_local_scope_undoes_feature_changes_like_dgl(dgl):
    ours, theirs = multigraph(), multigraph().to_dgl()
    for g in (ours, theirs):
        g.ndata["h"] = torch.ones(6, 2)
        g.edata["w"] = torch.arange(8.0)
        with g.local_scope():
            g.ndata["h"] = torch.zeros(6, 2)         # replaced: undone
            g.ndata["tmp"] = torch.ones(6)           # added: removed
            del g.edata["w"]                         # deleted: restored
            g.update_all(unigraph.function.copy_u("h", "m"), unigraph.function.sum("m", "agg")) \
                if isinstance(g, Graph) else g.update_all(dgl.function.copy_u("h", "m"), dgl.function.sum("m", "agg"))
            assert torch.equal(g.ndata["agg"], torch.zeros(6, 2))
        g.ndata["h"][0] += 5                         # in place: visible (the tensor is shared)
    for g in (ours, theirs):
        assert sorted(g.ndata.keys()) == ["h"] and sorted(g.edata.keys()) == ["w"]
        assert g.ndata["h"][0].tolist() == [6.0, 6.0] and torch.equal(g.edata["w"], torch.arange(8.0))


def test_local_scope_restores_after_an_exception_and_for_blocks():
    block = Graph(torch.tensor([[0, 3], [1, 0]]), num_src_nodes=4, num_dst_nodes=2)
    block.srcdata["x"] = torch.ones(4)
    with pytest.raises(RuntimeError):
        with block.local_scope():
            block.srcdata["x"] = torch.zeros(4)
            block.dstdata["y"] = torch.ones(2)
            raise RuntimeError("boom")
    assert torch.equal(block.srcdata["x"], torch.ones(4)) and "y" not in block.dstdata


# ---------------------------------------------------------------- the DGL mini-batch loop
def ring_graph(n=40) -> Graph:
    src = torch.arange(n)
    edge_index = torch.stack([torch.cat([src, (src + 1) % n, (src + 3) % n]), torch.cat([(src + 1) % n, src, src])])
    g = Graph(edge_index, num_nodes=n)
    g.ndata["feat"] = torch.randn(n, 5)
    g.ndata["label"] = torch.arange(n) % 3
    g.edata["w"] = torch.rand(edge_index.shape[1])
    return g


def test_node_loader_batches_unpack_like_dgl():
    g = ring_graph()
    loader = NodeLoader(g, torch.arange(10), NeighborSampler([2, 2]), batch_size=4, features=g.ndata["feat"])
    for input_nodes, output_nodes, blocks in loader:
        assert blocks[-1].num_dst_nodes() == output_nodes.numel() and blocks[0].num_src_nodes() == input_nodes.numel()
    batch = next(iter(loader))  # the unigraph API is unchanged
    assert batch.x.shape == (batch.input_nodes.numel(), 5) and batch.seeds is batch.output_nodes


def test_dataloading_prefetches_into_blocks_and_trains():
    g = ring_graph()
    sampler = dataloading.NeighborSampler([3, -1], prefetch_node_feats=["feat"], prefetch_labels=["label"],
                                          prefetch_edge_feats=["w"])
    loader = dataloading.DataLoader(g, torch.arange(40) < 20, sampler, batch_size=8, shuffle=True, seed=0)
    assert len(loader) == 3
    model = unigraph.models.GraphSAGE(5, out_channels=3, hidden_channels=8, num_layers=2)
    seen = []
    for input_nodes, output_nodes, blocks in loader:
        assert torch.equal(blocks[0].srcdata["feat"], g.ndata["feat"][input_nodes])
        assert torch.equal(blocks[-1].dstdata["label"], g.ndata["label"][output_nodes])
        for block in blocks:
            assert torch.equal(block.edata["w"], g.edata["w"][block.edata["eid"]])
        loss = torch.nn.functional.cross_entropy(model(blocks, blocks[0].srcdata["feat"]), blocks[-1].dstdata["label"])
        loss.backward()
        seen.append(output_nodes)
    assert sorted(torch.cat(seen).tolist()) == list(range(20))


def test_full_neighbor_blocks_match_dgl(dgl):
    g = ring_graph()
    seeds = torch.tensor([0, 7, 13])
    loader = dataloading.DataLoader(g, seeds, dataloading.MultiLayerFullNeighborSampler(2), batch_size=3)
    input_nodes, output_nodes, blocks = next(iter(loader))
    dg = g.to_dgl()
    d_input, d_output, d_blocks = dgl.dataloading.MultiLayerFullNeighborSampler(2).sample_blocks(dg, seeds)
    assert set(input_nodes.tolist()) == set(d_input.tolist()) and torch.equal(output_nodes, d_output)
    for ours, theirs in zip(blocks, d_blocks):
        ids_src, ids_dst = input_nodes[:ours.num_src_nodes], input_nodes[:ours.num_dst_nodes]
        ours_edges = sorted(zip(ids_src[ours.src].tolist(), ids_dst[ours.dst].tolist()))
        s, d = theirs.edges()
        theirs_edges = sorted(zip(theirs.srcdata[dgl.NID][s].tolist(), theirs.dstdata[dgl.NID][d].tolist()))
        assert ours_edges == theirs_edges


def test_dataloading_refuses_what_it_cannot_do():
    g = ring_graph()
    with pytest.raises(ValueError, match="edge_dir='in'"):
        dataloading.NeighborSampler([2], edge_dir="out")
    with pytest.raises(ValueError, match="prob="):
        dataloading.NeighborSampler([2], prob="w")
    with pytest.raises(TypeError, match="does not support"):
        dataloading.DataLoader(g, torch.arange(3), dataloading.NeighborSampler([2]), pin_memory=True)
    with pytest.raises(TypeError, match="Graph.from_dgl"):
        dataloading.DataLoader(object(), torch.arange(3), dataloading.NeighborSampler([2]))


# ---------------------------------------------------------------- from_pyg
def test_from_pyg_takes_the_first_graph_of_a_dataset():
    pytest.importorskip("torch_geometric")
    from torch_geometric.datasets import FakeDataset
    torch.manual_seed(0)
    dataset = FakeDataset(num_graphs=3, avg_num_nodes=12, num_channels=4)
    g = Graph.from_pyg(dataset)
    first = dataset[0]
    assert g.num_nodes == first.num_nodes and torch.equal(g.edge_index, first.edge_index)
    assert torch.equal(g.ndata["x"], first.x)
    # the whole dataset's concatenated edge_index (what dataset.edge_index returns) is not used
    assert g.num_edges != dataset.edge_index.shape[1]


def test_from_pyg_batch_and_sparse_adjacency():
    pyg = pytest.importorskip("torch_geometric")
    from torch_geometric.data import Batch, Data
    a = Data(x=torch.randn(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]]))
    b = Data(x=torch.randn(2, 2), edge_index=torch.tensor([[1], [0]]))
    g = Graph.from_pyg(Batch.from_data_list([a, b]))
    assert g.edge_index.tolist() == [[0, 1, 4], [1, 2, 3]] and g.ndata["batch"].tolist() == [0, 0, 0, 1, 1]
    sparse = pyg.transforms.ToSparseTensor()(Data(x=torch.randn(3, 2), edge_index=torch.tensor([[0, 2], [1, 1]])))
    assert sorted(map(tuple, Graph.from_pyg(sparse).edge_index.t().tolist())) == [(0, 1), (2, 1)]
    # ToSparseTensor's output without torch_sparse: a torch sparse adj_t[dst, src], in every layout
    adj_t = torch.sparse_coo_tensor(torch.tensor([[1, 1, 0], [0, 2, 2]]), torch.ones(3), (3, 3))
    for layout in (adj_t, adj_t.to_sparse_csr(), adj_t.to_sparse_csc()):
        graph = Graph.from_pyg(Data(x=torch.randn(3, 2), adj_t=layout))
        assert sorted(map(tuple, graph.edge_index.t().tolist())) == [(0, 1), (2, 0), (2, 1)]


def test_from_pyg_points_to_the_right_converter(dgl):
    pyg_data = pytest.importorskip("torch_geometric.data")
    with pytest.raises(TypeError, match="Graph.from_dgl"):
        Graph.from_pyg(dgl.graph(([0], [1])))
    nx = pytest.importorskip("networkx")
    with pytest.raises(TypeError, match="Graph.from_networkx"):
        Graph.from_pyg(nx.path_graph(3))
    scipy_sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="Graph.from_scipy"):
        Graph.from_pyg(scipy_sparse.eye(3).tocsr())
    hetero = pyg_data.HeteroData()
    hetero["a"].x = torch.randn(2, 1)
    with pytest.raises(TypeError, match="HeteroGraph.from_pyg"):
        Graph.from_pyg(hetero)
    with pytest.raises(TypeError, match="without edges"):
        Graph.from_pyg(pyg_data.Data(x=torch.randn(2, 1)))
