"""WLConv against PyG's: the same colours and the same hashmap over several rounds and graphs
(repeated edges, self-loops, isolated nodes, a hub, negative and huge input colours, one-hot
input, every adjacency form), the vectorised tuple hash against Python's, the tensor copy of the
hashmap following resets and assignments, histograms, repr and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import random_edges
from unigraph.nn.wl_conv import tuple_hashes

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def refine_both(theirs, ours, x, edge_index, rounds: int = 3):
    """``rounds`` refinements by both layers, each fed its own colours; they must agree every round."""
    mine = x
    for _ in range(rounds):
        x, mine = theirs(x, edge_index), ours(mine, edge_index)
        assert mine.dtype == torch.long
        assert torch.equal(mine, x)
    assert ours.hashmap == theirs.hashmap
    return mine


def test_colours_and_hashmap_equal_pygs_over_rounds_and_graphs():
    theirs, ours = pyg_nn.WLConv(), U.WLConv()
    gen = torch.Generator().manual_seed(0)
    for seed in range(4):   # one palette shared by the graphs, as in a WL kernel over a dataset
        n = 12 + 5 * seed
        x = torch.randint(0, 3, (n,), generator=gen)
        edge_index = random_edges(n, 3 * n, seed=seed)   # repeated edges and self-loops included
        refine_both(theirs, ours, x, edge_index)


def test_hub_isolated_nodes_and_extreme_colours_equal_pygs():
    """A hub with 300 neighbours (300 hash steps), isolated nodes, colours that Python hashes
    specially (-1, multiples of 2^61 - 1, the int64 extremes)."""
    theirs, ours = pyg_nn.WLConv(), U.WLConv()
    n = 310
    hub = torch.stack([torch.arange(1, 301), torch.zeros(300, dtype=torch.long)])
    back = torch.stack([torch.zeros(300, dtype=torch.long), torch.arange(1, 301)])
    edge_index = torch.cat([hub, back, torch.tensor([[5, 6, 6], [6, 5, 6]])], dim=1)
    x = torch.randint(-3, 3, (n,), generator=torch.Generator().manual_seed(1))
    x[:6] = torch.tensor([-1, 2**61 - 1, -(2**61 - 1), 2**63 - 1, -(2**63), 2**62])
    refine_both(theirs, ours, x, edge_index, rounds=2)


def test_one_hot_and_sparse_adjacencies_equal_pygs():
    from torch_sparse import SparseTensor
    n = 10
    x = torch.randint(0, 4, (n,), generator=torch.Generator().manual_seed(2))
    edge_index = random_edges(n, 25, seed=3)
    theirs, ours = pyg_nn.WLConv(), U.WLConv()
    expected = theirs(x, edge_index)
    assert torch.equal(ours(torch.nn.functional.one_hot(x).float(), edge_index), expected)
    csr = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(25), (n, n)).coalesce().to_sparse_csr()
    assert torch.equal(ours(x, csr), theirs(x, csr))
    adj = SparseTensor.from_edge_index(edge_index, sparse_sizes=(n, n)).t()
    assert torch.equal(ours(x, adj), theirs(x, adj))
    assert torch.equal(ours(unigraph.Graph(edge_index, num_nodes=n), x), expected)
    assert ours.hashmap == theirs.hashmap


def test_empty_graph():
    ours = U.WLConv()
    out = ours(torch.tensor([3, 3, 1]), torch.empty(2, 0, dtype=torch.long))
    assert out.tolist() == [0, 0, 1] and ours.hashmap == {hash((3,)): 0, hash((1,)): 1}
    assert ours(torch.empty(0, dtype=torch.long), torch.empty(2, 0, dtype=torch.long)).shape == (0,)


def test_tuple_hashes_equal_pythons():
    gen = torch.Generator().manual_seed(4)
    lengths = torch.randint(0, 6, (200,), generator=gen)
    first = torch.randint(-2**63, 2**63 - 1, (200,), generator=gen)
    rest = torch.randint(-2**63, 2**63 - 1, (int(lengths.sum()),), generator=gen)
    rest[::3] = torch.randint(-3, 3, rest[::3].shape, generator=gen)
    owner = torch.repeat_interleave(torch.arange(200), lengths)
    expected, start = [], 0
    for f, k in zip(first.tolist(), lengths.tolist()):
        expected.append(hash((f, *rest[start:start + k].tolist())))
        start += k
    assert tuple_hashes(first, rest, owner).tolist() == expected


def test_hashmap_resets_and_assignments_are_followed():
    """The sorted tensor copy of the hashmap is rebuilt when the dict is replaced, reset or grown
    from outside."""
    x, edge_index = torch.tensor([0, 1, 0, 1, 2]), random_edges(5, 9, seed=5)
    theirs, ours = pyg_nn.WLConv(), U.WLConv()
    refine_both(theirs, ours, x, edge_index, rounds=2)
    theirs.reset_parameters()
    ours.reset_parameters()
    assert ours.hashmap == {}
    refine_both(theirs, ours, x, edge_index, rounds=1)
    shared = pyg_nn.WLConv()
    shared(x + 7, edge_index)
    ours.hashmap = dict(shared.hashmap)     # another palette, assigned
    theirs.hashmap = dict(shared.hashmap)
    refine_both(theirs, ours, x, edge_index, rounds=2)
    extra = {12345: len(ours.hashmap)}      # an entry added from outside: the copy is rebuilt
    ours.hashmap.update(extra)
    theirs.hashmap.update(extra)
    refine_both(theirs, ours, x + 3, edge_index, rounds=1)


def test_histogram_equals_pygs():
    theirs, ours = pyg_nn.WLConv(), U.WLConv()
    x = torch.randint(0, 3, (12,), generator=torch.Generator().manual_seed(6))
    colours = refine_both(theirs, ours, x, random_edges(12, 30, seed=6), rounds=1)
    batch = torch.tensor([0] * 5 + [1] * 4 + [3] * 3)
    for args in ((colours,), (colours, batch)):
        assert torch.equal(ours.histogram(*args), theirs.histogram(*args))
        expected = theirs.histogram(*args, norm=True)
        torch.testing.assert_close(ours.histogram(*args, norm=True), expected, equal_nan=True)
        assert ours.histogram(*args, norm=True).dtype == torch.float32


def test_repr_and_refusals():
    assert str(U.WLConv()) == str(pyg_nn.WLConv()) == "WLConv()"
    conv, edge_index = U.WLConv(), random_edges(4, 6)
    with pytest.raises(TypeError, match="int64"):
        conv(torch.tensor([0.0, 1.0, 0.0, 1.0]), edge_index)
    with pytest.raises(ValueError, match="one-hot"):
        conv(torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]), edge_index)
    with pytest.raises(TypeError, match="one tensor"):
        conv((torch.tensor([0, 1, 0, 1]), torch.tensor([0, 1])), edge_index)
    with pytest.raises(ValueError, match="square"):
        conv(torch.tensor([0, 1, 0]), torch.sparse_coo_tensor(torch.tensor([[0, 3], [1, 2]]), torch.ones(2), (4, 3)))
    with pytest.raises(ValueError, match="out-of-range"):
        conv(torch.tensor([0, 1, 0]), torch.tensor([[0, 5], [1, 2]]))
    conv(torch.tensor([0, 1, 0, 1]), edge_index)
    with pytest.raises(ValueError, match=r"colours must be in \[0, "):
        conv.histogram(torch.tensor([0, 99]))
    with pytest.raises(TypeError, match="int64"):
        conv.histogram(torch.tensor([0.0]))
