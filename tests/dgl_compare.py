"""One comparison for the tests of unigraph.dgl.nn (tests/unigraph_dgl/nn): a module of
unigraph.dgl.nn and DGL's own, given the same state_dict (the same parameter names and shapes),
compute the same outputs, input gradients and parameter gradients (float64, eval mode), on the
same graphs built in each library."""
from __future__ import annotations

from typing import Callable

import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn

SRC = torch.tensor([0, 0, 1, 2, 2, 3, 4, 1, 4, 5])
DST = torch.tensor([1, 2, 2, 0, 3, 1, 0, 5, 5, 4])
SEEDS = torch.tensor([2, 5])
TOL = dict(rtol=1e-9, atol=1e-10)


def our_graphs():
    """The 6-node graph with self-loops and a block of it (seeds 2 and 5), in unigraph.dgl."""
    ours = udgl.add_self_loop(udgl.graph((SRC, DST), num_nodes=6))
    return ours, udgl.to_block(ours.in_subgraph(SEEDS), SEEDS)


def graphs(dgl, blocks: bool = True) -> list[tuple]:
    """``[(ours, theirs), ...]``: the graph of :func:`our_graphs` and (``blocks``) its block, each
    built by unigraph.dgl and by DGL."""
    ours, our_block = our_graphs()
    theirs = dgl.add_self_loop(dgl.graph((SRC, DST), num_nodes=6))
    pairs = [(ours, theirs)]
    if blocks:
        pairs.append((our_block, dgl.to_block(theirs.in_subgraph(SEEDS), SEEDS)))
    return pairs


def same_modules(dgl, make: Callable) -> tuple[torch.nn.Module, torch.nn.Module]:
    """``(ours, theirs)``: ``make(unigraph.dgl.nn)`` with ``make(dgl.nn)``'s state_dict loaded
    (strict: the same names and shapes), both float64, in eval mode."""
    theirs = make(dgl.nn).double().eval()
    ours = make(unn).double().eval()
    assert set(ours.state_dict()) == set(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def _flat(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat(v)]
    return []


def assert_same_run(ours: torch.nn.Module, theirs: torch.nn.Module, our_args: tuple, their_args: tuple,
                    inputs: list[torch.Tensor], **forward) -> None:
    """``ours(*our_args, **forward)`` equals ``theirs(*their_args, **forward)`` (every tensor of
    the outputs, nested tuples too), and so do the gradients of ``inputs`` (tensors both calls
    read, requiring grad) and of every parameter, under the sum of squares of the outputs."""
    out_ours, out_theirs = _flat(ours(*our_args, **forward)), _flat(theirs(*their_args, **forward))
    assert len(out_ours) == len(out_theirs)
    for a, b in zip(out_ours, out_theirs):
        torch.testing.assert_close(a, b, **TOL)
    floating = [(a, b) for a, b in zip(out_ours, out_theirs) if a.is_floating_point() and b.requires_grad]
    wrt_ours = list(inputs) + list(ours.parameters())
    wrt_theirs = list(inputs) + list(theirs.parameters())
    mine = torch.autograd.grad(sum(a.square().sum() for a, _ in floating), wrt_ours, allow_unused=True)
    reference = torch.autograd.grad(sum(b.square().sum() for _, b in floating), wrt_theirs, allow_unused=True)
    for a, b in zip(mine, reference):
        if b is None:
            assert a is None or not a.any()
        else:
            torch.testing.assert_close(a, b, **TOL)


def compare(dgl, make: Callable, feat_size: int = 5, edge_weight: bool = False, blocks: bool = True,
            **forward) -> None:
    """:func:`same_modules`, then on each of :func:`graphs`: node features ``[N_src, feat_size]``
    (and with ``edge_weight`` one weight per edge) through both, compared by :func:`assert_same_run`."""
    torch.manual_seed(0)
    for ours_graph, their_graph in graphs(dgl, blocks):
        ours, theirs = same_modules(dgl, make)
        x = torch.randn(ours_graph.num_src_nodes(), feat_size, dtype=torch.float64, requires_grad=True)
        extra = {"edge_weight": torch.rand(ours_graph.num_edges(), dtype=torch.float64)} if edge_weight else {}
        assert_same_run(ours, theirs, (ours_graph, x), (their_graph, x), [x], **extra, **forward)
