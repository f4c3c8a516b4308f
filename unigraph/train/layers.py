"""A node classifier as a list of layers, each ``layer(graph, h) -> h``, for pipeline stages.

The node classifiers (:class:`unigraph.models.layer_stack.LayerStack`: GCN, GAT, GraphSAGE, GIN)
keep their convolutions in ``model.convs``; :class:`ModelLayer` runs convolution ``i`` through the
same :func:`~unigraph.models.layer_stack.apply_layer` as the model's ``forward`` (dropout,
activation, the order of the random draws), so running the layers one after another is the
model's ``forward``. ``tests/test_train_layers.py`` checks this for every model.
"""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.models.layer_stack import LayerStack, apply_layer


class ModelLayer(torch.nn.Module):
    """Convolution ``index`` of ``model`` with the dropout and activation ``model.forward`` puts around it.

    Holds the model's own convolution (parameters are shared, not copied).
    """

    def __init__(self, model: LayerStack, index: int):
        super().__init__()
        self.conv = model.convs[index]
        self.dropout_at, self.activation = model.dropout_at, model.activation
        self.p = model.dropout
        self.first = index == 0
        self.last = index == len(model.convs) - 1
        self.train(model.training)  # a new module starts in training mode; follow the model's

    def forward(self, graph: Graph, h: Tensor) -> Tensor:
        return apply_layer(self.conv, graph, h, first=self.first, last=self.last, dropout_at=self.dropout_at,
                           activation=self.activation, p=self.p, training=self.training)


def model_layers(model: torch.nn.Module) -> list[ModelLayer]:
    """The layers of a GCN, GAT, GraphSAGE or GIN (any LayerStack), in order."""
    if not isinstance(model, LayerStack):
        raise TypeError(f"cannot split a {type(model).__name__} into layers; supported: GCN, GAT, GraphSAGE, GIN "
                        "(unigraph.models.layer_stack.LayerStack) (ViG: unigraph.train.vig)")
    return [ModelLayer(model, i) for i in range(len(model.convs))]


def num_layers(model: torch.nn.Module) -> int:
    """How many graph layers (blocks) ``model`` consumes."""
    convs = getattr(model, "convs", None)
    if convs is None:
        raise TypeError(f"{type(model).__name__} has no `convs`; pass explicit fanouts (one per layer)")
    return len(convs)


def balanced(num_items: int, stages: int) -> tuple[int, ...]:
    """An even split of ``num_items`` layers over ``stages`` (earlier stages take the remainder)."""
    if stages > num_items:
        raise ValueError(f"cannot cut {num_items} layers into {stages} stages: each stage needs at least one layer")
    base, extra = divmod(num_items, stages)
    return tuple(base + (1 if s < extra else 0) for s in range(stages))


def stage_bounds(num_items: int, stages: int, balance: tuple[int, ...] | None) -> list[tuple[int, int]]:
    """``[(start, stop), ...]``: the layers of each stage, from ``balance`` (GPipe's) or an even split."""
    if balance is None:
        balance = balanced(num_items, stages)
    if len(balance) != stages:
        raise ValueError(f"balance has {len(balance)} entries but there are {stages} stages")
    if sum(balance) != num_items:
        raise ValueError(f"balance {list(balance)} sums to {sum(balance)} but the model has {num_items} layers")
    bounds, start = [], 0
    for count in balance:
        bounds.append((start, start + count))
        start += count
    return bounds
