"""unigraph.dgl's graph API beyond message passing, against the real DGL on the same graphs:
subgraphs of every kind on homogeneous, bipartite and heterogeneous graphs (DGL's edge and node
orders), relation slices, the metagraph and unidirectional-bipartite views, the sparse-format
bookkeeping, networkx conversions, to_homogeneous / to_heterogeneous ids, metapath graphs,
block_to_graph, incidence matrices, typed UDF batches, mutations of bipartite graphs, batches
of every kind (slice_batch, dict batch counts), reverse, type subgraphs; and the refusals."""
from __future__ import annotations

import networkx as nx
import pytest
import torch

import unigraph.dgl as udgl
from unigraph.dgl import subgraph as usub
from unigraph.dgl.convert import bipartite_from_networkx, block_to_graph, to_networkx
from unigraph.dgl.transforms import metapath_reachable_graph, slice_batch
from unigraph.dgl.utils import is_sorted_srcdst

IDTYPES = [torch.int32, torch.int64]


def equal(a, b) -> bool:
    """Same dtype and values (``torch.equal`` alone ignores the dtype)."""
    return a.dtype == b.dtype and torch.equal(a, b)


def random_edges(gen, n_src, n_dst, count):
    return (torch.randint(0, n_src, (count,), generator=gen), torch.randint(0, n_dst, (count,), generator=gen))


def schemas(seed=0):
    """A heterograph, a one-relation homogeneous graph and a bipartite graph (their data)."""
    gen = torch.Generator().manual_seed(seed)
    hetero = {("u", "f", "u"): random_edges(gen, 6, 6, 12), ("u", "p", "g"): random_edges(gen, 6, 5, 10),
              ("d", "m", "g"): random_edges(gen, 4, 5, 7)}
    counts = {"u": 6, "g": 5, "d": 4}
    return [(hetero, counts), ({("u", "f", "u"): hetero[("u", "f", "u")]}, {"u": 6}),
            ({("u", "p", "g"): hetero[("u", "p", "g")]}, {"u": 6, "g": 5})]


def build(module, data, counts, idtype):
    g = module.heterograph(data, counts, idtype=idtype)
    for ntype in g.ntypes:
        g.nodes[ntype].data["h"] = torch.arange(g.num_nodes(ntype) * 2, dtype=torch.float64).view(-1, 2) + len(ntype)
    for cet in g.canonical_etypes:
        g.edges[cet].data["w"] = torch.arange(g.num_edges(cet), dtype=torch.float64) + 10 * len(cet[1])
    return g


def same_graph(ours, theirs):
    assert ours.ntypes == theirs.ntypes and ours.canonical_etypes == theirs.canonical_etypes
    assert ours.idtype == theirs.idtype
    for ntype in theirs.ntypes:
        assert ours.num_nodes(ntype) == theirs.num_nodes(ntype)
        assert sorted(ours.nodes[ntype].data) == sorted(theirs.nodes[ntype].data)
        for key, value in theirs.nodes[ntype].data.items():
            assert ours.nodes[ntype].data[key].dtype == value.dtype and torch.equal(ours.nodes[ntype].data[key], value)
    for cet in theirs.canonical_etypes:
        for a, b in zip(ours.edges(etype=cet, form="all"), theirs.edges(etype=cet, form="all")):
            assert a.dtype == b.dtype and torch.equal(a, b), (cet, a, b)
        assert sorted(ours.edges[cet].data) == sorted(theirs.edges[cet].data)
        for key, value in theirs.edges[cet].data.items():
            assert ours.edges[cet].data[key].dtype == value.dtype and torch.equal(ours.edges[cet].data[key], value)


def pick(gen, count, idtype):
    return torch.randperm(count, generator=gen)[: int(torch.randint(0, count + 1, (), generator=gen))].to(idtype)


# ---------------------------------------------------------------------- subgraphs
@pytest.mark.parametrize("idtype", IDTYPES)
def test_subgraphs_match_dgl_on_every_kind_of_graph(dgl, idtype):
    gen = torch.Generator().manual_seed(1)
    for seed in range(4):
        for data, counts in schemas(seed):
            ours, theirs = build(udgl, data, counts, idtype), build(dgl, data, counts, idtype)
            nodes = {t: pick(gen, n, idtype) for t, n in counts.items()}
            edges = {cet: pick(gen, len(data[cet][0]), idtype) for cet in data}
            for relabel in (True, False):
                same_graph(ours.subgraph(nodes, relabel_nodes=relabel), theirs.subgraph(nodes, relabel_nodes=relabel))
                same_graph(ours.edge_subgraph(edges, relabel_nodes=relabel),
                           theirs.edge_subgraph(edges, relabel_nodes=relabel))
                same_graph(ours.in_subgraph(nodes, relabel_nodes=relabel),
                           theirs.in_subgraph(nodes, relabel_nodes=relabel))
                same_graph(ours.out_subgraph(nodes, relabel_nodes=relabel, store_ids=False),
                           theirs.out_subgraph(nodes, relabel_nodes=relabel, store_ids=False))
            seeds = {"u": torch.tensor([0, 3], dtype=idtype)}
            for k in (1, 2):
                for ours_fn, theirs_fn in ((usub.khop_in_subgraph, dgl.khop_in_subgraph),
                                           (usub.khop_out_subgraph, dgl.khop_out_subgraph)):
                    (a, a_ids), (b, b_ids) = ours_fn(ours, seeds, k), theirs_fn(theirs, seeds, k)
                    same_graph(a, b)
                    assert a_ids["u"].dtype == b_ids["u"].dtype and torch.equal(a_ids["u"], b_ids["u"])


def test_khop_on_ids_and_masks(dgl):
    edges = (torch.tensor([0, 1, 2, 3, 4]), torch.tensor([1, 2, 3, 4, 0]))
    ours, theirs = udgl.graph(edges), dgl.graph(edges)
    (a, a_ids), (b, b_ids) = usub.khop_in_subgraph(ours, [2, 4], 1), dgl.khop_in_subgraph(theirs, [2, 4], 1)
    same_graph(a, b)
    assert a_ids.dtype == b_ids.dtype and torch.equal(a_ids, b_ids)
    mask = torch.tensor([True, False, True, True, False])
    same_graph(ours.subgraph(mask), theirs.subgraph(mask))
    with pytest.raises(udgl.DGLError, match="outside"):   # a True past the node count is refused
        ours.subgraph(torch.tensor([True, False, False, False, False, True]))
    with pytest.raises(udgl.DGLError, match="k must be"):
        usub.khop_in_subgraph(ours, [0], -1)


def test_relation_slices_and_type_subgraphs(dgl):
    gen = torch.Generator().manual_seed(3)
    data = {("u", "f", "u"): random_edges(gen, 6, 6, 8), ("u", "p", "g"): random_edges(gen, 6, 5, 6),
            ("d", "m", "g"): random_edges(gen, 4, 5, 5), ("u", "w", "g"): random_edges(gen, 6, 5, 3)}
    counts = {"u": 6, "g": 5, "d": 4}
    ours, theirs = build(udgl, data, counts, torch.int32), build(dgl, data, counts, torch.int32)
    full = slice(None)
    for key in [(full, full, full), ("u", full, "g"), ("u", full, full), (full, full, "g"), ("d", full, "g")]:
        a, b = ours[key], theirs[key]
        assert (a.ntypes, a.etypes) == (b.ntypes, b.etypes)
        for x, y in zip(a.edges(form="all"), b.edges(form="all")):
            assert equal(x, y)
        for ntype in b.ntypes:
            for name, value in b.nodes[ntype].data.items():
                assert a.nodes[ntype].data[name].dtype == value.dtype and torch.equal(a.nodes[ntype].data[name], value)
        for name, value in b.edata.items():
            assert a.edata[name].dtype == value.dtype and torch.equal(a.edata[name], value)
    sub = ours.edge_type_subgraph(["p", "m"])
    same_graph(sub, theirs.edge_type_subgraph(["p", "m"]))
    sub.nodes["g"].data["new"] = torch.ones(5)   # DGL's type subgraphs share the features
    assert "new" in ours.nodes["g"].data
    same_graph(ours.node_type_subgraph(["u"]), theirs.node_type_subgraph(["u"]))


# ---------------------------------------------------------------------- types and formats
def test_metagraph_and_unidirectional_bipartite_views(dgl):
    data = {("A", "AB", "B"): ([0, 0, 1], [1, 2, 5]), ("A", "AC", "C"): ([1, 0], [0, 0])}
    ours, theirs = udgl.heterograph(data, {"A": 2, "B": 6, "C": 1, "D": 3}), \
        dgl.heterograph(data, {"A": 2, "B": 6, "C": 1, "D": 3})
    assert sorted(ours.metagraph().edges(keys=True)) == sorted(theirs.metagraph().edges(keys=True))
    assert sorted(ours.metagraph().nodes) == sorted(theirs.metagraph().nodes)
    assert (ours.is_unibipartite, ours.srctypes, ours.dsttypes) == (theirs.is_unibipartite, theirs.srctypes,
                                                                   theirs.dsttypes)
    assert (ours.num_src_nodes(), ours.num_dst_nodes(), ours.num_nodes()) == \
        (theirs.num_src_nodes(), theirs.num_dst_nodes(), theirs.num_nodes())
    assert ours.get_ntype_id("SRC/A") == theirs.get_ntype_id("SRC/A")
    ours.nodes["A"].data["h"] = torch.ones(2)
    assert ours.nodes["SRC/A"].data["h"] is ours.nodes["A"].data["h"]
    assert not ours.is_multigraph and udgl.heterograph({("a", "x", "a"): ([0, 0], [1, 1])}).is_multigraph
    assert ours._etype2canonical == {"AB": ("A", "AB", "B"), "AC": ("A", "AC", "C")}
    assert not ours.is_pinned() and ours.unpin_memory_() is ours
    with pytest.raises(udgl.DGLError, match="pin"):
        ours.pin_memory_()
    with pytest.raises(udgl.DGLError, match="SparseMatrix"):
        ours.adj(etype="AB")


def test_format_bookkeeping_matches_dgl(dgl):
    edges = ([0, 1, 0, 2], [0, 1, 1, 0])
    ours, theirs = udgl.graph(edges), dgl.graph(edges)
    steps = [lambda g: g.formats(), lambda g: g.formats(["coo", "csr"]).formats(),
             lambda g: g.formats("csc").formats()]
    for step in steps:
        assert step(ours) == step(theirs)
    for graph in (ours, theirs):
        graph.in_degrees()
    assert ours.formats() == theirs.formats()
    restricted = ours.formats(["coo", "csr"])
    restricted.create_formats_()
    assert sorted(restricted.formats(["coo", "csc"]).formats()["created"]) == ["coo"]
    with pytest.raises(udgl.DGLError, match="sparse formats"):
        ours.formats("csc").out_degrees()
    assert ours.formats("csc").in_degrees().tolist() == theirs.in_degrees().tolist()


def test_compressed_input_adj_tensors_and_edge_lists(dgl):
    data = ("csr", (torch.tensor([0, 1, 3, 3]), torch.tensor([2, 0, 1]), []))
    ours, theirs = udgl.graph(data), dgl.graph(data)
    for fmt in ("coo", "csr", "csc"):
        for a, b in zip(ours.adj_tensors(fmt), theirs.adj_tensors(fmt)):
            # (DGL's empty eids for the CSR it was given are float32, left from the [] it got)
            assert equal(a, b) or (a.numel() == b.numel() == 0 and a.dtype == ours.idtype), fmt
    assert ours.num_nodes() == theirs.num_nodes() and ours.formats() == theirs.formats()
    with pytest.raises(udgl.DGLError, match="indptr"):
        udgl.graph(("csr", (torch.tensor([0, 1, 3]), torch.tensor([2, 0, 1, 1]), [])))
    with pytest.raises(udgl.DGLError):
        udgl.graph(("csr", (torch.tensor([0, 1, 3, 3]), torch.tensor([2, 0, 1]), [])), num_nodes=4)
    pairs = [(0, 1), (2, 3), (1, 1)]
    for a, b in zip(udgl.graph(pairs).edges(), dgl.graph(pairs).edges()):
        assert equal(a, b)
    with pytest.raises(udgl.DGLError, match="pairs"):
        udgl.graph([(0, 1, 2)])
    assert is_sorted_srcdst(torch.tensor([0, 0, 1]), torch.tensor([2, 1, 0])) == \
        dgl.utils.is_sorted_srcdst(torch.tensor([0, 0, 1]), torch.tensor([2, 1, 0]))


# ---------------------------------------------------------------------- conversions
def _nx_view(graph):
    nodes = {n: {k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in attrs.items()}
             for n, attrs in graph.nodes(data=True)}
    edges = sorted((int(u), int(v), tuple(sorted((k, v.tolist() if isinstance(v, torch.Tensor) else v)
                                                  for k, v in attrs.items())))
                   for u, v, attrs in graph.edges(data=True))
    return nodes, edges


def test_to_networkx_matches_dgl(dgl):
    data = {("user", "follows", "user"): ([0, 1], [1, 2]), ("user", "follows", "topic"): ([1, 1], [1, 2]),
            ("user", "plays", "game"): ([0, 3], [3, 4])}
    graphs = udgl.heterograph(data), dgl.heterograph(data)
    for g in graphs:
        g.nodes["game"].data["n"] = torch.arange(5.0)
        g.nodes["user"].data["n"] = torch.arange(8.0).view(4, 2)
        g.edges["plays"].data["e"] = torch.ones(2, 2)
    assert _nx_view(to_networkx(graphs[0], ["n"], ["e"])) == _nx_view(dgl.to_networkx(graphs[1], ["n"], ["e"]))
    homogeneous = udgl.graph(([0, 1, 1], [1, 2, 2])), dgl.graph(([0, 1, 1], [1, 2, 2]))
    for g in homogeneous:
        g.ndata["x"] = torch.arange(3.0)
        g.edata["y"] = torch.arange(6.0).view(3, 2)
    ours, theirs = homogeneous[0].to_networkx(["x"], ["y"]), dgl.to_networkx(homogeneous[1], ["x"], ["y"])
    assert _nx_view(ours) == _nx_view(theirs)


def test_from_networkx_matches_dgl(dgl):
    nx_graph = nx.DiGraph()
    nx_graph.add_nodes_from([1, 3], bipartite=0, feat=torch.zeros(2))
    nx_graph.add_nodes_from([2, 4, 5], bipartite=1, other=torch.ones(3))
    nx_graph.add_edge(3, 5, weight=torch.ones(1), eid=1)
    nx_graph.add_edge(1, 4, weight=2 * torch.ones(1), eid=0)
    for kwargs in ({}, {"edge_id_attr_name": "eid", "u_attrs": ["feat"], "v_attrs": ["other"], "e_attrs": ["weight"]}):
        same_graph(bipartite_from_networkx(nx_graph, "user", "plays", "game", **kwargs),
                   dgl.bipartite_from_networkx(nx_graph, "user", "plays", "game", **kwargs))
    labelled = nx.DiGraph([("b", "a"), ("c", "b"), ("a", "c")])
    for a, b in zip(udgl.from_networkx(labelled).edges(), dgl.from_networkx(labelled).edges()):
        assert equal(a, b)   # nodes numbered in sorted label order, as DGL numbers them
    with pytest.raises(udgl.DGLError, match="bipartite"):
        bipartite_from_networkx(nx.DiGraph([(0, 1)]), "a", "e", "b")


def test_homogeneous_round_trip_ids_and_empty_types(dgl):
    data = {("A", "AB", "B"): ([0, 1, 2], [1, 1, 0]), ("B", "BA", "A"): ([0, 1], [2, 2])}
    graphs = udgl.heterograph(data, {"A": 3, "B": 2, "C": 0}), dgl.heterograph(data, {"A": 3, "B": 2, "C": 0})
    for g in graphs:
        g.nodes["A"].data["x"] = torch.arange(3.0)
        g.nodes["B"].data["x"] = torch.arange(2.0)
    a, b = udgl.to_homogeneous(graphs[0], ndata=["x"]), dgl.to_homogeneous(graphs[1], ndata=["x"])
    for key in ("x", udgl.NID, udgl.NTYPE):
        assert a.ndata[key].dtype == b.ndata[key].dtype and torch.equal(a.ndata[key], b.ndata[key])
    edges = ([0, 1, 2, 0], [2, 2, 3, 3])
    homogeneous = udgl.graph(edges), dgl.graph(edges)
    for g in homogeneous:
        g.ndata[udgl.NTYPE] = torch.tensor([0, 0, 1, 2])
        g.edata[udgl.ETYPE] = torch.tensor([0, 0, 1, 2])
    mg = nx.MultiDiGraph([("l0", "l1", "e0"), ("l1", "l2", "e1"), ("l0", "l2", "e2"), ("l2", "l0", "e0")])
    for metagraph in (None, mg):
        same_graph(udgl.to_heterogeneous(homogeneous[0], ["l0", "l1", "l2"], ["e0", "e1", "e2"], metagraph=metagraph),
                   dgl.to_heterogeneous(homogeneous[1], ["l0", "l1", "l2"], ["e0", "e1", "e2"], metagraph=metagraph))
    with pytest.raises(udgl.DGLError, match="has no feature"):
        graphs[0].nodes["B"].data.pop("x")
        udgl.to_homogeneous(graphs[0], ndata=["x"])


def test_metapath_block_to_graph_incidence_and_reverse(dgl):
    data = {("user", "follows", "user"): ([0, 1], [1, 2]), ("user", "plays", "game"): ([0, 1, 2, 1], [0, 0, 1, 1]),
            ("developer", "develops", "game"): ([0, 1], [0, 1])}
    ours, theirs = build(udgl, data, None, torch.int32), build(dgl, data, None, torch.int32)
    for path in (["follows", "plays"], ["follows"], ["follows", "follows"]):
        same_graph(metapath_reachable_graph(ours, path), dgl.metapath_reachable_graph(theirs, path))
    for typestr in ("in", "out", "both"):
        assert equal(ours.inc(typestr, etype="follows").to_dense(), theirs.inc(typestr, etype="follows").to_dense())
    assert equal(ours.inc("out", etype="plays").to_dense(), theirs.inc("out", etype="plays").to_dense())
    with pytest.raises(udgl.DGLError, match="both"):
        ours.inc("both", etype="plays")
    for copy_edata in (False, True):
        same_graph(udgl.reverse(ours, copy_edata=copy_edata), dgl.reverse(theirs, copy_edata=copy_edata))
    block_data = {("A", "AB", "B"): ([1, 2, 3], [2, 1, 0]), ("B", "BA", "A"): ([2, 3], [3, 4])}
    blocks = udgl.create_block(block_data), dgl.create_block(block_data)
    one = udgl.create_block(([0, 1], [1, 2]), 3, 4), dgl.create_block(([0, 1], [1, 2]), 3, 4)
    for pair in (blocks, one):
        for b in pair:
            b.edata["x"] = {cet: torch.ones(b.num_edges(cet)) for cet in b.canonical_etypes} \
                if len(b.canonical_etypes) > 1 else torch.ones(b.num_edges())
        same_graph(block_to_graph(pair[0]), dgl.block_to_graph(pair[1]))


# ---------------------------------------------------------------------- functions of the graph
def test_typed_batches_and_filters(dgl):
    seen = []
    g = udgl.heterograph({("user", "plays", "game"): ([0, 1], [1, 2])})
    g.apply_edges(lambda edges: seen.append(edges.canonical_etype) or {})
    g.update_all(lambda edges: {"m": edges.src["h"]} if False else {}, lambda nodes: seen.append(nodes.ntype) or {})
    g.apply_nodes(lambda nodes: seen.append(nodes.ntype) or {}, ntype="game")
    assert seen[0] == ("user", "plays", "game") and "game" in seen
    graphs = udgl.graph(([0, 1, 2], [1, 2, 0]), idtype=torch.int32), dgl.graph(([0, 1, 2], [1, 2, 0]),
                                                                               idtype=torch.int32)
    for h in graphs:
        h.ndata["x"] = torch.tensor([1.0, 5.0, 3.0])
        h.edata["w"] = torch.tensor([1.0, 2.0, 3.0])
    for args in ((), (torch.tensor([2, 1], dtype=torch.int32),)):
        a = graphs[0].filter_nodes(lambda nodes: nodes.data["x"] > 2, *args)
        b = graphs[1].filter_nodes(lambda nodes: nodes.data["x"] > 2, *args)
        assert a.dtype == b.dtype and torch.equal(a, b)
    a = graphs[0].filter_edges(lambda edges: edges.src["x"] + edges.data["w"] > 3)
    b = graphs[1].filter_edges(lambda edges: edges.src["x"] + edges.data["w"] > 3)
    assert a.dtype == b.dtype and torch.equal(a, b)


def test_apply_edges_over_several_relations(dgl):
    data = {("n1", "r1", "n2"): ([0, 1], [1, 0]), ("n1", "r2", "n3"): ([1], [0])}
    ours, theirs = build(udgl, data, None, torch.int64), build(dgl, data, None, torch.int64)
    assert isinstance(ours.srcdata["h"], torch.Tensor) and isinstance(theirs.srcdata["h"], torch.Tensor)
    for g, module in ((ours, udgl), (theirs, dgl)):
        g.apply_edges(module.function.u_add_v("h", "h", "s"))
    for cet in data:
        assert equal(ours.edges[cet].data["s"], theirs.edges[cet].data["s"])
    with pytest.raises(udgl.DGLError, match="etype"):
        ours.apply_edges(lambda edges: {"s": edges.src["h"]})


@pytest.mark.parametrize("idtype", IDTYPES)
def test_bipartite_mutations_match_dgl(dgl, idtype):
    graphs = [module.heterograph({("user", "plays", "game"): ([0, 1, 1], [1, 2, 0])}, idtype=idtype)
              for module in (udgl, dgl)]
    for g in graphs:
        g.nodes["user"].data["h"] = torch.tensor([1, 1], dtype=idtype)
        g.edata["h"] = torch.tensor([1, 2, 3], dtype=idtype)
        g.add_nodes(2, data={"h": torch.tensor([2, 2], dtype=idtype)}, ntype="user")
        g.add_nodes(1, ntype="game")
        g.add_edges(torch.tensor([0, 5], dtype=idtype), torch.tensor([4, 3], dtype=idtype),
                    {"h": torch.tensor([7, 8], dtype=idtype)})
    same_graph(*graphs)
    for g in graphs:
        g.remove_nodes(torch.tensor([1], dtype=idtype), ntype="user", store_ids=True)
        g.remove_nodes(torch.tensor([0], dtype=idtype), ntype="game")
    same_graph(*graphs)
    with pytest.raises(udgl.DGLError, match="node type"):
        graphs[0].add_nodes(1)


def test_batches_of_every_kind_match_dgl(dgl):
    def parts(module):
        g1 = module.heterograph({("user", "follows", "user"): ([0, 1], [1, 2]), ("user", "plays", "game"): ([], [])})
        g2 = module.heterograph({("user", "follows", "user"): ([0, 1], [1, 2]),
                                 ("user", "plays", "game"): ([0, 1], [0, 0])})
        g1.nodes["user"].data["h"] = torch.arange(3.0)
        g2.nodes["user"].data["h"] = torch.arange(3.0) + 3
        g2.nodes["game"].data["h"] = torch.ones(1)   # g1 has no game node: its missing feature is fine
        g2.edges["plays"].data["w"] = torch.ones(2)
        return g1, g2
    (a1, a2), (b1, b2) = parts(udgl), parts(dgl)
    ours, theirs = udgl.batch([a1, a2]), dgl.batch([b1, b2])
    same_graph(ours, theirs)
    for i in range(2):
        same_graph(slice_batch(ours, i, store_ids=True), dgl.slice_batch(theirs, i, store_ids=True))
    for x, y in zip(udgl.unbatch(ours), dgl.unbatch(theirs)):
        same_graph(x, y)
    bipartite = [udgl.heterograph({("a", "e", "b"): ([0, 1], [2, 0])}), dgl.heterograph({("a", "e", "b"): ([0, 1],
                                                                                                          [2, 0])})]
    ours, theirs = udgl.batch([bipartite[0]] * 3), dgl.batch([bipartite[1]] * 3)
    same_graph(ours, theirs)
    assert ours.batch_num_nodes("b").tolist() == theirs.batch_num_nodes("b").tolist()
    for x, y in zip(udgl.unbatch(ours), dgl.unbatch(theirs)):
        same_graph(x, y)
    a1.nodes["user"].data["extra"] = torch.ones(3)
    with pytest.raises(udgl.DGLError, match="same features"):
        udgl.batch([a1, a2])
    homogeneous = udgl.batch([udgl.graph(([0, 1], [1, 2])), udgl.graph(([0], [1]))])
    homogeneous.set_batch_num_nodes({"_N": torch.tensor([2, 3])})
    assert homogeneous.batch_num_nodes().tolist() == [2, 3]
    with pytest.raises(udgl.DGLError, match="sum"):
        homogeneous.set_batch_num_edges(torch.tensor([1, 1]))
