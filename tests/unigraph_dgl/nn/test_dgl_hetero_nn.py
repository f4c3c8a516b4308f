"""unigraph.dgl.nn's heterograph modules (HeteroGraphConv, HeteroLinear, HeteroEmbedding) and
relation-typed ones (TypedLinear, RelGraphConv) against the real DGL's: a DGL state_dict loads, and
outputs, input gradients and parameter gradients agree in float64 (eval mode) on heterographs
built by both libraries, on blocks, on the main options; DGL's initialization; the refusals."""
from __future__ import annotations

import math

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import TOL, assert_same_run, graphs, same_modules

# relations between the same and different node types; 'store' receives nothing. Given unsorted:
# both libraries order relations (and so 'stack' and a callable's list) by canonical etype.
RELATIONS = {
    ("user", "follows", "user"): ([0, 0, 2, 1, 3], [1, 2, 1, 3, 3]),
    ("user", "plays", "game"): ([0, 0, 0, 1, 2], [0, 2, 3, 0, 2]),
    ("store", "sells", "game"): ([0, 0, 1, 1], [0, 3, 1, 2]),
    ("game", "liked-by", "user"): ([1, 2, 3], [0, 0, 2]),
}
WIDTHS = {"user": 2, "game": 3, "store": 4}
COUNTS = {"user": 4, "game": 4, "store": 2}


class Flat(torch.nn.Module):
    """A dict-valued module's outputs as a tuple in key order (for assert_same_run); the keys of
    the last call are kept in ``keys``."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner, self.keys = inner, None

    def forward(self, *args, **kwargs):
        out = self.inner(*args, **kwargs)
        self.keys = sorted(out, key=str)
        return tuple(out[k] for k in self.keys)


def hetero_graphs(dgl):
    return udgl.heterograph(RELATIONS), dgl.heterograph(RELATIONS)


def features(types=WIDTHS, rows=COUNTS):
    torch.manual_seed(1)
    return {t: torch.randn(rows[t], types[t], dtype=torch.float64, requires_grad=True) for t in types}


def conv_mods(nn, canonical: bool) -> dict:
    """GATs into 'user' (2 heads: [N, 2, 3] from both relations), GraphConv and SAGEConv into 'game'."""
    mods = {
        ("user", "follows", "user"): nn.GATConv(2, 3, num_heads=2),
        ("game", "liked-by", "user"): nn.GATConv((3, 2), 3, num_heads=2, residual=True),
        ("user", "plays", "game"): nn.GraphConv(2, 3, norm="both"),
        ("store", "sells", "game"): nn.SAGEConv((4, 3), 3, "mean", activation=torch.tanh),
    }
    return mods if canonical else {cet[1]: mod for cet, mod in mods.items()}


def sum_weighted(results, dsttype):
    """DGL's own test aggregator: result i weighs i + 1."""
    return sum((i + 1) * r for i, r in enumerate(results))


def run_hetero(dgl, make, our_args, their_args, inputs, **forward):
    ours, theirs = same_modules(dgl, lambda nn: Flat(make(nn)))
    assert_same_run(ours, theirs, our_args, their_args, inputs, **forward)
    assert ours.keys == theirs.keys
    return ours.keys


# ---------------------------------------------------------------------- HeteroGraphConv
@pytest.mark.parametrize("aggregate", ["sum", "max", "min", "mean", "stack", sum_weighted])
@pytest.mark.parametrize("canonical", [False, True])
def test_hetero_conv(dgl, aggregate, canonical):
    ours_g, their_g = hetero_graphs(dgl)
    x = features()
    keys = run_hetero(dgl, lambda nn: nn.HeteroGraphConv(conv_mods(nn, canonical), aggregate),
                      (ours_g, x), (their_g, x), list(x.values()))
    assert keys == ["game", "user"]  # 'store' receives from no relation: no output


def test_hetero_conv_some_inputs_and_pairs(dgl):
    ours_g, their_g = hetero_graphs(dgl)
    x = features()
    make = lambda nn: nn.HeteroGraphConv(conv_mods(nn, False), "sum")  # noqa: E731
    no_store = {"user": x["user"], "game": x["game"]}  # 'sells' (out of 'store') takes no part
    assert run_hetero(dgl, make, (ours_g, no_store), (their_g, no_store), list(no_store.values())) == ["game", "user"]
    # a (src, dst) pair: a relation runs where its source type is in src and its destination type in dst
    dst = {"game": torch.randn(4, 3, dtype=torch.float64, requires_grad=True)}
    pair = ({"user": x["user"], "store": x["store"]}, dst)
    assert run_hetero(dgl, make, (ours_g, pair), (their_g, pair), [x["user"], x["store"], dst["game"]]) == ["game"]


def test_hetero_conv_mod_args_and_kwargs(dgl):
    ours_g, their_g = hetero_graphs(dgl)
    x = features()
    weights = torch.rand(5, dtype=torch.float64, requires_grad=True)
    kwargs = {"plays": {"edge_weight": weights}, "sells": {"edge_weight": torch.rand(4, dtype=torch.float64)}}
    args = {"follows": (None, True)}  # GATConv's (edge_weight, get_attention): attention is returned too
    make = lambda nn: nn.HeteroGraphConv(conv_mods(nn, False), "sum")  # noqa: E731
    run_hetero(dgl, make, (ours_g, x), (their_g, x), list(x.values()) + [weights], mod_kwargs=kwargs)
    # positional args reach the module: GATConv returns (h, attention), the aggregator gets the tuples
    ours, theirs = same_modules(dgl, lambda nn: nn.HeteroGraphConv({"follows": nn.GATConv(2, 3, num_heads=2)},
                                                                  lambda results, dsttype: results[0]))
    users = ({"user": x["user"]}, {"user": x["user"]})  # the other relations miss a side: not run
    (h, a), (h_ref, a_ref) = ours(ours_g, users, mod_args=args)["user"], theirs(their_g, users, mod_args=args)["user"]
    torch.testing.assert_close(h, h_ref, **TOL)
    torch.testing.assert_close(a, a_ref, **TOL)


@pytest.mark.parametrize("pair", [False, True])
def test_hetero_conv_on_a_block(dgl, pair):
    # unigraph.dgl has blocks of one relation (no heterogeneous to_block): the homogeneous block,
    # its relation named '_E'; one dict is cut to the block's destinations per type
    (_, _), (our_block, their_block) = graphs(dgl)
    x = torch.randn(our_block.num_src_nodes(), 5, dtype=torch.float64, requires_grad=True)
    inputs = ({"_N": x}, {"_N": x[: our_block.num_dst_nodes()]}) if pair else {"_N": x}
    make = lambda nn: nn.HeteroGraphConv({"_E": nn.SAGEConv(5, 4, "gcn")}, "stack")  # noqa: E731
    assert run_hetero(dgl, make, (our_block, inputs), (their_block, inputs), [x]) == ["_N"]


def test_hetero_conv_relation_without_edges(dgl):
    data = dict(RELATIONS)
    data[("user", "plays", "game")] = ([], [])
    ours_g, their_g = udgl.heterograph(data, num_nodes_dict=COUNTS), dgl.heterograph(data, num_nodes_dict=COUNTS)
    x = features()
    run_hetero(dgl, lambda nn: nn.HeteroGraphConv(conv_mods(nn, True), "max"), (ours_g, x), (their_g, x),
               list(x.values()))


def test_hetero_conv_errors(dgl):
    ours_g, their_g = hetero_graphs(dgl)
    x = features()
    with pytest.raises(udgl.DGLError, match="aggregator"):
        unn.HeteroGraphConv({"plays": unn.GraphConv(2, 3)}, "median")
    with pytest.raises(TypeError, match="aggregate"):
        unn.HeteroGraphConv({"plays": unn.GraphConv(2, 3)}, 3)
    conv = unn.HeteroGraphConv({"plays": unn.GraphConv(2, 3)}).double()
    with pytest.raises(udgl.DGLError, match="no module for edge type"):
        conv(ours_g, x)  # 'follows' has source features but no module
    with pytest.raises(udgl.DGLError, match="destination type 'game'"):
        unn.HeteroGraphConv(conv_mods(unn, False)).double()(ours_g, {"user": x["user"]})
    with pytest.raises(udgl.DGLError, match="unigraph.dgl"):
        conv(their_g, x)
    with pytest.raises(TypeError, match="inputs"):
        conv(ours_g, [x["user"]])
    assert unn.HeteroGraphConv({"plays": unn.GraphConv(2, 3)}).mods["plays"]._allow_zero_in_degree


# ---------------------------------------------------------------------- HeteroLinear, HeteroEmbedding
KEYS = {"user": 3, ("user", "follows", "user"): 2}


@pytest.mark.parametrize("bias", [True, False])
def test_hetero_linear(dgl, bias):
    torch.manual_seed(0)
    x = {k: torch.randn(5, width, dtype=torch.float64, requires_grad=True) for k, width in KEYS.items()}
    run_hetero(dgl, lambda nn: nn.HeteroLinear(KEYS, 4, bias=bias), (x,), (x,), list(x.values()))
    torch.manual_seed(3)
    theirs = dgl.nn.HeteroLinear(KEYS, 4).state_dict()
    torch.manual_seed(3)
    ours = unn.HeteroLinear(KEYS, 4).state_dict()
    assert list(ours) == list(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)  # nn.Linear's init
    with pytest.raises(udgl.DGLError, match="no module for keys"):
        unn.HeteroLinear(KEYS, 4)({"game": torch.randn(2, 3)})


def test_hetero_embedding(dgl):
    ids = {"user": torch.tensor([0, 2, 2]), ("user", "follows", "user"): torch.tensor([[1], [0]])}
    ours, theirs = same_modules(dgl, lambda nn: Flat(nn.HeteroEmbedding(KEYS, 6)))
    assert_same_run(ours, theirs, (ids,), (ids,), [])
    assert set(ours.inner.weight) == set(KEYS) and ours.inner.weight["user"] is ours.inner.embeds["user"].weight
    torch.manual_seed(0)
    layer = unn.HeteroEmbedding({"user": 300, "game": 200}, 100)
    assert abs(layer.weight["user"].std().item() - 1) < 0.02  # nn.Embedding's N(0, 1)
    layer.reset_parameters()  # DGL's: Glorot uniform
    bound = math.sqrt(6 / 400)
    assert layer.weight["user"].abs().max() <= bound and layer.weight["user"].abs().max() > 0.95 * bound
    with pytest.raises(udgl.DGLError, match="no module for keys"):
        layer({"store": torch.tensor([0])})


# ---------------------------------------------------------------------- TypedLinear
REGULARIZED = [(None, None), ("basis", 3), ("bdd", 2)]


@pytest.mark.parametrize("regularizer, num_bases", REGULARIZED)
@pytest.mark.parametrize("sort", [False, True])
def test_typed_linear(dgl, regularizer, num_bases, sort):
    torch.manual_seed(0)
    x = torch.randn(30, 4, dtype=torch.float64, requires_grad=True)
    x_type = torch.randint(0, 5, (30,))
    x_type[x_type == 3] = 4  # a type without rows
    if sort:
        x_type = x_type.sort().values
    ours, theirs = same_modules(dgl, lambda nn: nn.TypedLinear(4, 6, 5, regularizer=regularizer, num_bases=num_bases))
    assert_same_run(ours, theirs, (x, x_type), (x, x_type), [x], sorted_by_type=sort)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("regularizer, num_bases", REGULARIZED)
def test_typed_linear_initialization(dgl, regularizer, num_bases):
    # the same draws in the same order as DGL's: equal parameters under one seed
    torch.manual_seed(5)
    theirs = dgl.nn.TypedLinear(8, 6, 4, regularizer=regularizer, num_bases=num_bases).state_dict()
    torch.manual_seed(5)
    ours = unn.TypedLinear(8, 6, 4, regularizer=regularizer, num_bases=num_bases).state_dict()
    assert list(ours) == list(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_typed_linear_errors():
    with pytest.raises(ValueError, match="regularizer"):
        unn.TypedLinear(4, 6, 3, regularizer="lowrank", num_bases=2)
    with pytest.raises(ValueError, match="num_bases"):
        unn.TypedLinear(4, 6, 3, regularizer="basis")
    with pytest.raises(ValueError, match="divide"):
        unn.TypedLinear(4, 6, 3, regularizer="bdd", num_bases=4)
    lin = unn.TypedLinear(4, 6, 3)
    x = torch.randn(4, 4)
    with pytest.raises(udgl.DGLError, match="outside 0..2"):
        lin(x, torch.tensor([0, 1, 2, 3]))
    with pytest.raises(udgl.DGLError, match="4 rows"):
        lin(x, torch.tensor([0, 1, 2]))
    with pytest.raises(udgl.DGLError, match="integer"):
        lin(x, torch.zeros(4))
    with pytest.raises(udgl.DGLError, match="not sorted"):
        lin(x, torch.tensor([0, 2, 1, 2]), sorted_by_type=True)
    with pytest.raises(udgl.DGLError, match=r"\[N, 4\]"):
        lin(torch.randn(4, 5), torch.tensor([0, 1, 2, 2]))


# ---------------------------------------------------------------------- RelGraphConv
@pytest.mark.parametrize("regularizer, num_bases", REGULARIZED + [("basis", None), ("bdd", None)])
@pytest.mark.parametrize("options", [dict(), dict(self_loop=False, bias=False, activation=torch.relu),
                                     dict(layer_norm=True, activation=torch.tanh)])
def test_rel_graph_conv(dgl, regularizer, num_bases, options):
    in_feat, out_feat = (4, 6) if num_bases is not None else (6, 9)  # num_bases None: num_rels (3)
    torch.manual_seed(0)
    for ours_graph, their_graph in graphs(dgl):
        ours, theirs = same_modules(dgl, lambda nn: nn.RelGraphConv(in_feat, out_feat, 3, regularizer, num_bases,
                                                                    **options))
        x = torch.randn(ours_graph.num_src_nodes(), in_feat, dtype=torch.float64, requires_grad=True)
        etypes = torch.randint(0, 3, (ours_graph.num_edges(),))
        norm = torch.rand(ours_graph.num_edges(), 1, dtype=torch.float64, requires_grad=True)
        assert_same_run(ours, theirs, (ours_graph, x, etypes), (their_graph, x, etypes), [x])
        assert_same_run(ours, theirs, (ours_graph, x, etypes, norm), (their_graph, x, etypes, norm), [x, norm])


def test_rel_graph_conv_presorted_and_1d_norm(dgl):
    # edges sorted by relation, as dgl.to_homogeneous leaves them: presorted=True gives DGL's result
    torch.manual_seed(0)
    src, dst = torch.randint(0, 8, (2, 40))
    etypes = torch.randint(0, 4, (40,)).sort().values
    ours_g, their_g = udgl.graph((src, dst), num_nodes=8), dgl.graph((src, dst), num_nodes=8)
    x = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    norm = torch.rand(40, 1, dtype=torch.float64)
    for regularizer in (None, "basis", "bdd"):
        ours, theirs = same_modules(dgl, lambda nn: nn.RelGraphConv(4, 6, 4, regularizer, 2))
        assert_same_run(ours, theirs, (ours_g, x, etypes, norm), (their_g, x, etypes, norm), [x], presorted=True)
        # DGL documents norm as [E] but multiplies [E, out] by it: here [E] weighs each edge as [E, 1] does
        torch.testing.assert_close(ours(ours_g, x, etypes, norm.view(-1)), theirs(their_g, x, etypes, norm), **TOL)


def test_rel_graph_conv_initialization_and_errors(dgl):
    torch.manual_seed(2)
    theirs = dgl.nn.RelGraphConv(8, 6, 4, "basis", 2, layer_norm=True).state_dict()
    torch.manual_seed(2)
    ours = unn.RelGraphConv(8, 6, 4, "basis", 2, layer_norm=True).state_dict()
    assert list(ours) == list(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)
    conv = unn.RelGraphConv(4, 6, 3)
    g = udgl.graph(([0, 1, 2], [1, 2, 0]))
    with pytest.raises(udgl.DGLError, match="one relation id per edge"):
        conv(g, torch.randn(3, 4), torch.tensor([0, 1]))
    with pytest.raises(udgl.DGLError, match="outside 0..2"):
        conv(g, torch.randn(3, 4), torch.tensor([0, 1, 3]))
    with pytest.raises(udgl.DGLError, match="norm"):
        conv(g, torch.randn(3, 4), torch.tensor([0, 1, 2]), torch.rand(2, 1))
    with pytest.raises(udgl.DGLError, match="not sorted"):
        conv(g, torch.randn(3, 4), torch.tensor([2, 1, 0]), presorted=True)
    with pytest.raises(udgl.DGLError, match="several relations"):
        conv(udgl.heterograph(RELATIONS), torch.randn(4, 4), torch.tensor([0]))
