"""unigraph.dgl.nn's geometric modules (EGNNConv, AtomicConv, DGNConv, PathEncoder) and the
point-set graph builders (knn_graph, segmented_knn_graph, radius_graph and their modules) against
DGL's own: a DGL state_dict loads, outputs and input/parameter gradients agree in float64 (EGNN:
finite coordinate gradients where DGL's are NaN, checked numerically), DGL's initialization, the
same graphs (edges, order, batch sizes) from the builders; the errors."""
from __future__ import annotations

import warnings

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import SRC, DST, TOL, assert_same_run, graphs, our_graphs, same_modules
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch import factory


def plain_graphs(dgl, extra_node: bool = True):
    """``(ours, theirs)``: the 6-node test graph without self-loops, plus an isolated 7th node."""
    n = 7 if extra_node else 6
    return udgl.graph((SRC, DST), num_nodes=n), dgl.graph((SRC, DST), num_nodes=n)


def rand(*shape, grad: bool = True):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


def run_and_grads(module, args, wrt):
    out = module(*args)
    outs = list(out) if isinstance(out, tuple) else [out]
    grads = torch.autograd.grad(sum(o.square().sum() for o in outs), wrt, allow_unused=True)
    return outs, grads


def assert_same_with_frozen(ours, theirs, our_args, their_args, inputs):
    """assert_same_run for modules holding frozen parameters (gradients of the trainable ones)."""
    trainable = lambda m: [p for p in m.parameters() if p.requires_grad]   # noqa: E731
    out_a, grad_a = run_and_grads(ours, our_args, inputs + trainable(ours))
    out_b, grad_b = run_and_grads(theirs, their_args, inputs + trainable(theirs))
    for a, b in zip(out_a + list(grad_a), out_b + list(grad_b)):
        torch.testing.assert_close(a, b, **TOL)


def same_init(dgl, make):
    torch.manual_seed(3)
    theirs = make(dgl.nn)
    torch.manual_seed(3)
    ours = make(unn)
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=0, atol=0)


# ---------------------------------------------------------------------- EGNNConv
@pytest.mark.parametrize("edge_feat_size", [0, 2])
def test_egnn_conv(dgl, edge_feat_size):
    torch.manual_seed(0)
    ours_g, their_g = plain_graphs(dgl)
    ours, theirs = same_modules(dgl, lambda nn: nn.EGNNConv(4, 5, 3, edge_feat_size))
    h, x = rand(7, 4), rand(7, 3)
    inputs, args = [h, x], [h, x]
    if edge_feat_size:
        e = rand(ours_g.num_edges(), edge_feat_size)
        inputs.append(e)
        args.append(e)
    assert_same_run(ours, theirs, (ours_g, *args), (their_g, *args), inputs)


def test_egnn_conv_self_loops(dgl):
    """With self-loops DGL's coordinate gradients are all NaN (sqrt(0) in its backward): the outputs
    and the other gradients equal DGL's, ours are finite and match finite differences."""
    torch.manual_seed(0)
    (ours_g, their_g), = graphs(dgl, blocks=False)
    ours, theirs = same_modules(dgl, lambda nn: nn.EGNNConv(4, 5, 3, 2))
    h, x, e = rand(6, 4), rand(6, 3), rand(ours_g.num_edges(), 2)
    out_a, grad_a = run_and_grads(ours, (ours_g, h, x, e), [h, x, e, *ours.parameters()])
    out_b, grad_b = run_and_grads(theirs, (their_g, h, x, e), [h, x, e, *theirs.parameters()])
    assert torch.isnan(grad_b[1]).all() and torch.isfinite(grad_a[1]).all()
    for i, (a, b) in enumerate(zip(out_a + list(grad_a), out_b + list(grad_b))):
        if i != len(out_a) + 1:
            torch.testing.assert_close(a, b, **TOL)
    assert torch.autograd.gradcheck(lambda coords: ours(ours_g, h.detach(), coords, e.detach()), (x,))


def test_egnn_conv_default_init_and_empty_edge_feat(dgl):
    same_init(dgl, lambda nn: nn.EGNNConv(4, 5, 3, 2))
    ours_g, their_g = plain_graphs(dgl)
    ours, theirs = same_modules(dgl, lambda nn: nn.EGNNConv(4, 5, 3))
    h, x, empty = rand(7, 4, grad=False), rand(7, 3, grad=False), torch.zeros(ours_g.num_edges(), 0)
    for a, b in zip(ours(ours_g, h, x, empty), theirs(their_g, h, x, empty)):   # DGL's own test passes [E, 0]
        torch.testing.assert_close(a, b, **TOL)


def test_egnn_conv_errors():
    g, block = our_graphs()
    conv = unn.EGNNConv(4, 5, 3, 2)
    h, x, e = torch.randn(6, 4), torch.randn(6, 3), torch.randn(g.num_edges(), 2)
    with pytest.raises(DGLError, match="one node set"):
        conv(block, h, x, torch.randn(block.num_edges(), 2))
    with pytest.raises(DGLError, match="pass edge_feat"):
        conv(g, h, x)
    with pytest.raises(DGLError, match="edge_feat must be"):
        conv(g, h, x, e[:, :1])
    with pytest.raises(DGLError, match="in_size=4"):
        conv(g, torch.randn(6, 3), x, e)
    with pytest.raises(DGLError, match="coord_feat"):
        conv(g, h, torch.randn(5, 3), e)
    with pytest.raises(DGLError, match="edge_feat_size=0"):
        unn.EGNNConv(4, 5, 3)(g, h, x, e)


# ---------------------------------------------------------------------- AtomicConv
def atomic(nn, types: bool):
    return nn.AtomicConv(torch.tensor([1.5, 3.0, 0.8]), torch.tensor([0.0, 1.0, 2.0]), torch.tensor([1.0, 4.0, 0.5]),
                         torch.tensor([6.0, 8.0]) if types else None)


@pytest.mark.parametrize("types", [True, False])
def test_atomic_conv(dgl, types):
    torch.manual_seed(0)
    pairs = [graphs(dgl, blocks=False)[0], plain_graphs(dgl)]   # self-loops; an atom without neighbours
    for ours_g, their_g in pairs:
        ours, theirs = same_modules(dgl, lambda nn: atomic(nn, types))
        n = ours_g.num_nodes()
        feat = (torch.tensor([6.0, 8.0, 1.0])[torch.randint(0, 3, (n, 1))].double() if types
                else rand(n, 2))
        dist = (torch.rand(ours_g.num_edges(), 1, dtype=torch.float64) * 3.5).requires_grad_()  # some past c_k
        inputs = [dist] if types else [feat, dist]
        assert_same_with_frozen(ours, theirs, (ours_g, feat, dist), (their_g, feat, dist), inputs)
        assert ours(ours_g, feat, dist).shape == (n, 2 * 3)   # T (types, or feat's width) x K


def test_atomic_conv_errors():
    g, block = our_graphs()
    conv = atomic(unn, True)
    feat, dist = torch.full((6, 1), 6.0), torch.rand(g.num_edges(), 1)
    with pytest.raises(DGLError, match="one node set"):
        conv(block, feat, torch.rand(block.num_edges(), 1))
    with pytest.raises(DGLError, match="distances must be"):
        conv(g, feat, dist.view(-1))
    with pytest.raises(DGLError, match=r"feat \[N, 1\]"):
        conv(g, torch.full((6, 2), 6.0), dist)
    with pytest.raises(TypeError, match="floating-point"):
        conv(g, torch.full((6, 1), 6), dist)
    with pytest.raises(DGLError, match="one value per radial filter"):
        unn.AtomicConv(torch.ones(2), torch.ones(3), torch.ones(3))


# ---------------------------------------------------------------------- DGNConv
DGN_OPTIONS = [
    dict(aggregators=["dir1-av", "dir2-dx", "mean", "max"], scalers=["identity", "amplification"]),
    dict(aggregators=["dir3-dx", "sum", "dir3-av", "std"], scalers=["attenuation", "identity"], num_towers=2,
         edge_feat_size=3),
    dict(aggregators=["dir1-dx", "min", "var"], scalers=["amplification", "attenuation"], residual=False,
         edge_feat_size=2),
]


@pytest.mark.parametrize("options", DGN_OPTIONS, ids=["dir_av_dx", "towers_edges", "no_residual"])
def test_dgn_conv(dgl, options):
    torch.manual_seed(0)
    options = dict(options)
    edge_size = options.get("edge_feat_size", 0)
    for ours_g, their_g in [graphs(dgl, blocks=False)[0], plain_graphs(dgl)]:
        ours, theirs = same_modules(dgl, lambda nn: nn.DGNConv(4, 4, delta=1.7, **options))
        n = ours_g.num_nodes()
        h, eig = rand(n, 4), rand(n, 3)
        inputs = [h, eig]
        forward = {"eig_vec": eig}
        if edge_size:
            forward["edge_feat"] = rand(ours_g.num_edges(), edge_size)
            inputs.append(forward["edge_feat"])
        assert_same_run(ours, theirs, (ours_g, h), (their_g, h), inputs, **forward)


def test_dgn_conv_batch_lappe_and_init(dgl):
    """A batch of two graphs with DGL's LapPE eigenvectors; no directional aggregator (eig_vec not
    needed); the default initialization drawn as DGL's (it builds PNA towers first)."""
    torch.manual_seed(0)
    ours_g = udgl.batch([udgl.add_self_loop(udgl.graph((SRC, DST), num_nodes=6)), udgl.rand_graph(5, 12)])
    their_g = dgl.batch([dgl.graph(tuple(t.clone() for t in g.edges()), num_nodes=g.num_nodes())
                         for g in udgl.unbatch(ours_g)])
    eig = dgl.lap_pe(their_g, 3, padding=True).double()
    h = rand(11, 4)
    ours, theirs = same_modules(dgl, lambda nn: nn.DGNConv(4, 4, ["dir2-av", "dir1-dx", "mean"], ["identity"], 2.0))
    assert_same_run(ours, theirs, (ours_g, h), (their_g, h), [h], eig_vec=eig)
    ours, theirs = same_modules(dgl, lambda nn: nn.DGNConv(4, 6, ["mean", "max"], ["identity"], 2.0))
    their_g.ndata["eig"] = eig   # DGL's towers read it even without a directional aggregator; ours do not
    assert_same_run(ours, theirs, (ours_g, h), (their_g, h), [h])
    same_init(dgl, lambda nn: nn.DGNConv(4, 4, ["dir1-av", "sum", "dir2-dx"], ["identity", "attenuation"], 2.0,
                                         num_towers=2, edge_feat_size=3))


def test_dgn_conv_errors():
    g, block = our_graphs()
    conv = unn.DGNConv(4, 4, ["dir2-av", "mean"], ["identity"], 2.0)
    h = torch.randn(6, 4)
    with pytest.raises(DGLError, match="unknown aggregators"):
        unn.DGNConv(4, 4, ["dir4-av"], ["identity"], 2.0)
    with pytest.raises(DGLError, match="needs eig_vec"):
        conv(g, h)
    with pytest.raises(DGLError, match="K >= 2"):
        conv(g, h, eig_vec=torch.randn(6, 1))
    with pytest.raises(DGLError, match="block"):
        conv(block, h, eig_vec=torch.randn(6, 2))


# ---------------------------------------------------------------------- PathEncoder
@pytest.mark.parametrize("max_len,num_heads", [(1, 1), (2, 3), (3, 2)])
def test_path_encoder(dgl, max_len, num_heads):
    torch.manual_seed(0)
    src, dst = torch.tensor([0, 0, 0, 1, 1, 2, 3, 3, 4]), torch.tensor([1, 2, 3, 0, 3, 0, 0, 1, 2])
    ours_g, their_g = udgl.graph((src, dst), num_nodes=6), dgl.graph((src, dst), num_nodes=6)
    dist, path = udgl.shortest_dist(ours_g, return_paths=True)
    their_dist, their_path = dgl.shortest_dist(their_g, return_paths=True)
    assert torch.equal(dist, their_dist) and torch.equal(path, their_path)
    edata = torch.cat([rand(9, 4, grad=False), torch.zeros(1, 4, dtype=torch.float64)])
    index = torch.nn.functional.pad(path, (0, max(0, max_len - path.shape[-1])), value=-1)[..., :max_len]
    path_data = torch.stack([edata[index], edata[index.flip(0)]]).requires_grad_()   # a batch of 2
    dists = torch.stack([dist, dist.flip(0)])
    ours, theirs = same_modules(dgl, lambda nn: nn.PathEncoder(max_len, 4, num_heads))
    assert_same_run(ours, theirs, (dists, path_data), (dists, path_data), [path_data])
    same_init(dgl, lambda nn: nn.PathEncoder(max_len, 4, num_heads))


def test_path_encoder_errors():
    enc = unn.PathEncoder(2, 4)
    with pytest.raises(DGLError, match="max_len=2"):
        enc(torch.zeros(1, 3, 3, dtype=torch.long), torch.zeros(1, 3, 3, 1, 4))
    with pytest.raises(DGLError, match=r"dist must be a tensor \[B, N, N\]"):
        enc(torch.zeros(3, 3, dtype=torch.long), torch.zeros(1, 3, 3, 2, 4))
    with pytest.raises(DGLError, match="positive int"):
        unn.PathEncoder(0, 4)


# ---------------------------------------------------------------------- point-set graphs
def edges(g):
    return [t.tolist() for t in g.edges()]


def assert_same_graph(ours, theirs, ordered: bool = True):
    a, b = edges(ours), edges(theirs)
    assert (a == b) if ordered else (sorted(zip(*a)) == sorted(zip(*b)))
    assert ours.num_nodes() == theirs.num_nodes()
    assert ours.batch_num_nodes().tolist() == theirs.batch_num_nodes().tolist()
    assert ours.batch_num_edges().tolist() == theirs.batch_num_edges().tolist()


@pytest.mark.parametrize("algorithm", ["bruteforce-blas", "bruteforce", "kd-tree"])
def test_knn_graph(dgl, algorithm):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # k larger than a set: both warn and cut k
        for x in (torch.rand(9, 3), torch.rand(3, 5, 2), torch.rand(12, 4, dtype=torch.float64)):
            for dist in ("euclidean", "cosine"):
                for exclude_self in (False, True):
                    for k in (1, 3, 6):
                        kw = dict(algorithm=algorithm, dist=dist, exclude_self=exclude_self)
                        # DGL's bruteforce lists each node's neighbours in its heap's order
                        assert_same_graph(unn.KNNGraph(k)(x, **kw), dgl.nn.KNNGraph(k)(x, **kw),
                                          ordered=algorithm != "bruteforce")
                        assert_same_graph(factory.knn_graph(x, k, **kw), dgl.knn_graph(x, k, **kw),
                                          ordered=algorithm != "bruteforce")
        x, segs = torch.rand(12, 3), [3, 5, 4]
        for exclude_self in (False, True):
            for k in (2, 4):
                kw = dict(algorithm=algorithm, exclude_self=exclude_self)
                assert_same_graph(unn.SegmentedKNNGraph(k)(x, segs, **kw), dgl.nn.SegmentedKNNGraph(k)(x, segs, **kw),
                                  ordered=algorithm != "bruteforce")


def test_knn_graph_ties_and_coincident_points(dgl):
    """Points on a grid (many equal distances): the default algorithm picks DGL's neighbours; with
    more than k + 1 coincident points and exclude_self every node keeps exactly k in-edges and no
    self-loop, as DGL's (which drops a random extra edge)."""
    torch.manual_seed(0)
    grid = torch.stack(torch.meshgrid(torch.arange(4.0), torch.arange(3.0), indexing="ij"), -1).reshape(-1, 2)
    for k in (2, 4, 5):
        assert_same_graph(factory.knn_graph(grid, k), dgl.knn_graph(grid, k))
        assert_same_graph(factory.segmented_knn_graph(grid, k, [7, 5]), dgl.segmented_knn_graph(grid, k, [7, 5]))
    # far from the origin float32 rounding decides the order (unigraph.nn.knn_graph, which sums the
    # same three terms in another order, picks other neighbours here)
    far = torch.rand(30, 3) * 0.01 + 100
    assert_same_graph(factory.knn_graph(far, 5), dgl.knn_graph(far, 5))
    assert_same_graph(factory.knn_graph(far.view(3, 10, 3), 4, dist="cosine"),
                      dgl.knn_graph(far.view(3, 10, 3), 4, dist="cosine"))
    x = torch.cat([torch.zeros(6, 2), torch.ones(4, 2)])
    ours = factory.segmented_knn_graph(x, 2, [6, 4], exclude_self=True)
    theirs = dgl.segmented_knn_graph(x, 2, [6, 4], exclude_self=True)
    src, dst = ours.edges()
    assert not (src == dst).any() and ours.in_degrees().tolist() == theirs.in_degrees().tolist() == [2] * 10
    assert ours.batch_num_edges().tolist() == theirs.batch_num_edges().tolist()
    assert (x[src] == x[dst]).all()


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("self_loop", [False, True])
def test_radius_graph(dgl, p, self_loop):
    torch.manual_seed(0)
    x = torch.rand(10, 3, dtype=torch.float64, requires_grad=True)
    for mode in factory.COMPUTE_MODES:
        ours, theirs = unn.RadiusGraph(0.45, p, self_loop, mode), dgl.nn.RadiusGraph(0.45, p, self_loop, mode)
        (g_a, d_a), (g_b, d_b) = ours(x, get_distances=True), theirs(x, get_distances=True)
        assert_same_graph(g_a, g_b)
        torch.testing.assert_close(d_a, d_b, **TOL)
        # DGL fills cdist's output in place, so only its self-loop variant has a backward
        if self_loop:
            grad_a, = torch.autograd.grad(d_a.sum(), x)
            grad_b, = torch.autograd.grad(d_b.sum(), x)
            torch.testing.assert_close(grad_a, grad_b, **TOL)
        assert_same_graph(factory.radius_graph(x, 0.45, p, self_loop, mode),
                          dgl.radius_graph(x, 0.45, p, self_loop, mode))
    grad, = torch.autograd.grad(unn.RadiusGraph(0.45)(x, get_distances=True)[1].sum(), x)
    assert torch.isfinite(grad).all()


def test_point_graph_errors():
    x = torch.rand(5, 2)
    with pytest.raises(DGLError, match="nn-descent"):
        factory.knn_graph(x, 2, algorithm="nn-descent")
    with pytest.raises(DGLError, match="unknown algorithm"):
        unn.KNNGraph(2)(x, algorithm="ball-tree")
    with pytest.raises(DGLError, match="CUDA only"):
        factory.knn_graph(x, 2, algorithm="bruteforce-sharemem")
    with pytest.raises(DGLError, match="dist must be"):
        factory.knn_graph(x, 2, dist="manhattan")
    with pytest.raises(DGLError, match="k must be > 0"):
        factory.knn_graph(x, 0)
    with pytest.raises(DGLError, match="empty"):
        factory.knn_graph(torch.rand(0, 2), 1)
    with pytest.raises(DGLError, match="summing to the 5 points"):
        unn.SegmentedKNNGraph(2)(x, [2, 2])
    with pytest.raises(TypeError, match="floating-point"):
        factory.knn_graph(torch.ones(5, 2, dtype=torch.long), 2)
    with pytest.raises(DGLError, match="r must be > 0"):
        unn.RadiusGraph(0.0)(x)
    with pytest.raises(DGLError, match="compute_mode"):
        factory.radius_graph(x, 0.5, compute_mode="fast")
    with pytest.warns(UserWarning, match="using k=5"):
        assert factory.knn_graph(x, 7).num_edges() == 25
