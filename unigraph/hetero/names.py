"""Node type names and canonical relations ``(src_type, name, dst_type)``, checked: what every
heterogeneous module names, kept below them all."""
from __future__ import annotations

from typing import Any

Relation = tuple[str, str, str]


def check_type_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what} must be a non-empty str, got {type(name).__name__} ({name!r})")
    return name


def check_relation(key: Any) -> Relation:
    """A canonical relation ``(src_type, name, dst_type)`` of three non-empty strings."""
    if not isinstance(key, tuple) or len(key) != 3:
        raise TypeError(f"a relation must be a tuple (src_type, name, dst_type), got {key!r}")
    for part, what in zip(key, ("its source type", "its name", "its destination type")):
        check_type_name(part, f"relation {key!r}: {what}")
    return key
