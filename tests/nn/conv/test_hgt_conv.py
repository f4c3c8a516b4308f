"""HGTConv's lazy in_channels=-1 and PyG's output rule (every node type in x_dict that some
relation of the metadata ends in)."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U

X = {"author": torch.randn(4, 6, dtype=torch.float64), "paper": torch.randn(5, 3, dtype=torch.float64)}
EDGES = {("author", "writes", "paper"): torch.tensor([[0, 1, 2, 3, 3], [0, 1, 1, 4, 2]]),
         ("paper", "written_by", "author"): torch.tensor([[0, 1, 1, 4, 2], [0, 1, 2, 3, 3]])}
METADATA = (["author", "paper"], list(EDGES))


def test_lazy_widths_equal_explicit_ones():
    torch.manual_seed(0)
    lazy = U.HGTConv(-1, 8, METADATA, heads=2).double()
    optimizer = torch.optim.SGD(lazy.parameters(), lr=0.1)  # built before the widths are known
    out = lazy(X, EDGES)
    assert str(lazy) == "HGTConv(-1, 8, heads=2)" and lazy.in_channels == {"author": 6, "paper": 3}
    explicit = U.HGTConv({"author": 6, "paper": 3}, 8, METADATA, heads=2).double()
    explicit.load_state_dict(lazy.state_dict(), strict=True)
    for key in out:
        torch.testing.assert_close(out[key], explicit(X, EDGES)[key])
    sum(o.sum() for o in out.values()).backward()
    before = lazy.kqv_lin.weight.detach().clone()
    optimizer.step()
    assert not torch.equal(before, lazy.kqv_lin.weight)
    with pytest.raises(ValueError, match="must be \\[4, 6\\]"):
        lazy({**X, "author": torch.randn(4, 7, dtype=torch.float64)}, EDGES)


def test_node_types_without_edges_here_still_get_their_update():
    torch.manual_seed(0)
    metadata = (["author", "paper", "university"], [("author", "writes", "paper"),
                                                    ("university", "employs", "author")])
    conv = U.HGTConv(-1, 8, metadata).double()
    x = {**X, "university": torch.randn(2, 3, dtype=torch.float64)}
    out = conv(x, {("author", "writes", "paper"): EDGES[("author", "writes", "paper")]})
    assert set(out) == {"author", "paper"} and out["author"].shape == (4, 8)
