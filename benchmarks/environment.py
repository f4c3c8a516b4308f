"""What every benchmark script records and how it writes results: re-exported from
:mod:`unigraph.benchmarking` (the one place for these rules, shared with ``unigraph bench``), plus
the ``--out`` convention of the scripts in this folder.

``--out``: without it a script writes to ``benchmarks/results/scratch/`` (git-ignored); a
``--quick`` run may not write into ``benchmarks/results/`` itself; only an explicit ``--out
benchmarks/results`` of a full run replaces the committed results (see
:mod:`unigraph.benchmarking.output`).
"""
from __future__ import annotations

import argparse
import pathlib
import statistics

from unigraph.benchmarking import output
from unigraph.benchmarking.environment import (available_memory_gb, describe, finish, load_average, machine,  # noqa: F401
                                               optional_module, peak_memory_gb, set_threads, synchronize,
                                               thread_counts, versions)

RESULTS = pathlib.Path(__file__).resolve().parent / "results"  # the committed results


def add_out_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=pathlib.Path, default=None,
                        help="folder for the results (default: benchmarks/results/scratch, git-ignored; pass "
                             "--out benchmarks/results to replace the committed results with a full run)")


def out_dir(args) -> pathlib.Path:
    """The folder this run writes to (ValueError for a --quick run aimed at the committed results)."""
    return output.results_dir(args.out, RESULTS, quick=bool(getattr(args, "quick", False)))


def finish_arguments(parser: argparse.ArgumentParser, args, positive: tuple[str, ...]) -> None:
    """The checks every script's arguments end with: each of ``positive`` at least 1, and
    ``args.out`` resolved by :func:`out_dir` (errors through ``parser.error``)."""
    for name in positive:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    try:
        args.out = out_dir(args)
    except ValueError as err:
        parser.error(str(err))


def write_report(result: dict, out: pathlib.Path, name: str, write_markdown) -> None:
    """``out/name.json`` (everything) and ``out/name.md`` (``write_markdown(result, path)``), written
    atomically, then print the markdown."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    output.write_json(out / f"{name}.json", result)
    write_markdown(result, out / f"{name}.md")
    print((out / f"{name}.md").read_text())


def side_by_side(times: dict[str, list[float]], warmup: int, peer: str) -> dict:
    """A row of interleaved step times (ms) per library after ``warmup`` steps: median, min and
    max of each, and ``speedup`` = the peer's median / unigraph's."""
    row = {}
    for library, ms in times.items():
        timed = ms[warmup:]
        row[library] = {"ms_median": statistics.median(timed), "ms_min": min(timed), "ms_max": max(timed)}
    row["speedup"] = row[peer]["ms_median"] / row["unigraph"]["ms_median"]
    return row


def timing_cell(timing: dict) -> str:
    """``median (min - max)`` of a :func:`side_by_side` entry, for the markdown tables."""
    return f"{timing['ms_median']:.3f} ({timing['ms_min']:.3f} - {timing['ms_max']:.3f})"
