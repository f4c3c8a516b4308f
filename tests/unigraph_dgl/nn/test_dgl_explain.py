"""unigraph.dgl.nn's explainers against the real DGL's: with the same seeds and the same model
weights, GNNExplainer's and HeteroGNNExplainer's learned masks, PGExplainer's and
HeteroPGExplainer's losses, gradients, probabilities and edge masks, and SubgraphX's search
(answer and whole tree) are DGL's, in float64 (the default dtype, which the explainers draw their
masks and noise in). Then the contracts where we part from DGL (HeteroSubgraphX, the center
embedding of HeteroPGExplainer), what an explanation must show (an ignored edge, a decisive
node), the progress bar and the errors."""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import DST, SRC, TOL
from unigraph.dgl.base import EID, NID, DGLError
from unigraph.dgl.nn.pytorch.explain import _common

HETERO = {("game", "rev", "user"): ([0, 0, 1, 1, 2], [0, 1, 1, 2, 3]),
          ("user", "plays", "game"): ([0, 1, 1, 2, 3], [0, 0, 1, 1, 2]),
          ("user", "follows", "user"): ([0, 1, 2, 3, 1, 2, 0, 1, 2, 3], [1, 0, 3, 2, 2, 1, 0, 1, 2, 3])}


@pytest.fixture(autouse=True)
def float64():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def assert_same(a, b) -> None:
    """Equal tensors, or tuples / dicts of them (dict keys in the same order)."""
    if isinstance(a, torch.Tensor):
        assert a.shape == b.shape and a.dtype == b.dtype
        torch.testing.assert_close(a, b, **TOL)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            assert_same(a[key], b[key])
    else:
        assert a == b


def same_weights(theirs: torch.nn.Module, ours: torch.nn.Module):
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return theirs, ours


def homo_graphs(dgl, reverse: bool = False):
    src, dst = (torch.cat([SRC, DST]), torch.cat([DST, SRC])) if reverse else (SRC, DST)
    theirs, ours = dgl.graph((src, dst), num_nodes=6), udgl.graph((src, dst), num_nodes=6)
    return (theirs, ours) if reverse else (dgl.add_self_loop(theirs), udgl.add_self_loop(ours))


def hetero_graphs(dgl):
    data = {cet: (torch.tensor(u), torch.tensor(v)) for cet, (u, v) in HETERO.items()}
    return dgl.heterograph(data), udgl.heterograph(data)


def hetero_feat():
    torch.manual_seed(0)
    return {"game": torch.randn(3, 4), "user": torch.randn(4, 4)}


def run_both(dgl, pairs, call, seed: int = 1):
    """``call(lib, model, graph)`` for DGL and for us, each after ``seed`` (torch and numpy)."""
    out = []
    for lib, model, graph in ((dgl.nn, pairs[0][0], pairs[1][0]), (unn, pairs[0][1], pairs[1][1])):
        torch.manual_seed(seed)
        np.random.seed(seed)
        out.append(call(lib, model, graph))
    return out


# ---------------------------------------------------------------------- GNNExplainer
def message_model(lib, graph_level: bool, out: int = 3):
    """DGL's test model: a linear map, messages scaled by ``eweight`` (and an optional per-edge
    ``scale``), summed; averaged per graph with ``graph_level``."""
    fn = lib.function

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(5, out)

        def forward(self, graph, feat, eweight=None, scale=None):
            with graph.local_scope():
                graph.ndata["h"] = self.linear(feat)
                weight = eweight if scale is None else (scale if eweight is None else eweight * scale)
                if weight is None:
                    graph.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
                else:
                    graph.edata["w"] = weight
                    graph.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "h"))
                if graph_level:
                    return graph.ndata["h"].mean(0, keepdim=True)
                return graph.ndata["h"]
    return Model()


@pytest.mark.parametrize("num_hops", [1, 2])
def test_gnnexplainer_node_matches_dgl(dgl, num_hops):
    torch.manual_seed(0)
    pairs = (same_weights(message_model(dgl, False), message_model(udgl, False)), homo_graphs(dgl))
    feat = torch.randn(6, 5)
    scale = torch.rand(pairs[1][0].num_edges())  # one per edge: cut to the subgraph's edges
    theirs, ours = run_both(dgl, pairs, lambda lib, m, g: lib.GNNExplainer(m, num_hops, num_epochs=12, log=False)
                            .explain_node(3, g, feat, scale=scale))
    assert_same((theirs[0], theirs[2], theirs[3]), (ours[0], ours[2], ours[3]))
    assert torch.equal(theirs[1].ndata[NID], ours[1].ndata[NID])
    assert torch.equal(theirs[1].edata[EID], ours[1].edata[EID])
    assert theirs[3].shape == (ours[1].num_edges(),) and ours[2].shape == (5,)


def test_gnnexplainer_graph_matches_dgl(dgl):
    torch.manual_seed(0)
    pairs = (same_weights(message_model(dgl, True), message_model(udgl, True)), homo_graphs(dgl))
    feat = torch.randn(6, 5)
    theirs, ours = run_both(dgl, pairs, lambda lib, m, g: lib.GNNExplainer(
        m, 1, lr=0.05, num_epochs=12, alpha1=0.01, alpha2=0.5, beta1=0.5, beta2=0.2, log=False).explain_graph(g, feat))
    assert_same(theirs, ours)


def _objective(explainer, model, graph, feat, feat_mask, edge_mask):
    """GNNExplainer's loss at given masks (probabilities), recomputed here."""
    with torch.no_grad():
        label = model(graph, feat).argmax(-1)[0]
        logp = model(graph, feat * feat_mask, eweight=edge_mask).log_softmax(-1)[0, label]

        def entropy(m):
            return (-m * torch.log(m + 1e-15) - (1 - m) * torch.log(1 - m + 1e-15)).mean()
        return float(-logp + explainer.alpha1 * edge_mask.sum() + explainer.alpha2 * entropy(edge_mask)
                     + explainer.beta1 * feat_mask.mean() + explainer.beta2 * entropy(feat_mask))


def test_gnnexplainer_contract():
    """Masks in (0, 1) of DGL's shapes; the loss falls; edges the model ignores end low (without
    the entropy term, which pushes every mask to the end of (0, 1) it starts nearer to, the only
    pull on an ignored edge is the size term)."""
    torch.manual_seed(0)
    model = message_model(udgl, True, out=2)
    graph = udgl.add_self_loop(udgl.graph((SRC, DST), num_nodes=6))
    feat = torch.randn(6, 5)
    ignored = torch.zeros(graph.num_edges(), dtype=torch.bool)
    ignored[:5] = True
    scale = (~ignored).double()  # the model multiplies the first five edges' messages by 0
    explainer = unn.GNNExplainer(model, 1, lr=0.05, num_epochs=0, alpha1=0.05, alpha2=0.0, log=False)
    torch.manual_seed(1)
    start = explainer.explain_graph(graph, feat, scale=scale)
    explainer.num_epochs = 60
    torch.manual_seed(1)
    feat_mask, edge_mask = explainer.explain_graph(graph, feat, scale=scale)
    assert feat_mask.shape == (5,) and edge_mask.shape == (graph.num_edges(),)
    assert bool(((edge_mask > 0) & (edge_mask < 1)).all()) and bool(((feat_mask > 0) & (feat_mask < 1)).all())

    def model_with_scale(g, x, eweight=None):
        return model(g, x, eweight=eweight, scale=scale)
    assert _objective(explainer, model_with_scale, graph, feat, feat_mask, edge_mask) < \
        _objective(explainer, model_with_scale, graph, feat, *start) - 0.1
    assert bool((edge_mask[ignored] < start[1][ignored]).all()) and bool((edge_mask[ignored] < 0.5).all())


def test_gnnexplainer_progress_bar(capsys, monkeypatch):
    """``log=True``: a tqdm bar as DGL's where tqdm is installed, else nothing."""
    pytest.importorskip("tqdm")
    model, graph = message_model(udgl, True), udgl.graph((SRC, DST), num_nodes=6)
    feat = torch.randn(6, 5)
    unn.GNNExplainer(model, 1, num_epochs=3, log=True).explain_graph(graph, feat)
    assert "Explain graph" in capsys.readouterr().err
    monkeypatch.setattr(_common, "_tqdm", None)
    unn.GNNExplainer(model, 1, num_epochs=3, log=True).explain_graph(graph, feat)
    assert capsys.readouterr().err == ""


def test_gnnexplainer_errors(dgl):
    model, graph = message_model(udgl, False), udgl.graph((SRC, DST), num_nodes=6)
    explainer = unn.GNNExplainer(model, 1, num_epochs=1, log=False)
    feat = torch.randn(6, 5)
    with pytest.raises(DGLError, match="one node at a time"):
        explainer.explain_node([1, 2], graph, feat)
    with pytest.raises(DGLError, match="outside"):
        explainer.explain_node(6, graph, feat)
    with pytest.raises(DGLError, match="shape"):
        explainer.explain_graph(graph, feat[:5])
    with pytest.raises(DGLError, match="homogeneous"):
        explainer.explain_graph(hetero_graphs(dgl)[1], feat)
    with pytest.raises(ValueError, match="num_hops"):
        unn.GNNExplainer(model, -1)
    with pytest.raises(DGLError, match="logits"):
        unn.GNNExplainer(_Flat(), 1, log=False).explain_graph(graph, feat)


class _Flat(torch.nn.Module):
    """A model whose output is not logits [rows, classes]."""

    def forward(self, graph, feat, eweight=None):
        return feat.sum(1)


# ---------------------------------------------------------------------- HeteroGNNExplainer
def typed_message_model(lib, graph_level: bool, cets):
    """DGL's heterogeneous test model: a linear map per relation, messages scaled by ``eweight``,
    averaged per relation and summed over relations."""
    fn = lib.function

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = torch.nn.ModuleDict({"_".join(c): torch.nn.Linear(4, 3) for c in cets})

        def forward(self, graph, feat, eweight=None):
            with graph.local_scope():
                funcs = {}
                for cet in graph.canonical_etypes:
                    graph.nodes[cet[0]].data[f"h{cet[1]}"] = self.weights["_".join(cet)](feat[cet[0]])
                    if eweight is None:
                        funcs[cet] = (fn.copy_u(f"h{cet[1]}", "m"), fn.mean("m", "h"))
                    else:
                        graph.edges[cet].data["w"] = eweight[cet]
                        funcs[cet] = (fn.u_mul_e(f"h{cet[1]}", "w", "m"), fn.mean("m", "h"))
                graph.multi_update_all(funcs, "sum")
                if graph_level:
                    return sum(graph.nodes[t].data["h"].mean(0, keepdim=True) for t in graph.ntypes)
                return {t: graph.nodes[t].data["h"] for t in graph.ntypes if "h" in graph.nodes[t].data}
    return Model()


@pytest.mark.parametrize("ntype, node, num_hops", [("user", 2, 1), ("game", 1, 2)])
def test_hetero_gnnexplainer_node_matches_dgl(dgl, ntype, node, num_hops):
    graphs = hetero_graphs(dgl)
    models = same_weights(typed_message_model(dgl, False, graphs[0].canonical_etypes),
                          typed_message_model(udgl, False, graphs[1].canonical_etypes))
    feat = hetero_feat()
    theirs, ours = run_both(dgl, (models, graphs), lambda lib, m, g: lib.HeteroGNNExplainer(
        m, num_hops, num_epochs=10, log=False).explain_node(ntype, node, g, feat))
    assert_same((theirs[0], theirs[2], theirs[3]), (ours[0], ours[2], ours[3]))
    for t in graphs[0].ntypes:
        assert torch.equal(theirs[1].nodes[t].data[NID], ours[1].nodes[t].data[NID])
    for cet in graphs[0].canonical_etypes:
        assert torch.equal(theirs[1].edges[cet].data[EID], ours[1].edges[cet].data[EID])


def test_hetero_gnnexplainer_graph_matches_dgl(dgl):
    graphs = hetero_graphs(dgl)
    models = same_weights(typed_message_model(dgl, True, graphs[0].canonical_etypes),
                          typed_message_model(udgl, True, graphs[1].canonical_etypes))
    feat = hetero_feat()
    theirs, ours = run_both(dgl, (models, graphs), lambda lib, m, g: lib.HeteroGNNExplainer(
        m, 1, num_epochs=10, log=False).explain_graph(g, feat))
    assert_same(theirs, ours)
    assert all(((m > 0) & (m < 1)).all() for m in ours[1].values())


def test_hetero_gnnexplainer_errors(dgl):
    graph = hetero_graphs(dgl)[1]
    explainer = unn.HeteroGNNExplainer(typed_message_model(udgl, False, graph.canonical_etypes), 1, log=False)
    feat = hetero_feat()
    with pytest.raises(DGLError, match="missing"):
        explainer.explain_node("user", 0, graph, {"user": feat["user"]})
    with pytest.raises(DGLError, match="node type 'item'"):
        explainer.explain_node("item", 0, graph, feat)
    with pytest.raises(DGLError, match=r"feat\['game'\]"):
        explainer.explain_graph(graph, {"game": feat["game"][:2]})
    graph_model = unn.HeteroGNNExplainer(typed_message_model(udgl, True, graph.canonical_etypes), 1, log=False)
    with pytest.raises(DGLError, match="node type: logits"):
        graph_model.explain_node("user", 0, graph, feat)


# ---------------------------------------------------------------------- PGExplainer
def conv_model(lib, graph_level: bool):
    """DGL's PGExplainer test model: GraphConv (its embedding), then mean and a linear layer."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.GraphConv(5, 2)
            self.fc = torch.nn.Linear(2, 2)

        def forward(self, g, h, embed=False, edge_weight=None):
            h = self.conv(g, h, edge_weight=edge_weight)
            if not graph_level or embed:
                return h
            return self.fc(lib.nn.AvgPooling()(g, h))
    return Model()


def _train(explainer, step, temperatures=(5.0, 3.0, 1.0)):
    """Adam steps of ``step(explainer, t)``; the losses and, after each, the parameters' gradients."""
    optimizer = torch.optim.Adam(explainer.parameters(), lr=0.01)
    record = []
    for t in temperatures:
        loss = step(explainer, t)
        optimizer.zero_grad()
        loss.backward()
        record.append((loss.detach(), [p.grad.clone() for p in explainer.parameters()]))
        optimizer.step()
    return record


def test_pgexplainer_graph_matches_dgl(dgl):
    torch.manual_seed(0)
    pairs = (same_weights(conv_model(dgl, True), conv_model(udgl, True)), homo_graphs(dgl, reverse=True))
    feat = torch.randn(6, 5)

    def call(lib, model, graph):
        explainer = lib.PGExplainer(model, 2, coff_budget=0.5, sample_bias=0.1)
        record = _train(explainer, lambda e, t: e.train_step(graph, feat, t))
        return record, explainer.explain_graph(graph, feat), explainer.explain_graph(graph, feat, 2.0, training=True)
    theirs, ours = run_both(dgl, pairs, call)
    assert_same(theirs, ours)


def test_pgexplainer_state_dict(dgl):
    torch.manual_seed(0)
    theirs = dgl.nn.PGExplainer(conv_model(dgl, False), 2, num_hops=1, explain_graph=False)
    ours = unn.PGExplainer(conv_model(udgl, False), 2, num_hops=1, explain_graph=False)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert ours.num_features == theirs.num_features == 6
    assert [p.shape for p in ours.parameters()] == [p.shape for p in theirs.parameters()]


def test_pgexplainer_node_matches_dgl(dgl):
    torch.manual_seed(0)
    pairs = (same_weights(conv_model(dgl, False), conv_model(udgl, False)), homo_graphs(dgl, reverse=True))
    feat = torch.randn(6, 5)

    def call(lib, model, graph):
        explainer = lib.PGExplainer(model, 2, num_hops=1, explain_graph=False, coff_budget=-0.1)
        nodes = iter([0, [0, 3], torch.tensor(4), torch.tensor([1, 5])])
        record = _train(explainer, lambda e, t: e.train_step_node(next(nodes), graph, feat, t), (5.0, 4.0, 2.0, 1.0))
        probs, mask, batched, centers = explainer.explain_node([1, 4], graph, feat)
        return record, probs, mask, centers, batched.ndata[NID], batched.edata[EID], batched.batch_num_nodes()
    theirs, ours = run_both(dgl, pairs, call)
    assert_same(theirs, ours)


def test_pgexplainer_errors(dgl):
    graph = udgl.graph((SRC, DST), num_nodes=6)  # no reverse edges
    feat = torch.randn(6, 5)
    with pytest.raises(DGLError, match="reverse edge"):
        unn.PGExplainer(conv_model(udgl, True), 2).explain_graph(udgl.add_self_loop(graph), feat)
    with pytest.raises(DGLError, match="explain_graph=False"):
        unn.PGExplainer(conv_model(udgl, True), 2).train_step_node(0, graph, feat, 1.0)
    with pytest.raises(DGLError, match="explain_graph=True"):
        unn.PGExplainer(conv_model(udgl, False), 2, num_hops=1, explain_graph=False).train_step(graph, feat, 1.0)
    with pytest.raises(DGLError, match="num_hops"):
        unn.PGExplainer(conv_model(udgl, False), 2, explain_graph=False).explain_node(0, graph, feat)
    reverse = homo_graphs(dgl, reverse=True)[1]
    with pytest.raises(DGLError, match="outside"):
        unn.PGExplainer(conv_model(udgl, False), 2, num_hops=1, explain_graph=False).explain_node([0, 9], reverse, feat)


# ---------------------------------------------------------------------- HeteroPGExplainer
def typed_conv_model(lib, graph_level: bool, cets):
    """DGL's HeteroPGExplainer test model, with ``mod_kwargs`` keyed by edge type names (DGL 2.1's
    HeteroGraphConv ignores canonical-etype keys, so its own test never weights an edge)."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.HeteroGraphConv({c: lib.nn.GraphConv(4, 4, allow_zero_in_degree=True) for c in cets})
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, g, h, embed=False, edge_weight=None):
            kwargs = {} if edge_weight is None else {c[1]: {"edge_weight": w} for c, w in edge_weight.items()}
            h = self.conv(g, h, mod_kwargs=kwargs)
            if not graph_level or embed:
                return h
            return self.fc(sum(h[t].mean(0, keepdim=True) for t in g.ntypes))
    return Model()


def test_hetero_pgexplainer_matches_dgl(dgl):
    graphs, feat = hetero_graphs(dgl), hetero_feat()
    for graph_level in (True, False):
        models = same_weights(typed_conv_model(dgl, graph_level, graphs[0].canonical_etypes),
                              typed_conv_model(udgl, graph_level, graphs[1].canonical_etypes))

        def call(lib, model, graph):
            explainer = lib.HeteroPGExplainer(model, 4, num_hops=1, explain_graph=graph_level)
            if graph_level:
                record = _train(explainer, lambda e, t: e.train_step(graph, feat, t))
                return record, explainer.explain_graph(graph, feat)
            # the centers are of the first node type: where DGL reads the center's own embedding
            nodes = iter([{"game": [0, 2]}, {"game": torch.tensor([1])}, {"game": [2]}])
            record = _train(explainer, lambda e, t: e.train_step_node(next(nodes), graph, feat, t))
            probs, mask, batched, centers = explainer.explain_node({"game": torch.tensor([1, 2])}, graph, feat)
            return record, probs, mask, centers, {t: batched.nodes[t].data[NID] for t in batched.ntypes}
        theirs, ours = run_both(dgl, (models, graphs), call)
        assert_same(theirs, ours)


def test_hetero_pgexplainer_center_embedding(dgl):
    """A node explanation reads the center's own embedding, also for a center of another type
    than the first (where DGL 2.1 reads another node's)."""
    graph, feat = hetero_graphs(dgl)[1], hetero_feat()
    torch.manual_seed(0)
    model = typed_conv_model(udgl, False, graph.canonical_etypes)
    explainer = unn.HeteroPGExplainer(model, 4, num_hops=1, explain_graph=False)
    seen = []
    explainer.elayers.register_forward_hook(lambda module, args, out: seen.append(args[0]))
    _, _, batched, centers = explainer.explain_node({"user": [3]}, graph, feat)
    embed = model(batched, {t: batched.nodes[t].data["feat"] for t in batched.ntypes}, embed=True)
    center = embed["user"][centers["user"][0]].detach()
    assert batched.nodes["user"].data[NID][centers["user"][0]] == 3
    torch.testing.assert_close(seen[0][:, 8:], center.expand(batched.num_edges(), 4), **TOL)


def test_hetero_pgexplainer_errors(dgl):
    graph, feat = hetero_graphs(dgl)[1], hetero_feat()
    explainer = unn.HeteroPGExplainer(typed_conv_model(udgl, False, graph.canonical_etypes), 4, num_hops=1,
                                      explain_graph=False)
    with pytest.raises(TypeError, match="dict"):
        explainer.explain_node([0], graph, feat)
    with pytest.raises(DGLError, match="item"):
        explainer.explain_node({"item": [0]}, graph, feat)
    one_way = udgl.heterograph({("user", "plays", "game"): ([0, 1], [0, 1]), ("game", "rev", "user"): ([0], [0])})
    with pytest.raises(DGLError, match="reverse edge"):
        unn.HeteroPGExplainer(typed_conv_model(udgl, True, one_way.canonical_etypes), 4).explain_graph(
            one_way, {"user": torch.randn(2, 4), "game": torch.randn(2, 4)})


# ---------------------------------------------------------------------- SubgraphX
@pytest.fixture
def dgl_subgraphx(dgl, monkeypatch):
    """DGL 2.1's SubgraphX, mended for numpy 2 (its ``int(np.where(...)[0])`` of a 1-element
    array is an error there) by a numpy stand-in whose ``where`` gives the element itself."""
    module = __import__("dgl.nn.pytorch.explain.subgraphx", fromlist=["np"])
    stand_in = types.SimpleNamespace(**{k: getattr(np, k) for k in ("random", "ones", "zeros", "array")})
    stand_in.where = lambda cond: (np.flatnonzero(cond)[0],)
    monkeypatch.setattr(module, "np", stand_in)
    return dgl


def pooled_model(lib):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.GraphConv(5, 3, allow_zero_in_degree=True)

        def forward(self, g, h):
            return lib.nn.AvgPooling()(g, torch.relu(self.conv(g, h)))
    return Model()


@pytest.mark.parametrize("case", range(4))
def test_subgraphx_matches_dgl(dgl_subgraphx, case):
    """The answer and the whole search tree (sizes, rewards, visits) of DGL's search."""
    dgl = dgl_subgraphx
    torch.manual_seed(case)
    n = 7 + case
    src, dst = torch.randint(0, n, (2 * n,)), torch.randint(0, n, (2 * n,))
    idtype = torch.int32 if case % 2 else torch.int64
    graphs = dgl.graph((src, dst), num_nodes=n, idtype=idtype), udgl.graph((src, dst), num_nodes=n, idtype=idtype)
    models = same_weights(pooled_model(dgl), pooled_model(udgl))
    feat = torch.randn(n, 5)

    def call(lib, model, graph):
        explainer = lib.SubgraphX(model, num_hops=2 + case % 2, coef=2.0, high2low=case != 2, num_child=2 + case,
                                  num_rollouts=3, shapley_steps=4)
        nodes = explainer.explain_graph(graph, feat, target_class=case % 3)
        return nodes, sorted((len(v.nodes), v.immediate_reward, v.num_visit, v.total_reward)
                             for v in explainer.mcts_node_maps.values())
    theirs, ours = run_both(dgl, (models, graphs), call, seed=case)
    assert_same(theirs[0], ours[0])
    assert len(theirs[1]) == len(ours[1])
    for a, b in zip(theirs[1], ours[1]):
        assert a[0] == b[0] and a[2] == b[2]
        assert a[1] == pytest.approx(b[1], rel=1e-9, abs=1e-12) and a[3] == pytest.approx(b[3], rel=1e-9, abs=1e-12)


class _OneNode(torch.nn.Module):
    """Class 0 is likelier the larger node ``decisive``'s first feature: the answer must hold it."""

    def __init__(self, decisive: int, typed: bool = False):
        super().__init__()
        self.decisive, self.typed = decisive, typed

    def forward(self, graph, feat):
        x = feat["user"] if self.typed else feat
        score = x[self.decisive, 0] + 0.01 * x.sum()
        return torch.stack([score, -score]).unsqueeze(0)


def test_subgraphx_finds_the_decisive_node():
    graph = udgl.graph((torch.cat([SRC, DST]), torch.cat([DST, SRC])), num_nodes=6)
    feat = torch.rand(6, 3) + 1.0
    for decisive in (1, 4):
        np.random.seed(0)
        nodes = unn.SubgraphX(_OneNode(decisive), 1, num_rollouts=8, shapley_steps=5).explain_graph(graph, feat, 0)
        assert decisive in nodes.tolist() and len(nodes) <= 3


def test_hetero_subgraphx_one_type_is_subgraphx():
    torch.manual_seed(3)
    src, dst = torch.randint(0, 9, (25,)), torch.randint(0, 9, (25,))
    plain = udgl.graph((src, dst), num_nodes=9)
    typed = udgl.heterograph({("n", "e", "n"): (src, dst)}, {"n": 9})
    model = pooled_model(udgl)
    feat = torch.randn(9, 5)

    class Typed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, g, h):
            return self.inner(g, h["n"])
    np.random.seed(5)
    expected = unn.SubgraphX(model, 2, num_rollouts=5, shapley_steps=5, num_child=4).explain_graph(plain, feat, 1)
    np.random.seed(5)
    found = unn.HeteroSubgraphX(Typed(), 2, num_rollouts=5, shapley_steps=5, num_child=4).explain_graph(
        typed, {"n": feat}, 1)
    assert list(found) == ["n"] and torch.equal(found["n"], expected)


def test_hetero_subgraphx_contract(dgl):
    """``{ntype: ids}`` of at most node_min nodes in all, connected, holding the decisive node
    (DGL 2.1's reversed reward would steer away from it)."""
    graph = hetero_graphs(dgl)[1]
    feat = {"game": torch.rand(3, 2) + 1.0, "user": torch.rand(4, 2) + 1.0}
    for decisive in (0, 3):
        np.random.seed(1)
        nodes = unn.HeteroSubgraphX(_OneNode(decisive, typed=True), 2, num_rollouts=8, shapley_steps=5,
                                    node_min=3).explain_graph(graph, feat, 0)
        assert list(nodes) == ["game", "user"] and decisive in nodes["user"].tolist()
        assert sum(ids.numel() for ids in nodes.values()) <= 3
        sub = _common.typed_node_subgraph(graph, {t: ids.long() for t, ids in nodes.items()})
        homo = udgl.to_bidirected(udgl.to_homogeneous(sub))
        assert _common.khop_in_subgraph(homo, torch.tensor([0]), homo.num_nodes())[0].num_nodes() == homo.num_nodes()


def test_subgraphx_errors(dgl):
    graph = udgl.graph((SRC, DST), num_nodes=6)
    model = pooled_model(udgl)
    with pytest.raises(DGLError, match="node_min"):
        unn.SubgraphX(model, 1, node_min=6).explain_graph(graph, torch.randn(6, 5), 0)
    with pytest.raises(DGLError, match="homogeneous"):
        unn.SubgraphX(model, 1).explain_graph(hetero_graphs(dgl)[1], torch.randn(6, 5), 0)
    with pytest.raises(TypeError, match="target_class"):
        unn.SubgraphX(model, 1).explain_graph(graph, torch.randn(6, 5), 0.5)
    for bad in (dict(num_child=0), dict(node_min=0), dict(shapley_steps=0), dict(num_rollouts=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            unn.SubgraphX(model, 1, **bad)
    with pytest.raises(DGLError, match="missing"):
        unn.HeteroSubgraphX(model, 1).explain_graph(hetero_graphs(dgl)[1], {"user": torch.randn(4, 2)}, 0)
