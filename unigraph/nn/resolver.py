"""Names to modules, as PyG's ``act=``/``norm=``/``aggr=`` arguments accept them.

A name matches a class when they agree ignoring case, ``_``, ``-`` and spaces, with or without
the family's suffix: ``"relu"``, ``"ReLU"``, ``"leaky_relu"`` (``torch.nn.LeakyReLU``);
``"batch_norm"``, ``"BatchNorm"``, ``"batch"`` (:class:`unigraph.nn.norm.BatchNorm`);
``"softmax"`` (:class:`unigraph.nn.aggr.SoftmaxAggregation`). The class is built with the
arguments given (``normalization_resolver("layer_norm", 16, mode="node")``). Anything that is not
a string (a module, a function, None) is returned as it is. An unknown name raises ``ValueError``
listing the choices.

Activations are torch's (every class in ``torch.nn.modules.activation``, plus ``"swish"``);
normalizations are unigraph's own (nothing here imports PyG). Aggregation names resolve in
:mod:`unigraph.nn.aggr.resolver` (the aggregation modules use this module's matching rule).
"""
from __future__ import annotations

import inspect
from typing import Any, Iterable

import torch
from torch import Tensor

from unigraph.nn import norm


def normalize_name(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "").replace(" ", "")


def resolve(query: Any, classes: Iterable[Any], suffix: str, aliases: dict[str, Any], family: str,
            *args: Any, **kwargs: Any) -> Any:
    """``query`` itself unless it is a string; else the matching class built with the arguments."""
    if not isinstance(query, str):
        return query
    wanted = normalize_name(query)
    classes = list(classes)
    found = aliases.get(wanted)
    if found is None:
        for cls in classes:
            name = normalize_name(cls.__name__)
            if wanted in (name, name.replace(suffix, "")):
                found = cls
                break
    if found is None:
        choices = sorted({cls.__name__ for cls in classes} | set(aliases))
        raise ValueError(f"unknown {family} {query!r}; choices: {', '.join(choices)}")
    return found(*args, **kwargs) if inspect.isclass(found) else found


def swish(x: Tensor) -> Tensor:
    """:math:`x \\cdot \\sigma(x)`."""
    return x * x.sigmoid()


def activation_resolver(query: Any = "relu", *args: Any, **kwargs: Any) -> Any:
    acts = [cls for cls in vars(torch.nn.modules.activation).values()
            if isinstance(cls, type) and issubclass(cls, torch.nn.Module)]
    return resolve(query, acts, "act", {"swish": swish}, "activation", *args, **kwargs)


def normalization_resolver(query: Any, *args: Any, **kwargs: Any) -> Any:
    norms = [getattr(norm, name) for name in norm.__all__ if isinstance(getattr(norm, name), type)
             and issubclass(getattr(norm, name), torch.nn.Module)]
    return resolve(query, norms, "norm", {}, "normalization", *args, **kwargs)
