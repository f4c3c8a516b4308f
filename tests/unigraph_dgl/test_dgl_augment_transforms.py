"""DGL's augmentation / feature / positional-encoding transforms (unigraph/dgl/augment_transforms.py)
against DGL's, on a graph with self-loops, repeated edges and an isolated node, and on a
heterograph: the random ones draw exactly DGL's sample under the same torch seed (and have the
right distribution); RowFeatNormalizer, RandomWalkPE, ToLevi and SVDPE give DGL's values."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import unigraph.dgl as udgl
from unigraph.dgl.augment_transforms import (
    SVDPE, AddEdge, DropEdge, DropNode, FeatMask, NodeShuffle, RandomWalkPE, RowFeatNormalizer, ToLevi,
    random_walk_pe, svd_pe)
from unigraph.dgl.base import DGLError

SRC = [0, 0, 0, 1, 2, 2, 3, 3, 4, 6, 6, 1]   # 0 -> 1 twice, self-loops on 0 and 2, node 5 isolated
DST = [1, 1, 0, 2, 2, 0, 4, 1, 3, 4, 6, 3]
N = 7
HETERO = {("user", "follows", "user"): ([1, 2, 2, 0], [3, 4, 4, 0]),
          ("player", "plays", "game"): ([2, 2, 0], [1, 1, 0]),
          ("user", "owns", "game"): ([0, 4], [1, 0])}
COUNTS = {"user": 6, "player": 3, "game": 2}


def homogeneous(lib, idtype=torch.int64, features=True):
    g = lib.graph((torch.tensor(SRC), torch.tensor(DST)), num_nodes=N, idtype=idtype)
    if features:
        g.ndata["h"] = torch.arange(N * 4, dtype=torch.float32).reshape(N, 4) - 7
        g.ndata["i"] = torch.arange(N)
        g.edata["w"] = torch.linspace(-1, 3, len(SRC) * 3).reshape(len(SRC), 3)
        g.edata["x"] = torch.arange(len(SRC))
    return g


def hetero(lib, idtype=torch.int64):
    g = lib.heterograph({k: (torch.tensor(u), torch.tensor(v)) for k, (u, v) in HETERO.items()}, COUNTS,
                        idtype=idtype)
    gen = torch.Generator().manual_seed(5)
    for t, n in COUNTS.items():
        g.nodes[t].data["h"] = torch.randn(n, 5, generator=gen)
    g.nodes["user"].data["i"] = torch.arange(6)
    for cet in HETERO:
        g.edges[cet].data["w"] = torch.randn(g.num_edges(cet), 4, generator=gen)
    return g


def same_graph(ours, theirs):
    assert ours.ntypes == theirs.ntypes and ours.canonical_etypes == theirs.canonical_etypes
    assert ours.idtype == theirs.idtype
    for t in theirs.ntypes:
        assert ours.num_nodes(t) == theirs.num_nodes(t)
        assert set(ours.nodes[t].data) == set(theirs.nodes[t].data)
        for key, value in theirs.nodes[t].data.items():
            assert ours.nodes[t].data[key].dtype == value.dtype and torch.equal(ours.nodes[t].data[key], value)
    for cet in theirs.canonical_etypes:
        for a, b in zip(ours.edges(etype=cet), theirs.edges(etype=cet)):
            assert a.dtype == b.dtype and torch.equal(a, b)
        assert set(ours.edges[cet].data) == set(theirs.edges[cet].data)
        for key, value in theirs.edges[cet].data.items():
            assert ours.edges[cet].data[key].dtype == value.dtype and torch.equal(ours.edges[cet].data[key], value)


def seeded(transform, g, seed):
    torch.manual_seed(seed)
    return transform(g)


# ---------------------------------------------------------------------- random, seeded like DGL
@pytest.mark.parametrize("name,args", [("NodeShuffle", ()), ("DropNode", (0.4,)), ("DropEdge", (0.3,)),
                                       ("AddEdge", (0.5,)), ("AddEdge", (1.7,))])
@pytest.mark.parametrize("make", [homogeneous, hetero])
@pytest.mark.parametrize("idtype", [torch.int64, torch.int32])
def test_node_shuffle_drop_node_drop_edge_add_edge_draw_dgls_sample(dgl, name, args, make, idtype):
    ours_cls = {"NodeShuffle": NodeShuffle, "DropNode": DropNode, "DropEdge": DropEdge, "AddEdge": AddEdge}[name]
    for seed in (0, 1, 2):
        g_ours, g_theirs = make(udgl, idtype), make(dgl, idtype)
        out_ours = seeded(ours_cls(*args), g_ours, seed)
        out_theirs = seeded(getattr(dgl, name)(*args), g_theirs, seed)
        same_graph(out_ours, out_theirs)
        same_graph(g_ours, make(dgl, idtype))   # the input is left as it was


def test_node_shuffle_permutes_rows_together():
    torch.manual_seed(0)
    g = homogeneous(udgl)
    out = NodeShuffle()(g)
    perm = out.ndata["i"]
    assert sorted(perm.tolist()) == list(range(N))
    assert torch.equal(out.ndata["h"], g.ndata["h"][perm])
    assert torch.equal(torch.stack(out.edges()), torch.stack(g.edges())) and torch.equal(out.edata["w"], g.edata["w"])
    firsts = torch.stack([NodeShuffle()(g).ndata["i"][0] for _ in range(2000)])
    assert torch.bincount(firsts, minlength=N).min() > 2000 / N * 0.7   # every node lands first about as often


@pytest.mark.parametrize("p", [0.2, 0.7])
def test_drop_node_and_drop_edge_distribution(p):
    torch.manual_seed(0)
    big = udgl.graph((torch.randint(0, 2000, (8000,)), torch.randint(0, 2000, (8000,))), num_nodes=2000)
    big.edata["e"] = torch.arange(8000)
    kept = DropEdge(p)(big)
    assert abs(kept.num_edges() / 8000 - (1 - p)) < 0.03
    assert bool((kept.edata["e"].diff() > 0).all())   # the survivors in order
    big.ndata["n"] = torch.arange(2000)
    kept = DropNode(p)(big)
    assert abs(kept.num_nodes() / 2000 - (1 - p)) < 0.05
    ids = kept.ndata["n"]
    src, dst = kept.edges()
    orig_src, orig_dst = big.edges()
    e = kept.edata["e"]
    assert torch.equal(ids[src.long()], orig_src[e]) and torch.equal(ids[dst.long()], orig_dst[e])
    survivors = torch.zeros(2000, dtype=torch.bool)
    survivors[ids] = True
    assert int((survivors[orig_src] & survivors[orig_dst]).sum()) == kept.num_edges()   # all edges between survivors


def test_drop_and_add_edge_extremes():
    g = homogeneous(udgl)
    for out in (DropNode(0)(g), DropEdge(0)(g)):
        assert out is not g and out.num_nodes() == N and out.num_edges() == len(SRC)
    assert DropNode(1)(g).num_nodes() == 0 and DropEdge(1)(g).num_edges() == 0
    assert AddEdge(0)(g) is g   # DGL's fast path returns the graph itself
    out = AddEdge(0.5)(g)
    assert out.num_edges() == len(SRC) + 6 and out.num_nodes() == N
    assert torch.equal(out.edges()[0][:len(SRC)], g.edges()[0]) and (out.edata["w"][len(SRC):] == 0).all()
    torch.manual_seed(3)
    many = AddEdge(200.0)(udgl.graph(([0, 1], [1, 2]), num_nodes=5))
    counts = torch.bincount(many.edges()[0][2:].long(), minlength=5)
    assert many.num_edges() == 402 and counts.min() > 400 / 5 * 0.6   # uniform over all nodes, isolated ones too


# ---------------------------------------------------------------------- FeatMask
@pytest.mark.parametrize("make", [homogeneous, hetero])
def test_feat_mask_draws_dgls_mask(dgl, make):
    for seed in (0, 4):
        g_ours, g_theirs = make(udgl), make(dgl)
        seeded(FeatMask(0.5, ["h"], ["w"]), g_ours, seed)
        seeded(dgl.FeatMask(0.5, ["h"], ["w"]), g_theirs, seed)
        same_graph(g_ours, g_theirs)


def test_feat_mask_columns_and_distribution():
    torch.manual_seed(0)
    g = udgl.graph(([0, 1], [1, 2]))
    h = torch.randn(3, 4000) + 10
    g.ndata["h"] = h
    out = FeatMask(0.3, node_feat_names=["h"])(g)
    assert out is g and g.ndata["h"] is not h and (h > 0).all()   # a new tensor; the caller's is not changed
    zero = (out.ndata["h"] == 0)
    assert torch.equal(zero.all(0), zero.any(0))   # whole columns
    assert torch.equal(out.ndata["h"][:, ~zero[0]], h[:, ~zero[0]])
    assert abs(zero[0].float().mean().item() - 0.3) < 0.03
    assert FeatMask(0.0, ["nope"])(g) is g   # DGL's fast path: nothing is looked at
    g.ndata["h3"] = torch.ones(3, 2, 50)
    masked = FeatMask(0.5, ["h3"])(g).ndata["h3"]
    assert torch.equal((masked == 0).all(0).all(0), (masked == 0).any(0).any(0))   # the last dimension


# ---------------------------------------------------------------------- RowFeatNormalizer
@pytest.mark.parametrize("subtract_min", [False, True])
@pytest.mark.parametrize("make", [homogeneous, hetero])
def test_row_feat_normalizer_equals_dgl(dgl, make, subtract_min):
    g_ours, g_theirs = make(udgl), make(dgl)
    for g in (g_ours, g_theirs):
        for t in g.ntypes:   # float64 too
            g.nodes[t].data["d"] = (torch.arange(g.num_nodes(t) * 3, dtype=torch.float64).reshape(-1, 3) - 4) / 3
    ours = RowFeatNormalizer(subtract_min, ["h", "d"], ["w"])(g_ours)
    theirs = dgl.RowFeatNormalizer(subtract_min, ["h", "d"], ["w"])(g_theirs)
    assert ours is g_ours
    for t in theirs.ntypes:
        for key, value in theirs.nodes[t].data.items():
            assert ours.nodes[t].data[key].dtype == value.dtype
            atol = 1e-12 if value.dtype == torch.float64 else 1e-6
            torch.testing.assert_close(ours.nodes[t].data[key], value, rtol=0, atol=atol)
    for cet in theirs.canonical_etypes:
        torch.testing.assert_close(ours.edges[cet].data["w"], theirs.edges[cet].data["w"], rtol=0, atol=1e-6)
    if subtract_min:
        assert torch.allclose(ours.ndata["h"].sum(1) if isinstance(ours.ndata["h"], torch.Tensor)
                              else ours.nodes["game"].data["h"].sum(1), torch.tensor(1.0))


# ---------------------------------------------------------------------- encodings
@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("idtype", [torch.int64, torch.int32])
def test_random_walk_pe_equals_dgl(dgl, k, idtype):
    g_ours, g_theirs = homogeneous(udgl, idtype), homogeneous(dgl, idtype)
    expected = dgl.random_walk_pe(g_theirs, k)
    got = random_walk_pe(g_ours, k)
    assert got.dtype == torch.float32 and got.shape == (N, k)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    assert (got[5] == 0).all()   # the isolated node never returns
    out = RandomWalkPE(k, "rw")(g_ours)
    assert out is g_ours and torch.equal(out.ndata["rw"], got)
    # weights without repeated pairs: DGL's values exactly
    simple = ([0, 0, 1, 2, 2, 3, 3], [1, 0, 2, 2, 0, 1, 4])
    weight = torch.tensor([[0.5], [2.0], [1.0], [3.0], [0.25], [1.5], [4.0]])
    a, b = udgl.graph(simple, num_nodes=6, idtype=idtype), dgl.graph(simple, num_nodes=6, idtype=idtype)
    a.edata["we"], b.edata["we"] = weight, weight
    torch.testing.assert_close(RandomWalkPE(k, eweight_name="we")(a).ndata["PE"],
                               dgl.RandomWalkPE(k, eweight_name="we")(b).ndata["PE"], rtol=0, atol=1e-6)


def test_random_walk_pe_weights_of_repeated_edges_add_up():
    g = udgl.graph(([0, 0, 0, 1], [1, 1, 0, 0]))
    g.edata["w"] = torch.tensor([1.0, 2.0, 3.0, 1.0])
    # from node 0: to 1 with weight 1 + 2, to itself with 3, so it stays with probability 1/2
    # (DGL 2.1 gives 1/3: it weighs the pair by its edge count times its total weight)
    pe = random_walk_pe(g, 2, "w")
    torch.testing.assert_close(pe, torch.tensor([[0.5, 0.25 + 0.5], [0.0, 0.5]]))
    torch.testing.assert_close(random_walk_pe(g, 1), torch.tensor([[1 / 3], [0.0]]))   # counts, as DGL


@pytest.mark.parametrize("k", [1, 3, 7, 9])
def test_svd_pe_equals_dgl(dgl, k):
    g_ours, g_theirs = homogeneous(udgl), homogeneous(dgl)
    expected = dgl.svd_pe(g_theirs, k, padding=True, random_flip=False)
    got = svd_pe(g_ours, k, padding=True, random_flip=False)
    assert got.dtype == torch.float32 and got.shape == (N, 2 * k)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    np.random.seed(11)
    expected = dgl.SVDPE(k, "s", padding=True)(g_theirs).ndata["s"]
    np.random.seed(11)
    assert torch.equal(SVDPE(k, "s", padding=True)(g_ours).ndata["s"], expected)   # the same signs drawn


def test_svd_pe_properties_and_dgls_example(dgl):
    # DGL's own test graph: the absolute values it lists
    src, dst = [0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 4, 4], [2, 3, 0, 2, 0, 2, 3, 4, 3, 4, 0, 1]
    target = torch.tensor([[0.6669, 0.3068, 0.7979, 0.8477], [0.6311, 0.6101, 0.1248, 0.5137],
                           [1.1993, 0.0665, 0.9183, 0.1455], [0.5682, 0.6766, 0.8952, 0.6449],
                           [0.3393, 0.8363, 0.6500, 0.4564]])
    g = udgl.graph((src, dst))
    torch.testing.assert_close(svd_pe(g, 2).abs(), target, rtol=0, atol=1e-4)
    # the encoding reproduces the adjacency: sum_i (u_i sqrt s_i)(v_i sqrt s_i)^T = A at full rank
    pe = svd_pe(g, 5, random_flip=False).double()
    a = torch.zeros(5, 5, dtype=torch.float64).index_put_((torch.tensor(src), torch.tensor(dst)),
                                                           torch.ones(12, dtype=torch.float64), accumulate=True)
    torch.testing.assert_close(pe[:, :5] @ pe[:, 5:].T, a, rtol=0, atol=1e-5)
    np.random.seed(0)
    flips = torch.stack([svd_pe(g, 2)[:, 0] / svd_pe(g, 2, random_flip=False)[:, 0] for _ in range(400)])
    assert set(flips.round().unique().tolist()) == {-1.0, 1.0} and abs(flips.mean().item()) < 0.1
    padded = SVDPE(8, padding=True, random_flip=False)(g).ndata["svd_pe"]
    assert padded.shape == (5, 16) and (padded[:, 10:] == 0).all()


@pytest.mark.parametrize("idtype", [torch.int64, torch.int32])
def test_to_levi_equals_dgl(dgl, idtype):
    ours, theirs = ToLevi()(homogeneous(udgl, idtype)), dgl.ToLevi()(homogeneous(dgl, idtype))
    same_graph(ours, theirs)
    assert ours.ntypes == ["edge", "node"] and ours.num_nodes("node") == N
    assert ours.canonical_etypes == [("edge", "e2n", "node"), ("node", "n2e", "edge")]


def test_to_levi_keeps_trailing_isolated_nodes():
    g = udgl.graph(([0, 1], [1, 0]), num_nodes=4)
    g.ndata["h"] = torch.arange(4.0)
    levi = ToLevi()(g)
    assert levi.num_nodes("node") == 4 and torch.equal(levi.nodes["node"].data["h"], g.ndata["h"])
    empty = ToLevi()(udgl.graph(([], []), num_nodes=3))
    assert empty.num_nodes("node") == 3 and empty.num_nodes("edge") == 0


# ---------------------------------------------------------------------- errors
def test_errors_name_the_problem():
    g, h = homogeneous(udgl), hetero(udgl)
    bip = udgl.heterograph({("a", "r", "b"): ([0], [1])})
    for bad in (-0.1, 1.5, True, "0.5"):
        for cls in (DropNode, DropEdge):
            with pytest.raises(DGLError, match="probability"):
                cls(bad)
        with pytest.raises(DGLError, match="probability"):
            FeatMask(bad)
    with pytest.raises(DGLError, match="ratio"):
        AddEdge(-1)
    for k in (0, -2, 1.5, True):
        for call in (lambda: random_walk_pe(g, k), lambda: svd_pe(g, k), lambda: RandomWalkPE(k), lambda: SVDPE(k)):
            with pytest.raises(DGLError, match="positive int"):
                call()
    for call in (lambda: random_walk_pe(h, 2), lambda: svd_pe(h, 2), lambda: ToLevi()(h), lambda: ToLevi()(bip),
                 lambda: RandomWalkPE(2)(bip), lambda: SVDPE(1)(bip)):
        with pytest.raises(DGLError, match="homogeneous"):
            call()
    with pytest.raises(DGLError, match="padding=True"):
        svd_pe(g, N + 1)
    with pytest.raises(DGLError, match="no edge feature 'nope'"):
        random_walk_pe(g, 2, "nope")
    with pytest.raises(DGLError, match="one weight per edge"):
        random_walk_pe(g, 2, "w")   # three values per edge
    with pytest.raises(DGLError, match="'nope'"):
        RowFeatNormalizer(node_feat_names=["h", "nope"])(g)
    assert torch.equal(g.ndata["h"], homogeneous(udgl).ndata["h"])   # nothing changed before the error
    with pytest.raises(DGLError, match="floating point"):
        RowFeatNormalizer(node_feat_names=["i"])(g)
    with pytest.raises(DGLError, match="'nope'"):
        FeatMask(edge_feat_names=["nope"])(h)
    with pytest.raises(DGLError, match="two dimensions"):
        FeatMask(node_feat_names=["h", "i"])(g)
    with pytest.raises(DGLError, match="list of feature names"):
        FeatMask(node_feat_names="h")
    for cls in (NodeShuffle(), DropNode(), DropEdge(), AddEdge()):
        with pytest.raises(DGLError, match="graph from unigraph.dgl"):
            cls(torch.zeros(3))
