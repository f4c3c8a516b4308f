"""Partition sets whose checksums were recomputed after a change (the metadata is a checked file,
the parts are listed with their SHA-256: anyone can rewrite both): compressed members, counts the
parts cannot hold, more classes than nodes and non-finite features are refused with the file's name,
before anything of their size is allocated; and the command line refuses them in one line."""
from __future__ import annotations

import io
import json
import shutil
import zipfile

import numpy as np
import pytest

from unigraph.cli import main
from unigraph.data import planted_partition
from unigraph.data.checked_file import read_checked, sha256_file, write_checked
from unigraph.distributed import format as fmt
from unigraph.distributed.local import LocalPartition
from unigraph.distributed.partition import partition_dataset


@pytest.fixture(scope="module")
def part_set(tmp_path_factory):
    out = tmp_path_factory.mktemp("parts")
    partition_dataset(planted_partition(300, num_features=6, num_val=60, num_test=60, seed=0), 2, out, method="random")
    return out


@pytest.fixture
def copy(part_set, tmp_path):
    shutil.copytree(part_set, tmp_path / "set")
    return tmp_path / "set"


def _edit_metadata(directory, edit) -> None:
    path = directory / fmt.METADATA
    meta = json.loads(read_checked(path, fmt.FORMAT))
    edit(meta)
    write_checked(path, fmt.FORMAT, json.dumps(meta).encode())


def _relist(directory, part: int) -> None:
    """Record part ``part``'s new checksum and size in the metadata (as an attacker would)."""
    path = directory / fmt.part_file(part)
    _edit_metadata(directory, lambda m: m["parts"][part].update(sha256=sha256_file(path), bytes=path.stat().st_size))


def test_compressed_features_are_refused(copy):
    path = copy / "part-0.npz"
    source = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            archive.writestr(info.filename, source.read(info.filename))
    _relist(copy, 0)
    with pytest.raises(fmt.PartitionFormatError, match=r"part-0.npz: zip member '.*' is compressed"):
        LocalPartition.load(copy, 0)


def test_a_header_claiming_more_than_its_member_is_refused(copy):
    path = copy / "part-0.npz"
    source = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    with zipfile.ZipFile(path, "w") as archive:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "x.npy":
                data = data.replace(b"'shape': (150, 6)", b"'shape': (150, 9)", 1)
            archive.writestr(info.filename, data)
    _relist(copy, 0)
    with pytest.raises(fmt.PartitionFormatError, match=r"member 'x.npy' is truncated or corrupt"):
        LocalPartition.load(copy, 0)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(num_classes=2**40), "num_classes=1,099,511,627,776 is more than the 300 nodes"),
    (lambda m: m.update(num_features=2**40), "more than its parts hold"),
    (lambda m: m.update(max_in_degree=10**12), "max_in_degree=1,000,000,000,000 is more than the"),
])
def test_counts_the_parts_cannot_hold_are_refused_naming_the_file(copy, edit, message):
    _edit_metadata(copy, edit)
    with pytest.raises(fmt.PartitionFormatError, match=message) as refused:
        fmt.read_metadata(copy)
    assert str(refused.value).startswith(str(copy / fmt.METADATA))


def _nan_features(directory) -> None:
    info = fmt.read_metadata(directory)
    arrays = fmt.load_part_arrays(info, 1)
    arrays["x"] = arrays["x"].copy()
    arrays["x"][3, 2] = np.nan
    entry = fmt.write_part(directory, info.set_id, 1, arrays)
    info.parts[1].update(sha256=entry["sha256"], bytes=entry["bytes"])
    fmt.write_metadata(info)


def test_nan_features_are_refused(copy):
    _nan_features(copy)
    with pytest.raises(fmt.PartitionFormatError, match="part-1.npz: array 'x' holds non-finite features"):
        LocalPartition.load(copy, 1)


@pytest.mark.parametrize("damage, message", [
    (_nan_features, "part-1.npz: array 'x' holds non-finite features"),
    (lambda d: _edit_metadata(d, lambda m: m.update(num_classes=2**40)), "is more than the 300 nodes"),
])
def test_the_command_line_refuses_them_before_any_process_starts(copy, capsys, damage, message):
    damage(copy)
    with pytest.raises(SystemExit) as stop:
        main(["train", "--partitions", str(copy), "--model", "sage"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and len(err.strip().splitlines()) == 2, err
