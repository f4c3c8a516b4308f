"""dgl.GCNNorm, PPR, HeatKernel, GDC and SIGNDiffusion (unigraph/dgl/diffusion_transforms.py)
against DGL's: the same edge weights (GCNNorm, also per relation of a heterograph), the same
sparsified edges in the same order with the same weights (the dense diffusions), the same diffused
features (SIGN), on graphs with self-loops, parallel edges and an isolated node; where we differ
from DGL on purpose (parallel edges add up, float64 weights, a non-symmetric heat kernel, weighted
'rw' at a node without in-edges) against the documented formula; and the refused inputs."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
from unigraph.dgl.base import DGLError
from unigraph.dgl.diffusion_transforms import GDC, PPR, GCNNorm, HeatKernel, SIGNDiffusion

# node 6 is isolated; 0 -> 0 and 4 -> 4 are self-loops; 2 -> 1 and 1 -> 4 are repeated
MULTI = ([0, 1, 2, 2, 3, 3, 4, 1, 4, 1, 5], [0, 0, 1, 1, 3, 0, 2, 4, 4, 4, 3])
# the same without the repeats (DGL's dense diffusions keep one of several parallel edges)
SIMPLE = ([0, 1, 2, 3, 3, 4, 1, 4, 5], [0, 0, 1, 3, 0, 2, 4, 4, 3])
N = 7


def pair(dgl, edges, weights=None, idtype=torch.int64, feat=None):
    src, dst = (torch.tensor(e) for e in edges)
    ours = udgl.graph((src, dst), num_nodes=N, idtype=idtype)
    theirs = dgl.graph((src, dst), num_nodes=N, idtype=idtype)
    for g in (ours, theirs):
        if weights is not None:
            g.edata["w"] = weights.clone()
        if feat is not None:
            g.ndata["feat"] = feat.clone()
    return ours, theirs


def dense_adj(edges, weights=None, dtype=torch.float32):
    src, dst = (torch.tensor(e) for e in edges)
    w = torch.ones(src.numel(), dtype=dtype) if weights is None else weights.to(dtype)
    return torch.zeros(N, N, dtype=dtype).index_put_((dst, src), w, accumulate=True)


# ---------------------------------------------------------------------------- GCNNorm
@pytest.mark.parametrize("weights", [None, "float32", "float64", "column"])
def test_gcnnorm_equals_dgl(dgl, weights):
    gen = torch.Generator().manual_seed(0)
    w = {None: None, "float32": torch.rand(11, generator=gen) + 0.1,
         "float64": torch.rand(11, generator=gen, dtype=torch.float64) + 0.1,
         "column": torch.rand(11, 1, generator=gen) + 0.1}[weights]
    ours, theirs = pair(dgl, MULTI, w)
    out = GCNNorm()(ours)
    expected = dgl.GCNNorm()(theirs).edata["w"]
    assert out is ours   # in place, as DGL's
    assert out.edata["w"].dtype == expected.dtype and out.edata["w"].shape == expected.shape
    torch.testing.assert_close(out.edata["w"], expected, rtol=1e-6, atol=1e-9)


def test_gcnnorm_heterograph_equals_dgl(dgl):
    spec = {("A", "r1", "A"): ([0, 1, 2, 2], [0, 0, 1, 1]), ("A", "r2", "B"): ([0, 0], [1, 1]),
            ("B", "r3", "B"): ([0, 1, 2], [0, 0, 1]), ("B", "r4", "A"): ([1], [3])}
    ours = udgl.heterograph({k: tuple(torch.tensor(x) for x in v) for k, v in spec.items()})
    theirs = dgl.heterograph({k: tuple(torch.tensor(x) for x in v) for k, v in spec.items()})
    for g in (ours, theirs):
        g.edges["r3"].data["ew"] = torch.tensor([0.1, 0.2, 0.3])
    GCNNorm("ew")(ours)
    dgl.GCNNorm("ew")(theirs)
    for cet in theirs.canonical_etypes:
        assert ("ew" in ours.edges[cet].data) == ("ew" in theirs.edges[cet].data) == (cet[0] == cet[2])
        if cet[0] == cet[2]:
            torch.testing.assert_close(ours.edges[cet].data["ew"], theirs.edges[cet].data["ew"])


def test_gcnnorm_integer_weights_are_weights():
    # DGL 2.1 raises inside its kernel ("Feature data must be float type"); the formula is defined
    g = udgl.graph((torch.tensor(MULTI[0]), torch.tensor(MULTI[1])), num_nodes=N)
    g.edata["w"] = torch.arange(1, 12)
    out = GCNNorm()(g).edata["w"]
    h = udgl.graph((torch.tensor(MULTI[0]), torch.tensor(MULTI[1])), num_nodes=N)
    h.edata["w"] = torch.arange(1, 12).float()
    torch.testing.assert_close(out, GCNNorm()(h).edata["w"])


# ---------------------------------------------------------------------------- dense diffusions
CASES = [("ppr", dict(avg_degree=2)), ("ppr", dict(alpha=0.3, eps=0.02)), ("ppr", dict(avg_degree=8)),
         ("heat", dict(avg_degree=2)), ("heat", dict(t=3.0, eps=0.05)),
         ("gdc", dict(coefs=[0.3, 0.2, 0.1], avg_degree=2)), ("gdc", dict(coefs=[0.1, 0.5], eps=0.01))]


def make(name, lib, kwargs):
    kwargs = dict(kwargs)
    if name == "gdc":
        return lib.GDC(kwargs.pop("coefs"), **kwargs)
    return {"ppr": lib.PPR, "heat": lib.HeatKernel}[name](**kwargs)


class Ours:
    PPR, HeatKernel, GDC = PPR, HeatKernel, GDC


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name,kwargs", CASES)
def test_dense_diffusion_equals_dgl(dgl, name, kwargs, weighted, idtype):
    w = torch.rand(9, generator=torch.Generator().manual_seed(1)) if weighted else None
    feat = torch.randn(N, 3, generator=torch.Generator().manual_seed(2))
    ours, theirs = pair(dgl, SIMPLE, w, idtype, feat)
    ours.edata["other"] = torch.arange(9)
    out, expected = make(name, Ours, kwargs)(ours), make(name, dgl, kwargs)(theirs)
    assert out.idtype == idtype and out.num_nodes() == N
    for a, b in zip(out.edges(), expected.edges()):
        assert a.dtype == b.dtype and torch.equal(a, b)   # the same edges in the same order
    assert list(out.edata) == ["w"] and out.edata["w"].dtype == torch.float32
    torch.testing.assert_close(out.edata["w"], expected.edata["w"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.ndata["feat"], feat)
    assert ours.edata["w"] is not out.edata["w"] if weighted else "w" not in ours.edata   # input untouched


def bidirected(edges):
    """``edges`` and their reverses (a self-loop once): the edges, and which original each is."""
    src, dst = torch.tensor(edges[0]), torch.tensor(edges[1])
    back = (src != dst).nonzero().flatten()
    return (torch.cat([src, dst[back]]).tolist(), torch.cat([dst, src[back]]).tolist()), \
        torch.cat([torch.arange(src.numel()), back])


def test_heat_kernel_symmetric_equals_dgl(dgl):
    edges, origin = bidirected(SIMPLE)
    w = torch.rand(9, generator=torch.Generator().manual_seed(3))
    ours, theirs = pair(dgl, edges, w[origin])   # bidirected with symmetric weights: eigh, as DGL
    out, expected = HeatKernel(avg_degree=3)(ours), dgl.HeatKernel(avg_degree=3)(theirs)
    for a, b in zip(out.edges(), expected.edges()):
        assert torch.equal(a, b)
    torch.testing.assert_close(out.edata["w"], expected.edata["w"], rtol=1e-5, atol=1e-6)


def reference(name, adj, kwargs):
    eye = torch.eye(N, dtype=adj.dtype)
    if name == "ppr":
        alpha = kwargs.get("alpha", 0.15)
        return alpha * torch.linalg.inv(eye - (1 - alpha) * adj)
    if name == "heat":
        t = kwargs.get("t", 2.0)
        return torch.linalg.matrix_exp(t * (adj - eye))
    return sum(c * torch.linalg.matrix_power(adj, k) for k, c in enumerate(kwargs["coefs"]))


def check_against(out, diff, kwargs):
    eps = kwargs.get("eps")
    if eps is None:
        eps = -float("inf") if kwargs["avg_degree"] > N else diff.flatten().sort(descending=True).values[
            kwargs["avg_degree"] * N - 1]
    dst, src = (diff >= eps).nonzero(as_tuple=True)
    assert torch.equal(out.edges()[0], src) and torch.equal(out.edges()[1], dst)
    torch.testing.assert_close(out.edata["w"], diff[dst, src], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name,kwargs", CASES)
def test_dense_diffusion_parallel_edges_add_up(dgl, name, kwargs):
    # our multigraph's result is DGL's on the graph whose parallel edges are merged, weights summed
    w = torch.rand(11, generator=torch.Generator().manual_seed(4)) + 0.1
    ours, _ = pair(dgl, MULTI, w)
    merged = {}
    for s, d, x in zip(*MULTI, w.tolist()):
        merged[(s, d)] = merged.get((s, d), 0.0) + x
    simple = ([s for s, _ in merged], [d for _, d in merged])
    _, theirs = pair(dgl, simple, torch.tensor(list(merged.values())))
    out, expected = make(name, Ours, kwargs)(ours), make(name, dgl, kwargs)(theirs)
    for a, b in zip(out.edges(), expected.edges()):
        assert torch.equal(a, b)
    torch.testing.assert_close(out.edata["w"], expected.edata["w"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", CASES)
def test_dense_diffusion_float64_weights(name, kwargs):
    # DGL 2.1 raises a dtype error for float64 weights; we compute the formula in float64
    w = torch.rand(11, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    g = udgl.graph((torch.tensor(MULTI[0]), torch.tensor(MULTI[1])), num_nodes=N)
    g.edata["w"] = w
    out = make(name, Ours, kwargs)(g)
    assert out.edata["w"].dtype == torch.float64
    check_against(out, reference(name, dense_adj(MULTI, w, torch.float64), kwargs), kwargs)


def test_heat_kernel_nonsymmetric_weights_on_bidirected_structure():
    # DGL takes the eigendecomposition of the upper triangle here; the formula is exp(t (A - I))
    edges, origin = bidirected(SIMPLE)
    w = torch.rand(origin.numel(), generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    g = udgl.graph((torch.tensor(edges[0]), torch.tensor(edges[1])), num_nodes=N)
    g.edata["w"] = w
    out = HeatKernel(avg_degree=3)(g)
    check_against(out, reference("heat", dense_adj(edges, w, torch.float64), {}), dict(avg_degree=3))


def test_dense_diffusion_edge_cases():
    empty = udgl.graph((torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64)), num_nodes=3)
    out = PPR(avg_degree=1)(empty)   # no edges: alpha I, the three diagonal entries tie
    assert out.edges()[0].tolist() == out.edges()[1].tolist() == [0, 1, 2]
    torch.testing.assert_close(out.edata["w"], torch.full((3,), 0.15))
    assert GDC([1.0], avg_degree=5)(empty).num_edges() == 9   # avg_degree > n: every entry, zeros too


# ---------------------------------------------------------------------------- SIGNDiffusion
@pytest.mark.parametrize("op", ["raw", "rw", "gcn", "ppr"])
@pytest.mark.parametrize("weighted", [False, True])
def test_sign_equals_dgl(dgl, op, weighted):
    # DGL's unweighted 'gcn' / 'ppr' weights are float32 and its kernels refuse to mix dtypes
    dtype = torch.float32 if op in ("gcn", "ppr") and not weighted else torch.float64
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-12)
    feat = torch.randn(N, 4, generator=torch.Generator().manual_seed(7), dtype=dtype)
    w = torch.rand(11, generator=torch.Generator().manual_seed(8), dtype=torch.float64) + 0.1 if weighted else None
    ours, theirs = pair(dgl, MULTI, w, feat=feat)
    kwargs = dict(k=3, eweight_name="w" if weighted else None, diffuse_op=op, alpha=0.25)
    out = SIGNDiffusion(**kwargs)(ours)
    expected = dgl.SIGNDiffusion(**kwargs)(theirs)
    assert out is ours and sorted(out.ndata) == sorted(expected.ndata)
    assert list(out.edata) == list(expected.edata)   # GCNNorm's weights stay in a local scope
    for i in (1, 2, 3):
        a, b = out.ndata[f"out_feat_{i}"], expected.ndata[f"out_feat_{i}"]
        assert a.dtype == b.dtype == dtype and torch.isfinite(a).all()
        if op == "rw" and weighted:
            # nodes 5 and 6 have no in-edges: DGL divides 0 by 0 there (NaN, spreading to their
            # successors in later steps), D^-1 is 0 there for us; the rest agrees
            if i == 1:
                assert torch.isnan(b[5:]).all() and (a[5:] == 0).all()
            finite = torch.isfinite(b)
            assert finite[:5].any()
            torch.testing.assert_close(a[finite], b[finite], **tol)
        else:
            torch.testing.assert_close(a, b, **tol)


def test_sign_matches_matrix_form():
    x = torch.randn(N, 2, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    w = torch.rand(11, generator=torch.Generator().manual_seed(10), dtype=torch.float64) + 0.1
    g = udgl.graph((torch.tensor(MULTI[0]), torch.tensor(MULTI[1])), num_nodes=N)
    g.ndata["x"], g.edata["ew"] = x, w
    adj = dense_adj(MULTI, w, torch.float64)
    deg = adj.sum(1)
    inv_sqrt = torch.where(deg > 0, deg.rsqrt(), torch.zeros_like(deg))
    inv = torch.where(deg > 0, 1 / deg, torch.zeros_like(deg))
    mats = {"raw": adj, "rw": inv[:, None] * adj, "gcn": inv_sqrt[:, None] * adj * inv_sqrt[None, :]}
    for op, mat in mats.items():
        SIGNDiffusion(2, "x", f"o_{op}", "ew", op)(g)
        torch.testing.assert_close(g.ndata[f"o_{op}_2"], torch.einsum("vu,u...->v...", mat @ mat, x))
    SIGNDiffusion(2, "x", "p", "ew", "ppr", alpha=0.1)(g)
    h1 = 0.9 * torch.einsum("vu,u...->v...", mats["gcn"], x) + 0.1 * x
    torch.testing.assert_close(g.ndata["p_1"], h1)
    torch.testing.assert_close(g.ndata["p_2"], 0.9 * torch.einsum("vu,u...->v...", mats["gcn"], h1) + 0.1 * x)
    assert "p_3" not in g.ndata and SIGNDiffusion(0, "x", "none")(g) is g and "none_1" not in g.ndata


# ---------------------------------------------------------------------------- refused inputs
def test_refused_inputs():
    g = udgl.graph((torch.tensor(MULTI[0]), torch.tensor(MULTI[1])), num_nodes=N)
    hg = udgl.heterograph({("a", "r", "a"): (torch.tensor([0]), torch.tensor([1])),
                           ("a", "s", "b"): (torch.tensor([0]), torch.tensor([0]))})
    bipartite = udgl.heterograph({("a", "r", "b"): (torch.tensor([0]), torch.tensor([1]))})
    block = udgl.to_block(g)
    for transform in (PPR(), HeatKernel(), GDC([1.0, 0.5]), SIGNDiffusion(1)):
        for bad in (hg, bipartite):
            with pytest.raises(DGLError, match="homogeneous"):
                transform(bad)
        with pytest.raises(DGLError, match="block"):
            transform(block)
    with pytest.raises(DGLError, match="block"):
        GCNNorm()(block)
    with pytest.raises(DGLError, match="unigraph.dgl"):
        GCNNorm()(torch.zeros(3))
    with pytest.raises(DGLError, match="alpha"):
        PPR(alpha=1.5)
    with pytest.raises(DGLError, match="avg_degree"):
        HeatKernel(avg_degree=0)
    with pytest.raises(DGLError, match="avg_degree"):
        GDC([1.0], avg_degree=2.5)
    with pytest.raises(DGLError, match="eps"):
        PPR(eps="small")
    with pytest.raises(DGLError, match="coefs"):
        GDC([])
    with pytest.raises(DGLError, match="t must"):
        HeatKernel(t=float("nan"))
    with pytest.raises(DGLError, match="diffuse_op"):
        SIGNDiffusion(2, diffuse_op="sym")
    with pytest.raises(DGLError, match="k "):
        SIGNDiffusion(-1)
    with pytest.raises(DGLError, match="eweight_name"):
        GCNNorm(eweight_name=3)
    g.edata["w"] = torch.ones(11, 2)
    with pytest.raises(DGLError, match=r"shape \[num_edges\]"):
        PPR()(g)
    with pytest.raises(DGLError, match="ndata\\['feat'\\]"):
        SIGNDiffusion(1, eweight_name="w")(g)
    g.ndata["feat"] = torch.ones(N, 3)
    with pytest.raises(DGLError, match="broadcast"):
        SIGNDiffusion(1, eweight_name="w")(g)
    g.ndata["feat"] = torch.ones(N, 3, dtype=torch.int64)
    with pytest.raises(DGLError, match="floating point"):
        SIGNDiffusion(1)(g)
