"""Node classifiers by name, with per-model defaults that train well on the Planetoid graphs."""
from __future__ import annotations

import torch

from unigraph.models import GAT, GCN, GIN, GraphSAGE

# name -> (class, defaults); hidden is per head for GAT. GAT's are the paper's Cora setting.
MODELS: dict[str, tuple[type, dict]] = {
    "gcn": (GCN, dict(hidden_channels=16, dropout=0.5)),
    "sage": (GraphSAGE, dict(hidden_channels=64, dropout=0.5)),
    "gat": (GAT, dict(hidden_channels=8, heads=8, dropout=0.6)),
    "gin": (GIN, dict(hidden_channels=64, dropout=0.5)),
}
ALIASES = {"graphsage": "sage"}
# Classifiers of heterogeneous graphs, with their defaults (unigraph.train.hetero builds and trains them).
HETERO_MODELS: dict[str, dict] = {"rgcn": dict(hidden_channels=64, dropout=0.5)}


def model_names() -> list[str]:
    """The homogeneous node classifiers ``build_node_classifier`` builds."""
    return sorted(MODELS)


def build_node_classifier(name: str, in_channels: int, num_classes: int, *, num_layers: int = 2,
                          hidden_channels: int | None = None, dropout: float | None = None,
                          heads: int | None = None) -> torch.nn.Module:
    """``gcn``, ``sage`` (``graphsage``), ``gat`` or ``gin`` with ``num_layers`` layers; arguments left
    ``None`` take the model's default above. ``heads`` applies to GAT only."""
    key = ALIASES.get(str(name).lower(), str(name).lower())
    if key in HETERO_MODELS:
        raise ValueError(f"{name!r} classifies the nodes of heterogeneous graphs: build unigraph.models.RGCN with the "
                         "graph's node feature widths and relations (see unigraph.train.hetero)")
    if key not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(model_names())}")
    cls, defaults = MODELS[key]
    kwargs = dict(defaults, num_layers=num_layers)
    if hidden_channels is not None:
        kwargs["hidden_channels"] = hidden_channels
    if dropout is not None:
        kwargs["dropout"] = dropout
    if heads is not None:
        if key != "gat":
            raise ValueError(f"heads applies to the GAT model only, not {key!r}")
        kwargs["heads"] = heads
    return cls(in_channels, out_channels=num_classes, **kwargs)
