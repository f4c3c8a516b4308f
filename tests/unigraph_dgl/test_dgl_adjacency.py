"""g.adj_external and g.adj_tensors (unigraph/dgl/adjacency.py) against DGL's: the same entries,
orientation, shapes, dtypes, SciPy formats, on a graph with parallel edges, a bipartite relation of
a heterograph, and an empty graph."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl

SRC, DST = torch.tensor([2, 0, 1, 1, 3]), torch.tensor([1, 1, 2, 2, 3])   # a parallel pair, a self-loop


def both(dgl, build):
    return build(udgl), build(dgl)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_adj_external_equals_dgl(dgl, transpose, idtype):
    ours, theirs = both(dgl, lambda lib: lib.graph((SRC, DST), num_nodes=5, idtype=idtype))
    a, b = ours.adj_external(transpose=transpose), theirs.adj_external(transpose=transpose)
    assert a.layout == b.layout == torch.sparse_coo and a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(a._indices(), b._indices()) and torch.equal(a._values(), b._values())
    assert torch.equal(a.to_dense(), b.to_dense())   # the parallel pair counts 2
    for fmt in ("coo", "csr"):
        x, y = ours.adj_external(transpose, scipy_fmt=fmt), theirs.adj_external(transpose, scipy_fmt=fmt)
        assert type(x) is type(y) and x.dtype == y.dtype and (x != y).nnz == 0
        parts = ("row", "col", "data") if fmt == "coo" else ("indptr", "indices", "data")   # entry for entry
        assert all((getattr(x, part) == getattr(y, part)).all() for part in parts)


def test_adj_external_of_a_relation_and_empty_graph(dgl):
    edges = {("user", "buys", "item"): (torch.tensor([0, 1, 1]), torch.tensor([2, 0, 2]))}
    ours, theirs = both(dgl, lambda lib: lib.heterograph(edges, num_nodes_dict={"user": 2, "item": 4}))
    for transpose in (False, True):
        a = ours.adj_external(transpose=transpose, etype="buys")
        b = theirs.adj_external(transpose=transpose, etype="buys")
        assert a.shape == b.shape and torch.equal(a.to_dense(), b.to_dense())
    ours, theirs = both(dgl, lambda lib: lib.graph(([], []), num_nodes=3))
    assert torch.equal(ours.adj_external().to_dense(), theirs.adj_external().to_dense())


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc"])
def test_adj_tensors_equal_dgl(dgl, fmt):
    ours, theirs = both(dgl, lambda lib: lib.graph((SRC, DST), num_nodes=5, idtype=torch.int32))
    for a, b in zip(ours.adj_tensors(fmt), theirs.adj_tensors(fmt), strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)


def test_bad_formats_are_named():
    g = udgl.graph((SRC, DST), num_nodes=5)
    with pytest.raises(udgl.DGLError, match="scipy_fmt"):
        g.adj_external(scipy_fmt="csc")
    with pytest.raises(udgl.DGLError, match="fmt must be one of"):
        g.adj_tensors("dense")
    with pytest.raises(udgl.DGLError, match="edge type"):
        g.adj_external(etype="other")
