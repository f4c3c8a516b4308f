"""``unigraph bench FILE``: small files that describe huge graphs are refused before anything is
allocated (stride-0 views, inflating members, node counts no array holds), non-regular files are
refused by their type, a DGL file that crashes DGL's reader is an error naming it, and the bench
command's argument mistakes are one line with exit status 2."""
from __future__ import annotations

import io
import os
import pathlib
import zipfile

import numpy as np
import pytest
import torch

from unigraph import cli
from unigraph.benchmarking.graph_source import GraphSourceError, load
from unigraph.data import limits

EDGES = torch.tensor([[0, 1, 2, 2, 3, 4], [1, 2, 0, 3, 4, 0]])


def _refused(path, match, **kwargs):
    with pytest.raises(GraphSourceError, match=match) as refused:
        load(str(path), **kwargs)
    assert str(refused.value).startswith(str(path)), str(refused.value)
    return str(refused.value)


def test_a_stride_0_view_cannot_claim_200m_edges(tmp_path):
    torch.save(torch.zeros(2, 1, dtype=torch.int64).expand(2, 200_000_000), tmp_path / "view.pt")
    assert (tmp_path / "view.pt").stat().st_size < 4096
    _refused(tmp_path / "view.pt", "elements overlap .*stride-0")


def test_overlapping_views_of_one_storage_are_refused(tmp_path):
    storage = torch.arange(12)
    torch.save({"edge_index": storage[:10].view(2, 5), "num_nodes": storage[1:2].view(())}, tmp_path / "shared.pt")
    _refused(tmp_path / "shared.pt", "different views of overlapping bytes")


def _deflated_zeros(path: pathlib.Path, name: str, shape: tuple, dtype="<i8") -> None:
    """An .npz whose one member is ``zeros(shape)``, deflated, written in chunks (never held whole)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": dtype, "fortran_order": False, "shape": shape})
    remaining = int(np.prod(shape)) * np.dtype(dtype).itemsize
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            chunk = bytes(1 << 22)
            while remaining:
                member.write(chunk[:min(remaining, len(chunk))])
                remaining -= min(remaining, len(chunk))


def test_a_compressed_npz_may_not_inflate_past_its_allowance(tmp_path):
    _deflated_zeros(tmp_path / "bomb.npz", "edge_index", (2, 10_000_000))   # 160 MB of zeros in ~160 KB
    size = (tmp_path / "bomb.npz").stat().st_size
    assert size < 1 << 20
    message = _refused(tmp_path / "bomb.npz", "decompressing its zip members would need 160,000,128 bytes, over the "
                                              "limit of 67,108,864 bytes")
    assert "UNIGRAPH_MAX_LOAD_BYTES" in message and "--max-load-bytes" in message


def test_a_small_compressed_npz_still_loads(tmp_path):
    np.savez_compressed(tmp_path / "small.npz", edge_index=EDGES.numpy())
    assert load(str(tmp_path / "small.npz")).graph.num_edges == 6


@pytest.mark.parametrize("container", ["dict", "pyg"])
def test_a_node_count_no_array_holds_is_refused_naming_the_file(tmp_path, container):
    path = tmp_path / f"{container}.pt"
    if container == "dict":
        torch.save({"edge_index": EDGES, "num_nodes": 2**31 - 1}, path)
    else:
        from torch_geometric.data import Data
        torch.save(Data(edge_index=EDGES, num_nodes=2**31 - 1), path)
    assert path.stat().st_size < 4096
    _refused(path, r"num_nodes = 2,147,483,647 \(8 bytes of row pointers per node\) would need 17,179,869,184 bytes")


def test_a_trusted_file_may_raise_the_limit(tmp_path, monkeypatch):
    torch.save({"edge_index": EDGES, "num_nodes": 10_000_000}, tmp_path / "isolated.pt")
    _refused(tmp_path / "isolated.pt", "over the limit of 67,108,864")
    assert load(str(tmp_path / "isolated.pt"), max_load_bytes=1 << 30).graph.num_nodes == 10_000_000
    monkeypatch.setenv(limits.ENV_VAR, str(1 << 30))
    assert load(str(tmp_path / "isolated.pt")).graph.num_nodes == 10_000_000


def test_compressed_members_of_a_torch_file_are_refused(tmp_path):
    buffer = io.BytesIO()
    torch.save({"edge_index": EDGES}, buffer)
    source = zipfile.ZipFile(io.BytesIO(buffer.getvalue()))
    with zipfile.ZipFile(tmp_path / "deflated.pt", "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            archive.writestr(info.filename, source.read(info.filename))
    _refused(tmp_path / "deflated.pt", "is compressed")


def test_the_legacy_torch_format_is_refused(tmp_path):
    torch.save(EDGES, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    _refused(tmp_path / "legacy.pt", "legacy")


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_bit_flipped_torch_file_is_an_error_naming_it(tmp_path):
    buffer = io.BytesIO()
    torch.save({"edge_index": EDGES, "num_nodes": 5}, buffer)
    data = buffer.getvalue()
    start = data.index(b"data.pkl") + len(b"data.pkl")
    for offset in range(start, start + 160):   # every byte of the pickle, flipped in turn
        for bit in (0x01, 0x80):
            flipped = bytearray(data)
            flipped[offset] ^= bit
            path = tmp_path / "flipped.pt"
            path.write_bytes(bytes(flipped))
            try:
                load(str(path))
            except GraphSourceError as err:
                assert str(err).startswith(str(path))


@pytest.mark.timeout(60)
def test_fifos_and_devices_are_refused_by_their_type(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    _refused(tmp_path / "fifo", "is a fifo, not a regular file")   # never opened: no writer, it would block
    _refused(pathlib.Path("/dev/zero"), "is a device, not a regular file")


def test_a_dgl_file_that_crashes_dgl_is_an_error_naming_it(tmp_path, dgl):
    dgl.save_graphs(str(tmp_path / "graph.bin"), [dgl.graph((EDGES[0], EDGES[1]), num_nodes=5)])
    data = bytearray((tmp_path / "graph.bin").read_bytes())
    data[24:32] = (2**40).to_bytes(8, "little")   # a count DGL's C++ reader allocates for: std::bad_alloc, SIGABRT
    (tmp_path / "crash.bin").write_bytes(bytes(data))
    _refused(tmp_path / "crash.bin", r"DGL's reader crashed on this file \(signal 6, SIGABRT")


def test_a_dgl_file_with_ids_beyond_its_nodes_is_refused(tmp_path, dgl):
    dgl.save_graphs(str(tmp_path / "graph.bin"), [dgl.graph((EDGES[0], EDGES[1]), num_nodes=5)])
    data = bytearray((tmp_path / "graph.bin").read_bytes())
    # the destination array is stored as int64s; put 1000 where the first destination id (1) sits
    needle = EDGES[1].numpy().astype("<i8").tobytes()
    at = bytes(data).index(needle)
    data[at:at + 8] = (1000).to_bytes(8, "little")
    (tmp_path / "ids.bin").write_bytes(bytes(data))
    _refused(tmp_path / "ids.bin", "(outside 0..4|not a readable DGL graph file)")


@pytest.mark.parametrize("arguments, message", [
    (["--device", "cuda"], "--device cuda: no CUDA GPU is visible here"),
    (["--min-run-ms", "nan"], "--min-run-ms must be a finite number >= 0, got nan"),
    (["--max-load-bytes", "0"], "--max-load-bytes must be >= 1"),
    (["--width", "x"], "argument --width: invalid int value: 'x'"),
])
def test_bench_argument_mistakes_are_one_line_with_status_2(capsys, arguments, message):
    if arguments[:2] == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible")
    with pytest.raises(SystemExit) as stop:
        cli.main(["bench", "rmat:100:2", *arguments])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err
    assert err.strip().splitlines() == [f"unigraph bench: error: {err.split('error: ', 1)[1].splitlines()[0]}",
                                        "(see `unigraph bench --help`)"], err
