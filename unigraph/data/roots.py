"""Where a dataset's files are, given the folder a user names.

Users point at different levels of the same tree: the folder of the raw files itself, or PyG's
``root`` (files in ``root/Cora/raw``), with the dataset's folder in any letter case. These helpers
look in that short list of places, in order, and return the first that holds the files; if none
does they return the folder as given, so the reader reports what is missing there.
"""
from __future__ import annotations

import os
import pathlib
from typing import Callable


def candidate_folders(root: pathlib.Path, name: str) -> list[pathlib.Path]:
    """``root``, ``root/raw``, and ``root/<name>``, ``root/<name>/raw`` for every child of ``root``
    whose name is ``name`` in any letter case."""
    out = [root, root / "raw"]
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and child.name.lower() == name.lower():
                out += [child, child / "raw"]
    return out


def find_folder(root: str | os.PathLike, name: str, holds: Callable[[pathlib.Path], bool]) -> pathlib.Path:
    root = pathlib.Path(root)
    for folder in candidate_folders(root, name):
        if folder.is_dir() and holds(folder):
            return folder
    return root


def planetoid_folder(root: str | os.PathLike, name: str) -> pathlib.Path:
    """The folder holding ``ind.<name>.x`` (name lower-case, as the files are named)."""
    return find_folder(root, name, lambda folder: (folder / f"ind.{name.lower()}.x").is_file())


def tu_location(root: str | os.PathLike, name: str) -> tuple[pathlib.Path, str]:
    """``(folder, prefix)`` of a TU dataset: the folder holding ``<prefix>_A.txt`` where ``prefix``
    is ``name`` in any letter case (TU files are named ``MUTAG_A.txt``; users type ``mutag``)."""
    def prefix_in(folder: pathlib.Path) -> str | None:
        wanted = f"{name.lower()}_a.txt"
        matches = sorted(p.name[:-len("_A.txt")] for p in folder.glob("*_A.txt") if p.name.lower() == wanted)
        return matches[0] if matches else None

    folder = find_folder(root, name, lambda f: prefix_in(f) is not None)
    return folder, (prefix_in(folder) if folder.is_dir() else None) or name
