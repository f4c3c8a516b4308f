"""The backend registry: every kernel family unigraph can run, by explicit name.

Each backend module is importable without its optional dependency; ``availability()`` says
whether it can run here and on what. Asking for an unavailable backend by name fails loudly;
``auto`` skips it (see :mod:`unigraph.backends.selector`).
"""
from __future__ import annotations

from unigraph.backends.base import Availability, Backend, Request

_REGISTRY: dict[str, Backend] = {}
_STATUS: dict[str, Availability] = {}  # availability is checked once per process: it imports modules


def register(backend: Backend) -> Backend:
    if not backend.name or backend.name == "auto":
        raise ValueError(f"a backend needs a name other than 'auto', got {backend.name!r}")
    _REGISTRY[backend.name] = backend
    _STATUS.pop(backend.name, None)
    return backend


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> Backend:
    """The backend called ``name``; raises ValueError for unknown names, RuntimeError when it
    cannot run here (missing dependency), naming the reason."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown backend {name!r}; choose one of: auto, {', '.join(_REGISTRY)}")
    backend = _REGISTRY[name]
    status = status_of(name)
    if not status.ok:
        raise RuntimeError(f"backend {name!r} was requested but cannot run here: {status.detail}")
    return backend


def status_of(name: str) -> Availability:
    """Whether backend ``name`` can run here and on what (cached)."""
    if name not in _STATUS:
        _STATUS[name] = _REGISTRY[name].availability()
    return _STATUS[name]


def all_backends() -> dict[str, Backend]:
    return dict(_REGISTRY)


def _register_builtin() -> None:
    # Imported here, not at the top, so that each module can import this package first.
    from unigraph.backends import numba, scatter, sparse, triton
    register(scatter.ScatterBackend())
    register(sparse.SparseBackend())
    register(numba.NumbaBackend())
    register(triton.TritonNodeBackend())
    register(triton.TritonEdgeBackend())
    register(triton.TritonBackend())


_register_builtin()

__all__ = ["Availability", "Backend", "Request", "register", "names", "get", "status_of", "all_backends"]
