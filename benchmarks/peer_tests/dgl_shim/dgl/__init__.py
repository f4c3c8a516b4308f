"""``dgl`` resolved to ``unigraph.dgl``, for running DGL's own test files against unigraph
(``benchmarks/peer_tests/dgl_swap.py`` puts this folder first on ``PYTHONPATH``).

Everything a test reaches under ``dgl`` (``dgl.graph``, ``dgl.ops``, ``dgl.function``, ``dgl.nn``,
``dgl.dataloading``, ...) is the module or attribute of the same name in ``unigraph.dgl``: a
``dgl.X`` that unigraph does not have fails with ``ModuleNotFoundError``/``AttributeError``, as it
should. One exception: ``dgl.backend``, DGL's tensor helpers (``F.tensor``, ``F.attach_grad``,
...), which DGL's test helper package ``tests/backend`` star-imports; they are thin wrappers of
torch, not graph API, so this shim loads DGL's own (importing the installed DGL once, with the
graphbolt stub of benchmarks/peers.py) and then removes every other module of the real DGL from
``sys.modules``, so no graph, op or layer of the real DGL stays reachable.
"""
import importlib
import importlib.abc
import importlib.util
import os
import sys
import types

import unigraph.dgl as _face

_SHIM_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# modules of the real DGL that its tensor helpers need at call time (kept, and nothing else)
_KEEP = ("dgl.backend", "dgl._ffi")


def _real_backend():
    me = sys.modules.pop("dgl")
    saved_path = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _SHIM_ROOT]
    sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))
    try:
        real = importlib.import_module("dgl")
    finally:
        sys.path[:] = saved_path
    backend = real.backend
    for name in [n for n in sys.modules if n == "dgl" or n.startswith("dgl.")]:
        if not any(name == keep or name.startswith(keep + ".") for keep in _KEEP):
            del sys.modules[name]
    sys.modules["dgl"] = me
    return backend


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import dgl.X`` gives the module ``unigraph.dgl.X`` itself (one module under two names)."""

    def find_spec(self, name, path, target=None):
        if not name.startswith("dgl.") or importlib.util.find_spec("unigraph.dgl." + name[4:]) is None:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        return importlib.import_module("unigraph.dgl." + spec.name[4:])

    def exec_module(self, module):
        pass


backend = _real_backend()
sys.modules["dgl.backend"] = backend
sys.meta_path.insert(0, _Alias())
__path__ = []  # submodules come from the finder above, never from a folder


def __getattr__(name):
    return getattr(_face, name)


def __dir__():
    return sorted(set(dir(_face)) | {"backend"})
