"""Every graph unigraph hands to a user is a ``unigraph.Graph`` (unigraph/user_graph.py), with
``update_all``, ``apply_edges`` and the conversions, whatever built it: datasets, generators,
samplers and loaders, heterograph relations, link-prediction loaders, batching, benchmark graph
sources, the converters, and the core's own transforms of a user graph.

Each producer's graph runs ``g.update_all(fn.copy_u, fn.sum)`` in float64; the result must equal
``unigraph.ops.gspmm`` on the same graph and a plain ``index_add`` over its edges (a reference
that shares no kernel with either).
"""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph import function as fn
from unigraph import ops
from unigraph.graph import Graph as CoreGraph

from planetoid_files import write_planetoid


def check_user_graph(g, what: str) -> None:
    """``g`` is a ``unigraph.Graph`` whose ``update_all`` sums in-neighbours exactly."""
    assert isinstance(g, unigraph.Graph), (
        f"{what} is a {type(g).__module__}.{type(g).__qualname__}, not a unigraph.Graph")
    h = torch.randn(g.num_src_nodes, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with g.local_scope():
        g.srcdata["_h"] = h
        g.update_all(fn.copy_u("_h", "_m"), fn.sum("_m", "_out"))
        out = g.dstdata["_out"]
    reference = torch.zeros(g.num_dst_nodes, 3, dtype=torch.float64).index_add_(0, g.dst, h[g.src])
    torch.testing.assert_close(out, ops.gspmm(g, "copy_u", "sum", u=h), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, reference, rtol=1e-12, atol=1e-12)
    assert "_out" not in g.dstdata and "_h" not in g.srcdata  # local_scope put the features back


def small_dataset(num_nodes: int):
    from unigraph.data import planted_partition
    return planted_partition(num_nodes, 3, 4, train_per_class=4, num_val=10, num_test=10, seed=0)


def small_graph() -> unigraph.Graph:
    return unigraph.Graph(torch.tensor([[0, 1, 2, 2, 3, 4, 4], [1, 2, 0, 3, 4, 0, 4]]), num_nodes=6)


# ---------------------------------------------------------------------- the class itself
def test_the_reference_check_fails_on_a_core_graph():
    core = CoreGraph(torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(AssertionError, match="not a unigraph.Graph"):
        check_user_graph(core, "a core graph")
    check_user_graph(unigraph.Graph.view(core), "its view")


def test_derived_graphs_keep_the_user_class():
    g = small_graph()
    g.edata["w"] = torch.ones(g.num_edges)
    block = unigraph.Graph(torch.tensor([[0, 3, 2], [0, 1, 1]]), num_src_nodes=4, num_dst_nodes=2)
    derived = {
        "to": g.to("cpu"), "reverse": g.reverse(), "add_self_loops": g.add_self_loops(),
        "remove_self_loops": g.remove_self_loops(), "to_undirected": g.to_undirected(),
        "prepared self-loop graph": unigraph.self_loops.with_self_loops(g.prepare()).graph,
        "from_csr (checked)": unigraph.Graph.from_csr(*g.in_csr()[:2], 6),
        "from_csr (trusted)": unigraph.Graph.from_csr(*g.in_csr()[:2], 6, validate=False),
        "block reverse": block.reverse(), "block add_self_loops": block.add_self_loops(),
    }
    for what, graph in derived.items():
        check_user_graph(graph, what)


# ---------------------------------------------------------------------- datasets and generators
def test_generated_and_stored_datasets(tmp_path):
    from unigraph.data import academic_graph, load_dataset, motif_graphs, random_geometric_graph, rmat, save_dataset
    from unigraph.data.arxiv_like import arxiv_like
    ds = small_dataset(60)
    save_dataset(ds, tmp_path / "ds.pt")
    graphs = {
        "planted_partition": ds.graph, "rmat": rmat(50, 200, seed=1),
        "random_geometric_graph": random_geometric_graph(40, 0.3),
        "arxiv_like": arxiv_like(80, 240, 4, 3, seed=0).graph,
        "load_dataset": load_dataset(tmp_path / "ds.pt").graph,
        "motif_graphs()[0]": motif_graphs(4, seed=0)[0][0],
        "knn_graph": unigraph.knn_graph(torch.randn(20, 3, generator=torch.Generator().manual_seed(0)), 4),
    }
    hetero = academic_graph(60, seed=0).graph
    for relation, relation_graph in hetero.items():
        graphs[f"academic_graph[{relation}]"] = relation_graph
    for what, graph in graphs.items():
        check_user_graph(graph, what)


def test_files_read_by_the_dataset_readers(tmp_path):
    from test_ogb_dataset import write_ogb
    from test_tu_dataset import write_tu
    from unigraph.data import read_ogb_node, read_tu
    write_ogb(tmp_path, "ogbn-arxiv")
    check_user_graph(read_ogb_node(tmp_path, "ogbn-arxiv").graph, "read_ogb_node")
    check_user_graph(read_tu(write_tu(tmp_path / "tu"), "TOY")[1][0], "read_tu()[1]")


def test_planetoid_files_give_a_user_graph(tmp_path):
    from unigraph.data import Planetoid
    check_user_graph(Planetoid(write_planetoid(tmp_path / "cora"), "cora").graph, "Planetoid (tiny files)")


# The real files live outside the project (../shared, or UNIGRAPH_PLANETOID_RAW): skipped without them.
def test_planetoid_cora_gives_a_user_graph(planetoid_root):
    from unigraph.benchmarking import graph_source
    from unigraph.data import Planetoid
    check_user_graph(Planetoid(planetoid_root, "cora").graph, "Planetoid cora")
    check_user_graph(graph_source.load(f"planetoid:cora:{planetoid_root}").graph, "graph_source planetoid")


def test_benchmark_graph_sources(tmp_path):
    from unigraph.benchmarking import graph_source
    torch.save({"edge_index": torch.tensor([[0, 1, 2], [1, 2, 0]]), "num_nodes": 4}, tmp_path / "g.pt")
    for source in ("uniform:30:3", "rmat:30:3", "arxiv_like:30:3", str(tmp_path / "g.pt")):
        check_user_graph(graph_source.load(source).graph, f"graph_source.load({source!r})")


# ---------------------------------------------------------------------- samplers and loaders
def test_node_samplers_and_loaders():
    from unigraph import dataloading
    from unigraph.sampling import ClusterSampler, NeighborSampler, NodeLoader, RandomWalkSampler
    ds = small_dataset(80)
    graph, seeds = ds.graph, torch.arange(10)
    produced = {}
    batch = next(iter(NodeLoader(graph, seeds, NeighborSampler([3, 2]), batch_size=5, features=ds.x)))
    produced.update({f"NodeLoader block {i}": block for i, block in enumerate(batch.blocks)})
    blocks = NeighborSampler([4, 2], return_eids=True).sample(graph, seeds, key=1).blocks
    produced.update({f"NeighborSampler block {i}": block for i, block in enumerate(blocks)})
    _, _, dgl_blocks = next(iter(dataloading.DataLoader(graph, seeds, dataloading.NeighborSampler([2, 2]),
                                                        batch_size=4)))
    produced.update({f"dataloading.DataLoader block {i}": block for i, block in enumerate(dgl_blocks)})
    produced["ClusterSampler subgraph"] = ClusterSampler(graph, 4).sample(graph, torch.tensor([0, 2]), key=0).graph
    walk = RandomWalkSampler(graph, 2, roots_per_subgraph=10, num_presample=5, seed=0)
    produced["RandomWalkSampler subgraph"] = walk.sample(graph, torch.arange(10), key=0).graph
    produced["Blocks.to"] = batch.to("cpu").blocks[0]
    for what, block in produced.items():
        check_user_graph(block, what)


def test_graph_batches_and_items():
    from unigraph.data import collate, motif_graphs
    from unigraph.loader import GraphLoader
    dataset = motif_graphs(6, seed=0)
    batch = next(iter(GraphLoader(dataset, batch_size=3)))
    collated = collate([dataset[i] for i in range(3)])
    produced = {"dataset[0]": dataset[0][0], "GraphLoader batch": batch.graph, "GraphLoader readout": batch.readout(),
                "collate": collated.graph, "collate readout": collated.readout(),
                "GraphBatch.to": batch.to("cpu").graph}
    for what, graph in produced.items():
        check_user_graph(graph, what)


def test_hetero_relations_and_typed_blocks():
    from unigraph.data import academic_graph
    from unigraph.hetero import HeteroNeighborSampler, from_homogeneous, to_homogeneous
    hg = academic_graph(40, seed=0).graph
    produced = {"to_homogeneous": to_homogeneous(hg), "HeteroGraph.to_homogeneous": hg.to_homogeneous()}
    homogeneous = to_homogeneous(hg)
    back = from_homogeneous(homogeneous, hg.node_types, hg.relations)
    for source_name, source in (("HeteroGraph", hg), ("from_homogeneous", back), ("to", hg.to("cpu")),
                                ("add_reverse_relations", hg.add_reverse_relations())):
        for relation, graph in source.items():
            produced[f"{source_name}[{relation}]"] = graph
    paper = hg.node_types[0] if "paper" not in hg.node_types else "paper"
    batch = HeteroNeighborSampler([2, 2], seed=0).sample(hg, {paper: torch.arange(5)}, key=0)
    for i, block in enumerate(batch.blocks):
        for relation, graph in block.items():
            produced[f"typed block {i} [{relation}]"] = graph
    built = unigraph.HeteroGraph({("a", "r", "b"): torch.tensor([[0, 1], [1, 0]]),
                                  ("a", "s", "a"): torch.tensor([[0, 1], [1, 1]])})
    produced.update({f"HeteroGraph(...)[{relation}]": graph for relation, graph in built.items()})
    for what, graph in produced.items():
        check_user_graph(graph, what)


def test_link_prediction_graphs():
    from unigraph.loader import LinkNeighborLoader
    from unigraph.sampling import NeighborSampler
    from unigraph.tasks.link import split_edges
    split = split_edges(small_dataset(60).graph, seed=0)
    batch = next(iter(LinkNeighborLoader(split.graph, NeighborSampler([3, 3]), split.train_pos, neg_ratio=1,
                                         batch_size=8, exclude="reverse", seed=0)))
    input_nodes, pos_graph, neg_graph, blocks = batch
    produced = {"split_edges graph": split.graph, "pos_graph": pos_graph, "neg_graph": neg_graph,
                **{f"link block {i}": block for i, block in enumerate(blocks)}}
    for what, graph in produced.items():
        check_user_graph(graph, what)


# ---------------------------------------------------------------------- conversions
def test_conversions_give_user_graphs():
    pytest.importorskip("torch_geometric")
    import networkx
    import scipy.sparse
    from torch_geometric.data import Data
    g = small_graph()
    produced = {
        "from_pyg(Data)": unigraph.Graph.from_pyg(Data(edge_index=g.edge_index, num_nodes=6, x=torch.ones(6, 2))),
        "from_pyg(edge_index)": unigraph.Graph.from_pyg(g.edge_index, num_nodes=6),
        "from_pyg(to_pyg)": unigraph.Graph.from_pyg(g.to_pyg()),
        "from_scipy": unigraph.Graph.from_scipy(scipy.sparse.coo_matrix(([1.0, 2.0], ([0, 1], [1, 2])), shape=(3, 4))),
        "from_networkx": unigraph.Graph.from_networkx(networkx.path_graph(4)),
    }
    for what, graph in produced.items():
        check_user_graph(graph, what)


def test_from_dgl_gives_user_graphs(dgl):
    graph = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])), num_nodes=4)
    block = dgl.create_block((torch.tensor([0, 2, 3]), torch.tensor([0, 1, 1])), num_src_nodes=4, num_dst_nodes=2)
    check_user_graph(unigraph.Graph.from_dgl(graph), "from_dgl(graph)")
    check_user_graph(unigraph.Graph.from_dgl(block), "from_dgl(block)")
    check_user_graph(unigraph.Graph.from_dgl(small_graph().to_dgl()), "from_dgl(to_dgl)")


def test_the_converters_name_no_default_class():
    """``unigraph.convert`` sits below the user class: its callers say which class they want."""
    from unigraph import convert
    with pytest.raises(TypeError, match="cls"):
        convert.from_scipy(__import__("scipy.sparse").sparse.eye(2))
