r"""DGL's readouts (``SumPooling``, ``AvgPooling``, ``MaxPooling``): one row per graph of a batch
(``dgl.batch``), the sum / mean / max of its nodes' features (0 for a graph without nodes)."""
from __future__ import annotations

from torch import Tensor, nn

from unigraph.dgl.ops import segment_reduce


class _Pooling(nn.Module):
    reducer = "sum"

    def forward(self, graph, feat: Tensor) -> Tensor:
        return segment_reduce(graph.batch_num_nodes().to(feat.device), feat, reducer=self.reducer)


class SumPooling(_Pooling):
    reducer = "sum"


class AvgPooling(_Pooling):
    reducer = "mean"


class MaxPooling(_Pooling):
    reducer = "max"
