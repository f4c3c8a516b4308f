"""Where benchmark results go, and how they are written.

The rule: ``benchmarks/results/`` holds the committed results, each produced by a documented
command on a quiet machine. Nothing replaces them by accident:

* a run **without an explicit** ``--out`` writes to ``benchmarks/results/scratch/`` (git-ignored);
* a ``--quick`` (smoke) run is refused if ``--out`` points into the committed folder itself;
* only an explicit ``--out benchmarks/results`` of a full run replaces a committed file.

Files are written atomically (a temporary file in the same folder, then ``os.replace``), so an
interrupted run never leaves half a results file behind.
"""
from __future__ import annotations

import json
import os
import pathlib

from unigraph.data import checked_file

SCRATCH = "scratch"


def results_dir(out: str | os.PathLike | None, committed: pathlib.Path, *, quick: bool) -> pathlib.Path:
    """The folder a run writes to: ``out`` when given, else ``committed/scratch``.

    Raises ValueError for a ``quick`` run whose ``out`` is the committed folder (smoke figures
    must not replace measured ones).
    """
    committed = pathlib.Path(committed).resolve()
    if out is None:
        return committed / SCRATCH
    out = pathlib.Path(out).resolve()
    if quick and out == committed:
        raise ValueError(f"--quick results are smoke figures and may not replace the committed results in {committed}; "
                         f"drop --out (they go to {committed / SCRATCH}) or give another folder")
    return out


def write_text(path: pathlib.Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (creating its folder; :mod:`unigraph.data.checked_file`'s rule)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with checked_file.atomic_write(path) as file:
        file.write(text.encode())


def write_json(path: pathlib.Path, result: dict) -> None:
    write_text(path, json.dumps(result, indent=1, default=str) + "\n")


def write_report(result: dict, out: pathlib.Path, name: str, markdown: str) -> list[pathlib.Path]:
    """``out/name.json`` (everything) and ``out/name.md`` (``markdown``); returns both paths."""
    paths = [pathlib.Path(out) / f"{name}.json", pathlib.Path(out) / f"{name}.md"]
    write_json(paths[0], result)
    write_text(paths[1], markdown)
    return paths
