"""OGB folders: a small gzip file of huge text is refused before it is inflated past its allowance
(the count files may hold 4 KiB), counts no file can fill are refused, and a table is parsed
without a Python object per line (the 150 MB count file of issue 28 ran past 2.5 GB and 300 s)."""
from __future__ import annotations

import gzip
import os
import time

import pytest

from test_ogb_dataset import write_csv_gz, write_ogb
from unigraph.data import DataFormatError, read_ogb_node
from unigraph.data.text_table import read_table


def _gzip_repeat(path, line: bytes, total_bytes: int) -> None:
    """A gzip file of ``line`` repeated to ``total_bytes`` of text, written in chunks."""
    chunk = line * (1 << 20 // len(line))
    with gzip.open(path, "wb", compresslevel=9) as file:
        for _ in range(total_bytes // len(chunk)):
            file.write(chunk)


@pytest.mark.parametrize("text_bytes, message", [
    (20 << 20, r"num-node-list.csv.gz is \d+ bytes, over the limit of 4096"),          # ~20 KB of gzip
    (1 << 20, "num-node-list.csv.gz decompresses to more than 4096 bytes"),           # ~1 KB of gzip
])
def test_a_count_file_of_megabytes_is_refused_at_once(tmp_path, text_bytes, message):
    folder = write_ogb(tmp_path, "ogbn-arxiv")
    _gzip_repeat(folder / "raw" / "num-node-list.csv.gz", b"1\n", text_bytes)
    began = time.perf_counter()
    with pytest.raises(DataFormatError, match=message):
        read_ogb_node(tmp_path, "ogbn-arxiv")
    assert time.perf_counter() - began < 10


def test_a_gzip_file_may_not_inflate_past_its_allowance(tmp_path):
    folder = write_ogb(tmp_path, "ogbn-arxiv")
    _gzip_repeat(folder / "raw" / "node-label.csv.gz", b"0\n", 80 << 20)
    with pytest.raises(DataFormatError, match=r"node-label.csv.gz decompresses to more than 67108864 bytes, over the "
                                              r"limit of 67,108,864 bytes \(max\(64 MiB, 64 x"):
        read_ogb_node(tmp_path, "ogbn-arxiv")


def test_counts_no_file_can_fill_are_refused(tmp_path):
    folder = write_ogb(tmp_path, "ogbn-arxiv")
    write_csv_gz(folder / "raw" / "num-node-list.csv.gz", [10**12])
    with pytest.raises(DataFormatError, match="num-node-list.csv.gz says 1,000,000,000,000, more rows than"):
        read_ogb_node(tmp_path, "ogbn-arxiv")


@pytest.mark.timeout(60)
def test_fifos_are_refused(tmp_path):
    folder = write_ogb(tmp_path, "ogbn-arxiv")
    os.remove(folder / "raw" / "node-label.csv.gz")
    os.mkfifo(folder / "raw" / "node-label.csv.gz")
    with pytest.raises(DataFormatError, match="node-label.csv.gz: is a fifo, not a regular file"):
        read_ogb_node(tmp_path, "ogbn-arxiv")


def test_the_table_parser_names_bad_lines_and_keeps_the_values(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"1,2\r\n3,4\n\n")
    assert read_table(path, integer=True).tolist() == [[1, 2], [3, 4]]
    path.write_bytes(b"1,2\n3\n")
    with pytest.raises(DataFormatError, match="line 2 has 1 fields but line 1 has 2"):
        read_table(path, integer=True)
    path.write_bytes(b"1,2\n3,x\n")
    with pytest.raises(DataFormatError, match="line 2: 'x' is not a number"):
        read_table(path, integer=True)
    path.write_bytes(b"1\n\n2\n")
    with pytest.raises(DataFormatError, match="line 2: '' is not a number"):
        read_table(path, integer=True)
    path.write_bytes(b"1.5\nnan\n")
    assert read_table(path, integer=False, allow_nan=True).shape == (2, 1)
    with pytest.raises(DataFormatError, match="line 1: '1.5' is not an integer"):
        read_table(path, integer=True)
