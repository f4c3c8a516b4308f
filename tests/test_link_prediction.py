"""Link prediction: splits without leakage, negative sampling, the link loader, decoders, metrics, GAE."""
from __future__ import annotations

import pytest
import torch

from unigraph import Graph
from unigraph.data import planted_partition
from unigraph.models import GAE
from unigraph.sampling import NeighborSampler
from unigraph.tasks.link import (DotDecoder, EdgeSet, LinkNeighborLoader, MLPDecoder, corrupt_destinations,
                                 negative_pairs, split_edges)
from unigraph.tasks.metrics import Evaluator, hits_at_k, link_auc, mrr, roc_auc
from unigraph.train import TrainConfig
from unigraph.train.link_trainer import LinkTrainer


def pair_set(pairs: torch.Tensor, undirected: bool = False) -> set:
    out = set(map(tuple, pairs.t().tolist()))
    return out | {(v, u) for u, v in out} if undirected else out


def small_partition():
    return planted_partition(300, seed=0, num_val=50, num_test=100)


@pytest.fixture(scope="module")
def graph() -> Graph:
    g = small_partition().graph  # undirected: both directions of every edge
    return g


# ---------------------------------------------------------------- splits
def test_split_has_no_message_passing_leakage(graph):
    split = split_edges(graph, 0.1, 0.2, seed=3)
    message = pair_set(split.graph.edge_index)
    for held_out in (split.val_pos, split.test_pos):
        assert not pair_set(held_out, undirected=True) & message  # neither direction is a message edge
    everything = pair_set(graph.edge_index)
    num_pairs = len(everything) // 2
    assert split.test_pos.shape[1] == int(0.2 * num_pairs) and split.val_pos.shape[1] == int(0.1 * num_pairs)
    train, val, test = (pair_set(p) for p in (split.train_pos, split.val_pos, split.test_pos))
    assert len(train) + len(val) + len(test) == num_pairs and not (train & val or train & test or val & test)
    assert pair_set(split.train_pos, undirected=True) == message  # the message graph is the training edges
    negatives = pair_set(torch.cat([split.val_neg, split.test_neg], 1))
    assert len(negatives) == split.val_neg.shape[1] + split.test_neg.shape[1]  # distinct across both sets
    assert not pair_set(torch.cat([split.val_neg, split.test_neg], 1), undirected=True) & everything
    assert all(u < v for u, v in negatives | train)  # undirected pairs are reported once, u < v
    assert split.graph.ndata.keys() == graph.ndata.keys()
    # the test-time message graph: training and validation edges (both directions), no test edge
    assert pair_set(split.test_graph.edge_index) == message | pair_set(split.val_pos, undirected=True)
    assert not pair_set(split.test_pos, undirected=True) & pair_set(split.test_graph.edge_index)


def test_split_is_seeded_and_directed_splits_keep_direction():
    g = Graph(torch.tensor([[0, 1, 2, 3, 4, 0, 2], [1, 2, 3, 4, 0, 2, 2]]), num_nodes=5)
    a, b = split_edges(g, 0.2, 0.2, undirected=False, seed=1), split_edges(g, 0.2, 0.2, undirected=False, seed=1)
    assert torch.equal(a.test_pos, b.test_pos) and torch.equal(a.val_neg, b.val_neg)
    assert a.graph.num_edges == a.train_pos.shape[1] == 4  # the self-loop 2->2 is dropped, one direction kept
    assert not pair_set(a.test_neg) & pair_set(g.edge_index)
    with pytest.raises(ValueError, match="val_ratio \\+ test_ratio must be < 1"):
        split_edges(g, 0.5, 0.5)


# ---------------------------------------------------------------- negatives
@pytest.mark.parametrize("method", ["uniform", "degree"])
def test_negative_pairs_are_distinct_non_edges(graph, method):
    neg = negative_pairs(graph, 2000, method=method, generator=torch.Generator().manual_seed(0))
    assert neg.shape == (2, 2000)
    pairs = pair_set(neg)
    assert len(pairs) == 2000 and not pairs & pair_set(graph.edge_index) and all(u != v for u, v in pairs)
    undirected = negative_pairs(graph, 500, method=method, undirected=True, generator=torch.Generator().manual_seed(0))
    assert bool((undirected[0] < undirected[1]).all())


def test_degree_weighted_draws_follow_degree():
    # hub 0 joined both ways to nodes 1..10; nodes 11..40 a ring (both ways); node 41 isolated
    spokes, ring = torch.arange(1, 11), torch.arange(11, 41)
    src = torch.cat([torch.zeros(10, dtype=torch.int64), spokes, ring, ring.roll(1)])
    dst = torch.cat([spokes, torch.zeros(10, dtype=torch.int64), ring.roll(1), ring])
    g = Graph(torch.stack([src, dst]), num_nodes=42)
    sources = ring.repeat(1000)
    neg = corrupt_destinations(g, sources, 1, method="degree", generator=torch.Generator().manual_seed(0))
    assert not bool((neg[1] == 41).any())  # degree 0: never drawn
    assert not EdgeSet(g.edge_index, 42).contains(neg[0], neg[1]).any() and bool((neg[0] != neg[1]).all())
    # P(hub | source s) = w_hub / (sum of weights of the nodes s may draw), w = (in + out degree) ** 0.75
    w = (g.in_degrees() + g.out_degrees()).double() ** 0.75
    expected = 0.0
    for s in ring.tolist():
        allowed = torch.ones(42, dtype=torch.bool)
        allowed[s] = False
        allowed[g.dst[g.src == s]] = False
        expected += float(w[0] / w[allowed].sum()) / ring.numel()
    observed = float((neg[1] == 0).double().mean())
    sigma = (expected * (1 - expected) / sources.numel()) ** 0.5
    assert abs(observed - expected) < 4 * sigma, (observed, expected)
    uniform = corrupt_destinations(g, sources, 1, generator=torch.Generator().manual_seed(0))
    assert abs(float((uniform[1] == 0).double().mean()) - 1 / 39) < 0.01  # 39 allowed nodes per ring source
    assert bool((uniform[1] == 41).any())


def test_negatives_fail_loudly_when_the_graph_is_too_dense():
    n = 6
    full = torch.tensor([(u, v) for u in range(n) for v in range(n) if u != v and (u, v) != (0, 1)]).t()
    dense = Graph(full, num_nodes=n)
    assert negative_pairs(dense, 1).t().tolist() == [[0, 1]]  # the only non-edge
    with pytest.raises(ValueError, match="at most 1 non-edges"):
        negative_pairs(dense, 2)
    with pytest.raises(ValueError, match="no non-neighbour destination for source 2"):
        corrupt_destinations(dense, torch.tensor([0, 2]), 1)


def test_edge_set_membership():
    edges = EdgeSet(torch.tensor([[0, 2], [1, 3]]), 4)
    assert edges.contains(torch.tensor([0, 1, 2, 3]), torch.tensor([1, 0, 3, 2])).tolist() == [True, False, True, False]
    assert EdgeSet(torch.empty(2, 0, dtype=torch.int64), 4).contains(torch.tensor([0]), torch.tensor([1])).tolist() == [False]


# ---------------------------------------------------------------- decoders
def test_decoders_score_pairs_and_pair_graphs():
    torch.manual_seed(0)
    z = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    pairs = torch.tensor([[0, 3, 4, 4], [1, 3, 0, 2]])
    dot = DotDecoder()(z, pairs)
    torch.testing.assert_close(dot, (z[pairs[0]] * z[pairs[1]]).sum(-1))
    torch.testing.assert_close(DotDecoder()(z, Graph(pairs, num_nodes=5)), dot)
    mlp = MLPDecoder(4, 8, num_layers=2).double()
    expected = mlp.lins[1](torch.relu(mlp.lins[0](z[pairs[0]] * z[pairs[1]]))).view(-1)
    torch.testing.assert_close(mlp(z, pairs), expected)
    mlp(z, pairs).sum().backward()
    assert z.grad is not None
    with pytest.raises(ValueError, match="index 5"):
        DotDecoder()(z, torch.tensor([[0], [5]]))


# ---------------------------------------------------------------- the link loader
def test_link_loader_batches(graph):
    split = split_edges(graph, 0.1, 0.1, seed=0)
    loader = LinkNeighborLoader(split.graph, NeighborSampler([5, 5]), split.train_pos, neg_ratio=2, batch_size=64,
                                exclude="reverse", features=small_partition().x, seed=0)
    batches = list(loader)
    assert len(batches) == len(loader) == -(-split.train_pos.shape[1] // 64)
    seen = []
    message = pair_set(split.graph.edge_index)
    for batch in batches:
        p = batch.num_pos
        pairs = batch.output_nodes[batch.edge_label_index]  # back to global ids
        assert batch.edge_label.tolist() == [1.0] * p + [0.0] * (2 * p)
        assert pair_set(pairs[:, :p]) <= message and not pair_set(pairs[:, p:]) & message
        assert torch.equal(pairs[0, p:], pairs[0, :p].repeat_interleave(2))  # negatives corrupt the destination
        positives = pair_set(pairs[:, :p], undirected=True)
        for block in batch.blocks:  # the seed edges are in no block, in neither direction
            global_edges = torch.stack([batch.input_nodes[block.src], batch.input_nodes[block.dst]])
            assert not pair_set(global_edges) & positives
        input_nodes, pos_graph, neg_graph, blocks = batch  # DGL-style unpacking
        assert pos_graph.num_nodes == batch.output_nodes.numel() and neg_graph.num_edges == 2 * p
        seen.append(pairs[:, :p])
    assert pair_set(torch.cat(seen, 1)) == pair_set(split.train_pos)
    again = next(iter(LinkNeighborLoader(split.graph, NeighborSampler([5, 5]), split.train_pos, neg_ratio=2,
                                         batch_size=64, exclude="reverse", seed=0)))
    assert torch.equal(again.edge_label_index, batches[0].edge_label_index)


def test_link_loader_without_exclusion_keeps_seed_edges():
    g = Graph(torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]]), num_nodes=4)
    loader = LinkNeighborLoader(g, NeighborSampler([4]), torch.tensor([[0], [1]]), neg_ratio=0,
                                batch_size=1, shuffle=False)
    batch = next(iter(loader))
    edges = pair_set(torch.stack([batch.input_nodes[batch.blocks[0].src], batch.input_nodes[batch.blocks[0].dst]]))
    assert (0, 1) in edges and (1, 0) in edges
    with pytest.raises(ValueError, match="exclude must be one of"):
        LinkNeighborLoader(g, NeighborSampler([2]), exclude="both")


# ---------------------------------------------------------------- metrics, as OGB and scikit-learn compute them
POS = torch.tensor([0.9, 0.4, 0.4, 0.7, 0.1, 0.8])
NEG = torch.tensor([0.4, 0.2, 0.7, 0.05, 0.4, 0.3, 0.6, 0.1])


def test_auc_matches_sklearn_and_mann_whitney():
    # hand count over the 48 (pos, neg) pairs, ties counting half
    expected = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in POS.tolist() for n in NEG.tolist()) / 48
    assert link_auc(POS, NEG) == pytest.approx(expected, abs=1e-12)
    metrics = pytest.importorskip("sklearn.metrics")
    labels = torch.cat([torch.ones(6), torch.zeros(8)])
    assert link_auc(POS, NEG) == pytest.approx(metrics.roc_auc_score(labels, torch.cat([POS, NEG])), abs=1e-12)
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        y = torch.randint(0, 2, (200,), generator=gen)
        s = torch.randint(0, 20, (200,), generator=gen).float()  # many ties
        assert roc_auc(y, s) == pytest.approx(metrics.roc_auc_score(y, s), abs=1e-12)
    with pytest.raises(ValueError, match="both classes"):
        roc_auc(torch.ones(3), torch.rand(3))


def test_hits_and_mrr_match_ogb_formulas():
    # hits@3: the 3rd best negative is 0.4; positives strictly above it: 0.9, 0.7, 0.8
    assert hits_at_k(POS, NEG, 3) == pytest.approx(3 / 6)
    assert hits_at_k(POS, NEG, 1) == pytest.approx(2 / 6)   # 0.9 and 0.8 beat 0.7
    assert hits_at_k(POS, NEG, 9) == 1.0                     # fewer negatives than K: OGB says 1
    neg_rows = torch.tensor([[0.5, 0.9, 0.1], [0.4, 0.4, 0.3], [0.0, 0.0, 0.0]])
    pos = torch.tensor([0.6, 0.4, 0.5])
    # ranks: 1 + #greater + #equal/2 = 2, 1 + 0 + 1 = 2, 1
    out = mrr(pos, neg_rows)
    assert out["mrr_list"].tolist() == [0.5, 0.5, 1.0] and out["hits@1_list"].tolist() == [0.0, 0.0, 1.0]
    ogb = pytest.importorskip("ogb.linkproppred")
    gen = torch.Generator().manual_seed(0)
    y_pos, y_neg = torch.randint(0, 10, (50,), generator=gen).float(), torch.randint(0, 10, (300,), generator=gen).float()
    for k in (1, 20, 50):
        theirs = ogb.Evaluator("ogbl-ddi")
        theirs.K = k
        assert Evaluator(f"hits@{k}").eval({"y_pred_pos": y_pos, "y_pred_neg": y_neg})[f"hits@{k}"] == \
            theirs.eval({"y_pred_pos": y_pos, "y_pred_neg": y_neg})[f"hits@{k}"]
    rows = torch.randint(0, 5, (50, 20), generator=gen).float()
    ours, theirs = Evaluator("ogbl-citation2").eval({"y_pred_pos": y_pos, "y_pred_neg": rows}), \
        ogb.Evaluator("ogbl-citation2").eval({"y_pred_pos": y_pos, "y_pred_neg": rows})
    for key in ("mrr_list", "hits@1_list", "hits@3_list", "hits@10_list"):
        assert torch.equal(ours[key], theirs[key]), key


# ---------------------------------------------------------------- training
def test_gae_learns_links_full_graph_and_mini_batch(graph):
    split = split_edges(graph, 0.1, 0.1, seed=0)
    x = small_partition().x
    for batch_size in (None, 256):
        torch.manual_seed(0)
        model = GAE(in_channels=x.shape[1], hidden_channels=16, out_channels=16)
        config = TrainConfig(epochs=30, lr=0.01, weight_decay=0.0, batch_size=batch_size, patience=None,
                             progress="off", fanouts=None if batch_size is None else (5, 5))
        result = LinkTrainer(model, split, x, config).fit()
        assert result.history[-1].loss < result.history[0].loss
        assert result.best_val_auc > 0.7 and result.test_auc > 0.7, (batch_size, result.best_val_auc)  # chance: 0.5


def test_test_pairs_are_scored_on_the_test_graph(graph):
    split = split_edges(graph, 0.1, 0.1, seed=0)
    x = small_partition().x
    torch.manual_seed(0)
    model = GAE(in_channels=x.shape[1], hidden_channels=8, out_channels=8)
    val_auc, test_auc, *_ = LinkTrainer(model, split, x, TrainConfig(epochs=1, progress="off")).evaluate()
    with torch.no_grad():
        z, z_test = model.encode(split.graph, x), model.encode(split.test_graph, x)
        assert test_auc == link_auc(model.decode(z_test, split.test_pos), model.decode(z_test, split.test_neg))
        assert val_auc == link_auc(model.decode(z, split.val_pos), model.decode(z, split.val_neg))
        assert test_auc != link_auc(model.decode(z, split.test_pos), model.decode(z, split.test_neg))


@pytest.mark.slow
@pytest.mark.dataset
def test_gae_on_cora_reaches_auc_090(planetoid_root):
    from unigraph.data import Planetoid
    dataset = Planetoid(planetoid_root, "cora", normalize_features=True)
    split = split_edges(dataset.graph, 0.05, 0.1, seed=0)
    torch.manual_seed(0)
    model = GAE(in_channels=dataset.num_features)
    config = TrainConfig(epochs=400, lr=0.01, weight_decay=0.0, patience=None, progress="off")
    result = LinkTrainer(model, split, dataset.x, config).fit()
    assert result.test_auc >= 0.90, result.test_auc


# ---------------------------------------------------------------- fuzzing
from hypothesis import given, strategies as st  # noqa: E402

from graph_strategies import graphs  # noqa: E402


@given(drawn=graphs(bipartite=False), undirected=st.booleans(), method=st.sampled_from(["uniform", "degree"]))
def test_negatives_on_drawn_graphs_are_never_edges(drawn, undirected, method):
    g = drawn.graph
    n = g.num_nodes
    edges = pair_set(g.edge_index, undirected=undirected)
    non_edges = n * (n - 1) // (2 if undirected else 1) - len({p if not undirected else tuple(sorted(p))
                                                               for p in edges if p[0] != p[1]})
    want = min(non_edges, 5)
    if method == "degree" and int((g.in_degrees() + g.out_degrees()).sum()) == 0:
        return
    try:
        neg = negative_pairs(g, want, method=method, undirected=undirected, generator=drawn.generator())
    except ValueError as err:  # degree weights may make the remaining non-edges unreachable: a loud refusal
        assert method == "degree" and "too dense" in str(err)
        return
    assert neg.shape == (2, want) and not pair_set(neg) & edges and bool((neg[0] != neg[1]).all())
    assert len(pair_set(neg)) == want
