"""The peers' rows run as the peers' users run them.

Importing unigraph makes torch's own CPU dropout masks faster for everyone in the process
(``unigraph.torch_bernoulli``: the same bits, sooner), so a PyG or DGL row timed beside ours would
get it too, which no PyG or DGL user without unigraph gets. Every benchmark that times a peer
wraps the peer's calls with :func:`as_run_by`: a row is unigraph's when its name (or library)
starts with ``unigraph``; any other row runs with torch's kernel.
"""
from __future__ import annotations

import functools
from typing import Callable

from unigraph import torch_bernoulli


def ours(name: str) -> bool:
    return name.startswith("unigraph")


def as_run_by(name: str, call: Callable) -> Callable:
    """``call`` as the row ``name``'s users run it (unchanged for unigraph's rows)."""
    if ours(name):
        return call

    @functools.wraps(call)
    def peer(*args, **kwargs):
        with torch_bernoulli.enabled(False):
            return call(*args, **kwargs)
    return peer
