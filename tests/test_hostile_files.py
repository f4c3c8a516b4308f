"""Hostile and inconsistent Planetoid files: each attack or fault of issue 12 is reproduced and
must end in a :class:`DataFileError` naming the file, never a crash, a memory bomb or a dataset
that is silently wrong. Attacks that crashed the interpreter run in a subprocess, so that a
regression shows up as a signal instead of killing the test run.

The files are a tiny Planetoid set written here (no downloads, no shared files needed).
"""
from __future__ import annotations

import collections
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from unigraph.data import Planetoid, UnsafePickleError
from unigraph.data.errors import DataFileError
from unigraph.data.restricted_pickle import restricted_load

pytest.importorskip("scipy.sparse")
from planetoid_files import CLASSES, FEATURES, NUM_ALL, NUM_TEST, tiny_parts, write_planetoid  # noqa: E402

def refused(folder, part, match):
    """Planetoid refuses with a DataFileError naming ``ind.cora.<part>`` and saying ``match``."""
    with pytest.raises(DataFileError, match=match) as caught:
        Planetoid(folder, "cora")
    assert caught.value.path.endswith(f"ind.cora.{part}"), caught.value
    return caught.value


def test_the_tiny_set_loads(tmp_path):
    ds = Planetoid(write_planetoid(tmp_path / "raw"), "cora")
    assert ds.num_nodes == NUM_ALL + NUM_TEST + 2 and int(ds.test_mask.sum()) == NUM_TEST


# ---------------------------------------------------------------- crafted pickles (attacks)

class EvilDtype:
    """A void dtype whose state hides an object field behind flags=0 (so hasobject is False)."""

    def __reduce__(self):
        return (np.dtype, ("V8", False, True), (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0))


class EvilArray:
    """An array of that dtype whose bytes are a pointer the attacker chose."""

    def __reduce__(self):
        return (np.ndarray((0,)).__reduce__()[0], (np.ndarray, (0,), b"b"), (1, (4, 1), EvilDtype(), False, b"A" * 32))


def test_hidden_object_field_is_refused_in_a_subprocess(tmp_path):
    """Before the fix this segfaulted at astype (an attacker-chosen pointer dereferenced)."""
    payload = tmp_path / "evil.pkl"
    payload.write_bytes(pickle.dumps(EvilArray(), protocol=2))
    folder = write_planetoid(tmp_path / "raw", allx=payload.read_bytes())
    script = textwrap.dedent(f"""
        import numpy as np
        from unigraph.data import Planetoid, UnsafePickleError
        from unigraph.data.restricted_pickle import restricted_load
        for attempt in (lambda: restricted_load(open({str(payload)!r}, "rb").read()).astype(np.float32),
                        lambda: Planetoid({folder!r}, "cora")):
            try:
                attempt()
            except UnsafePickleError as err:
                print("REFUSED", err)
            else:
                print("ACCEPTED")
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"the loader crashed (return code {run.returncode}): {run.stderr[-2000:]}"
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("REFUSED") for line in lines), run.stdout
    assert "refusing numpy.dtype('V8'" in lines[0] and "ind.cora.allx" in lines[1]


def test_dtype_fields_are_refused_whatever_the_flags():
    """The check is on the dtype itself: fields/names in the state are refused with any flags."""
    for flags in (0, 1, 16, 63):
        class Flagged:
            def __reduce__(self, flags=flags):
                return (np.dtype, ("f8", False, True), (3, "<", None, ("a",), {"a": (np.dtype("f4"), 0)}, 8, 1, flags))
        with pytest.raises(UnsafePickleError, match="subarray, names, fields"):
            restricted_load(pickle.dumps(Flagged(), protocol=2))


class Call:
    """A pickle that calls ``func(*args)``."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


@pytest.mark.parametrize("payload, match", [
    (Call(np.ndarray, (10 ** 6,)), "refusing to call numpy.ndarray"),            # uninitialised memory
    (Call(list, list(range(10))), "refusing to call list"),                     # copies multiply a list
    (Call(np.ndarray((0,)).__reduce__()[0], np.ndarray, (10 ** 9,), b"b"), "uses only _reconstruct"),
    (Call(np.dtype, "f8", True, True), "align=True"),
    (Call(collections.defaultdict, np.ndarray), "defaultdict\\(numpy.ndarray\\)"),
])
def test_constructors_only_in_the_format_s_own_calls(payload, match):
    with pytest.raises(UnsafePickleError, match=match):
        restricted_load(pickle.dumps(payload, protocol=2))


def test_array_bytes_must_match_shape_and_dtype():
    class Short:
        def __reduce__(self):
            return (np.ndarray((0,)).__reduce__()[0], (np.ndarray, (0,), b"b"),
                    (1, (10 ** 6, 1000), np.dtype("f8"), False, b"\0" * 16))
    with pytest.raises(UnsafePickleError, match="needs 8000000000 bytes of data, the file holds 16"):
        restricted_load(pickle.dumps(Short(), protocol=2))


def test_real_numpy_pickles_still_load():
    for array in (np.arange(6, dtype=">i4").reshape(2, 3), np.asfortranarray(np.ones((3, 2))), np.array([True, False])):
        loaded = restricted_load(pickle.dumps(array, protocol=2))
        assert np.array_equal(loaded, array) and loaded.dtype.isnative and loaded.flags.writeable


# ---------------------------------------------------------------- memory bombs from tiny files

def test_shared_neighbour_lists_are_refused(tmp_path):
    shared = list(range(1000))
    bomb = collections.defaultdict(list, {node: shared for node in range(NUM_ALL)})  # 5.2e5 edges from ~3 kB
    error = refused(write_planetoid(tmp_path, graph=bomb), "graph", "shares its neighbour list")
    assert len(pickle.dumps(bomb, protocol=2)) < 8000, error


def test_csr_shape_bomb_is_refused_before_allocating(tmp_path):
    allx = tiny_parts()["allx"]
    allx._shape = (NUM_ALL, 10 ** 7)  # 5.2e9 dense entries (21 GB) from a 6 kB file
    refused(write_planetoid(tmp_path, allx=allx), "allx", r"would expand to 5200000000 dense entries")


def test_far_test_index_is_refused(tmp_path):
    index = b"\n".join(tiny_parts()["test.index"].split(b"\n")[:-1] + [b"3000000"])
    refused(write_planetoid(tmp_path, **{"test.index": index}), "test.index", "leaves 2999469 nodes without data")


# ---------------------------------------------------------------- inconsistent files

def test_ally_shorter_than_allx(tmp_path):
    refused(write_planetoid(tmp_path, ally=tiny_parts()["ally"][:-160]), "ally", "has 360 rows but ind.cora.allx has 520")


def test_labels_that_are_not_one_hot(tmp_path):
    garbage = np.random.default_rng(1).integers(-2 ** 31, 2 ** 31, (NUM_ALL, CLASSES)).astype(np.int32)  # "uninitialised"
    refused(write_planetoid(tmp_path, ally=garbage), "ally", "one-hot")


def test_float_node_ids(tmp_path):
    graph = tiny_parts()["graph"]
    graph[3].append(7.9)  # was truncated to 7
    refused(write_planetoid(tmp_path, graph=graph), "graph", r"node ids must be integers, found 7.9 \(float\)")


def test_duplicate_test_index(tmp_path):
    lines = tiny_parts()["test.index"].split(b"\n")
    refused(write_planetoid(tmp_path, **{"test.index": b"\n".join(lines[:-1] + lines[:1])}), "test.index", "more than once")


def test_nan_features(tmp_path):
    tx = tiny_parts()["tx"].toarray()
    tx[2, 1] = np.nan
    refused(write_planetoid(tmp_path, tx=tx), "tx", "NaN or infinite")


def test_y_must_repeat_ally(tmp_path):
    y = tiny_parts()["y"].copy()
    y[0] = np.roll(y[0], 1)
    refused(write_planetoid(tmp_path, y=y), "y", "should repeat the first 6 rows of ind.cora.ally")


def test_feature_width_mismatch(tmp_path):
    refused(write_planetoid(tmp_path, tx=np.zeros((NUM_TEST, FEATURES + 1), np.float32)), "tx",
            "has 6 columns but ind.cora.allx has 5")


def test_graph_node_out_of_range(tmp_path):
    graph = tiny_parts()["graph"]
    graph[1].append(10 ** 20)
    refused(write_planetoid(tmp_path, graph=graph), "graph", "beyond the int64 range")


@pytest.mark.parametrize("part", ["x", "ally", "graph", "test.index"])
def test_truncated_and_empty_files(tmp_path, part):
    original = (pickle.dumps(tiny_parts()[part], protocol=2) if part != "test.index" else tiny_parts()[part])
    for cut in (0, len(original) // 2):
        folder = write_planetoid(tmp_path / str(cut), **{part: original[:cut]})
        refused(folder, part, "damaged or truncated|holds no test node ids|lists 6 test nodes")


# ---------------------------------------------------------------- random corruption

CORRUPTION_SCRIPT = """
import os, pathlib, random, sys
from unigraph.data import Planetoid
from unigraph.data.errors import DataFileError
folder, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
originals = {p: p.read_bytes() for p in folder.iterdir()}
rng = random.Random(12)
outcomes = {"refused": 0, "loaded": 0}
for round in range(rounds):
    victim = rng.choice(sorted(originals))
    data = bytearray(originals[victim])
    for _ in range(rng.choice((1, 2, 8))):
        data[rng.randrange(len(data))] = rng.randrange(256)
    if rng.random() < 0.3:
        data = data[: rng.randrange(len(data))]
    victim.write_bytes(bytes(data))
    try:
        Planetoid(folder, "cora")
        outcomes["loaded"] += 1        # a flip in a value the format allows (a feature bit, an id)
    except DataFileError as err:
        assert err.path == str(victim), (err.path, victim)
        outcomes["refused"] += 1
    victim.write_bytes(originals[victim])
print(outcomes)
"""


def test_random_corruption_never_crashes(tmp_path):
    """Flipped bytes and truncations in any file: a DataFileError naming that file, or a load
    (when the flip lands in a value the format allows), never another exception or a signal.
    ``UNIGRAPH_FUZZ_ROUNDS`` raises the number of rounds (default 150)."""
    folder = write_planetoid(tmp_path / "raw")
    rounds = int(os.environ.get("UNIGRAPH_FUZZ_ROUNDS", "150"))
    run = subprocess.run([sys.executable, "-c", CORRUPTION_SCRIPT, folder, str(rounds)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"return code {run.returncode}: {run.stderr[-3000:]}"
    outcomes = eval(run.stdout.strip().splitlines()[-1])  # noqa: S307 - our own script's dict
    assert outcomes["refused"] > rounds // 2, outcomes


def test_loaded_tensors_are_what_the_files_say(tmp_path):
    parts = tiny_parts()
    ds = Planetoid(write_planetoid(tmp_path), "cora")
    assert torch.equal(ds.x[:NUM_ALL], torch.from_numpy(parts["allx"].toarray()))
    assert torch.equal(ds.y[:NUM_ALL], torch.from_numpy(parts["ally"].argmax(1)).long())
