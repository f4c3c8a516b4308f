"""Layer behaviour beyond PyG equivalence: MRConv against a reference, sparse inputs, blocks given as
one tensor, attention weights and dropout, GCN caching, bad input, reset and repr."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

import unigraph
from graph_strategies import graphs
from op_cases import cpu_test_backends

BACKENDS = cpu_test_backends()


def random_graph(num_nodes=12, num_edges=40, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return unigraph.Graph(torch.randint(0, num_nodes, (2, num_edges), generator=gen), num_nodes=num_nodes)


def block_of(g_src_nodes=9, g_dst_nodes=4, num_edges=20, seed=0):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.stack([torch.randint(0, g_src_nodes, (num_edges,), generator=gen),
                              torch.randint(0, g_dst_nodes, (num_edges,), generator=gen)])
    return unigraph.Graph(edge_index, num_src_nodes=g_src_nodes, num_dst_nodes=g_dst_nodes)


# ---------------------------------------------------------------------- MRConv (PyG has none)
def mrconv_reference(g, x_src, x_dst, nn):
    """max over in-edges of (x_j - x_i), by a loop over destinations; 0 without in-edges."""
    rows = []
    for i in range(g.num_dst_nodes):
        sources = g.src[g.dst == i]
        if sources.numel():
            rows.append((x_src[sources] - x_dst[i]).max(dim=0).values)
        else:
            rows.append(torch.zeros_like(x_dst[i]))
    relative = torch.stack(rows) if rows else x_dst.new_zeros((0, x_dst.shape[1]))
    return nn(torch.cat([x_dst, relative], dim=-1))


def grads(out, upstream, leaves):
    found = torch.autograd.grad((out * upstream).sum(), leaves, allow_unused=True)
    return [torch.zeros_like(t) if g is None else g for t, g in zip(leaves, found)]


@given(data=st.data())
def test_mrconv_matches_reference_and_is_fused(data):
    drawn = data.draw(graphs(max_nodes=8, max_edges=24, hub_degree=16), label="graph")
    g, gen = drawn.graph, drawn.generator()
    torch.manual_seed(0)
    conv = unigraph.MRConv(3, 4).double()
    x_src = torch.randn(g.num_src_nodes, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(g.num_dst_nodes, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    x = (x_src, x_dst) if g.is_bipartite else x_src
    expected = mrconv_reference(g, x_src, x_dst if g.is_bipartite else x_src, conv.nn)
    upstream = torch.randn(expected.shape, generator=gen, dtype=torch.float64)
    leaves = [x_src, x_dst] if g.is_bipartite else [x_src]
    want = grads(expected, upstream, leaves)
    for backend in BACKENDS:
        with unigraph.use_backend(backend):
            out = conv(g, x)
        torch.testing.assert_close(out, expected, msg=lambda m: f"{backend} ({drawn.kind}): {m}")
        for got, w in zip(grads(out, upstream, leaves), want):
            torch.testing.assert_close(got, w, msg=lambda m: f"{backend} gradient ({drawn.kind}): {m}")
        assert unigraph.explain(conv).mode == "fused"


# ---------------------------------------------------------------------- sparse inputs
SPARSE_CASES = {
    "GCNConv": lambda: unigraph.GCNConv(30, 4),
    "GATConv-residual": lambda: unigraph.GATConv(30, 3, heads=2, residual=True),
    "GATv2Conv": lambda: unigraph.GATv2Conv(30, 3, heads=2),
    "SAGEConv-projected-first": lambda: unigraph.SAGEConv(30, 4),
    "SAGEConv-max": lambda: unigraph.SAGEConv(30, 4, aggr="max"),
    "GraphConv": lambda: unigraph.GraphConv(30, 4, aggr="mean"),
}


def bag_of_words(rows: int, width: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.where(torch.rand(rows, width, generator=gen) < 0.1, torch.rand(rows, width, generator=gen), 0.0)


@pytest.mark.parametrize("layout", [torch.sparse_csr, torch.sparse_coo], ids=["csr", "coo"])
@pytest.mark.parametrize("name", list(SPARSE_CASES))
@pytest.mark.parametrize("bipartite", [False, True], ids=["graph", "block"])
def test_sparse_features_equal_dense(name, layout, bipartite):
    g = block_of() if bipartite else random_graph()
    dense = bag_of_words(g.num_src_nodes, 30, seed=1)
    sparse = dense.to_sparse_csr() if layout == torch.sparse_csr else dense.to_sparse()
    torch.manual_seed(0)
    conv = SPARSE_CASES[name]()
    expected = conv(g, dense)
    expected_grads = torch.autograd.grad(expected.square().sum(), list(conv.parameters()))
    out = conv(g, sparse)
    grads = torch.autograd.grad(out.square().sum(), list(conv.parameters()))
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_sparse_dropout_keeps_structure_and_scales():
    from unigraph.nn.projection import dropout
    x = bag_of_words(200, 50, seed=2).to_sparse_csr()
    torch.manual_seed(0)
    dropped = dropout(x, 0.5, training=True)
    assert dropped.layout == torch.sparse_csr
    assert torch.equal(dropped.col_indices(), x.col_indices())
    kept = dropped.values() != 0
    assert 0.4 < kept.float().mean() < 0.6
    torch.testing.assert_close(dropped.values()[kept], 2 * x.values()[kept])
    assert dropout(x, 0.5, training=False) is x


# ---------------------------------------------------------------------- blocks with one tensor
BLOCK_CASES = {
    "SAGEConv": lambda: unigraph.SAGEConv(3, 4),
    "GATConv": lambda: unigraph.GATConv(3, 2, heads=2),
    "GATv2Conv": lambda: unigraph.GATv2Conv(3, 2, heads=2),
    "GINConv": lambda: unigraph.GINConv(torch.nn.Linear(3, 4)),
    "GraphConv": lambda: unigraph.GraphConv(3, 4, aggr="max"),
    "EdgeConv": lambda: unigraph.EdgeConv(torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU())),
    "MRConv": lambda: unigraph.MRConv(3, 4),
}


@pytest.mark.parametrize("name", list(BLOCK_CASES))
def test_block_with_one_tensor_means_destinations_first(name):
    g = block_of()
    x = torch.randn(g.num_src_nodes, 3)
    torch.manual_seed(0)
    conv = BLOCK_CASES[name]()
    out = conv(g, x)
    assert out.shape[0] == g.num_dst_nodes
    torch.testing.assert_close(out, conv(g, (x, x[: g.num_dst_nodes])))


def test_gcn_on_a_block_uses_block_degrees():
    g = block_of()
    conv = unigraph.GCNConv(3, 2, bias=False)
    x = torch.randn(g.num_src_nodes, 3)
    src = torch.cat([g.src, torch.arange(g.num_dst_nodes)])  # one self-loop per destination
    dst = torch.cat([g.dst, torch.arange(g.num_dst_nodes)])
    keep = torch.cat([g.src != g.dst, torch.ones(g.num_dst_nodes, dtype=torch.bool)])
    src, dst = src[keep], dst[keep]
    out_degree = torch.bincount(src, minlength=g.num_src_nodes).float()
    in_degree = torch.bincount(dst, minlength=g.num_dst_nodes).float()
    norm = out_degree[src].rsqrt() * in_degree[dst].rsqrt()
    h = x @ conv.lin.weight.t()
    expected = torch.zeros(g.num_dst_nodes, 2).index_add_(0, dst, norm.unsqueeze(-1) * h[src])
    torch.testing.assert_close(conv(g, x), expected)


# ---------------------------------------------------------------------- attention
def test_gat_attention_weights_are_a_softmax_and_match_the_fused_path():
    g = random_graph()
    conv = unigraph.GATConv(5, 3, heads=4, dropout=0.5)
    x = torch.randn(12, 5)
    conv.eval()
    fused = conv(g, x)
    out, (edge_index, alpha) = conv(g, x, return_attention_weights=True)
    torch.testing.assert_close(out, fused)
    assert alpha.shape == (edge_index.shape[1], 4) and bool((alpha >= 0).all())
    sums = torch.zeros(12, 4).index_add_(0, edge_index[1], alpha)
    torch.testing.assert_close(sums, torch.ones(12, 4))  # every node has its self-loop
    assert int((edge_index[0] == edge_index[1]).sum()) == 12  # existing loops replaced by one per node


def test_gat_attention_dropout_is_inverted_dropout_on_the_weights():
    g = random_graph()
    conv = unigraph.GATConv(5, 3, heads=2, dropout=0.5)
    x = torch.randn(12, 5)
    conv.train()
    torch.manual_seed(7)
    fused = conv(g, x)
    torch.manual_seed(7)
    out, (_, alpha) = conv(g, x, return_attention_weights=True)
    torch.testing.assert_close(fused, out)  # same mask: the fused kernel applies it as the formula does
    kept = alpha > 0
    assert 0.3 < kept.float().mean() < 0.7
    conv.eval()
    _, (_, clean) = conv(g, x, return_attention_weights=True)
    torch.testing.assert_close(alpha[kept], 2 * clean[kept])


# ---------------------------------------------------------------------- GCN normalization
def test_gcn_improved_without_weights_uses_loop_weight_two():
    g = random_graph()  # has self-loops: they keep their weight 1 either way
    conv = unigraph.GCNConv(4, 3, improved=True)
    x = torch.randn(12, 4)
    torch.testing.assert_close(conv(g, x), conv(g, x, torch.ones(g.num_edges)))


def test_gcn_cached_reuses_the_first_graphs_normalization():
    g = random_graph()
    conv = unigraph.GCNConv(4, 3, cached=True)
    x = torch.randn(12, 4)
    weights = torch.rand(g.num_edges) + 0.5
    first = conv(g, x, weights)
    torch.testing.assert_close(conv(g, x, weights * 3 + 1), first)  # cached: the weights are not re-read
    other = random_graph(seed=1)
    uncached = unigraph.GCNConv(4, 3)
    uncached.load_state_dict(conv.state_dict())
    torch.testing.assert_close(conv(other, x, weights), uncached(other, x, weights))  # a new graph: recomputed
    conv.reset_parameters()
    assert conv._cached_norm is None


# ---------------------------------------------------------------------- EdgeConv's split first layer
def test_edgeconv_splits_a_leading_linear():
    g = random_graph()
    x = torch.randn(12, 3)
    lone = unigraph.EdgeConv(torch.nn.Linear(6, 4))
    lone(g, x)
    assert unigraph.explain(lone).mode == "fused"  # max of (a_i + b_j) = a_i + max_j b_j
    deep = unigraph.EdgeConv(torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)))
    deep(g, x)
    plan = unigraph.explain(deep)
    assert plan.mode == "g-SDDMM" and plan.primitive_calls() == ["gsddmm add u v", "gspmm copy_e max"]


# ---------------------------------------------------------------------- bad input, reset, repr
@pytest.mark.parametrize("call, error, match", [
    (lambda g: unigraph.GCNConv(4, 3)(g, torch.randn(12, 5)), ValueError, "expects x with 4 features"),
    (lambda g: unigraph.GCNConv(4, 3)(g, torch.randn(11, 4)), ValueError, "x has 11 rows but the graph has 12"),
    (lambda g: unigraph.GCNConv(4, 3)(g, (torch.randn(12, 4),) * 2), ValueError, "not a \\(source, destination\\)"),
    (lambda g: unigraph.GCNConv(4, 3)(g.edge_index, torch.randn(12, 4)), TypeError, "unigraph.Graph"),
    (lambda g: unigraph.GCNConv(4, 3)(g, torch.randn(12, 4), torch.ones(g.num_edges, 2)), ValueError,
     "edge_weight of shape \\[num_edges\\]"),
    (lambda g: unigraph.GCNConv(4, 3)(g, torch.randn(12, 4), torch.ones(g.num_edges, dtype=torch.long)),
     TypeError, "floating point"),
    (lambda g: unigraph.SAGEConv(4, 3, aggr="median"), ValueError, "unknown aggregation .median."),
    (lambda g: unigraph.SAGEConv(4, 3)(g, torch.randn(12, 6)), ValueError, "expects x with 4 features"),
    (lambda g: unigraph.GATConv(4, 3)(g, torch.randn(12, 4), torch.randn(g.num_edges, 2)), ValueError,
     "without edge_dim"),
    (lambda g: unigraph.GATConv(4, 3, edge_dim=2)(g, torch.randn(12, 4), torch.randn(g.num_edges, 3)), ValueError,
     "edge_attr with 2 features"),
    (lambda g: unigraph.GATConv(4, 3, heads=0), ValueError, "heads must be a positive int"),
    (lambda g: unigraph.GATConv(4, 3, dropout=1.0), ValueError, "dropout must be in"),
    (lambda g: unigraph.GATConv(4, 3, fill_value="median"), ValueError, "fill_value must be"),
    (lambda g: unigraph.GATv2Conv(4, 3)(g, (torch.randn(12, 4), None)), ValueError, "needs destination features"),
    (lambda g: unigraph.MRConv(4, 3)(g, torch.randn(12, 3)), ValueError, "expects x with 4 features"),
    (lambda g: unigraph.GINConv("mlp"), TypeError, "callable network"),
    (lambda g: unigraph.EdgeConv(torch.nn.Linear(6, 2))(g, (torch.randn(12, 3), torch.randn(12, 2))), ValueError,
     "of one width"),
])
def test_bad_input_is_named_before_any_kernel(call, error, match):
    with pytest.raises(error, match=match):
        call(random_graph())


def test_reset_parameters_and_repr():
    layers = {
        "GCNConv(4, 3)": unigraph.GCNConv(4, 3),
        "SAGEConv(4, 3, aggr=max)": unigraph.SAGEConv(4, 3, aggr="max"),
        "GATConv(4, 3, heads=2)": unigraph.GATConv(4, 3, heads=2, edge_dim=2),
        "GATv2Conv(4, 3, heads=2)": unigraph.GATv2Conv(4, 3, heads=2),
        "GraphConv(4, 3)": unigraph.GraphConv(4, 3),  # PyG's repr
        "MRConv(4, 3)": unigraph.MRConv(4, 3),
        "GINConv(nn=Linear(in_features=4, out_features=3, bias=True))": unigraph.GINConv(torch.nn.Linear(4, 3)),
        "EdgeConv(nn=Linear(in_features=8, out_features=3, bias=True))": unigraph.EdgeConv(torch.nn.Linear(8, 3)),
    }
    for text, layer in layers.items():
        assert repr(layer) == text
        before = [p.detach().clone() for p in layer.parameters()]
        layer.reset_parameters()
        after = list(layer.parameters())
        assert any(not torch.equal(b, a) for b, a in zip(before, after) if b.numel() > 1), text
