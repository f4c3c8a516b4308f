"""The backend registry: every kernel family unigraph can run, by explicit name, with what it declares.

Two kinds of names:

* a **backend** (``scatter``, ``sparse``, ``numba``, ``triton_node``, ``triton_edge``): one object
  with kernels and a declared :class:`~unigraph.backends.base.Contract` (ops, dtypes, devices,
  whether ``auto`` may pick it), validated by :func:`register`;
* a **family** (``triton``): a name for several backends, resolved per call to the variant the
  cost model prefers (:mod:`unigraph.backends.selector`). ``auto`` weighs the variants
  themselves, never the family.

Each backend module is importable without its optional dependency; ``availability()`` says
whether it can run here and on what (checked once per process: it may import modules). Asking
for an unavailable backend by name fails loudly; ``auto`` skips it.
"""
from __future__ import annotations

from unigraph.backends.base import Availability, Backend, Contract, Family, Request

RESERVED = ("auto", "auto-tune")

_REGISTRY: dict[str, Backend] = {}
_FAMILIES: dict[str, Family] = {}
_STATUS: dict[str, Availability] = {}


def _check_new_name(name) -> None:
    if not isinstance(name, str) or not name or name in RESERVED:
        raise ValueError(f"a backend needs a name other than {' and '.join(map(repr, RESERVED))}, got {name!r}")
    if name in _REGISTRY or name in _FAMILIES:
        raise ValueError(f"the name {name!r} is already registered; unregister it first")


def _methods_needed(contract: Contract) -> set[str]:
    """The kernel methods a backend must implement for the ops it declares: edge_softmax and
    gat_attention are composed from gspmm and gsddmm unless it fuses them."""
    needed = set()
    for op in contract.ops:
        needed |= {op} if op in contract.fused or op in ("gspmm", "gsddmm") else {"gspmm", "gsddmm"}
    return needed


def register(backend: Backend) -> Backend:
    """Add ``backend`` under ``backend.name`` after validating what it declares."""
    if not isinstance(backend, Backend):
        raise TypeError(f"register takes a unigraph.backends.Backend, got {type(backend).__name__}")
    _check_new_name(backend.name)
    if not isinstance(backend.contract, Contract):
        raise TypeError(f"backend {backend.name!r}: contract must be a unigraph.backends.Contract, "
                        f"got {type(backend.contract).__name__}")
    for method in _methods_needed(backend.contract):
        if getattr(type(backend), method) is getattr(Backend, method):
            raise TypeError(f"backend {backend.name!r} declares ops that need {method}, which it does not implement")
    if backend.contract.fused_backward and type(backend).gat_attention_backward is Backend.gat_attention_backward:
        raise TypeError(f"backend {backend.name!r} declares a fused gat_attention backward but does not implement it")
    _REGISTRY[backend.name] = backend
    _STATUS.pop(backend.name, None)
    return backend


def register_family(family: Family) -> Family:
    """Add a family name over backends already registered."""
    _check_new_name(family.name)
    missing = [v for v in family.variants if v not in _REGISTRY]
    if not family.variants or missing:
        raise ValueError(f"family {family.name!r} needs registered variants; missing: {missing or 'all'}")
    _FAMILIES[family.name] = family
    return family


def unregister(name: str) -> None:
    """Remove a backend or family (tests register temporary ones)."""
    _REGISTRY.pop(name, None)
    _FAMILIES.pop(name, None)
    _STATUS.pop(name, None)


def registered(name: str) -> bool:
    """Whether ``name`` is a backend or family name (``name in names()`` without building the list)."""
    return name in _REGISTRY or name in _FAMILIES


def names() -> list[str]:
    """Every backend name, then every family name (what a user may ask for besides auto)."""
    return list(_REGISTRY) + list(_FAMILIES)


def all_backends() -> dict[str, Backend]:
    return dict(_REGISTRY)


def families() -> dict[str, Family]:
    return dict(_FAMILIES)


def family(name: str) -> Family | None:
    """The family called ``name``, or None when ``name`` is not a family."""
    return _FAMILIES.get(name)


def get(name: str) -> Backend:
    """The backend called ``name``; raises ValueError for unknown names (and family names, which
    the selector resolves), RuntimeError when it cannot run here, naming the reason."""
    backend = _REGISTRY.get(name)
    if backend is None:
        if name in _FAMILIES:
            raise ValueError(f"{name!r} is a family of backends ({', '.join(_FAMILIES[name].variants)}); "
                             "the selector resolves it per call")
        raise ValueError(f"unknown backend {name!r}; choose one of: auto, {', '.join(names())}")
    status = status_of(name)
    if not status.ok:
        raise RuntimeError(f"backend {name!r} was requested but cannot run here: {status.detail}")
    return backend


def check_choice(name: str) -> None:
    """Raise unless ``name`` is a backend or family that can run here (what a user may choose)."""
    fam = _FAMILIES.get(name)
    if fam is None:
        get(name)
    elif not any(status_of(v).ok for v in fam.variants):
        raise RuntimeError(f"backend family {name!r} was requested but none of its variants can run here: "
                           + "; ".join(f"{v}: {status_of(v).detail}" for v in fam.variants))


def status_of(name: str) -> Availability:
    """Whether backend ``name`` can run here and on what (cached; a family: its variants')."""
    if name not in _STATUS:
        fam = _FAMILIES.get(name)
        if fam is not None:
            statuses = [status_of(v) for v in fam.variants]
            ok = any(s.ok for s in statuses)
            _STATUS[name] = Availability(ok, f"family of {', '.join(fam.variants)}" + ("" if ok else ": "
                                         + statuses[0].detail))
        else:
            _STATUS[name] = _REGISTRY[name].availability()
    return _STATUS[name]


def _register_builtin() -> None:
    # Imported here, not at the top, so that each module can import this package first.
    from unigraph.backends import numba, scatter, sparse, triton
    register(scatter.ScatterBackend())
    register(sparse.SparseBackend())
    register(numba.NumbaBackend())
    register(triton.TritonNodeBackend())
    register(triton.TritonEdgeBackend())
    register_family(triton.FAMILY)


_register_builtin()

__all__ = ["Availability", "Backend", "Contract", "Family", "Request", "register", "register_family", "unregister",
           "names", "get", "check_choice", "status_of", "all_backends", "families", "family"]
