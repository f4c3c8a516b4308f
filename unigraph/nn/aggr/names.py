"""Aggregation modules by name (PyG's names: ``"mean"``, ``"add"``, ``"std"``, ``"softmax"``,
``"power_mean"``, ``"lstm"``, ...), by :mod:`unigraph.nn.resolver`'s matching rule. One name gives
one module; lists are :mod:`unigraph.nn.aggr.resolver`'s."""
from __future__ import annotations

from typing import Any

from unigraph.nn.aggr.basic import (
    MaxAggregation, MeanAggregation, MinAggregation, MulAggregation, PowerMeanAggregation, SoftmaxAggregation,
    StdAggregation, SumAggregation, VarAggregation)
from unigraph.nn.aggr.sequence import LSTMAggregation, MLPAggregation
from unigraph.nn.resolver import resolve

NAMED = (SumAggregation, MeanAggregation, MaxAggregation, MinAggregation, MulAggregation, VarAggregation,
         StdAggregation, SoftmaxAggregation, PowerMeanAggregation, LSTMAggregation, MLPAggregation)


def aggregation_by_name(query: Any, *args: Any, **kwargs: Any) -> Any:
    """The module a name stands for, built with the arguments; anything else as it is."""
    return resolve(query, NAMED, "aggregation", {"add": SumAggregation}, "aggregation", *args, **kwargs)
