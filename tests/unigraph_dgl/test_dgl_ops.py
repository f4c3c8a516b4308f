"""unigraph.dgl.ops: DGL's op names, unused operands, shorthands, segment ops and edge softmax
forms, against the real DGL (float64, forward and gradients) or a loop reference."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
from unigraph.dgl import ops as uops

SRC = torch.tensor([0, 0, 1, 2, 2, 3, 4, 1, 1])
DST = torch.tensor([1, 2, 2, 0, 3, 1, 0, 2, 2])


def grads(out, inputs):
    return torch.autograd.grad(out.square().sum(), inputs, allow_unused=True)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "copy_lhs", "copy_rhs"])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_gspmm_takes_dgl_names_and_ignores_the_unused_operand(dgl, op, reduce):
    x = torch.rand(6, 2, 3, dtype=torch.float64, requires_grad=True) + 0.5
    e = torch.rand(9, 2, 1, dtype=torch.float64, requires_grad=True) + 0.5
    ours = uops.gspmm(udgl.graph((SRC, DST), num_nodes=6), op, reduce, x, e)
    theirs = dgl.ops.gspmm(dgl.graph((SRC, DST), num_nodes=6), op, reduce, x, e)
    theirs = torch.where(torch.isinf(theirs), torch.zeros_like(theirs), theirs)  # DGL: inf for nodes without in-edges
    torch.testing.assert_close(ours, theirs)
    for mine, reference in zip(grads(ours, (x, e)), grads(theirs, (x, e))):
        if reference is not None:
            torch.testing.assert_close(mine, reference)


def test_every_shorthand_is_the_generic_call(dgl):
    g, d = udgl.graph((SRC, DST), num_nodes=6), dgl.graph((SRC, DST), num_nodes=6)
    x, y, e = torch.rand(6, 4, dtype=torch.float64), torch.rand(6, 4, dtype=torch.float64) + 1, torch.rand(9, 4,
                                                                                                       dtype=torch.float64) + 1
    values = {"u": x, "v": y, "e": e}
    for name in [n for n in dir(dgl.ops) if n.count("_") == 2 and n[0] in "uve" and n[-1] in "uve"]:
        lhs, _, rhs = name.split("_")
        torch.testing.assert_close(getattr(uops, name)(g, values[lhs], values[rhs]),
                                   getattr(dgl.ops, name)(d, values[lhs], values[rhs]), msg=name)
    for reduce in ("sum", "mean", "max", "min"):
        for name in (f"u_mul_e_{reduce}", f"u_div_e_{reduce}", f"copy_u_{reduce}", f"copy_e_{reduce}"):
            args = (x, e) if name.startswith("u_") else (x,) if name.startswith("copy_u") else (e,)
            expected = getattr(dgl.ops, name)(d, *args)
            torch.testing.assert_close(getattr(uops, name)(g, *args), torch.nan_to_num(expected, posinf=0, neginf=0),
                                       msg=name)
    for name in ("copy_u", "copy_v", "copy_e"):
        value = e if name == "copy_e" else x
        torch.testing.assert_close(getattr(uops, name)(g, value), getattr(dgl.ops, name)(d, value), msg=name)


@pytest.mark.parametrize("reducer", ["sum", "mean", "max", "min"])
def test_segment_reduce_and_softmax(reducer):
    value = torch.randn(10, 3, dtype=torch.float64, requires_grad=True)
    seglen = torch.tensor([2, 3, 0, 4, 1])
    out = uops.segment_reduce(seglen, value, reducer)
    parts = torch.split(value, seglen.tolist())
    reduce = {"sum": lambda t: t.sum(0), "mean": lambda t: t.mean(0), "max": lambda t: t.max(0).values,
              "min": lambda t: t.min(0).values}[reducer]
    expected = torch.stack([reduce(p) if len(p) else value.new_zeros(3) for p in parts])
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grads(out, value)[0], grads(expected, value)[0])
    torch.testing.assert_close(uops.segment_softmax(seglen, value), torch.cat([p.softmax(0) for p in parts]))
    with pytest.raises(udgl.DGLError, match="sums to 9"):
        uops.segment_reduce(torch.tensor([9]), value)


def test_segment_mm_and_gather_mm_match_the_loop():
    a = torch.randn(12, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    seglen = torch.tensor([5, 0, 7])
    out = uops.segment_mm(a, b, seglen)
    expected = torch.cat([a[:5] @ b[0], a[5:] @ b[2]])
    torch.testing.assert_close(out, expected)
    for mine, reference in zip(grads(out, (a, b)), grads(expected, (a, b))):
        torch.testing.assert_close(mine, reference)
    index = torch.tensor([2, 0, 2, 1, 1, 0, 2, 2, 0, 1, 0, 2])
    out = uops.gather_mm(a, b, idx_b=index)
    expected = torch.bmm(a.unsqueeze(1), b[index]).squeeze(1)
    torch.testing.assert_close(out, expected)
    for mine, reference in zip(grads(out, (a, b)), grads(expected, (a, b))):
        torch.testing.assert_close(mine, reference)


@pytest.mark.parametrize("norm_by", ["dst", "src"])
def test_edge_softmax_forms_match_dgl(dgl, norm_by):
    g, d = udgl.graph((SRC, DST), num_nodes=6), dgl.graph((SRC, DST), num_nodes=6)
    scores = torch.randn(9, 2, dtype=torch.float64, requires_grad=True)
    ours, theirs = uops.edge_softmax(g, scores, norm_by=norm_by), dgl.ops.edge_softmax(d, scores, norm_by=norm_by)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(grads(ours, scores)[0], grads(theirs, scores)[0])
    subset = torch.tensor([7, 1, 2, 5])
    torch.testing.assert_close(uops.edge_softmax(g, scores[subset], eids=subset, norm_by=norm_by),
                               dgl.ops.edge_softmax(d, scores[subset], eids=subset, norm_by=norm_by))
    data = {("user", "follows", "user"): (torch.tensor([0, 1, 2]), torch.tensor([1, 1, 0])),
            ("user", "plays", "game"): (torch.tensor([0, 2, 2, 1]), torch.tensor([1, 0, 1, 1])),
            ("dev", "makes", "game"): (torch.tensor([0, 1]), torch.tensor([1, 1]))}
    hg, hd = udgl.heterograph(data), dgl.heterograph(data)
    logits = {etype: torch.randn(len(edges[0]), 1, dtype=torch.float64) for etype, edges in data.items()}
    ours, theirs = uops.edge_softmax(hg, logits, norm_by=norm_by), dgl.ops.edge_softmax(hd, logits, norm_by=norm_by)
    assert set(ours) == set(theirs)
    for etype in theirs:
        torch.testing.assert_close(ours[etype], theirs[etype])
