"""Choosing a backend: argument > use_backend > set_backend > UNIGRAPH_BACKEND > auto."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph import ops
from unigraph.backends import Request, all_backends, register, _REGISTRY, _STATUS
from unigraph.backends.scatter import ScatterBackend


class RecordingBackend(ScatterBackend):
    """Scatter kernels under another name, recording which calls reached it."""

    def __init__(self, name):
        self.name = name
        self.calls = []

    def gspmm(self, g, op, reduce, u, e):
        self.calls.append(("gspmm", op))
        return super().gspmm(g, op, reduce, u, e)

    def estimate_us(self, stats, request):
        return 1e9  # auto never picks it


@pytest.fixture
def recorders():
    made = {name: register(RecordingBackend(name)) for name in ("rec_a", "rec_b", "rec_c", "rec_d")}
    yield made
    for name in made:
        _REGISTRY.pop(name, None)
        _STATUS.pop(name, None)


def run(g):
    return ops.gspmm(g, "copy_u", "sum", torch.ones(3, 2))


def test_precedence(recorders, monkeypatch):
    g = unigraph.Graph(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    monkeypatch.setenv("UNIGRAPH_BACKEND", "rec_d")
    run(g)
    assert recorders["rec_d"].calls == [("gspmm", "copy_u")]
    unigraph.set_backend("rec_c")
    run(g)
    assert len(recorders["rec_c"].calls) == 1
    with unigraph.use_backend("rec_b"):
        run(g)
        assert len(recorders["rec_b"].calls) == 1
        ops.gspmm(g, "copy_u", "sum", torch.ones(3, 2), backend="rec_a")
        assert len(recorders["rec_a"].calls) == 1
        with unigraph.use_backend("auto"):
            run(g)  # auto: the cost model never picks the recorders
    assert [len(recorders[n].calls) for n in ("rec_a", "rec_b", "rec_c", "rec_d")] == [1, 1, 1, 1]
    run(g)  # context exited: back to set_backend
    assert len(recorders["rec_c"].calls) == 2
    unigraph.set_backend(None)
    run(g)  # back to the environment variable
    assert len(recorders["rec_d"].calls) == 2


def test_the_environment_variable_is_read_at_each_call_however_it_is_changed(monkeypatch):
    """``selector._environment_value`` reads ``os.environ``'s own entries: a value set, changed or
    removed at run time (``os.environ[...]``, ``putenv`` through it, ``mock.patch.dict``) counts at
    the next call; an ``os.environ`` replaced by a plain mapping is read through ``get``."""
    import os
    from unittest import mock
    from backends import selector
    monkeypatch.delenv("UNIGRAPH_BACKEND", raising=False)
    assert selector.current_choice() == ("auto", "default")
    monkeypatch.setenv("UNIGRAPH_BACKEND", "numba")
    assert selector.current_choice() == ("numba", "UNIGRAPH_BACKEND")
    os.environ["UNIGRAPH_BACKEND"] = " scatter "
    assert selector.current_choice() == ("scatter", "UNIGRAPH_BACKEND")
    with mock.patch.dict(os.environ, {"UNIGRAPH_BACKEND": "sparse"}):
        assert selector.current_choice() == ("sparse", "UNIGRAPH_BACKEND")
    assert selector.current_choice() == ("scatter", "UNIGRAPH_BACKEND")
    del os.environ["UNIGRAPH_BACKEND"]
    assert selector.current_choice() == ("auto", "default")
    monkeypatch.setattr(os, "environ", {"UNIGRAPH_BACKEND": "numba"})
    assert selector.current_choice() == ("numba", "UNIGRAPH_BACKEND")
    os.environ["UNIGRAPH_BACKEND"] = "nonesuch"
    with pytest.raises(ValueError, match="UNIGRAPH_BACKEND='nonesuch' names no backend"):
        selector.current_choice()


def test_backward_runs_on_the_forward_backend(recorders):
    g = unigraph.Graph(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    x = torch.ones(3, 2, requires_grad=True)
    with unigraph.use_backend("rec_a"):
        out = ops.gspmm(g, "copy_u", "sum", x)
    out.sum().backward()  # outside the block: still rec_a (the reverse-graph gspmm)
    assert recorders["rec_a"].calls == [("gspmm", "copy_u"), ("gspmm", "copy_u")]
    assert torch.equal(x.grad, torch.tensor([[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]))


@pytest.mark.usefixtures("no_small_graph_rule")  # the cost model's path on a small graph
def test_explain_reports_statistics_candidates_and_reason():
    src = torch.arange(1, 300)
    g = unigraph.Graph(torch.stack([src, torch.zeros_like(src)]), num_nodes=300)  # a hub
    x = torch.randn(300, 16)
    explanation = unigraph.explain(g, "copy_u", "sum", x)
    assert explanation.backend in all_backends()
    assert explanation.stats.max_in_degree == 299
    runnable = [c for c in explanation.candidates if c.estimate_us is not None]
    assert min(runnable, key=lambda c: c.estimate_us).name == explanation.backend
    text = str(explanation)
    assert "max 299" in text and "candidates:" in text and "reason:" in text
    assert unigraph.explain(g, "dot", None, 16).request.kind == "gsddmm"
    assert unigraph.explain(g, "edge_softmax", None, 1).request.kind == "edge_softmax"
    forced = unigraph.explain(g, "copy_u", "sum", 16, backend="scatter")
    assert forced.backend == "scatter" and forced.source == "argument"
    with pytest.raises(ValueError, match="op must be a gspmm op"):
        unigraph.explain(g, "bogus")


def test_auto_weighs_launch_cost_on_tiny_graphs_and_traffic_on_large_ones():
    # the cost model's two ends: launch overhead dominates tiny graphs, E x F traffic large ones
    tiny = unigraph.Graph(torch.tensor([[0], [1]]), num_nodes=2)
    big_src = torch.randint(0, 20_000, (200_000,), generator=torch.Generator().manual_seed(0))
    big = unigraph.Graph(torch.stack([big_src, torch.randint(0, 20_000, (200_000,))]), num_nodes=20_000)
    assert unigraph.explain(tiny, "copy_u", "sum", 8).backend != "sparse"  # the highest launch cost
    assert unigraph.explain(big, "copy_u", "sum", 64).backend != "scatter"  # the most E x F traffic


@pytest.mark.usefixtures("no_small_graph_rule")  # the cost model's path on a small graph
def test_auto_decision_is_cached_per_graph_and_call():
    g = unigraph.Graph(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    run(g)
    keys = [k for k in g._cache if isinstance(k, tuple) and k[:2] == ("unigraph.backends", "auto")]
    assert len(keys) == 1 and Request(*keys[0][2:]).kind == "gspmm"  # the request's fields, plain constants
    assert g._cache[keys[0]] is all_backends()[unigraph.explain(g, "copy_u", "sum", torch.ones(3, 2)).backend]


def test_info_lists_every_backend_with_what_it_runs_on():
    report = unigraph.info()
    assert set(report.backends) == set(all_backends())
    assert report.backends["scatter"].startswith("available:")
    assert "torch-scatter" in report.backends["scatter"] or "torch native" in report.backends["scatter"]
    assert "kernels:" in str(report) and "auto (from default)" in str(report)


def test_decision_keys_hold_every_request_field():
    """Decisions are kept on the graph under the request's fields as a plain tuple (a compiled
    program reads that memo; see Graph.memo): a field missing from the key would share decisions."""
    import dataclasses

    from unigraph.backends import Request, selector
    request = Request("gspmm", "u_mul_e", "max", 12, torch.float64, torch.device("cpu"), True)
    assert selector._fields(request) == dataclasses.astuple(request)


def test_auto_fast_decision_is_the_explained_one(monkeypatch):
    """``_pick_name`` (what auto runs) and ``_pick`` (what explain reports) choose alike: every
    op family, widths, grad and thread counts, tiny to skewed graphs, on the CPU and on a GPU
    request with every backend pretending to be available; and with none able to run, the same error."""
    from unigraph.backends import Availability, Request, _STATUS, selector
    from unigraph.graph import DegreeStats
    shapes = [(12, 30, 5, 1.0), (3_000, 7_000, 12, 0.6), (200_000, 3_000_000, 35, 0.25),
              (200_000, 3_000_000, 1_000_000, 40.0), (100, 0, 0, 0.0)]
    requests = [("gspmm", "copy_u", "sum"), ("gspmm", "u_mul_e", "mean"), ("gspmm", "u_add_e", "max"),
                ("gsddmm", "dot", None), ("edge_softmax", "softmax", None), ("gat_attention", "gat", None)]
    for device in ("cpu", "cuda"):
        if device == "cuda":
            for name in unigraph.backends.names():
                monkeypatch.setitem(_STATUS, name, Availability(True, "pretend"))
        for nodes, edges, max_in, cv in shapes:
            stats = DegreeStats(num_src_nodes=nodes, num_dst_nodes=nodes, num_edges=edges,
                                mean_in_degree=edges / nodes, max_in_degree=max_in, cv_in_degree=cv,
                                max_out_degree=max_in)
            for kind, op, reduce in requests:
                for width, dtype, grad, threads in ((8, torch.float32, False, 1), (64, torch.float64, True, 2),
                                                    (256, torch.float16, True, 2)):
                    request = Request(kind, op, reduce, width, dtype, torch.device(device), grad, threads)
                    assert selector._pick_name(stats, request) == selector._pick(stats, request)[0], request
    for name in unigraph.backends.names():
        monkeypatch.setitem(_STATUS, name, Availability(False, "gone"))
    request = Request("gspmm", "copy_u", "sum", 8, torch.float32, torch.device("cpu"), False, 1)
    with pytest.raises(RuntimeError, match="no backend can run"):
        selector._pick_name(stats, request)


def test_the_lanes_decision_lookup_shares_the_front_doors_key_and_decision():
    """``selector.auto_backend`` (the native lane's per-call lookup, built from the request's
    fields without a Request) keeps and finds decisions under ``choose``'s very key: a decision
    either path made is the one the other finds, one entry per request, none per thread count shared."""
    from unigraph.backends import selector
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=4)
    fields = ("gspmm", "copy_u", "sum", 8, torch.float32, torch.device("cpu"), False, 2)
    lane = selector.auto_backend(g, *fields)
    front = selector.choose(g, Request(*fields))
    assert lane is front
    keys = [k for k in g._cache if isinstance(k, tuple) and k[:2] == ("unigraph.backends", "auto")]
    assert keys == [("unigraph.backends", "auto") + fields]
    g2 = unigraph.Graph(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=4)
    assert selector.choose(g2, Request(*fields)) is selector.auto_backend(g2, *fields)  # the other way round
    assert len([k for k in g2._cache if isinstance(k, tuple) and k[:2] == ("unigraph.backends", "auto")]) == 1
    selector.auto_backend(g, *fields[:-1], 1)  # another thread count: its own decision
    assert len([k for k in g._cache if isinstance(k, tuple) and k[:2] == ("unigraph.backends", "auto")]) == 2
