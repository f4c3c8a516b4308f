"""Checkpoints: one file per run (``last.pt``), written atomically and checksummed, read with
``weights_only=True`` and checked before anything is restored.

Format (a dict of tensors, numbers, strings, lists and dicts only, so ``torch.load`` never has to
unpickle an arbitrary object, even from a file of unknown origin), inside a checked file
(:mod:`unigraph.data.checked_file`: SHA-256 of every byte, written to a temporary file that is
renamed over the old one, so a crash or SIGKILL mid-write leaves the previous checkpoint intact;
a killed writer's temporary file is removed by the next write)::

    format        "unigraph.train.checkpoint"        version   2
    epoch         epochs completed (>= 1)
    model         the model's state_dict (the whole model, also for pipeline runs)
    optimizer     the optimizer's state_dict; for pipeline runs a list, one per stage
    rng           one capture_rng_state() dict per rank (unigraph.train.rng)
    loader        the mini-batch loader's state ({"epoch": ...}), or None for full-graph runs
    early_stopping, stopped_early, history (one EpochMetrics dict per epoch), config,
    world (mode, world size, stages, replicas)

:func:`load_checkpoint` refuses, with a :class:`CheckpointError` naming the file, a file that is
missing, truncated, corrupted or foreign, one that lacks a key or holds a mistyped one, a history
that does not count the epochs 1..epoch, an epoch outside ``1..epochs`` of the resuming run, and
content a run never holds (:mod:`unigraph.train.checkpoint_checks`: NaN weights or optimizer
state, accuracies outside [0, 1], short RNG states, ...). Before restoring, the trainers check the
state against their model and fresh optimizer (:func:`check_restorable`: keys, shapes,
hyperparameters), so a bad value is a ``CheckpointError`` naming the field, never a traceback.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import tempfile

import torch

from unigraph.data.checked_file import load_torch, save_torch
from unigraph.data.errors import DataFileError
from unigraph.train import checkpoint_checks
from unigraph.train.metrics import EpochMetrics

FORMAT = "unigraph.train.checkpoint"
VERSION = 2  # 2: checked file (atomic, checksummed); version 1 files were plain torch.save archives
FILENAME = "last.pt"
_LEGACY_TEMPORARIES = ".last-*.pt.tmp"  # what version 1 writers left behind when killed
_EARLY_STOPPING_KEYS = ("patience", "best_acc", "best_loss", "best_epoch", "best_test_acc", "bad_epochs", "best_state")
_HISTORY_KEYS = tuple(field.name for field in dataclasses.fields(EpochMetrics))


class CheckpointError(DataFileError):
    """A checkpoint cannot be written or resumed from; the message names the file or directory."""


class Checkpoint(dict):
    """The loaded state (a plain dict of the format's keys) that remembers the file it came from."""

    path: pathlib.Path


def checkpoint_path(directory: str | os.PathLike) -> pathlib.Path:
    return pathlib.Path(directory) / FILENAME


def prepare_directory(directory: str | os.PathLike) -> pathlib.Path:
    """Create ``directory`` if needed and prove a checkpoint can be written there (a probe file is
    written and removed), so that a bad ``checkpoint_dir`` fails before the first epoch."""
    directory = pathlib.Path(directory)
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(directory, "is a file, not a directory: checkpoints go into a directory (as last.pt)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory, prefix=".probe-"):
            pass
    except OSError as err:
        raise CheckpointError(directory, f"cannot hold checkpoints ({err.strerror or err})") from None
    return directory


def save_checkpoint(directory: str | os.PathLike, state: dict) -> pathlib.Path:
    """Write ``state`` (plus the format tag) to ``directory/last.pt`` atomically; returns the path."""
    directory = prepare_directory(directory)
    for leftover in directory.glob(_LEGACY_TEMPORARIES):
        leftover.unlink(missing_ok=True)
    return save_torch(checkpoint_path(directory), FORMAT, {"format": FORMAT, "version": VERSION, **state})


def _require(path: pathlib.Path, condition: bool, problem: str) -> None:
    if not condition:
        raise CheckpointError(path, problem)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_history(path: pathlib.Path, history, epoch: int) -> None:
    _require(path, isinstance(history, list) and len(history) == epoch,
             f"has a history of {len(history) if isinstance(history, list) else type(history).__name__} entries for "
             f"{epoch} completed epochs")
    for i, entry in enumerate(history):
        _require(path, isinstance(entry, dict) and set(entry) == set(_HISTORY_KEYS),
                 f"history[{i}] should be a dict with the keys {list(_HISTORY_KEYS)}, got "
                 f"{sorted(entry) if isinstance(entry, dict) else type(entry).__name__}")
        _require(path, entry["epoch"] == i + 1 and _is_int(entry["epoch"]),
                 f"history[{i}] is for epoch {entry['epoch']!r}, expected {i + 1}")
        _require(path, all(isinstance(entry[key], (int, float)) and not isinstance(entry[key], bool)
                           for key in _HISTORY_KEYS),
                 f"history[{i}] holds a value that is not a number: {entry!r:.200}")


def check_state(path: pathlib.Path, state, epochs: int | None = None) -> None:
    """Refuse a checkpoint state the trainers could not restore exactly (see the module docstring)."""
    _require(path, isinstance(state, dict) and state.get("format") == FORMAT,
             f"is not a unigraph training checkpoint (format tag "
             f"{state.get('format') if isinstance(state, dict) else type(state).__name__!r})")
    _require(path, state.get("version") == VERSION,
             f"has checkpoint version {state.get('version')!r}, this unigraph reads version {VERSION}")
    missing = [key for key in ("epoch", "model", "optimizer", "rng", "loader", "early_stopping", "stopped_early",
                               "history", "config", "world") if key not in state]
    _require(path, not missing, f"lacks the keys {missing}")
    epoch = state["epoch"]
    _require(path, _is_int(epoch) and epoch >= 1, f"has completed {epoch!r} epochs; a checkpoint holds >= 1")
    if epochs is not None:
        _require(path, epoch <= epochs, f"has completed {epoch} epochs but this run trains {epochs} in total: "
                                        "resume with at least as many epochs, or start a new run")
    _check_history(path, state["history"], epoch)
    _require(path, isinstance(state["model"], dict) and all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                            for k, v in state["model"].items()),
             "has a model state that is not a dict of tensors")
    for key, kind in (("config", dict), ("world", dict), ("early_stopping", dict), ("stopped_early", bool),
                      ("rng", list)):
        _require(path, isinstance(state[key], kind), f"has a {key!r} of type {type(state[key]).__name__}, "
                                                     f"expected {kind.__name__}")
    _require(path, set(state["early_stopping"]) == set(_EARLY_STOPPING_KEYS),
             f"has early_stopping keys {sorted(state['early_stopping'])}, expected {sorted(_EARLY_STOPPING_KEYS)}")
    world_size = state["world"].get("world_size")
    _require(path, _is_int(world_size) and len(state["rng"]) == world_size
             and all(isinstance(r, dict) for r in state["rng"]),
             f"holds {len(state['rng'])} RNG states for a world of {world_size!r} processes")
    _require(path, state["loader"] is None or isinstance(state["loader"], dict), "has a loader state that is not a dict")
    try:
        checkpoint_checks.check_content(state, epoch)
    except checkpoint_checks.ContentError as err:
        raise CheckpointError(path, str(err)) from None


def load_checkpoint(directory: str | os.PathLike, *, epochs: int | None = None) -> Checkpoint:
    """Read and verify ``directory/last.pt`` (checksum, then :func:`check_state`; ``epochs``, the
    resuming run's total, bounds the saved epoch). Raises :class:`CheckpointError`."""
    path = checkpoint_path(directory)
    if not path.is_file():
        raise CheckpointError(path, "does not exist: there is no checkpoint to resume from")
    try:
        state = load_torch(path, FORMAT)
    except DataFileError as err:
        raise CheckpointError(path, err.problem) from None
    check_state(path, state, epochs)
    checkpoint = Checkpoint(state)
    checkpoint.path = path
    return checkpoint


def check_restorable(state: dict, model, optimizer, *, stage: int | None = None) -> None:
    """``state`` (from :func:`load_checkpoint`) against the resuming run's model and fresh optimizer
    (see :func:`unigraph.train.checkpoint_checks.check_restorable`)."""
    try:
        checkpoint_checks.check_restorable(state, model, optimizer, stage=stage)
    except checkpoint_checks.ContentError as err:
        raise CheckpointError(getattr(state, "path", FILENAME), str(err)) from None


def check_compatible(state: dict, world: dict) -> None:
    """Refuse to resume a run laid out differently (mode, world size, stages, replicas)."""
    saved = state.get("world", {})
    if saved != world:
        raise CheckpointError(getattr(state, "path", FILENAME), f"was written by a run with {saved}, but this run has "
                                                                f"{world}; resume with the same layout (or start a new run)")
