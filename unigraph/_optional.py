"""Imports of optional dependencies, each failing with one clear message.

DGL gets special care: DGL 2.1.0 (the newest wheel for Python 3.11) is built for torch <= 2.2, and
on newer torch its ``import dgl`` fails while loading the graphbolt extension. unigraph never
patches DGL. If DGL was already loaded by the caller (the benchmarks' peer loader does it with a
stub for graphbolt, see ``benchmarks/peers.py``), that module is used as is.
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType


def require(module: str, purpose: str, install: str) -> ModuleType:
    """Import ``module`` or raise ImportError saying what needed it and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{purpose} needs the optional package {module!r}, which could not be imported "
                          f"({err}). Install it with: {install}") from err


def require_dgl(purpose: str) -> ModuleType:
    if "dgl" in sys.modules and hasattr(sys.modules["dgl"], "graph"):
        return sys.modules["dgl"]
    try:
        import dgl  # noqa: PLC0415 - optional peer
    except Exception as err:  # DGL raises FileNotFoundError/OSError from its C extensions, not only ImportError
        import torch
        raise ImportError(
            f"{purpose} needs DGL, which could not be imported: {type(err).__name__}: {err}. "
            f"DGL 2.1.0 (the newest build for Python 3.11) supports torch <= 2.2; this is torch "
            f"{torch.__version__}, on which `import dgl` fails while loading its graphbolt extension. "
            "unigraph does not patch DGL. To use DGL's core anyway, load it first through "
            "benchmarks/peers.py:load_dgl(), which is what the benchmarks and tests do.") from err
    return dgl
