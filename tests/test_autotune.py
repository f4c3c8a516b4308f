"""``auto-tune``: measures each candidate once per kind of call, keeps the fastest in memory and,
when asked, in a JSON file; the cost model's estimate does not matter once measured.

The candidates are fake backends (scatter kernels with a controlled delay) in a registry of
their own, so timings are large and ordered: 0, 15 and 40 ms extra per call.
"""
from __future__ import annotations

import json
import time

import pytest
import torch

import unigraph
from unigraph import backends as registry
from unigraph import ops
from unigraph.backends import autotune, selector
from unigraph.backends.scatter import ScatterBackend


class DelayedBackend(ScatterBackend):
    """Scatter kernels that sleep first; the cost model is told the opposite of the truth."""

    def __init__(self, name: str, delay_s: float, estimate_us: float):
        self.name, self.delay_s, self._estimate = name, delay_s, estimate_us
        self.calls = 0

    def availability(self):
        return registry.Availability(True, f"fake, {self.delay_s * 1000:.0f} ms per call")

    def estimate_us(self, stats, request):
        return self._estimate

    def gspmm(self, g, op, reduce, u, e):
        self.calls += 1
        time.sleep(self.delay_s)
        return super().gspmm(g, op, reduce, u, e)


@pytest.fixture
def fakes(monkeypatch):
    """A registry of three fakes (the fastest has the worst estimate) and a fresh tuner."""
    made = {"fast": DelayedBackend("fast", 0.0, 900.0), "medium": DelayedBackend("medium", 0.015, 500.0),
            "slow": DelayedBackend("slow", 0.040, 10.0)}
    monkeypatch.setattr(registry, "_REGISTRY", dict(made))
    monkeypatch.setattr(registry, "_STATUS", {})
    monkeypatch.setattr(autotune, "TUNER", autotune.Tuner(repeats=2))
    monkeypatch.delenv(autotune.CACHE_ENV_VAR, raising=False)
    return made


def graph(n=40, seed=0):
    edges = torch.randint(0, n, (2, 4 * n), generator=torch.Generator().manual_seed(seed))
    return unigraph.Graph(edges, num_nodes=n)


def calls(fakes):
    return {name: b.calls for name, b in fakes.items()}


def test_auto_follows_the_estimate_auto_tune_the_clock(fakes):
    g = graph()
    x = torch.randn(40, 8)
    assert unigraph.explain(g, "copy_u", "sum", x).backend == "slow"
    with unigraph.use_backend("auto-tune"):
        out = ops.gspmm(g, "copy_u", "sum", x)
    # each candidate: one warm-up and two timed runs; then the call itself on the winner
    assert calls(fakes) == {"fast": 4, "medium": 3, "slow": 3}
    torch.testing.assert_close(out, ScatterBackend().gspmm(g.tensors(), "copy_u", "sum", x, None)[0])
    measurement = autotune.TUNER.lookup(autotune.signature(g.stats(), selector.Request(
        "gspmm", "copy_u", "sum", 8, torch.float32, torch.device("cpu"))))
    assert measurement.winner == "fast"
    assert measurement.timings_us["fast"] < measurement.timings_us["medium"] < measurement.timings_us["slow"]


def test_measured_once_per_kind_then_cached(fakes):
    x = torch.randn(40, 8)
    unigraph.set_backend("auto-tune")
    ops.gspmm(graph(seed=0), "copy_u", "sum", x)
    after_first = calls(fakes)
    ops.gspmm(graph(seed=0), "copy_u", "sum", x)  # another graph object, same signature: no measuring
    assert calls(fakes) == {**after_first, "fast": after_first["fast"] + 1}
    ops.gspmm(graph(seed=0), "copy_u", "sum", torch.randn(40, 16))  # another feature width: measured anew
    assert calls(fakes)["slow"] == after_first["slow"] + 3


def test_a_differentiated_call_is_measured_apart_from_the_same_call_under_no_grad(fakes):
    """auto-tune times a differentiated call with its backward: its winner is not the forward's."""
    x = torch.randn(40, 8, requires_grad=True)
    with unigraph.use_backend("auto-tune"):
        ops.gspmm(graph(seed=0), "copy_u", "sum", x)
        after_first = calls(fakes)
        with torch.no_grad():
            ops.gspmm(graph(seed=0), "copy_u", "sum", x)   # the same call forward alone: measured anew
    assert calls(fakes)["slow"] == after_first["slow"] + 3
    kinds = [autotune.signature(graph().stats(), selector.Request("gspmm", "copy_u", "sum", 8, torch.float32,
                                                                  torch.device("cpu"), grad))
             for grad in (False, True)]
    assert kinds[1] == kinds[0] + " +backward"
    assert all(autotune.TUNER.lookup(k) is not None for k in kinds)


def test_explain_shows_measurements(fakes):
    g = graph()
    with unigraph.use_backend("auto-tune"):
        before = unigraph.explain(g, "copy_u", "sum", torch.randn(40, 8))
        assert before.backend == "slow" and before.reason.startswith("not measured yet")
        ops.gspmm(g, "copy_u", "sum", torch.randn(40, 8))
        after = unigraph.explain(g, "copy_u", "sum", torch.randn(40, 8))
    assert after.backend == "fast" and after.reason.startswith("fastest measured")
    assert "measured" in str(after) and all(c.measured_us is not None for c in after.candidates)


def test_disk_cache_is_json_written_and_read_back(fakes, tmp_path):
    path = tmp_path / "tune" / "cache.json"
    autotune.enable_disk_cache(path)
    with unigraph.use_backend("auto-tune"):
        ops.gspmm(graph(), "copy_u", "sum", torch.randn(40, 8))
    data = json.loads(path.read_text())
    assert data["version"] == autotune.FORMAT_VERSION
    (entry,) = data["entries"]
    assert entry["winner"] == "fast" and set(entry["timings_us"]) == {"fast", "medium", "slow"}
    assert "gspmm copy_u sum width=8 float32 cpu" in entry["kind"]

    # a new process (a fresh tuner) reads the winner instead of measuring
    fresh = autotune.Tuner()
    fresh.enable_disk_cache(path)
    autotune.TUNER = fresh
    before = calls(fakes)
    with unigraph.use_backend("auto-tune"):
        ops.gspmm(graph(), "copy_u", "sum", torch.randn(40, 8))
    assert calls(fakes) == {**before, "fast": before["fast"] + 1}


def test_cache_file_from_the_environment(fakes, tmp_path, monkeypatch):
    path = tmp_path / "env_cache.json"
    monkeypatch.setenv(autotune.CACHE_ENV_VAR, str(path))
    monkeypatch.setenv(selector.ENV_VAR, "auto-tune")
    ops.gspmm(graph(), "copy_u", "sum", torch.randn(40, 8))
    assert json.loads(path.read_text())["entries"][0]["winner"] == "fast"


def test_a_foreign_cache_file_is_refused(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"version": 99, "entries": []}))
    with pytest.raises(ValueError, match="not a unigraph auto-tune cache"):
        autotune.Tuner().enable_disk_cache(path)


def test_a_winner_that_cannot_run_any_more_is_measured_again(fakes):
    x = torch.randn(40, 8)
    with unigraph.use_backend("auto-tune"):
        ops.gspmm(graph(), "copy_u", "sum", x)
        registry._REGISTRY.pop("fast")
        registry._STATUS.pop("fast", None)
        assert unigraph.explain(graph(), "copy_u", "sum", x).backend == "slow"  # not measured here
        ops.gspmm(graph(seed=0), "copy_u", "sum", x)
    kind = autotune.signature(graph().stats(), selector.Request("gspmm", "copy_u", "sum", 8, torch.float32,
                                                                torch.device("cpu")))
    assert autotune.TUNER.lookup(kind).winner == "medium"


def test_auto_tune_is_a_valid_choice_everywhere(fakes, monkeypatch):
    unigraph.set_backend("auto-tune")
    assert selector.current_choice() == ("auto-tune", "set_backend")
    unigraph.set_backend(None)
    monkeypatch.setenv(selector.ENV_VAR, "auto-tune")
    assert selector.current_choice() == ("auto-tune", selector.ENV_VAR)
    monkeypatch.setenv(selector.ENV_VAR, "auto_tune")
    with pytest.raises(ValueError, match="auto-tune"):
        selector.current_choice()
