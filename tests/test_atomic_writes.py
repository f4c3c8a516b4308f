"""Saved datasets and checkpoints: a writer killed with SIGKILL mid-write leaves the previous file
intact (and its leftover is cleaned up by the next write); damaged files are refused by name."""
from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from unigraph.data import load_dataset, planted_partition, save_dataset
from unigraph.data.checked_file import MAGIC, load_torch, remove_stale_temporaries
from unigraph.data.errors import DataFileError
from unigraph.train import load_checkpoint, save_checkpoint
from unigraph.train.checkpoint import FORMAT, CheckpointError, checkpoint_path, prepare_directory


@pytest.fixture(scope="module")
def small():
    return planted_partition(300, num_features=8, num_val=60, num_test=100, seed=1)


def same_dataset(a, b) -> bool:
    return (a.name == b.name and torch.equal(a.graph.edge_index, b.graph.edge_index)
            and all(torch.equal(getattr(a, f), getattr(b, f)) for f in ("x", "y", "train_mask", "val_mask", "test_mask")))


# ---------------------------------------------------------------- damaged files are refused by name

def damage(path: pathlib.Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "overwrite the middle":
        middle = len(data) // 2
        data[middle:middle + 16] = bytes(16)
    elif how == "flip one bit":
        data[len(data) - 100] ^= 0x01
    elif how == "truncate":
        data = data[: len(data) * 2 // 3]
    elif how == "append":
        data += b"tail"
    elif how == "break the header":
        data[len(MAGIC) + 3] = ord("#")
    path.write_bytes(bytes(data))


HOW = ["overwrite the middle", "flip one bit", "truncate", "append", "break the header"]
MESSAGE = {"overwrite the middle": "checksum does not match", "flip one bit": "checksum does not match",
           "truncate": "is truncated", "append": "has bytes after", "break the header": "damaged header"}


@pytest.mark.parametrize("how", HOW)
def test_damaged_dataset_is_refused_naming_the_file(small, tmp_path, how):
    path = tmp_path / "data.pt"
    save_dataset(small, path)
    damage(path, how)
    with pytest.raises(DataFileError, match=MESSAGE[how]) as caught:
        load_dataset(path)
    assert caught.value.path == str(path) and str(caught.value).startswith(str(path))


@pytest.mark.parametrize("how", HOW)
def test_damaged_checkpoint_is_refused_naming_the_file(tmp_path, how):
    save_checkpoint(tmp_path, {"epoch": 1, "model": {"w": torch.randn(64, 64)}})
    damage(checkpoint_path(tmp_path), how)
    with pytest.raises(CheckpointError, match=MESSAGE[how]) as caught:
        load_checkpoint(tmp_path)
    assert caught.value.path == str(checkpoint_path(tmp_path))


def test_a_file_of_another_kind_is_refused(small, tmp_path):
    save_checkpoint(tmp_path, {"epoch": 1})
    with pytest.raises(DataFileError, match="holds a 'unigraph.train.checkpoint', not a 'unigraph.NodeDataset'"):
        load_dataset(checkpoint_path(tmp_path))


def test_broadcast_views_cannot_claim_sizes_the_file_does_not_hold(small, tmp_path):
    from unigraph.data.checked_file import save_torch
    from unigraph.data.storage import FORMAT, VERSION
    huge = torch.zeros(1, dtype=torch.bool).expand(10 ** 9)  # a stride-0 view: 1 byte in the file, 1e9 nodes claimed
    record = {"format": FORMAT, "version": VERSION, "name": "bomb", "num_nodes": 10 ** 9,
              "edge_index": torch.zeros(2, 0, dtype=torch.long), "x": torch.zeros(1, 1).expand(10 ** 9, 1),
              "y": torch.zeros(1, dtype=torch.long).expand(10 ** 9), "train_mask": huge,
              "val_mask": huge, "test_mask": huge}
    save_torch(tmp_path / "bomb.pt", FORMAT, record)
    assert (tmp_path / "bomb.pt").stat().st_size < 10_000
    with pytest.raises(DataFileError, match="field 'x' is a view of shape"):
        load_dataset(tmp_path / "bomb.pt")


# ---------------------------------------------------------------- SIGKILL mid-write

WRITER = """
import os, sys, time
from unigraph.data import planted_partition, save_dataset
target = sys.argv[1]
save_dataset(planted_partition(310, num_features=8, num_val=60, num_test=100, seed=1), target)
real_fsync = os.fsync
def slow_fsync(fd):  # the new file is written but not yet renamed: the moment a kill hurts most
    print("WRITING", flush=True)
    time.sleep(120)
    real_fsync(fd)
os.fsync = slow_fsync
save_dataset(planted_partition(320, num_features=8, num_val=60, num_test=100, seed=1), target)
print("FINISHED", flush=True)
"""


def test_sigkill_mid_write_keeps_the_previous_dataset(small, tmp_path):
    target = tmp_path / "data.pt"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "WRITING"
        writer.send_signal(signal.SIGKILL)
        assert writer.wait(timeout=60) == -signal.SIGKILL
    finally:
        writer.kill()
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1 and leftovers[0].stat().st_size > 1000  # the killed writer's new file
    assert load_dataset(target).num_nodes == 310  # the previous version, intact
    save_dataset(small, target)
    assert same_dataset(load_dataset(target), small)
    assert not leftovers[0].exists()  # the next write removed what the killed writer left


LOOPING_WRITER = """
import sys
import torch
from unigraph.train import save_checkpoint
directory = sys.argv[1]
weights = [torch.full((1024, 1024), float(i)) for i in (1, 2)]  # 4 MB checkpoints
print("READY", flush=True)
i = 0
while True:
    save_checkpoint(directory, {"epoch": i % 2 + 1, "model": {"w": weights[i % 2]}})
    i += 1
"""


def test_sigkill_at_random_moments_never_leaves_a_partial_checkpoint(tmp_path):
    save_checkpoint(tmp_path, {"epoch": 1, "model": {"w": torch.full((1024, 1024), 1.0)}})
    rng = random.Random(5)
    for _ in range(2):
        writer = subprocess.Popen([sys.executable, "-c", LOOPING_WRITER, str(tmp_path)], stdout=subprocess.PIPE,
                                  text=True)
        try:
            assert writer.stdout.readline().strip() == "READY"
            time.sleep(rng.uniform(0.05, 0.5))
            writer.send_signal(signal.SIGKILL)
            writer.wait(timeout=60)
        finally:
            writer.kill()
        state = load_torch(checkpoint_path(tmp_path), FORMAT)  # complete and verified, whichever version
        assert torch.equal(state["model"]["w"], torch.full((1024, 1024), float(state["epoch"])))
    save_checkpoint(tmp_path, {"epoch": 3})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_live_writers_temporaries_are_left_alone(tmp_path):
    target = tmp_path / "file"
    mine = tmp_path / f".file.{os.getpid()}.abcd.tmp"
    parent = tmp_path / f".file.{os.getppid()}.abcd.tmp"  # a live process other than this one
    dead = tmp_path / ".file.999999999.abcd.tmp"
    for path in (mine, parent, dead):
        path.write_bytes(b"x")
    assert remove_stale_temporaries(target) == [dead]
    assert mine.exists() and parent.exists()


def test_legacy_checkpoint_leftovers_are_removed(tmp_path):
    (tmp_path / ".last-abc123.pt.tmp").write_bytes(b"partial")
    save_checkpoint(tmp_path, {"epoch": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_checkpoint_directory_is_checked_up_front(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    with pytest.raises(CheckpointError, match="is a file, not a directory"):
        prepare_directory(a_file)
    with pytest.raises(CheckpointError, match="cannot hold checkpoints"):
        prepare_directory(a_file / "below")
    assert prepare_directory(tmp_path / "new" / "dir").is_dir()
