"""The one allocation rule of every reader (unigraph.data.limits) and the checked files that use it:
datasets and checkpoints whose checksum was recomputed over a compressed member, a stride-0 or
overlapping view, out-of-range labels, shared splits or NaN features are refused naming the file
and the field; fifos and devices are refused by their type."""
from __future__ import annotations

import io
import os
import zipfile

import pytest
import torch

from unigraph.data import limits, load_dataset, planted_partition, save_dataset
from unigraph.data.checked_file import read_checked, save_torch, write_checked
from unigraph.data.errors import DataFileError
from unigraph.data.storage import FORMAT, VERSION
from unigraph.train import load_checkpoint, save_checkpoint
from unigraph.train.checkpoint import FORMAT as CHECKPOINT, CheckpointError, checkpoint_path


@pytest.fixture(scope="module")
def small():
    return planted_partition(200, num_features=6, num_val=40, num_test=60, seed=2)


def _record(dataset) -> dict:
    return {"format": FORMAT, "version": VERSION, "name": dataset.name, "num_nodes": dataset.num_nodes,
            "num_classes": dataset.num_classes, "edge_index": dataset.graph.edge_index, "x": dataset.x.clone(),
            "y": dataset.y.clone(), "train_mask": dataset.train_mask.clone(), "val_mask": dataset.val_mask.clone(),
            "test_mask": dataset.test_mask.clone()}


def _deflate(payload: bytes) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(payload))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            archive.writestr(info.filename, source.read(info.filename))
    return out.getvalue()


# ---------------------------------------------------------------------------------------------- the rule
def test_the_allowance_is_64_mib_or_64_bytes_per_byte(monkeypatch):
    monkeypatch.delenv(limits.ENV_VAR, raising=False)
    assert limits.allowance(0) == 64 << 20 and limits.allowance(10 << 20) == 640 << 20
    assert limits.allowance(10, override=5) == 5
    monkeypatch.setenv(limits.ENV_VAR, "123")
    assert limits.allowance(10 << 20) == 123
    monkeypatch.setenv(limits.ENV_VAR, "lots")
    with pytest.raises(ValueError, match="UNIGRAPH_MAX_LOAD_BYTES must be a number of bytes"):
        limits.allowance(1)


@pytest.mark.parametrize("make, ok", [
    (lambda: torch.zeros(3, 4), True),
    (lambda: torch.zeros(4, 3).t(), True),                       # transposed: strided, no overlap
    (lambda: torch.zeros(10)[2:8:2], True),
    (lambda: torch.zeros(1).expand(5), False),                   # stride 0
    (lambda: torch.zeros(10).as_strided((4, 3), (1, 1)), False),  # rows fold onto each other
    (lambda: torch.zeros(1, 0).expand(5, 0), True),               # empty: nothing to overlap
])
def test_views_that_overlap_are_refused(make, ok):
    if ok:
        limits.check_tensors("f", {"t": make()}, 1 << 20)
    else:
        with pytest.raises(DataFileError, match="f: field 't' is a view .* whose elements overlap"):
            limits.check_tensors("f", {"t": make()}, 1 << 20)


def test_views_of_one_storage_must_be_the_same_view_or_disjoint():
    base = torch.arange(10.0)
    limits.check_tensors("f", {"a": base, "tied": base}, 1 << 20)           # tied weights: the same view twice
    limits.check_tensors("f", {"a": base[:5], "b": base[5:]}, 1 << 20)       # disjoint halves
    with pytest.raises(DataFileError, match="field 'b' and field 'a' are different views of overlapping bytes"):
        limits.check_tensors("f", {"a": base[:6], "b": base[4:]}, 1 << 20)


@pytest.mark.timeout(60)
def test_only_regular_files_are_opened(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for path, kind in ((tmp_path / "fifo", "a fifo"), ("/dev/zero", "a device"), (tmp_path, "a directory")):
        with pytest.raises(DataFileError, match=f"is {kind}, not a regular file"):
            limits.open_regular(path)
    with pytest.raises(FileNotFoundError):
        limits.regular_size(tmp_path / "missing")


# ---------------------------------------------------------------------------------------------- checked files
def test_a_compressed_member_inside_a_dataset_is_refused(small, tmp_path):
    save_dataset(small, tmp_path / "d.pt")
    payload = read_checked(tmp_path / "d.pt", FORMAT)
    write_checked(tmp_path / "d.pt", FORMAT, _deflate(payload))   # a valid checksum over the deflated archive
    with pytest.raises(DataFileError, match=r"d.pt: zip member '.*' is compressed") as refused:
        load_dataset(tmp_path / "d.pt")
    assert refused.value.path == str(tmp_path / "d.pt")


def test_a_compressed_member_inside_a_checkpoint_is_refused(tmp_path):
    save_checkpoint(tmp_path, {"epoch": 1, "model": {"w": torch.zeros(256, 256)}})
    payload = read_checked(checkpoint_path(tmp_path), CHECKPOINT)
    write_checked(checkpoint_path(tmp_path), CHECKPOINT, _deflate(payload))
    with pytest.raises(CheckpointError, match="is compressed"):
        load_checkpoint(tmp_path)


@pytest.mark.timeout(60)
def test_a_fifo_in_place_of_a_checked_file_is_refused(tmp_path):
    os.mkfifo(tmp_path / "d.pt")
    with pytest.raises((DataFileError, FileNotFoundError), match="(is a fifo|does not exist)"):
        load_dataset(tmp_path / "d.pt")
    os.mkfifo(checkpoint_path(tmp_path))
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["y"].__setitem__(0, 10**9), r"field 'y' holds labels 0\.\.1000000000, outside 0\.\.num_classes-1 = 3"),
    (lambda r: r.update(num_classes=None) or r["y"].__setitem__(0, 500),
     r"outside 0\.\.num_nodes-1 = 199 \(a dataset cannot have more classes than nodes\)"),
    (lambda r: r.update(num_classes=10**6), "field 'num_classes' must be an int in 0..num_nodes"),
    (lambda r: r.update(val_mask=r["train_mask"].clone(), test_mask=r["train_mask"].clone()),
     "fields 'train_mask' and 'val_mask' share"),
    (lambda r: r["test_mask"].__setitem__(int(r["val_mask"].nonzero()[0]), True), "fields 'val_mask' and 'test_mask' share 1 nodes"),
    (lambda r: r["x"].__setitem__((5, 1), float("nan")), "field 'x' holds non-finite features"),
    (lambda r: r.update(num_nodes=10**9), "field 'num_nodes' says 1000000000 but 'x' has shape"),
    (lambda r: r.update(x=torch.zeros(1, 6).expand(200, 6)), "field 'x' is a view"),
])
def test_dataset_content_is_checked_naming_the_field(small, tmp_path, edit, message):
    record = _record(small)
    edit(record)
    if record.get("num_classes", 0) is None:
        del record["num_classes"]
    save_torch(tmp_path / "d.pt", FORMAT, record)
    with pytest.raises(DataFileError, match=message) as refused:
        load_dataset(tmp_path / "d.pt")
    assert str(refused.value).startswith(str(tmp_path / "d.pt"))


def test_the_dataset_round_trips(small, tmp_path):
    save_dataset(small, tmp_path / "d.pt")
    loaded = load_dataset(tmp_path / "d.pt")
    assert torch.equal(loaded.x, small.x) and loaded.num_classes == small.num_classes
