"""PyG's ``MessagePassing`` hooks: ``register_<stage>_forward_pre_hook`` / ``_forward_hook`` for
the stages ``propagate``, ``message``, ``aggregate``, ``message_and_aggregate`` and
``edge_update``, each returning a ``RemovableHandle``, called as PyG calls them:

=========================  ===================================================  =======================
stage                      pre-hook ``hook(module, inputs)``, may return         hook ``hook(module,
                                                                                  inputs, out)``
=========================  ===================================================  =======================
``propagate``              ``(edge_index, size, kwargs)``, or a new such tuple   ``out`` or a new one
``message``                ``(message_kwargs,)`` (per-edge inputs by name),      ``out`` or a new one
                           or the new dict (alone or in a 1-tuple)
``aggregate``              ``(aggregate_kwargs,)`` (``index``, ``ptr``,          ``out`` or a new one
                           ``dim_size``, or the override's own names), likewise
``message_and_aggregate``  ``(adjacency, kwargs)``, or a new such tuple          ``out`` or a new one
``edge_update``            ``(edge_index, size, kwargs)``, or a new such tuple   ``out`` or a new one
=========================  ===================================================  =======================

A ``message`` or ``aggregate`` hook needs the messages: while one is registered ``propagate``
runs the messages as written (``fuse=False``'s path, the same function), and the default
aggregation reads its index from the hook's dictionary (a hook may replace it, as PyG's users
do to cast an ``int32`` index). The ``propagate`` and ``edge_update`` hooks change no path.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

from torch.utils.hooks import RemovableHandle

STAGES = ("propagate", "message", "aggregate", "message_and_aggregate", "edge_update")


class PyGHooks:
    """The registration methods and the hook runners (mixed into ``MessagePassing``)."""

    def _init_pyg_hooks(self) -> None:
        for stage in STAGES:
            setattr(self, f"_{stage}_forward_pre_hooks", collections.OrderedDict())
            setattr(self, f"_{stage}_forward_hooks", collections.OrderedDict())

    def _ensure_pyg_hooks(self) -> None:
        """After unpickling a layer saved before the hooks existed."""
        if "_propagate_forward_pre_hooks" not in self.__dict__:
            self._init_pyg_hooks()

    def _register(self, hooks: collections.OrderedDict, hook: Callable) -> RemovableHandle:
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_propagate_forward_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (edge_index, size, kwargs))`` before every ``propagate``."""
        return self._register(self._propagate_forward_pre_hooks, hook)

    def register_propagate_forward_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (edge_index, size, kwargs), out)`` after every ``propagate``."""
        return self._register(self._propagate_forward_hooks, hook)

    def register_message_forward_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (message_kwargs,))`` before every ``message``."""
        return self._register(self._message_forward_pre_hooks, hook)

    def register_message_forward_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (message_kwargs,), out)`` after every ``message``."""
        return self._register(self._message_forward_hooks, hook)

    def register_aggregate_forward_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (aggregate_kwargs,))`` before every ``aggregate``."""
        return self._register(self._aggregate_forward_pre_hooks, hook)

    def register_aggregate_forward_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (aggregate_kwargs,), out)`` after every ``aggregate``."""
        return self._register(self._aggregate_forward_hooks, hook)

    def register_message_and_aggregate_forward_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (adjacency, kwargs))`` before every ``message_and_aggregate``."""
        return self._register(self._message_and_aggregate_forward_pre_hooks, hook)

    def register_message_and_aggregate_forward_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (adjacency, kwargs), out)`` after every ``message_and_aggregate``."""
        return self._register(self._message_and_aggregate_forward_hooks, hook)

    def register_edge_update_forward_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (edge_index, size, kwargs))`` before every ``edge_updater``."""
        return self._register(self._edge_update_forward_pre_hooks, hook)

    def register_edge_update_forward_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, (edge_index, size, kwargs), out)`` after every ``edge_updater``."""
        return self._register(self._edge_update_forward_hooks, hook)

    # ------------------------------------------------------------------ running them
    def _needs_hooked_messages(self) -> bool:
        """Whether a ``message`` or ``aggregate`` hook is registered (the messages are then built)."""
        return bool(self._message_forward_pre_hooks or self._message_forward_hooks
                    or self._aggregate_forward_pre_hooks or self._aggregate_forward_hooks)

    def _pre_call(self, stage: str, inputs: tuple) -> tuple:
        """``inputs`` after the stage's pre-hooks (a full tuple of the same arity comes back)."""
        for hook in getattr(self, f"_{stage}_forward_pre_hooks").values():
            result = hook(self, inputs)
            if result is not None:
                inputs = result
        return inputs

    def _pre_call_kwargs(self, stage: str, kwargs: dict) -> dict:
        """A stage's keyword dictionary after its pre-hooks (each may return the dict or a 1-tuple)."""
        for hook in getattr(self, f"_{stage}_forward_pre_hooks").values():
            result = hook(self, (kwargs,))
            if result is not None:
                kwargs = result[0] if isinstance(result, tuple) else result
        return kwargs

    def _post_call(self, stage: str, inputs: tuple, out: Any) -> Any:
        for hook in getattr(self, f"_{stage}_forward_hooks").values():
            result = hook(self, inputs, out)
            if result is not None:
                out = result
        return out
