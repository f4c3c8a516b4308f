"""Every random number generator a run draws from, seeded together and saved as plain tensors.

Checkpoints are loaded with ``torch.load(weights_only=True)``, which accepts tensors, numbers,
strings and containers of them but no arbitrary objects. torch's state already is a uint8
tensor; numpy's legacy ``MT19937`` state and Python's ``random`` state are tuples holding a
numpy array and big integers, so they are stored as int64 tensors (every word is < 2**32) plus
numbers, and rebuilt on restore.
"""
from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and every GPU), numpy's global generator and Python's ``random``."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def capture_rng_state() -> dict:
    """The state of every generator, as tensors and numbers."""
    kind, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    version, words, gauss_next = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)},
        "python": {"version": int(version), "words": torch.tensor(words, dtype=torch.int64),
                   "gauss_next": gauss_next},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    """Put every generator back where :func:`capture_rng_state` found it."""
    for key in ("torch", "numpy", "python"):
        if key not in state:
            raise ValueError(f"the saved RNG state has no {key!r} entry; it holds {sorted(state)}")
    torch.set_rng_state(state["torch"])
    saved = state["numpy"]
    np.random.set_state((saved["kind"], saved["keys"].numpy().astype(np.uint32), saved["pos"], saved["has_gauss"],
                         saved["cached_gaussian"]))
    saved = state["python"]
    random.setstate((saved["version"], tuple(int(w) for w in saved["words"].tolist()), saved["gauss_next"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
