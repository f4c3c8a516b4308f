r"""Aggregations that read each group's rows as a sequence, in ``index`` order (which must be
sorted, as in PyG): every group is padded with zero rows to one length first
(:meth:`~unigraph.nn.aggr.base.Aggregation.to_dense_batch`).

- :class:`LSTMAggregation`: an LSTM over the padded sequence; the output is its hidden state
  after the last position, padding included (so a group shorter than the longest one has also
  read zero rows: PyG's definition).
- :class:`MLPAggregation`: the first ``max_num_elements`` rows, zero-padded, concatenated into one
  vector and mapped by an :class:`~unigraph.nn.mlp.MLP` (rows beyond are dropped).

Neither is permutation invariant.
"""
from __future__ import annotations

import torch

from unigraph.nn.aggr.base import Aggregation
from unigraph.nn.mlp import MLP


class LSTMAggregation(Aggregation):
    """Args: ``in_channels``, ``out_channels`` (the LSTM's input and hidden sizes), and further
    ``torch.nn.LSTM`` arguments."""

    def __init__(self, in_channels: int, out_channels: int, **kwargs):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.lstm = torch.nn.LSTM(in_channels, out_channels, batch_first=True, **kwargs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lstm.reset_parameters()

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2, max_num_elements=None):
        dense, _ = self.to_dense_batch(x, index, ptr, dim_size, dim, max_num_elements=max_num_elements)
        if dense.shape[1] == 0:  # no rows at all: every group is empty
            return x.new_zeros((dim_size, self.out_channels))
        return self.lstm(dense)[0][:, -1]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"


class MLPAggregation(Aggregation):
    """Args: ``in_channels``, ``out_channels``, ``max_num_elements`` (rows read per group), and
    :class:`~unigraph.nn.mlp.MLP` arguments (``num_layers``, ``hidden_channels``, ...)."""

    def __init__(self, in_channels: int, out_channels: int, max_num_elements: int, **kwargs):
        super().__init__()
        self.in_channels, self.out_channels, self.max_num_elements = in_channels, out_channels, max_num_elements
        self.mlp = MLP(in_channels=in_channels * max_num_elements, out_channels=out_channels, **kwargs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.mlp.reset_parameters()

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2):
        dense, _ = self.to_dense_batch(x, index, ptr, dim_size, dim, max_num_elements=self.max_num_elements)
        return self.mlp(dense.reshape(dense.shape[0], -1))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
                f"max_num_elements={self.max_num_elements})")
