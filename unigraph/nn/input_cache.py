"""PyG's ``cached=True``, kept sound: :class:`InputCache` holds one value with the inputs it was
computed from and returns it only while the same unchanged inputs come back (PyG reuses its first
call's value for any later graph)."""
from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import Tensor

class InputCache:
    """One cached value with the inputs it was computed from (PyG's ``cached=True``).

    :meth:`get` hits only while every input tensor or object is the *same object* as at
    :meth:`put` (a weak reference, so nothing is kept alive) and each tensor's in-place version,
    storage address, shape, dtype and device are unchanged, and every plain setting (``K``, a
    dtype, ...) is equal. What it cannot see: a write that bypasses the version counter
    (``.data``, numpy or DLPack views). Inference tensors carry no version: nothing is cached for
    them. Nothing is read or written while torch.compile traces (the value is computed there)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.value: Any = None
        self._refs: tuple = ()
        self._stamp: tuple | None = None

    def get(self, inputs: tuple) -> Any:
        if self.value is None or torch.compiler.is_compiling():
            return None
        stamp = _stamp(inputs)
        if stamp is None or stamp != self._stamp:
            return None
        for ref, obj in zip(self._refs, inputs):
            if ref is not None and ref() is not obj:
                return None
        return self.value

    def put(self, inputs: tuple, value: Any) -> None:
        if torch.compiler.is_compiling():
            return
        stamp = _stamp(inputs)
        if stamp is None:
            self.clear()
            return
        self._refs = tuple(None if _plain(obj) else weakref.ref(obj) for obj in inputs)
        self._stamp, self.value = stamp, value

    # a cache is not state: pickling or copying a layer drops it (weak references do not pickle)
    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.clear()


def _plain(obj: Any) -> bool:
    return obj is None or isinstance(obj, (bool, int, float, str, torch.dtype, torch.device))


def _stamp(inputs: tuple) -> tuple | None:
    stamp = []
    for obj in inputs:
        if _plain(obj):
            stamp.append(obj)
        elif isinstance(obj, Tensor):
            if obj.is_inference():
                return None
            address = obj.data_ptr() if obj.layout == torch.strided else None
            stamp.append((id(obj), obj._version, address, tuple(obj.shape), obj.dtype, obj.device))
        else:
            stamp.append(id(obj))
    return tuple(stamp)


def refuse_cache_value(who: str, name: str, value: Any) -> None:
    """PyG's cache attributes may be cleared (``= None``), not filled by hand."""
    if value is not None:
        raise ValueError(f"{who}.{name} can only be set to None (to drop the cache); the layer fills it itself")
