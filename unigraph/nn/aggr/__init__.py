"""Aggregation modules with PyG's names and call contract (``aggr(x, index, dim_size=...)``),
for layers that take an aggregation (``SAGEConv(aggr=...)``, ``PNAConv``) and for direct use;
see :mod:`unigraph.nn.aggr.base`."""
from unigraph.nn.aggr.base import Aggregation
from unigraph.nn.aggr.basic import (
    MaxAggregation, MeanAggregation, MinAggregation, MulAggregation, PowerMeanAggregation, SoftmaxAggregation,
    StdAggregation, SumAggregation, VarAggregation)
from unigraph.nn.aggr.multi import MultiAggregation
from unigraph.nn.aggr.resolver import aggregation_resolver
from unigraph.nn.aggr.scaler import DegreeScalerAggregation
from unigraph.nn.aggr.sequence import LSTMAggregation, MLPAggregation
from unigraph.message_passing.pyg_arguments import register_aggregation_resolver

# MessagePassing(aggr=<module, list or another name>) resolves through it, as PyG's does
register_aggregation_resolver(aggregation_resolver)

__all__ = ["Aggregation", "SumAggregation", "MeanAggregation", "MaxAggregation", "MinAggregation", "MulAggregation",
           "VarAggregation",
           "StdAggregation", "SoftmaxAggregation", "PowerMeanAggregation", "MultiAggregation", "LSTMAggregation",
           "MLPAggregation", "DegreeScalerAggregation", "aggregation_resolver"]
