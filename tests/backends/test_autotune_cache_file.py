"""The auto-tune cache file (``UNIGRAPH_AUTOTUNE_CACHE``) read as an untrusted file: every broken
variant is a ValueError naming the file (never a raw JSONDecodeError, KeyError, TypeError or
RecursionError), and /dev/zero or a fifo is refused by its type instead of read forever."""
from __future__ import annotations

import json
import os

import pytest

from unigraph.backends import autotune

GOOD_ENTRY = {"kind": "k", "winner": "scatter", "timings_us": {"scatter": 1.0, "sparse": 2.0}, "timed": "fwd"}


def _cache(**changes) -> str:
    entry = {**GOOD_ENTRY, **changes}
    return json.dumps({"version": autotune.FORMAT_VERSION, "entries": [{k: v for k, v in entry.items() if v != "-"}]})


VARIANTS = {
    "truncated": _cache()[:-7],
    "not utf-8": b"\xff\xfe{\x00",
    "deep nesting": "[" * 200_000,
    "top level list": "[]",
    "entries not a list": json.dumps({"version": autotune.FORMAT_VERSION, "entries": {"a": 1}}),
    "missing keys": _cache(winner="-"),
    "kind of wrong type": _cache(kind=5),
    "timings of wrong type": _cache(timings_us=[1, 2]),
    "nan timing": _cache(timings_us={"scatter": float("nan")}),
    "negative timing": _cache(timings_us={"scatter": -1.0}),
    "winner not timed": _cache(winner="triton_node"),
    "unknown timed": _cache(timed="backward"),
    "extra key": _cache(extra=1),
    "entry not a dict": json.dumps({"version": autotune.FORMAT_VERSION, "entries": [3]}),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_broken_cache_is_refused_naming_the_file(tmp_path, variant):
    path = tmp_path / "cache.json"
    content = VARIANTS[variant]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError) as refused:
        autotune.Tuner().enable_disk_cache(path)
    assert not isinstance(refused.value, (json.JSONDecodeError, UnicodeDecodeError))   # both are ValueErrors
    assert str(refused.value).startswith(str(path)), str(refused.value)


def test_the_good_cache_loads(tmp_path):
    path = tmp_path / "cache.json"
    path.write_text(_cache())
    tuner = autotune.Tuner()
    tuner.enable_disk_cache(path)
    assert tuner.lookup("k").winner == "scatter"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_devices_and_fifos_from_the_environment_are_refused(tmp_path, monkeypatch, special):
    if special == "fifo":
        special = str(tmp_path / "fifo")
        os.mkfifo(special)
    monkeypatch.setenv(autotune.CACHE_ENV_VAR, special)
    with pytest.raises(ValueError, match=f"{special}: is a (device|fifo), not a regular file"):
        autotune.Tuner().lookup("k")


def test_a_cache_over_the_limit_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "cache.json"
    path.write_text(_cache())
    monkeypatch.setenv("UNIGRAPH_MAX_LOAD_BYTES", "50")
    with pytest.raises(ValueError, match=r"cache.json: the auto-tune cache is \d+ bytes, over the limit of 50"):
        autotune.Tuner().enable_disk_cache(path)
