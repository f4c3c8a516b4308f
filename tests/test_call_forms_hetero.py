"""PyG's call forms on the heterogeneous layers (float64, values and gradients):

* RGCNConv: ``conv(x, edge_index, edge_type)`` and ``conv(x, adj_t)`` with the relation ids as the
  values of a SparseTensor or a torch sparse adjacency (COO with duplicate entries, CSR, CSC), with
  features, featureless (``x`` None or node ids) and bipartite pairs, equal to PyG's RGCNConv
  given the same weights, for every decomposition and aggregation;
* HeteroConv and HGTConv: ``conv(x_dict, edge_index_dict)`` (``[2, E]`` tensors or SparseTensors)
  equal to PyG's HeteroConv/HGTConv and to our HeteroGraph form;
* the dict form's graph is cached on the adjacencies' identity and in-place version, holds nothing
  alive, and wrong forms are refused naming the accepted ones.
"""
from __future__ import annotations

import gc
import weakref

import pytest
import torch

import unigraph
from unigraph import HeteroConv, HeteroGraph, HGTConv, RGCNConv
from unigraph import call_forms
from unigraph.nn import hetero_forms
from test_hetero_layers import DECOMPOSITIONS, assert_all_close, copy_pyg_hgt, forward_and_grads, leaves_of

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse", reason="SparseTensor inputs need torch_sparse")
SparseTensor = torch_sparse.SparseTensor

N, R, F_IN, F_OUT = 7, 3, 6, 4


def typed_edges(num_src: int = N, num_dst: int = N, num_edges: int = 30, seed: int = 0):
    """Random edges with relation ids: parallel edges of different (and equal) relations, self-loops,
    and the last destination without in-edges."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    dst = torch.randint(0, num_dst - 1, (num_edges,), generator=gen)
    edge_type = torch.randint(0, R, (num_edges,), generator=gen)
    src[:3], dst[:3], edge_type[:3] = src[0], dst[0], torch.tensor([0, 1, 1])   # parallel edges, one repeated
    return torch.stack([src, dst]), edge_type


def typed_adjacency(form: str, edge_index, edge_type, shape):
    """``adj_t[dst, src]`` holding the relation ids as values, duplicates kept."""
    if form == "sparse_tensor":
        return SparseTensor(row=edge_index[1], col=edge_index[0], value=edge_type, sparse_sizes=shape)
    # uncoalesced: duplicates kept
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_type, shape, check_invariants=False)
    if form == "coo":
        return coo
    # CSR/CSC through SparseTensor, which keeps duplicate entries (torch's conversion would sum them)
    adj = SparseTensor(row=edge_index[1], col=edge_index[0], value=edge_type, sparse_sizes=shape)
    return adj.to_torch_sparse_csr_tensor() if form == "csr" else adj.to_torch_sparse_csc_tensor()


def rgcn_pair(width_in, aggr: str, decomposition: dict):
    theirs = pyg_nn.RGCNConv(width_in, F_OUT, R, aggr=aggr, **decomposition).double()
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = RGCNConv(width_in, F_OUT, R, aggr=aggr, **decomposition).double()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return ours, theirs


def run_both(ours, theirs, ours_call, theirs_call, leaves, where):
    assert_all_close(forward_and_grads(ours, ours_call, leaves), forward_and_grads(theirs, theirs_call, leaves),
                     where)


# ---------------------------------------------------------------------- RGCNConv
@pytest.mark.parametrize("decomposition", DECOMPOSITIONS, ids=["plain", "bases", "blocks"])
@pytest.mark.parametrize("aggr", ["mean", "sum", "max", "min"])
@pytest.mark.parametrize("form", ["edge_index", "sparse_tensor", "coo", "csr", "csc"])
def test_rgcn_pyg_forms_match_pyg(form, aggr, decomposition):
    edge_index, edge_type = typed_edges()
    x = torch.randn(N, F_IN, dtype=torch.float64, requires_grad=True)
    for width_in in (F_IN, 2):   # wider and narrower than the output: both orders of weight and aggregation
        ours, theirs = rgcn_pair(width_in, aggr, decomposition)
        xs = x[:, :width_in]
        want = lambda: theirs(xs, edge_index, edge_type)   # noqa: E731
        if form == "edge_index":
            got = lambda: ours(xs, edge_index, edge_type)   # noqa: E731
        else:
            adj = typed_adjacency(form, edge_index, edge_type, (N, N))
            got = lambda: ours(xs, adj)   # noqa: E731
        run_both(ours, theirs, got, want, [x], f"RGCNConv({width_in}) {form} {aggr} {decomposition}")


@pytest.mark.parametrize("decomposition", DECOMPOSITIONS[:2], ids=["plain", "bases"])
@pytest.mark.parametrize("aggr", ["mean", "sum", "max", "min"])
@pytest.mark.parametrize("form", ["edge_index", "sparse_tensor", "coo"])
def test_rgcn_featureless_matches_pyg(form, aggr, decomposition):
    """x None: node i is the one-hot vector e_i (PyG reads row i of each weight), for every aggregation."""
    edge_index, edge_type = typed_edges()
    ours, theirs = rgcn_pair(N, aggr, decomposition)
    adj = edge_index if form == "edge_index" else typed_adjacency(form, edge_index, edge_type, (N, N))
    types = edge_type if form == "edge_index" else None
    run_both(ours, theirs, lambda: ours(None, adj, types), lambda: theirs(None, edge_index, edge_type), [],
             f"featureless {form} {aggr}")
    ids = torch.randperm(N)   # node ids as x: the embedding rows of those ids
    run_both(ours, theirs, lambda: ours(ids, adj, types), lambda: theirs(ids, edge_index, edge_type), [],
             f"node ids {form} {aggr}")
    # sum/mean: the same as one-hot features through the feature path (max/min differ: PyG takes
    # the max of the weight rows, not the weight times the max of the one-hot vectors)
    eye = torch.eye(N, dtype=torch.float64)
    if aggr in ("mean", "sum"):
        torch.testing.assert_close(ours(None, adj, types), ours(eye, adj, types), rtol=1e-12, atol=1e-12)
    # the graph form takes it too
    g = unigraph.Graph(edge_index, num_nodes=N)
    torch.testing.assert_close(ours(g, None, edge_type), theirs(None, edge_index, edge_type), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("form", ["edge_index", "sparse_tensor", "coo"])
def test_rgcn_bipartite_pairs_match_pyg(form):
    num_src, num_dst = 9, 5
    edge_index, edge_type = typed_edges(num_src, num_dst)
    adj = edge_index if form == "edge_index" else typed_adjacency(form, edge_index, edge_type, (num_dst, num_src))
    types = edge_type if form == "edge_index" else None
    x_src = torch.randn(num_src, F_IN, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(num_dst, 2, dtype=torch.float64, requires_grad=True)
    ours, theirs = rgcn_pair((F_IN, 2), "mean", {"num_bases": 2})
    run_both(ours, theirs, lambda: ours((x_src, x_dst), adj, types),
             lambda: theirs((x_src, x_dst), edge_index, edge_type), [x_src, x_dst], f"bipartite {form}")
    # featureless on both sides: (None, destination ids)
    ours, theirs = rgcn_pair(num_src, "sum", {})
    ids_dst = torch.randint(0, num_src, (num_dst,))
    run_both(ours, theirs, lambda: ours((None, ids_dst), adj, types),
             lambda: theirs((None, ids_dst), edge_index, edge_type), [], f"bipartite featureless {form}")


def test_rgcn_relation_ids_changed_in_place_are_seen():
    edge_index, edge_type = typed_edges()
    x = torch.randn(N, F_IN, dtype=torch.float64)
    ours, theirs = rgcn_pair(F_IN, "mean", {})
    for adj in (typed_adjacency("sparse_tensor", edge_index, edge_type.clone(), (N, N)),
                typed_adjacency("coo", edge_index, edge_type.clone(), (N, N))):
        before = ours(x, adj)
        values = adj.storage.value() if isinstance(adj, SparseTensor) else adj._values()
        values.copy_((values + 1) % R)
        after = ours(x, adj)
        torch.testing.assert_close(after, theirs(x, edge_index, (edge_type + 1) % R), rtol=1e-12, atol=1e-12)
        assert not torch.allclose(before, after)


def test_rgcn_refuses_wrong_forms_by_name():
    edge_index, edge_type = typed_edges()
    x = torch.randn(N, F_IN)
    conv = RGCNConv(F_IN, F_OUT, R)
    sparse = typed_adjacency("sparse_tensor", edge_index, edge_type, (N, N))
    with pytest.raises(ValueError, match="edge_type and a sparse adjacency"):
        conv(x, sparse, edge_type)
    with pytest.raises(ValueError, match="relation id of each edge as its values.*has no values"):
        conv(x, SparseTensor(row=edge_index[1], col=edge_index[0], sparse_sizes=(N, N)))
    with pytest.raises(ValueError, match="one integer relation id per edge.*float"):
        conv(x, torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.shape[1]), (N, N)))
    with pytest.raises(TypeError, match="look swapped.*accepted forms"):
        conv(edge_index, x, edge_type)
    with pytest.raises(TypeError, match="needs edge_type"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match=r"relation id 3, outside 0\.\.2"):
        conv(x, edge_index, torch.full_like(edge_type, 3))
    featureless = RGCNConv(N, F_OUT, R)
    with pytest.raises(ValueError, match=r"id 7, outside 0\.\.6"):
        featureless(torch.full((N,), 7), edge_index, edge_type)
    with pytest.raises(TypeError, match="features and node ids"):
        RGCNConv((F_IN, N), F_OUT, R)((x, torch.arange(N)), edge_index, edge_type)
    with pytest.raises(ValueError, match="num_blocks.*node features"):
        RGCNConv(N, 7, R, num_blocks=7)(None, edge_index, edge_type)
    with pytest.raises(ValueError, match=r"x has 5 rows but the graph has 7"):   # x None is 5 nodes
        RGCNConv(5, F_OUT, R)(unigraph.Graph(edge_index, num_nodes=N), None, edge_type)


# ---------------------------------------------------------------------- HeteroConv and HGTConv
def small_hetero(seed: int = 0):
    """Two types, a self-relation, two relations between the types (one without edges), duplicates."""
    gen = torch.Generator().manual_seed(seed)
    counts = {"paper": 6, "author": 4}
    edges = {("author", "writes", "paper"): torch.stack([torch.randint(0, 4, (9,), generator=gen),
                                                         torch.randint(0, 6, (9,), generator=gen)]),
             ("paper", "cites", "paper"): torch.stack([torch.randint(0, 6, (8,), generator=gen),
                                                       torch.randint(0, 5, (8,), generator=gen)]),
             ("paper", "rev_writes", "author"): torch.zeros(2, 0, dtype=torch.int64)}
    edges[("author", "writes", "paper")][:, 1] = edges[("author", "writes", "paper")][:, 0]
    x = {t: torch.randn(n, F_IN, dtype=torch.float64, generator=gen).requires_grad_() for t, n in counts.items()}
    return edges, x, HeteroGraph(edges, num_nodes=counts)


def as_sparse(edges, x):
    return {r: SparseTensor(row=e[1], col=e[0], sparse_sizes=(x[r[2]].shape[0], x[r[0]].shape[0]))
            for r, e in edges.items()}


@pytest.mark.filterwarnings("ignore:There exist node types")
@pytest.mark.parametrize("form", ["edge_index", "sparse_tensor"])
@pytest.mark.parametrize("layer", ["sage", "graph-weighted"])
def test_hetero_conv_dict_form_matches_pyg(form, layer):
    edges, x, hg = small_hetero()
    pyg_convs, ours_convs = {}, {}
    for relation in edges:
        ours_cls, pyg_cls = ((unigraph.SAGEConv, pyg_nn.SAGEConv) if layer == "sage"
                             else (unigraph.GraphConv, pyg_nn.GraphConv))
        pyg_convs[relation], ours_convs[relation] = pyg_cls((F_IN, F_IN), F_OUT), ours_cls((F_IN, F_IN), F_OUT)
        ours_convs[relation].load_state_dict(pyg_convs[relation].state_dict(), strict=True)
    theirs = pyg_nn.HeteroConv(pyg_convs, aggr="sum").double()
    ours = HeteroConv(ours_convs, aggr="sum").double()
    adjs = edges if form == "edge_index" else as_sparse(edges, x)
    if layer == "graph-weighted" and form == "sparse_tensor":   # the values are edge weights, as in PyG
        gen = torch.Generator().manual_seed(1)
        adjs = {r: a.set_value(torch.rand(a.nnz(), dtype=torch.float64, generator=gen), layout="coo")
                for r, a in adjs.items()}
    leaves = leaves_of(x)
    want = forward_and_grads(theirs, lambda: theirs(x, adjs), leaves)
    assert_all_close(forward_and_grads(ours, lambda: ours(x, adjs), leaves), want, f"HeteroConv {layer} {form}")
    if form == "edge_index":   # and the HeteroGraph form
        assert_all_close(forward_and_grads(ours, lambda: ours(hg, x), leaves), want, f"HeteroConv {layer} hg")


@pytest.mark.parametrize("form", ["edge_index", "sparse_tensor"])
def test_hgt_dict_form_matches_pyg_and_the_graph_form(form):
    edges, x, hg = small_hetero()
    widths = {"paper": F_IN, "author": F_IN}
    torch.manual_seed(0)
    theirs = pyg_nn.HGTConv(widths, 4, hg.metadata(), heads=2).double()
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours = HGTConv(widths, 4, hg.metadata(), heads=2).double()
    copy_pyg_hgt(ours, theirs)
    adjs = edges if form == "edge_index" else as_sparse(edges, x)
    leaves = leaves_of(x)
    got = forward_and_grads(ours, lambda: ours(x, adjs), leaves)
    assert_all_close(got, forward_and_grads(ours, lambda: ours(hg, x), leaves), f"HGTConv {form} vs hg")
    want = forward_and_grads(theirs, lambda: theirs(x, edges), leaves)
    for key, value in want[0].items():
        torch.testing.assert_close(got[0][key], value, rtol=1e-9, atol=1e-9)
    for g, w in zip(got[1][: len(leaves)], want[1][: len(leaves)]):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9)


def test_dict_form_graph_cached_and_rebuilt_after_in_place_change():
    edges, x, _ = small_hetero()
    x = {t: v.detach() for t, v in x.items()}
    first = hetero_forms.hetero_graph("t", x, edges)
    assert hetero_forms.hetero_graph("t", x, dict(edges)) is first          # same tensors, same versions: a hit
    conv = HGTConv(F_IN, 4, first.metadata(), heads=2).double()
    before = conv(x, edges)
    edges[("paper", "cites", "paper")][1, 0] = 5                          # in place: the next call rebuilds
    second = hetero_forms.hetero_graph("t", x, edges)
    assert second is not first
    assert int(second[("paper", "cites", "paper")].dst[0]) == 5
    after = conv(x, edges)
    fresh = HeteroGraph(edges, num_nodes={"paper": 6, "author": 4})
    torch.testing.assert_close(after["paper"], conv(fresh, x)["paper"])
    assert not torch.allclose(before["paper"], after["paper"])
    other_rows = {"paper": x["paper"], "author": torch.randn(5, F_IN, dtype=torch.float64)}
    assert hetero_forms.hetero_graph("t", other_rows, edges).num_nodes("author") == 5   # counts are part of the key


def test_dict_form_cache_holds_nothing_alive():
    edges, x, _ = small_hetero()
    x = {t: v.detach() for t, v in x.items()}
    call_forms.clear_cache()
    graph = hetero_forms.hetero_graph("t", x, edges)
    ref = weakref.ref(edges[("paper", "cites", "paper")])
    assert len(call_forms._CACHE) == 1
    del edges[("paper", "cites", "paper")]   # one adjacency of the dict dies: the entry leaves with it
    gc.collect()
    assert ref() is None and len(call_forms._CACHE) == 0
    del graph


def test_hetero_dict_forms_refused_by_name():
    edges, x, hg = small_hetero()
    conv = HeteroConv({r: unigraph.SAGEConv((F_IN, F_IN), F_OUT) for r in edges}).double()
    hgt = HGTConv(F_IN, 4, hg.metadata()).double()
    for layer in (conv, hgt):
        name = type(layer).__name__
        with pytest.raises(TypeError, match="look swapped"):
            layer(edges, x)
        with pytest.raises(TypeError, match="look swapped.*accepted forms"):
            layer(x, hg)
        with pytest.raises(TypeError, match=rf"{name} cannot read its arguments.*accepted forms"):
            layer(x["paper"], edges)
        with pytest.raises(ValueError, match=r"no features for \['author'\]"):
            layer({"paper": x["paper"]}, edges)
        with pytest.raises(TypeError, match="must be a \\[2, E\\] integer tensor.*transposed"):
            layer(x, {**edges, ("paper", "cites", "paper"): edges[("paper", "cites", "paper")].t().contiguous()})
        with pytest.raises(ValueError, match=r"has shape \[4, 6\] but x_dict has \[6, 4\] rows"):
            layer(x, {**edges, ("author", "writes", "paper"): SparseTensor(
                row=torch.tensor([0]), col=torch.tensor([0]), sparse_sizes=(4, 6))})
    bad = {**edges, ("author", "writes", "paper"): torch.tensor([[4], [0]])}   # author 4 of 4
    with pytest.raises(ValueError, match="HGTConv.*author"):
        hgt(x, bad)
    with pytest.raises(ValueError, match="does not have"):
        conv(x, {r: e for r, e in edges.items() if r[1] != "cites"})
