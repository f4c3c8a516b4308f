"""``dgl`` resolved to ``unigraph.dgl``, for running DGL's own test files and examples against
unigraph (``dgl_swap.py``, ``dgl_examples.py``).

:func:`write` puts a package ``dgl`` in a folder outside the project (the runs put that folder
first on ``PYTHONPATH``); its ``__init__`` calls :func:`install`. A ``dgl`` package folder inside
the project would shadow the real DGL for every tool that resolves imports by path.

Everything a test reaches under ``dgl`` (``dgl.graph``, ``dgl.ops``, ``dgl.function``, ``dgl.nn``,
``dgl.dataloading``, ...) is the module or attribute of the same name in ``unigraph.dgl``: a
``dgl.X`` that unigraph does not have fails with ``ModuleNotFoundError``/``AttributeError``, as it
should, except the functions named in ``UNIGRAPH_DGL_STAND_INS`` (``dgl_swap.STAND_INS``, per
file): they raise ``NotImplementedError`` when called, so that a file importing one collects. One exception: ``dgl.backend``, DGL's tensor helpers (``F.tensor``, ``F.attach_grad``,
...), which DGL's test helper package ``tests/backend`` star-imports; they are thin wrappers of
torch, not graph API, so the shim loads DGL's own (importing the installed DGL once, with the
graphbolt stub of benchmarks/peers.py) and then removes every other module of the real DGL from
``sys.modules``, so no graph, op or layer of the real DGL stays reachable.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import pathlib
import sys
import types

# modules of the real DGL that its tensor helpers need at call time (kept, and nothing else)
_KEEP = ("dgl.backend", "dgl._ffi")
_INIT = "from benchmarks.peer_tests.dgl_shim import install\ninstall(__name__)\n"


def write(folder: pathlib.Path) -> pathlib.Path:
    """``folder/dgl/__init__.py`` calling :func:`install`; returns ``folder`` (for PYTHONPATH)."""
    package = pathlib.Path(folder) / "dgl"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(_INIT)
    return pathlib.Path(folder)


def _real_backend(shim_root: str):
    me = sys.modules.pop("dgl")
    saved_path = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != shim_root]
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


EXTRA = "UNIGRAPH_DGL_EXTRA"   # comma-separated modules whose __all__ joins unigraph.dgl in the run (work in progress)
STAND_INS = "UNIGRAPH_DGL_STAND_INS"   # comma-separated dgl functions (or "module.*") a file imports but unigraph lacks


def _stand_in(name: str):
    """A function named ``name`` that raises NotImplementedError when called: a test file that
    imports a DGL function unigraph does not have still collects, and only the tests that call it
    fail (named as such in the table)."""
    def missing(*args, **kwargs):
        raise NotImplementedError(f"unigraph has no dgl.{name} (dgl_swap stand-in)")
    missing.__name__ = missing.__qualname__ = name
    return missing


def install(name: str) -> None:
    """Make the module ``name`` (the shim's ``dgl``) the face of ``unigraph.dgl``."""
    import unigraph.dgl as face
    module = sys.modules[name]
    shim_root = os.path.dirname(os.path.dirname(os.path.abspath(module.__file__)))
    module.backend = _real_backend(shim_root)
    sys.modules["dgl.backend"] = module.backend
    sys.meta_path.insert(0, _Alias())
    module.__path__ = []  # submodules come from the finder above, never from a folder
    for missing in filter(None, os.environ.get(STAND_INS, "").split(",")):
        if missing.endswith(".*"):   # a whole module (``import dgl.partition``): every attribute a stand-in
            stub = types.ModuleType(f"{name}.{missing[:-2]}")
            stub.__getattr__ = lambda attr, prefix=missing[:-2]: _stand_in(f"{prefix}.{attr}")
            sys.modules[stub.__name__] = stub
            setattr(module, missing[:-2], stub)
        else:
            setattr(module, missing, _stand_in(missing))
    for extra in filter(None, os.environ.get(EXTRA, "").split(",")):   # a module's names not exported yet
        import unigraph.dgl.transforms as transforms
        found = importlib.import_module(extra)
        for attr in getattr(found, "__all__", ()):
            setattr(face, attr, getattr(found, attr))
            setattr(transforms, attr, getattr(found, attr))
    module.__getattr__ = lambda attr: getattr(face, attr)
    module.__dir__ = lambda: sorted(set(dir(face)) | {"backend"})
