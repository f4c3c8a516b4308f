"""HANConv against PyG's: per-type outputs, semantic attention weights and gradients (inputs and
parameters, float64) for self-relations and relations between types, every adjacency form, the
HeteroGraph form, lazy widths, empty relations and types; repr and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, loaded

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

COUNTS = {"author": 7, "paper": 6, "term": 4}
WIDTHS = {"author": 5, "paper": 3, "term": 2}


def features(seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {t: torch.randn(COUNTS[t], WIDTHS[t], dtype=torch.float64, generator=gen) for t in COUNTS}


def relations(seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)

    def edges(src, dst, num):
        return torch.stack([torch.randint(0, COUNTS[src], (num,), generator=gen),
                            torch.randint(0, COUNTS[dst], (num,), generator=gen)])
    return {("author", "coauthor", "author"): edges("author", "author", 12),
            ("paper", "cites", "paper"): edges("paper", "paper", 9),
            ("author", "writes", "paper"): edges("author", "paper", 10),
            ("term", "in", "paper"): edges("term", "paper", 5)}


def pair(in_channels=None, seed=0, **options):
    metadata = (list(COUNTS), list(relations()))
    in_channels = dict(WIDTHS) if in_channels is None else in_channels
    torch.manual_seed(seed)
    theirs, ours = pyg_nn.HANConv(in_channels, 8, metadata, **options), U.HANConv(in_channels, 8, metadata, **options)
    return (theirs, ours) if in_channels == -1 else (theirs, loaded(theirs, ours))


def assert_same_dicts(theirs, ours, x_dict, edge_index_dict, ours_args=None):
    """Outputs, semantic weights, the gradients of every input and parameter."""
    x_theirs = {t: x.detach().clone().requires_grad_() for t, x in x_dict.items()}
    x_ours = {t: x.detach().clone().requires_grad_() for t, x in x_dict.items()}
    expected, their_beta = theirs(x_theirs, edge_index_dict, return_semantic_attention_weights=True)
    args = (x_ours, edge_index_dict) if ours_args is None else ours_args(x_ours)
    out, beta = ours(*args, return_semantic_attention_weights=True)
    assert list(out) == list(expected) and list(beta) == list(their_beta)
    loss_theirs, loss_ours = 0.0, 0.0
    for t in expected:
        if expected[t] is None:
            assert out[t] is None and beta[t] is None
            continue
        torch.testing.assert_close(out[t], expected[t], **TOL)
        torch.testing.assert_close(beta[t], their_beta[t], **TOL)
        weight = torch.randn_like(expected[t])
        loss_theirs, loss_ours = loss_theirs + (expected[t] * weight).sum(), loss_ours + (out[t] * weight).sum()
    loss_theirs.backward()
    loss_ours.backward()
    for t in x_dict:
        torch.testing.assert_close(x_ours[t].grad, x_theirs[t].grad, **TOL)
    reference = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        if reference[name].grad is None:
            assert p.grad is None or not p.grad.any(), name
        else:
            torch.testing.assert_close(p.grad, reference[name].grad, **TOL, msg=name)
    return out


@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("negative_slope", [0.2, 0.0])
def test_heads_and_slope_equal_pygs(heads, negative_slope):
    theirs, ours = pair(heads=heads, negative_slope=negative_slope)
    out = assert_same_dicts(theirs, ours, features(), relations())
    assert out["author"].shape == (7, 8) and out["paper"].shape == (6, 8) and out["term"] is None


def test_sparse_adjacencies_and_hetero_graph_equal_pygs():
    from torch_sparse import SparseTensor
    theirs, ours = pair(heads=2)
    x_dict, edge_index_dict = features(1), relations(1)
    sizes = {r: (COUNTS[r[2]], COUNTS[r[0]]) for r in edge_index_dict}
    torch_sparse = {r: torch.sparse_coo_tensor(e.flip(0), torch.ones(e.shape[1]), sizes[r]).coalesce().to_sparse_csr()
                    for r, e in edge_index_dict.items()}
    assert_same_dicts(theirs, ours, x_dict, torch_sparse)
    sparse_tensors = {r: SparseTensor.from_edge_index(e, sparse_sizes=sizes[r][::-1]).t()
                      for r, e in edge_index_dict.items()}
    assert_same_dicts(theirs, ours, x_dict, sparse_tensors)
    hg = unigraph.HeteroGraph(edge_index_dict, num_nodes=COUNTS)
    assert_same_dicts(theirs, ours, x_dict, edge_index_dict, ours_args=lambda x: (hg, x))


def test_lazy_widths_equal_pygs():
    theirs, ours = pair(in_channels=-1, heads=2)
    x_dict, edge_index_dict = features(2), relations(2)
    theirs.double()(x_dict, edge_index_dict)
    ours.double()(x_dict, edge_index_dict)   # sized by its own first call, then given PyG's weights
    ours.load_state_dict(theirs.state_dict())
    assert_same_dicts(theirs, ours, x_dict, edge_index_dict)
    assert str(ours) == str(theirs) == "HANConv(8, heads=2)"


def test_empty_relations_and_types_equal_pygs():
    theirs, ours = pair(heads=2)
    x_dict = features(3)
    x_dict["paper"] = x_dict["paper"][:0]
    edge_index_dict = {r: torch.empty(2, 0, dtype=torch.long) for r in relations()}
    out = assert_same_dicts(theirs, ours, x_dict, edge_index_dict)
    assert out["paper"].shape == (0, 8) and not out["author"].any()


def test_dropout_is_off_in_eval_and_drawn_in_training():
    theirs, ours = pair(heads=2, dropout=0.5)
    x_dict, edge_index_dict = features(4), relations(4)
    theirs.eval(), ours.eval()
    assert_same_dicts(theirs, ours, x_dict, edge_index_dict)
    ours.train()
    torch.manual_seed(1)
    out = ours(x_dict, edge_index_dict)["paper"]
    assert out.shape == (6, 8) and not torch.allclose(out, ours.eval()(x_dict, edge_index_dict)["paper"])


def test_refusals():
    x_dict, edge_index_dict = features(), relations()
    metadata = (list(COUNTS), list(edge_index_dict))
    with pytest.raises(TypeError, match="aggr"):
        U.HANConv(WIDTHS, 8, metadata, aggr="mean")
    with pytest.raises(ValueError, match="target_to_source"):
        U.HANConv(WIDTHS, 8, metadata, flow="target_to_source")
    with pytest.raises(ValueError, match="divisible by heads"):
        U.HANConv(WIDTHS, 8, metadata, heads=3)
    conv = U.HANConv(WIDTHS, 8, metadata).double()
    with pytest.raises(ValueError, match="no attention weights for relation"):
        conv(x_dict, {**edge_index_dict, ("paper", "new", "author"): torch.tensor([[0], [1]])})
    with pytest.raises(ValueError, match="no projection for node types"):
        conv({**x_dict, "venue": torch.randn(2, 3, dtype=torch.float64)}, edge_index_dict)
    with pytest.raises(ValueError, match="has no features for"):
        conv({t: x for t, x in x_dict.items() if t != "term"}, edge_index_dict)
    with pytest.raises(ValueError, match="5 features"):
        conv({**x_dict, "author": torch.randn(7, 4, dtype=torch.float64)}, edge_index_dict)
    with pytest.raises(TypeError, match="swapped"):
        conv(edge_index_dict, x_dict)
