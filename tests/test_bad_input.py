"""Bad input raises a clear ValueError/TypeError naming the problem, before any kernel runs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import unigraph
from unigraph import ops
from unigraph.backends import Backend, Contract, register, all_backends
from unigraph.backends import _REGISTRY, _STATUS


@pytest.fixture
def g():
    return unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)


# --------------------------------------------------------------------------- Graph
@pytest.mark.parametrize("edge_index,error,match", [
    (torch.tensor([[0.0, 1.0], [1.0, 0.0]]), TypeError, "must hold integers.*float32"),
    (torch.tensor([[True], [False]]), TypeError, "must hold integers.*bool"),
    (torch.tensor([[0, 1, 2]]), ValueError, r"shape \[2, E\], got \[1, 3\]"),
    (torch.tensor([[0, 1], [1, 2], [2, 0]]), ValueError, "looks transposed"),
    (torch.tensor([0, 1]), ValueError, r"shape \[2, E\], got \[2\]"),
    (torch.tensor([[0, -1], [1, 0]]), ValueError, "negative index -1 \\(first at edge 1\\)"),
    ("edges", TypeError, "edge_index"),
])
def test_bad_edge_index(edge_index, error, match):
    with pytest.raises(error, match=match):
        unigraph.Graph(edge_index)


def test_out_of_range_indices_name_the_row_and_range():
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds index 5 .*num_nodes=3; valid indices are 0..2"):
        unigraph.Graph(torch.tensor([[0, 1], [1, 5]]), num_nodes=3)
    with pytest.raises(ValueError, match=r"edge_index\[0\] holds index 4 .*num_src_nodes=2"):
        unigraph.Graph(torch.tensor([[4], [0]]), num_src_nodes=2, num_dst_nodes=1)
    with pytest.raises(ValueError, match="num_nodes=0: a graph without nodes cannot have edges"):
        unigraph.Graph(torch.tensor([[0], [0]]), num_nodes=0)


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(num_nodes=-1), ValueError, "num_nodes must be >= 0, got -1"),
    (dict(num_nodes=2.5), TypeError, "num_nodes must be an int, got float"),
    (dict(num_nodes=True), TypeError, "num_nodes must be an int, got bool"),
    (dict(num_nodes=3, num_src_nodes=3), ValueError, "not both"),
    (dict(num_dst_nodes="4"), TypeError, "num_dst_nodes must be an int"),
])
def test_bad_sizes(kwargs, error, match):
    with pytest.raises(error, match=match):
        unigraph.Graph(torch.tensor([[0], [1]]), **kwargs)


def test_lists_and_numpy_are_accepted():
    assert unigraph.Graph([[0, 1], [1, 0]]).num_edges == 2
    assert unigraph.Graph(np.array([[0], [1]], dtype=np.int32)).num_nodes == 2
    assert unigraph.Graph([[], []]).num_edges == 0


# --------------------------------------------------------------------------- gspmm
@pytest.mark.parametrize("call,error,match", [
    (lambda g: ops.gspmm(g, "copy_x", "sum", torch.ones(3, 2)), ValueError, "gspmm op must be one of copy_u"),
    (lambda g: ops.gspmm(g, "copy_u", "prod", torch.ones(3, 2)), ValueError, "reduce must be one of sum, mean, max, min; got 'prod'"),
    (lambda g: ops.gspmm(g, "copy_u", "sum"), ValueError, "needs node features u"),
    (lambda g: ops.gspmm(g, "u_mul_e", "sum", torch.ones(3, 2)), ValueError, "needs edge features e"),
    (lambda g: ops.gspmm(g, "copy_u", "sum", torch.ones(3, 2), torch.ones(3)), ValueError, "did you mean 'u_mul_e'"),
    (lambda g: ops.gspmm(g, "copy_e", "sum", torch.ones(3, 2), torch.ones(3)), ValueError, "reads only edge features"),
    (lambda g: ops.gspmm(g, "copy_u", "sum", torch.ones(4, 2)), ValueError, "u has 4 rows but the graph has 3 source nodes"),
    (lambda g: ops.gspmm(g, "copy_e", "sum", None, torch.ones(5)), ValueError, "e has 5 rows but the graph has 3 edges"),
    (lambda g: ops.gspmm(g, "copy_u", "sum", torch.ones(3, 2, dtype=torch.long)), TypeError, "floating-point.*int64"),
    (lambda g: ops.gspmm(g, "u_mul_e", "sum", torch.ones(3, 2), torch.ones(3, dtype=torch.float64)), TypeError, "u is torch.float32 but e is torch.float64"),
    (lambda g: ops.gspmm(g, "u_mul_e", "sum", torch.ones(3, 2), torch.ones(3, 3)), ValueError, "do not broadcast"),
    (lambda g: ops.gspmm(g, "copy_u", "sum", torch.tensor(1.0)), ValueError, "got a scalar"),
    (lambda g: ops.gspmm(g, "copy_u", "sum", [[1.0]] * 3), TypeError, "u must be a torch.Tensor, got list"),
    (lambda g: ops.gspmm(g, "copy_u", "sum", torch.ones(3, 2, device="meta")), ValueError, "u is on meta but the graph is on cpu"),
    (lambda g: ops.gspmm(g.edge_index, "copy_u", "sum", torch.ones(3, 2)), TypeError, "expected a unigraph.Graph, got Tensor"),
])
def test_bad_gspmm_calls(g, call, error, match):
    with pytest.raises(error, match=match):
        call(g)


# --------------------------------------------------------------------------- gsddmm / softmax
@pytest.mark.parametrize("call,error,match", [
    (lambda g: ops.gsddmm(g, "pow", torch.ones(3, 2), torch.ones(3, 2)), ValueError, "gsddmm op must be one of add"),
    (lambda g: ops.gsddmm(g, "add", torch.ones(3, 2), torch.ones(3, 2), "x", "v"), ValueError, "lhs_target must be one of u, v, e; got 'x'"),
    (lambda g: ops.gsddmm(g, "dot", torch.ones(3, 2), torch.ones(3, 4)), ValueError, "dot needs equal last feature dimensions"),
    (lambda g: ops.gsddmm(g, "add", torch.ones(3, 2), torch.ones(4, 2), "u", "e"), ValueError, r"rhs \(target 'e'\) has 4 rows but the graph has 3 edges"),
    (lambda g: ops.gsddmm(g, "add", None, torch.ones(3, 2)), ValueError, "needs lhs"),
    (lambda g: ops.gsddmm(g, "copy_rhs", torch.ones(3, 2), None), ValueError, "needs rhs"),
    (lambda g: ops.edge_softmax(g, torch.ones(2, 1)), ValueError, "scores has 2 rows but the graph has 3 edges"),
    (lambda g: ops.edge_softmax(g, torch.ones(3, dtype=torch.int32)), TypeError, "floating-point"),
])
def test_bad_gsddmm_calls(g, call, error, match):
    with pytest.raises(error, match=match):
        call(g)


def test_bipartite_rows_are_checked_per_side():
    block = unigraph.Graph(torch.tensor([[0, 3], [0, 1]]), num_src_nodes=4, num_dst_nodes=2)
    with pytest.raises(ValueError, match=r"lhs \(target 'v'\) has 4 rows but the graph has 2 destination nodes"):
        ops.gsddmm(block, "add", torch.ones(4, 2), torch.ones(4, 2), "v", "u")
    assert ops.gspmm(block, "copy_u", "sum", torch.ones(4, 2)).shape == (2, 2)


# --------------------------------------------------------------------------- backend names
class _Kernelless(Backend):
    name = "kernelless"
    summary = "test double whose dependency is missing"
    contract = Contract(ops=())  # it declares no kernels

    def availability(self):
        from unigraph.backends import Availability
        return Availability(False, "needs the package 'nothing-here' (not installed)")


@pytest.fixture
def missing_backend():
    register(_Kernelless())
    yield "kernelless"
    _REGISTRY.pop("kernelless", None)
    _STATUS.pop("kernelless", None)


def test_unknown_backend_names_the_choices(g):
    with pytest.raises(ValueError, match="unknown backend 'fast'; choose one of: auto, scatter, sparse"):
        unigraph.set_backend("fast")
    with pytest.raises(ValueError, match="unknown backend 'fast'"):
        ops.gspmm(g, "copy_u", "sum", torch.ones(3, 2), backend="fast")


def test_unavailable_backend_fails_loudly_and_auto_skips_it(g, missing_backend):
    with pytest.raises(RuntimeError, match="'kernelless' was requested but cannot run here: needs the package"):
        unigraph.set_backend(missing_backend)
    with pytest.raises(RuntimeError, match="cannot run here"):
        ops.gspmm(g, "copy_u", "sum", torch.ones(3, 2), backend=missing_backend)
    explanation = unigraph.explain(g, "copy_u", "sum", 2)
    assert explanation.backend in ("scatter", "sparse") + tuple(all_backends())
    assert explanation.backend != missing_backend
    assert "kernelless (unavailable: needs the package" in explanation.reason


def test_bad_environment_variable(g, monkeypatch):
    monkeypatch.setenv("UNIGRAPH_BACKEND", "nonsense")
    with pytest.raises(ValueError, match="UNIGRAPH_BACKEND='nonsense' names no backend"):
        ops.gspmm(g, "copy_u", "sum", torch.ones(3, 2))
