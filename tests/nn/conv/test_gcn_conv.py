"""GCNConv in PyG's call forms: keyword edge_index, static graphs [B, N, F], flow, EdgeIndex's
sparse_size, PyG's refusals (self-loops without normalization, a non-square adjacency), PyG's cache
attribute names."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, assert_same_as_peer, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, IN, OUT = 10, 5, 4


@pytest.mark.parametrize("in_channels", [IN, 3])  # projects first / aggregates first
def test_static_graph_is_each_feature_set_alone(in_channels):
    torch.manual_seed(0)
    conv = U.GCNConv(in_channels, OUT).double()
    edge_index, weight = random_edges(N, 30), torch.rand(30, dtype=torch.float64)
    x = torch.randn(3, N, in_channels, dtype=torch.float64, requires_grad=True)
    out = conv(x, edge_index, weight)
    assert out.shape == (3, N, OUT)
    x_each = x.detach().clone().requires_grad_()
    expected = torch.stack([conv(x_each[b], edge_index, weight) for b in range(3)])
    torch.testing.assert_close(out, expected, **TOL)
    out.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(x.grad, x_each.grad, **TOL)
    theirs = pyg_nn.GCNConv(in_channels, OUT)
    assert_same(theirs, loaded(theirs, U.GCNConv(in_channels, OUT)), x.detach(), edge_index, weight)


def test_keyword_edge_index_flow_and_edge_index_type():
    from torch_geometric import EdgeIndex
    torch.manual_seed(0)
    conv = U.GCNConv(IN, OUT).double()
    x, edge_index = torch.randn(N, IN, dtype=torch.float64), random_edges(N, 25)
    out = conv(x, edge_index)
    torch.testing.assert_close(conv(x, edge_index=edge_index), out)
    torch.testing.assert_close(conv(x, EdgeIndex(edge_index, sparse_size=(N, N))), out)
    conv.flow = "target_to_source"  # read at call time, as PyG's
    torch.testing.assert_close(conv(x, edge_index.flip(0)), out, **TOL)
    theirs = pyg_nn.GCNConv(IN, OUT, flow="target_to_source")
    assert_same(theirs, loaded(theirs, U.GCNConv(IN, OUT, flow="target_to_source")), x, edge_index)


def test_self_loops_without_normalization_refused_as_pyg_does():
    with pytest.raises(ValueError, match="does not support adding self-loops"):
        U.GCNConv(IN, OUT, normalize=False, add_self_loops=True)
    conv = U.GCNConv(IN, OUT, normalize=False)  # add_self_loops follows normalize
    assert conv.add_self_loops is False
    theirs = pyg_nn.GCNConv(IN, OUT, normalize=False)
    assert_same(theirs, loaded(theirs, U.GCNConv(IN, OUT, normalize=False)),
                torch.randn(N, IN, dtype=torch.float64), random_edges(N, 20))


def test_cached_normalization_under_pygs_names():
    torch_sparse = pytest.importorskip("torch_sparse")
    conv = U.GCNConv(IN, OUT, cached=True)
    x, edge_index = torch.randn(N, IN), random_edges(N, 20)
    assert conv._cached_edge_index is None and conv._cached_adj_t is None
    conv(x, edge_index)
    assert conv._cached_edge_index is not None and conv._cached_adj_t is None
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()
    conv(x, adj)
    assert conv._cached_adj_t is not None


def test_non_square_adjacency_refused_in_pygs_form():
    """PyG asserts a square sparse adjacency and drops a non-square EdgeIndex's size when adding
    self-loops; the block normalization (DGL's) stays with the graph form."""
    from torch_geometric import EdgeIndex
    torch_sparse = pytest.importorskip("torch_sparse")
    import unigraph
    conv = U.GCNConv(IN, OUT)
    x, edge_index = torch.randn(N, IN), random_edges(N, 20, num_dst=4)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, 4)).t()
    for graph in (EdgeIndex(edge_index, sparse_size=(N, 4)), adj, adj.to_torch_sparse_coo_tensor()):
        with pytest.raises(ValueError, match="needs a square adjacency"):
            conv(x, graph)
        with pytest.raises(ValueError, match="needs a square adjacency"):
            conv(x.expand(2, N, IN), graph)
    assert conv(unigraph.Graph(edge_index, num_src_nodes=N, num_dst_nodes=4), x).shape == (4, OUT)
    assert U.GCNConv(IN, OUT, normalize=False)(x, EdgeIndex(edge_index, sparse_size=(N, 4))).shape == (4, OUT)


@pytest.mark.parametrize("in_channels", [3, IN, 9])  # aggregates first (bias in the product) / projects first
def test_gcn_matches_dgl_graphconv_on_a_symmetric_graph(in_channels, dgl):
    """The user_arxiv model's layer: on a symmetric graph (where DGL's out-degree of a source is its
    in-degree) GCNConv equals DGL's GraphConv on the graph with one self-loop per node, values and
    every gradient (float64)."""
    from dgl.nn.pytorch import GraphConv
    torch.manual_seed(0)
    half = random_edges(N, 20)
    edge_index = torch.unique(torch.cat([half, half.flip(0)], 1), dim=1)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    theirs = GraphConv(in_channels, 7).double()
    ours = U.GCNConv(in_channels, 7).double()
    with torch.no_grad():
        torch.nn.init.normal_(theirs.bias)
        ours.lin.weight.copy_(theirs.weight.t())
        ours.bias.copy_(theirs.bias)
    looped = dgl.add_self_loop(dgl.graph((edge_index[0], edge_index[1]), num_nodes=N))
    assert_same_as_peer(lambda x: ours(x, edge_index), lambda x: theirs(looped, x),
                        torch.randn(N, in_channels, dtype=torch.float64),
                        [(ours.lin.weight, lambda: theirs.weight.grad.t()), (ours.bias, theirs.bias)])


def test_a_new_edge_index_past_the_kept_bound_takes_the_new_graphs_path_and_equals_the_csr_path(monkeypatch):
    """GCNConv given a new edge_index whose self-looped aggregation is past the small-graph rule's
    kept bound but within the new graphs' bound: its self-looped graph (one kernel call) gets no
    CSR, and the output and every gradient equal the same layer's with the rule off (CSR kernels)."""
    pytest.importorskip("numba")
    from unigraph.backends import small_graph
    from unigraph import call_forms
    from unigraph.self_loops import with_self_loops
    gen = torch.Generator().manual_seed(5)
    edge_index = torch.randint(0, 60, (2, 400), generator=gen)
    edge_index[:, ::7] = edge_index[0, ::7]   # existing self-loops, dropped and replaced
    x = torch.randn(60, 6, generator=gen, requires_grad=True)
    conv = U.GCNConv(6, 5)
    monkeypatch.setattr(small_graph, "SMALL_WORK", 1)   # past the kept bound at any width
    monkeypatch.setattr(small_graph, "TINY_WORK", -1)   # (and not a tiny call, which would run torch's ops)
    call_forms.clear_cache()
    out = conv(x, edge_index)
    grads = torch.autograd.grad(out.square().sum(), [x, *conv.parameters()])
    looped = with_self_loops(call_forms.resolve("t", x, edge_index).graph).graph
    assert not looped.has_memo("in_csr") and not looped.has_memo("stats")
    monkeypatch.setattr(small_graph, "FRESH_WORK", 0)
    call_forms.clear_cache()
    second = edge_index.clone()
    again = conv(x, second)
    assert with_self_loops(call_forms.resolve("t", x, second).graph).graph.has_memo("in_csr")
    torch.testing.assert_close(out, again)
    torch.testing.assert_close(grads, torch.autograd.grad(again.square().sum(), [x, *conv.parameters()]))


@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("form", ["edge_index", "SparseTensor", "SparseTensor without values", "torch COO", "torch CSR"])
def test_existing_self_loops_follow_pygs_rule_for_each_form(form, improved):
    """A weighted graph with self-loops at two nodes: PyG keeps an edge_index's loop weight,
    replaces a SparseTensor's diagonal by the fill value and adds a torch sparse adjacency's loop
    to the new one; ours must give PyG's values and gradients in each form (it kept the loop weight
    in every form, silently off by ~0.1 for the sparse ones)."""
    from torch_sparse import SparseTensor
    torch.manual_seed(0)
    edge_index = torch.tensor([[0, 1, 1, 2, 3, 2], [1, 0, 1, 3, 2, 2]])   # loops at 1 and 2
    weight = torch.rand(6, dtype=torch.float64) + 0.5
    x = torch.randn(4, 3, dtype=torch.float64)
    theirs = pyg_nn.GCNConv(3, 2, improved=improved)
    ours = loaded(theirs, U.GCNConv(3, 2, improved=improved))
    coo = torch.sparse_coo_tensor(edge_index.flip(0), weight, (4, 4)).coalesce()
    args = {"edge_index": (x, edge_index, weight),
            "SparseTensor": (x, SparseTensor(row=edge_index[1], col=edge_index[0], value=weight, sparse_sizes=(4, 4))),
            "SparseTensor without values": (x, SparseTensor(row=edge_index[1], col=edge_index[0], sparse_sizes=(4, 4))),
            "torch COO": (x, coo), "torch CSR": (x, coo.to_sparse_csr())}[form]
    if form != "torch COO":
        assert_same(theirs, ours, *args)
        return
    # PyG's gcn_norm writes into a COO leaf that requires grad (it raises): outputs and x's gradient
    xs = [x.clone().requires_grad_() for _ in range(2)]
    expected, out = theirs(xs[0], coo), ours(xs[1], coo)
    torch.testing.assert_close(out, expected, **TOL)
    expected.square().sum().backward()
    out.square().sum().backward()
    torch.testing.assert_close(xs[1].grad, xs[0].grad, **TOL)
