"""MetaPath2Vec against PyG's: the same walks (positive and negative) draw for draw for one torch
seed, cyclic and one-way metapaths, dead ends (the dummy node); loss and its gradient; forward per
node type; str; state_dict; the loader; the errors."""
import pytest
import torch

from pyg_compare import TOL
from unigraph.nn.models import MetaPath2Vec

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")
WRITES, WRITTEN_BY, CITES = ("author", "writes", "paper"), ("paper", "written_by", "author"), \
    ("paper", "cites", "venue")


def _edges():
    gen = torch.Generator().manual_seed(0)
    a2p = torch.stack([torch.randint(0, 5, (12,), generator=gen), torch.randint(0, 7, (12,), generator=gen)])
    p2v = torch.stack([torch.randint(0, 6, (8,), generator=gen), torch.randint(0, 3, (8,), generator=gen)])
    return {WRITES: a2p, WRITTEN_BY: a2p.flip(0), CITES: p2v}


@pytest.mark.parametrize("metapath,walk_length,num_nodes", [
    ([WRITES, WRITTEN_BY], 6, None),
    ([WRITES, WRITTEN_BY], 5, {"author": 6, "paper": 8, "venue": 4}),   # isolated nodes: dead ends
    ([WRITES, CITES], 2, None),
])
def test_same_as_pyg(metapath, walk_length, num_nodes):
    kwargs = dict(embedding_dim=4, metapath=metapath, walk_length=walk_length, context_size=3,
                  walks_per_node=2, num_negative_samples=2, num_nodes_dict=num_nodes)
    theirs = pyg_models.MetaPath2Vec(_edges(), **kwargs).double()
    ours = MetaPath2Vec(_edges(), **kwargs).double()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert str(ours) == str(theirs)
    assert torch.equal(ours.offset, theirs.offset) and ours.dummy_idx == theirs.dummy_idx
    batch = torch.arange(ours.num_nodes_dict[metapath[0][0]])
    torch.manual_seed(1)
    pos_t, neg_t = theirs._sample(batch.tolist())
    torch.manual_seed(1)
    pos_o, neg_o = ours._sample(batch.tolist())
    assert torch.equal(pos_o, pos_t) and torch.equal(neg_o, neg_t)
    loss_t, loss_o = theirs.loss(pos_t, neg_t), ours.loss(pos_o, neg_o)
    torch.testing.assert_close(loss_o, loss_t, **TOL)
    (g_t,), (g_o,) = torch.autograd.grad(loss_t, theirs.embedding.weight), torch.autograd.grad(
        loss_o, ours.embedding.weight)
    torch.testing.assert_close(g_o, g_t, **TOL)
    for node_type in ours.start:
        assert torch.equal(ours(node_type), theirs(node_type))
        assert torch.equal(ours(node_type, torch.tensor([1, 0])), theirs(node_type, torch.tensor([1, 0])))


def test_loader():
    model = MetaPath2Vec(_edges(), 4, [WRITES, WRITTEN_BY], walk_length=4, context_size=2)
    pos, neg = next(iter(model.loader(batch_size=3)))
    assert pos.shape == (3 * 4, 2) and neg.shape == (3 * 4, 2)


def test_errors():
    edges = _edges()
    with pytest.raises(ValueError, match="invalid metapath"):
        MetaPath2Vec(edges, 4, [WRITES, CITES, WRITES], walk_length=2, context_size=2)
    with pytest.raises(AttributeError, match="cycle|does not end"):
        MetaPath2Vec(edges, 4, [WRITES, CITES], walk_length=3, context_size=2)
    with pytest.raises(ValueError, match="context_size"):
        MetaPath2Vec(edges, 4, [WRITES, WRITTEN_BY], walk_length=2, context_size=4)
    with pytest.raises(ValueError, match="not in edge_index_dict"):
        MetaPath2Vec(edges, 4, [("a", "b", "c")], walk_length=1, context_size=2)
    model = MetaPath2Vec(edges, 4, [WRITES, WRITTEN_BY], walk_length=2, context_size=2)
    with pytest.raises(KeyError, match="venue"):
        model("venue")
