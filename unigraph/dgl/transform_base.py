"""DGL's ``dgl.transforms`` module classes' common base: :class:`BaseTransform` (a callable
``graph -> graph``) and :class:`Compose` (several in order)."""
from __future__ import annotations

from typing import Any, Sequence

from unigraph.dgl.base import DGLError


class BaseTransform:
    """A graph transform: ``transform(g)`` returns the transformed graph (the input is not changed
    unless the transform says so)."""

    def __call__(self, g: Any):
        raise NotImplementedError(f"{type(self).__name__} does not implement __call__")

    def __repr__(self) -> str:
        return type(self).__name__ + "()"


class Compose(BaseTransform):
    """``transforms`` applied in order: ``Compose([a, b])(g) == b(a(g))``."""

    def __init__(self, transforms: Sequence[Any]):
        transforms = list(transforms)
        for t in transforms:
            if not callable(t):
                raise DGLError(f"Compose takes callables (graph -> graph), got {type(t).__name__}")
        self.transforms = transforms

    def __call__(self, g: Any):
        for transform in self.transforms:
            g = transform(g)
        return g

    def __repr__(self) -> str:
        inner = "".join(f"\n  {t!r}," for t in self.transforms)
        return f"{type(self).__name__}([{inner}\n])"
