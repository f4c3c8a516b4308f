"""The message-passing frontend: :class:`MessagePassing` (PyG style), ``update_all``/``apply_edges``
(DGL style), and the fx-based compiler both share (see :mod:`unigraph.message_passing.lazy`)."""
from unigraph.message_passing.base import MessagePassing
from unigraph.message_passing.dgl_style import EdgeBatch, NodeBatch, apply_edges, update_all
from unigraph.message_passing.plan import MessagePlan

__all__ = ["MessagePassing", "MessagePlan", "EdgeBatch", "NodeBatch", "update_all", "apply_edges"]
