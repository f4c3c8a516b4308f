"""Loading the peer libraries (PyG, DGL) for side-by-side comparisons.

THE DGL GRAPHBOLT STUB LIVES HERE AND ONLY HERE.
DGL 2.1.0, the newest DGL for Python 3.11, is built for torch <= 2.2; on newer torch its
``import dgl`` fails while loading the graphbolt extension (a C++ library compiled against the
old torch ABI). DGL's core (graphs, ``dgl.ops``, ``dgl.nn``) does not need graphbolt, so
:func:`load_dgl` puts an empty module under ``sys.modules["dgl.graphbolt"]`` before importing
DGL. No DGL file is modified. The library itself never does this: ``unigraph`` only uses a DGL
that the caller has already loaded, and otherwise says why it cannot (``unigraph._optional``).
"""
from __future__ import annotations

import importlib.util
import sys
import types


def load_dgl():
    """Import DGL's core on this torch (stubbing graphbolt, see module docstring) or return None
    with the reason printed when DGL is not installed or still fails."""
    if "dgl" in sys.modules and hasattr(sys.modules["dgl"], "graph"):
        return sys.modules["dgl"]
    if importlib.util.find_spec("dgl") is None:
        return None
    sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))
    try:
        import dgl
    except Exception as err:  # noqa: BLE001 - reported, not swallowed: the peer is skipped with this reason
        print(f"[peers] DGL is installed but could not be loaded even with the graphbolt stub: "
              f"{type(err).__name__}: {err}", file=sys.stderr)
        sys.modules.pop("dgl", None)
        return None
    return dgl


def load_pyg():
    """torch_geometric, or None when it is not installed."""
    if importlib.util.find_spec("torch_geometric") is None:
        return None
    import torch_geometric
    return torch_geometric
