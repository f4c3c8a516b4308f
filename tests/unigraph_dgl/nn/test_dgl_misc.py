"""unigraph.dgl.nn's HGTConv, EGTLayer, GroupRevRes, TWIRLSConv and TWIRLSUnfoldingAndAttention
against the real DGL's: a DGL state_dict loads, outputs and gradients (inputs and parameters)
agree in float64, the seeded default initialisation is DGL's, and bad input is refused.
GroupRevRes also: a chain lets go of its intermediate outputs, and its gradients equal plain
autograd's (with dropout in training too)."""
from __future__ import annotations

import weakref

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import TOL, assert_same_run, graphs, our_graphs, same_modules
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.conv.twirlsconv import TWIRLSUnfoldingAndAttention

F64 = torch.float64
# nodes 3 and 4 have no in-edge; 1 -> 2 twice
SPARSE_SRC, SPARSE_DST = torch.tensor([0, 1, 2, 3, 1, 4]), torch.tensor([1, 2, 1, 0, 2, 2])


def _sparse_pair(dgl):
    return udgl.graph((SPARSE_SRC, SPARSE_DST), num_nodes=5), dgl.graph((SPARSE_SRC, SPARSE_DST), num_nodes=5)


def _randomised(dgl, make):
    """:func:`same_modules` with every parameter drawn from N(0, 1) (the ones-initialised priors
    and gates too, so that each one's role is tested)."""
    ours, theirs = same_modules(dgl, make)
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


@pytest.mark.parametrize("make", [
    lambda nn: nn.HGTConv(5, 3, 2, 3, 4),
    lambda nn: nn.HGTConv(6, 3, 2, 3, 4, use_norm=True),
    lambda nn: nn.EGTLayer(8, 3, 2, 1),
    lambda nn: nn.TWIRLSConv(5, 3, 4, 2, num_mlp_before=2, num_mlp_after=2, norm="batch", use_eta=True),
    lambda nn: nn.GroupRevRes(nn.GraphConv(3, 3), 3),
], ids=["hgt", "hgt_norm", "egt", "twirls", "group_rev_res"])
def test_default_initialisation_is_dgls(dgl, make):
    torch.manual_seed(3)
    theirs = make(dgl.nn).state_dict()
    torch.manual_seed(3)
    ours = make(unn).state_dict()
    assert list(ours) == list(theirs)
    for key in theirs:
        torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0)


# ---------------------------------------------------------------------------------------- HGTConv
@pytest.mark.parametrize("in_size,head_size,num_heads,use_norm", [(6, 3, 2, False), (5, 2, 3, True), (4, 4, 1, False)])
def test_hgt_matches_dgl(dgl, in_size, head_size, num_heads, use_norm):
    # with and without the residual projection (in_size vs head_size * num_heads), on the graph
    # with self-loops, its block and a graph with nodes without in-edges
    torch.manual_seed(0)
    for ours_graph, their_graph in graphs(dgl) + [_sparse_pair(dgl)]:
        ours, theirs = _randomised(dgl, lambda nn: nn.HGTConv(in_size, head_size, num_heads, 3, 4, dropout=0.3,
                                                              use_norm=use_norm))
        x = torch.randn(ours_graph.num_src_nodes(), in_size, dtype=F64, requires_grad=True)
        ntype = torch.randint(0, 3, (ours_graph.num_src_nodes(),))
        etype = torch.randint(0, 4, (ours_graph.num_edges(),))
        assert_same_run(ours, theirs, (ours_graph, x, ntype, etype), (their_graph, x, ntype, etype), [x])


def test_hgt_presorted_matches_dgl(dgl):
    torch.manual_seed(1)
    ours_graph, their_graph = graphs(dgl, blocks=False)[0]
    ours, theirs = _randomised(dgl, lambda nn: nn.HGTConv(4, 2, 2, 2, 3))
    x = torch.randn(6, 4, dtype=F64, requires_grad=True)
    ntype = torch.tensor([0, 0, 0, 1, 1, 1])
    etype = torch.sort(torch.randint(0, 3, (ours_graph.num_edges(),))).values
    assert_same_run(ours, theirs, (ours_graph, x, ntype, etype), (their_graph, x, ntype, etype), [x], presorted=True)
    presorted = ours(ours_graph, x, ntype, etype, presorted=True)
    torch.testing.assert_close(presorted, ours(ours_graph, x, ntype, etype), **TOL)


def test_hgt_refuses_bad_input(dgl):
    g, _ = our_graphs()
    conv = unn.HGTConv(4, 2, 2, 2, 3)
    x, ntype, etype = torch.randn(6, 4), torch.zeros(6, dtype=torch.long), torch.zeros(g.num_edges(), dtype=torch.long)
    with pytest.raises(DGLError, match="ntype has 5 entries"):
        conv(g, x, ntype[:5], etype)
    with pytest.raises(DGLError, match="etype holds ids outside 0..2"):
        conv(g, x, ntype, etype + 3)
    with pytest.raises(DGLError, match="etype must be a 1-D integer tensor"):
        conv(g, x, ntype, etype.double())
    with pytest.raises(DGLError, match="built for 4"):
        conv(g, torch.randn(6, 5), ntype, etype)
    with pytest.raises(DGLError, match="presorted=True but etype is not sorted"):
        conv(g, x, ntype, torch.arange(g.num_edges()).flip(0) % 3, presorted=True)
    bipartite = udgl.heterograph({("a", "r", "b"): ([0, 1], [0, 0])})
    with pytest.raises(DGLError, match="bipartite graph of two node types"):
        conv(bipartite, torch.randn(2, 4), ntype[:2], etype[:2])


# ---------------------------------------------------------------------------------------- EGTLayer
@pytest.mark.parametrize("edge_update", [True, False])
@pytest.mark.parametrize("num_virtual_nodes,masked", [(0, False), (2, True), (1, False)])
def test_EGTLayer_matches_dgl(dgl, edge_update, num_virtual_nodes, masked):
    # normal parameters push some q.k past the clip at +-5 (its gradient cut) and gates to 0/1
    torch.manual_seed(0)
    ours, theirs = _randomised(dgl, lambda nn: nn.EGTLayer(8, 3, 2, num_virtual_nodes, edge_update=edge_update))
    nfeat = torch.randn(2, 5, 8, dtype=F64, requires_grad=True)
    efeat = torch.randn(2, 5, 5, 3, dtype=F64, requires_grad=True)
    mask = ((torch.rand(2, 5, 5) < 0.3) * -1e9).to(F64) if masked else None
    assert_same_run(ours, theirs, (nfeat, efeat, mask), (nfeat, efeat, mask), [nfeat, efeat])


def test_EGTLayer_refuses_bad_input():
    with pytest.raises(ValueError, match="divisible by num_heads"):
        unn.EGTLayer(8, 3, 3, 0)
    layer = unn.EGTLayer(8, 3, 2, 0)
    nfeat, efeat = torch.randn(2, 5, 8), torch.randn(2, 5, 5, 3)
    with pytest.raises(ValueError, match="efeat must be"):
        layer(nfeat, efeat[:, :4])
    with pytest.raises(ValueError, match="nfeat must be"):
        layer(nfeat[..., :6], efeat)
    with pytest.raises(ValueError, match="bool mask"):
        layer(nfeat, efeat, torch.zeros(2, 5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be"):
        layer(nfeat, efeat, torch.zeros(2, 5, 4))


# ------------------------------------------------------------------------------------- GroupRevRes
class _Block(torch.nn.Module):
    """A module as RevGNN stacks them: norm, activation, (dropout,) graph convolution, with an
    optional edge input (its chunk turned into scalar edge weights)."""

    def __init__(self, nn, feats: int, dropout: float = 0.0):
        super().__init__()
        self.norm = torch.nn.LayerNorm(feats)
        self.drop = torch.nn.Dropout(dropout)
        self.conv = nn.GraphConv(feats, feats, allow_zero_in_degree=True)

    def forward(self, g, h, *edge):
        h = self.drop(torch.tanh(self.norm(h)))
        return self.conv(g, h, edge_weight=torch.sigmoid(edge[0].sum(-1))) if edge else self.conv(g, h)


def _stack(nn, groups: int, feats: int = 4, depth: int = 3, dropout: float = 0.0):
    torch.manual_seed(1)
    return torch.nn.ModuleList([nn.GroupRevRes(_Block(nn, feats, dropout), groups) for _ in range(depth)]).double()


def _run_stack(stack, g, x, e):
    """Output, gradients of the input, the edge input and the parameters (by .backward(): DGL's
    GroupRevRes refuses torch.autograd.grad), and weak references to every layer's output."""
    x, e = x.clone().requires_grad_(), None if e is None else e.clone().requires_grad_()
    h, outputs = x, []
    for layer in stack:
        h = layer(g, h) if e is None else layer(g, h, e)
        outputs.append(weakref.ref(h))
    out = h.detach().clone()
    h.square().sum().backward()
    return out, x.grad, None if e is None else e.grad, [p.grad for p in stack.parameters()], outputs


@pytest.mark.parametrize("groups", [2, 3])
@pytest.mark.parametrize("edge_input", [False, True])
def test_group_rev_res_matches_dgl(dgl, groups, edge_input):
    # a stack of three: each layer rebuilds its input from its output (as DGL does)
    ours_graph, their_graph = graphs(dgl, blocks=False)[0]
    theirs, ours = _stack(dgl.nn, groups), _stack(unn, groups)
    ours.load_state_dict(theirs.state_dict())
    torch.manual_seed(0)
    x = torch.randn(6, 4 * groups, dtype=F64)
    e = torch.randn(ours_graph.num_edges(), 2 * groups, dtype=F64) if edge_input else None
    mine, reference = _run_stack(ours, ours_graph, x, e), _run_stack(theirs, their_graph, x, e)
    for a, b in zip(mine[:3], reference[:3]):
        if b is not None:
            torch.testing.assert_close(a, b, **TOL)
    for a, b in zip(mine[3], reference[3]):
        torch.testing.assert_close(a, b, **TOL)
    # the intermediate outputs were let go (rebuilt in backward); the last one is the caller's
    assert [r() is None for r in mine[4][:-1]] == [True] * (len(ours) - 1)


def _plain_gradients(stack, g, x):
    """The stack computed with ordinary autograd (every activation kept): the reference."""
    x = x.clone().requires_grad_()
    h = x
    for layer in stack:
        h = layer._forward(g, h, ())[0]
    grads = torch.autograd.grad(h.square().sum(), [x] + list(stack.parameters()))
    return h, grads


@pytest.mark.parametrize("training", [False, True])
def test_group_rev_res_gradients_equal_plain_autograd(training):
    # with dropout in training the inversion and the recomputation replay the forward's masks
    g, _ = our_graphs()
    stack = _stack(unn, 2, dropout=0.5).train(training)
    x = torch.randn(6, 8, dtype=F64)
    torch.manual_seed(7)
    expected_out, expected = _plain_gradients(stack, g, x)
    after_plain = torch.rand(3)
    torch.manual_seed(7)
    xr = x.clone().requires_grad_()
    h = xr
    for layer in stack:
        h = layer(g, h)
    got = torch.autograd.grad(h.square().sum(), [xr] + list(stack.parameters()))  # .grad works here
    torch.testing.assert_close(h, expected_out, **TOL)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, **TOL)
    torch.testing.assert_close(torch.rand(3), after_plain, rtol=0, atol=0)  # the RNG stream is untouched


def test_group_rev_res_shared_intermediate_and_retain_graph():
    # an intermediate also read elsewhere stays valid; a second backward rebuilds again
    g, _ = our_graphs()
    stack = _stack(unn, 2)
    x = torch.randn(6, 8, dtype=F64)
    xr = x.clone().requires_grad_()
    h1 = stack[0](g, xr)
    h2 = stack[1](g, h1)
    loss = (h2.square().sum() + (3 * h1).sum()).sum()
    first = torch.autograd.grad(loss, [xr] + list(stack[:2].parameters()), retain_graph=True)
    second = torch.autograd.grad(loss, [xr] + list(stack[:2].parameters()))
    xp = x.clone().requires_grad_()
    p1 = stack[0]._forward(g, xp, ())[0]
    p2 = stack[1]._forward(g, p1, ())[0]
    expected = torch.autograd.grad(p2.square().sum() + (3 * p1).sum(), [xp] + list(stack[:2].parameters()))
    for a, b, c in zip(first, second, expected):
        torch.testing.assert_close(a, c, **TOL)
        torch.testing.assert_close(b, c, **TOL)


def test_group_rev_res_refuses_bad_input():
    g, _ = our_graphs()
    with pytest.raises(ValueError, match="groups must be an int >= 2"):
        unn.GroupRevRes(torch.nn.Identity(), 1)
    layer = unn.GroupRevRes(_Block(unn, 2), 2).double()
    with pytest.raises(DGLError, match="divides into groups=2"):
        layer(g, torch.randn(6, 5, dtype=F64))
    with pytest.raises(DGLError, match="extra argument 0"):
        layer(g, torch.randn(6, 4, dtype=F64), torch.randn(g.num_edges(), 1, dtype=F64))
    widening = unn.GroupRevRes(unn.GraphConv(2, 3), 2).double()
    with pytest.raises(DGLError, match="must return a tensor of its input's shape"):
        widening(g, torch.randn(6, 4, dtype=F64))
    x = torch.randn(6, 4, dtype=F64, requires_grad=True)
    out = layer(g, x)
    with torch.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation|modified in place"):
        out.sum().backward()


# ----------------------------------------------------------------------------------------- TWIRLS
@pytest.fixture
def default_f64():
    """DGL's TWIRLS makes its edge weights with the default dtype (float32 otherwise), so its
    float64 run needs float64 as the default."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(F64)
    yield
    torch.set_default_dtype(previous)


def _twirls_graphs(dgl):
    """The graph with one self-loop per node, one with none (and nodes without in-edges), and one
    with a doubled self-loop: TWIRLSConv replaces them all by one per node."""
    doubled_src, doubled_dst = torch.tensor([0, 0, 0, 1, 2, 3]), torch.tensor([0, 0, 1, 2, 3, 1])
    return graphs(dgl, blocks=False) + [_sparse_pair(dgl), (udgl.graph((doubled_src, doubled_dst), num_nodes=5),
                                                            dgl.graph((doubled_src, doubled_dst), num_nodes=5))]


TWIRLS_CASES = [
    dict(),
    dict(precond=False),
    dict(attention=True, prop_step=4),
    dict(attention=True, attn_bef=True, use_eta=True, T=1.5, p=1.5, tau=0.3, prop_step=3, lam=0.7, alp=0.3),
    dict(num_mlp_before=2, num_mlp_after=3, norm="layer", lam=2.0),
    dict(num_mlp_before=2, num_mlp_after=2, norm="batch"),
    dict(num_mlp_before=0, num_mlp_after=2, attn_bef=True, p=0.5),
    dict(num_mlp_after=0, hidden_d=3, attention=True, precond=False, prop_step=5),
]


def _case_id(options: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items()) or "defaults"


@pytest.mark.parametrize("options", TWIRLS_CASES, ids=_case_id)
def test_twirls_matches_dgl(dgl, default_f64, options):
    kwargs = {**dict(input_d=5, output_d=3, hidden_d=4, prop_step=3), **options}
    torch.manual_seed(0)
    for ours_graph, their_graph in _twirls_graphs(dgl):
        ours, theirs = same_modules(dgl, lambda nn: nn.TWIRLSConv(**kwargs))
        with torch.no_grad():
            for name, p in theirs.named_parameters():
                if name.endswith("etas"):
                    p.uniform_(0.5, 1.5)
        ours.load_state_dict(theirs.state_dict())
        x = torch.randn(ours_graph.num_nodes(), 5, dtype=F64, requires_grad=True)
        assert_same_run(ours, theirs, (ours_graph, x), (their_graph, x), [x])


@pytest.mark.parametrize("options", [dict(), dict(precond=False, attn_aft=1, init_att=True, use_eta=True, T=2.0),
                                     dict(attn_aft=2, p=0.0, tau=0.5, alp=0.2, lam=3.0)])
def test_twirls_unfolding_matches_dgl(dgl, default_f64, options):
    kwargs = {**dict(d=4, alp=0, lam=1, prop_step=3), **options}
    torch.manual_seed(0)
    ours_graph, their_graph = graphs(dgl, blocks=False)[0]
    theirs = dgl.nn.TWIRLSUnfoldingAndAttention(**kwargs).double().eval()
    ours = TWIRLSUnfoldingAndAttention(**kwargs).double().eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(6, 4, dtype=F64, requires_grad=True)
    assert_same_run(ours, theirs, (ours_graph, x), (their_graph, x), [x])


def test_twirls_cached_unfolding(dgl, default_f64):
    # no MLP before the unfolding: its result is kept for the same graph and features, and
    # recomputed for new ones (DGL keeps its first result whatever comes next)
    g, _ = our_graphs()
    ours, theirs = same_modules(dgl, lambda nn: nn.TWIRLSConv(5, 3, 4, 3, num_mlp_before=0))
    x = torch.randn(6, 5, dtype=F64)
    first = ours(g, x)
    cached = ours.cached_unfolding
    torch.testing.assert_close(first, theirs(graphs(dgl, blocks=False)[0][1], x), **TOL)
    ours(g, x)
    assert ours.cached_unfolding is cached
    x2 = torch.randn(6, 5, dtype=F64)
    fresh = unn.TWIRLSConv(5, 3, 4, 3, num_mlp_before=0).double().eval()
    fresh.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(g, x2), fresh(g, x2), **TOL)
    x2.add_(1.0)  # in place: the version changes, the cache does not serve it
    torch.testing.assert_close(ours(g, x2), fresh(g, x2.clone()), **TOL)


def test_twirls_refuses_bad_input():
    g, block = our_graphs()
    with pytest.raises(ValueError, match="norm must be one of"):
        unn.TWIRLSConv(5, 3, 4, 2, norm="group")
    conv = unn.TWIRLSConv(5, 3, 4, 2)
    with pytest.raises(DGLError, match="one node set"):
        conv(block, torch.randn(block.num_src_nodes(), 5))
    with pytest.raises(DGLError, match="input_d=5"):
        conv(g, torch.randn(6, 4))
    with pytest.raises(DGLError, match="one row per node"):
        conv(g, torch.randn(5, 5))
    eta = unn.TWIRLSConv(5, 3, 4, 2, num_mlp_before=0, use_eta=True, attn_bef=True)
    with pytest.raises(DGLError, match="etas"):
        eta(g, torch.randn(6, 5))
