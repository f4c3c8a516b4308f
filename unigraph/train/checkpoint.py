"""Checkpoints: one file per run (``last.pt``), written atomically, read with ``weights_only=True``.

Format (a dict of tensors, numbers, strings, lists and dicts only, so ``torch.load`` never has to
unpickle an arbitrary object, even from a file of unknown origin)::

    format        "unigraph.train.checkpoint"        version   1
    epoch         epochs completed
    model         the model's state_dict (the whole model, also for pipeline runs)
    optimizer     the optimizer's state_dict; for pipeline runs a list, one per stage
    rng           one capture_rng_state() dict per rank (unigraph.train.rng)
    loader        the mini-batch loader's state ({"epoch": ...}), or None for full-graph runs
    early_stopping, history, config, world (mode, world size, stages, replicas)

A checkpoint is written to a temporary file in the same directory and renamed over the old one,
so a crash mid-write leaves the previous checkpoint intact.
"""
from __future__ import annotations

import os
import pathlib
import tempfile

import torch

FORMAT = "unigraph.train.checkpoint"
VERSION = 1
FILENAME = "last.pt"


def checkpoint_path(directory: str | os.PathLike) -> pathlib.Path:
    return pathlib.Path(directory) / FILENAME


def save_checkpoint(directory: str | os.PathLike, state: dict) -> pathlib.Path:
    """Write ``state`` (plus the format tag) to ``directory/last.pt`` atomically; returns the path."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = checkpoint_path(directory)
    handle, tmp = tempfile.mkstemp(prefix=".last-", suffix=".pt.tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save({"format": FORMAT, "version": VERSION, **state}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(directory: str | os.PathLike) -> dict:
    """Read ``directory/last.pt`` with ``weights_only=True`` and check its format tag."""
    path = checkpoint_path(directory)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint to resume from: {path} does not exist")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{path} is not a unigraph training checkpoint (format tag "
                         f"{state.get('format') if isinstance(state, dict) else type(state).__name__!r})")
    if state.get("version") != VERSION:
        raise ValueError(f"{path} has checkpoint version {state.get('version')}, this unigraph reads version {VERSION}")
    return state


def check_compatible(state: dict, world: dict) -> None:
    """Refuse to resume a run laid out differently (mode, world size, stages, replicas)."""
    saved = state.get("world", {})
    if saved != world:
        raise ValueError(f"the checkpoint was written by a run with {saved}, but this run has {world}; resume with "
                         "the same layout (or start a new run)")
