"""``dgl.function``: the built-in message and reduce functions, which are unigraph's own
(:mod:`unigraph.function` spells out every one of DGL's names: ``copy_u``, ``copy_e``,
``u_mul_e``, ..., ``sum``, ``mean``, ``max``, ``min``)."""
from unigraph.function import *  # noqa: F401,F403 - the same objects under DGL's module name
from unigraph.function import MESSAGE_FUNCTIONS, REDUCERS, MessageFunction, ReduceFunction  # noqa: F401

__all__ = list(MESSAGE_FUNCTIONS) + list(REDUCERS) + ["MessageFunction", "ReduceFunction"]
