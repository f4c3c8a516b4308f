"""PyG's ``aggregation_resolver``: a name (:mod:`unigraph.nn.aggr.names`), a list of names or
modules (a :class:`~unigraph.nn.aggr.MultiAggregation` of them), or a module (returned as it is)."""
from __future__ import annotations

from typing import Any

from unigraph.nn.aggr.multi import MultiAggregation
from unigraph.nn.aggr.names import aggregation_by_name


def aggregation_resolver(query: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(query, (list, tuple)):
        return MultiAggregation(list(query), *args, **kwargs)
    return aggregation_by_name(query, *args, **kwargs)
