"""Control-variate sampling (VR-GCN; Chen, Zhu and Song, ICML 2018): GCN trained with 1-2 sampled
neighbours per node, at about the accuracy of full neighbourhoods.

**The model** is GCN with the propagation matrix ``P = D^{-1/2} (A + I) D^{-1/2}`` (``D``: in-degree
+ 1, PyG's ``gcn_norm``; ``P_uv`` weighs the edge ``v -> u``)::

    H^1 = relu((P X) W^0),    H^{l+1} = relu((P H^l) W^l),    logits = (P H^{L-1}) W^{L-1}

and ``P X`` is **preprocessed once** (:func:`precompute_ax`, one ``update_all`` over the graph, or
over a range of rows per trainer), so the first layer needs no neighbours at all.

**The estimator.** Each later layer's aggregation ``(P H)_u`` is estimated from ``D`` sampled
in-neighbours ``n^(u)`` (without replacement) and a *history* ``H-bar``: the activations each node
had when it was last computed, kept for every node in a store::

    (P H)_u ~ P_uu h_u + sum_{v in n^(u)} (d_u / |n^(u)|) P_uv (h_v - hbar_v) + sum_{v in n(u)} P_uv hbar_v

The sampled term is unbiased for ``sum_v P_uv (h_v - hbar_v)`` (each of the ``d_u`` neighbours is
drawn with probability ``|n^(u)| / d_u``), so the whole is unbiased for ``(P H)_u``, and its
variance shrinks with ``h - hbar``: as training converges the histories approach the activations
and the estimate approaches the exact aggregation. The last term reads histories only (no
recursion: its neighbours' activations are not computed), and the self-loop term ``P_uu h_u`` is
exact (``u`` is always computed). Gradients flow through the sampled term and the self term, as in
the paper. After each step the activations computed for the batch's nodes replace their histories.
With ``fanout=None`` every neighbour is "sampled": the estimate is the exact aggregation (and so
are its gradients), which is this module's full-neighbourhood training.

**The store** (:class:`TensorHistory`, in memory, optionally in shared memory for several
processes; :class:`MappedHistory`, a file mapped shared, for histories larger than memory or
shared by the processes of a machine) keeps ``[num_nodes, width]`` per propagated layer, starting
at zero. It is keyed on node ids and read as written: nothing checks that a history is recent
(staleness is the estimator's business, and its bias stays zero whatever the history holds).
Dropout is not supported (VR-GCN's dropout variant needs a second control variate).
"""
from __future__ import annotations

import dataclasses
import math
import os
import pathlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from unigraph import function as fn
from unigraph import ops
from unigraph.graph import Graph
from unigraph.user_graph import Graph as UserGraph
from unigraph.sampling.batch import block_from_csr
from unigraph.sampling.csr_view import InCSR, csr_ranges, in_csr_view
from unigraph.sampling.neighbor import NeighborSampler


def gcn_weights(degree_dst: Tensor, degree_src: Tensor) -> Tensor:
    """``P_uv = 1 / sqrt((d_u + 1)(d_v + 1))`` for edges ``v -> u`` (in-degrees ``d``)."""
    return ((degree_dst.to(torch.float64) + 1) * (degree_src.to(torch.float64) + 1)).rsqrt()


def precompute_ax(graph: Graph | InCSR, x: Tensor, *, rows: tuple[int, int] | None = None,
                  block_rows: int = 1 << 16, out: Tensor | None = None) -> Tensor:
    """``(P X)[first:end]`` (``rows``; default all), computed a block of destination rows at a time
    with ``update_all`` on each block's in-edges (memory: a block's edges and their sources' rows).

    ``graph``'s in-CSR and ``x`` may be mapped from disk; ``out`` (``[end - first, F]``) receives
    the rows (default: a new tensor). Each of several trainers can compute its own range of rows.
    """
    csr = in_csr_view(graph)
    first, end = rows if rows is not None else (0, csr.num_nodes)
    if not 0 <= first <= end <= csr.num_nodes:
        raise ValueError(f"rows must satisfy 0 <= first <= end <= {csr.num_nodes}, got {rows}")
    if x.dim() != 2 or x.shape[0] != csr.num_nodes:
        raise ValueError(f"x must have one row per node ({csr.num_nodes}), got {list(x.shape)}")
    if out is None:
        out = torch.empty((end - first, x.shape[1]), dtype=x.dtype)
    elif tuple(out.shape) != (end - first, x.shape[1]):
        raise ValueError(f"out must have shape {[end - first, x.shape[1]]}, got {list(out.shape)}")
    ptr = csr.ptr
    for a in range(first, end, block_rows):
        b = min(end, a + block_rows)
        dst = torch.arange(a, b)
        counts, positions = csr_ranges(ptr, dst)
        sources = csr.indices[positions]
        unique, local = torch.unique(sources, return_inverse=True)
        indptr = torch.zeros(b - a + 1, dtype=torch.int64)
        torch.cumsum(counts, 0, out=indptr[1:])
        block = UserGraph.view(block_from_csr(indptr, local, unique.numel(), None))
        degree_src = ptr[unique + 1] - ptr[unique]
        weight = gcn_weights(counts.repeat_interleave(counts), degree_src[local]).to(x.dtype)
        block.srcdata["x"] = x[unique]
        block.edata["w"] = weight.unsqueeze(1)
        block.update_all(fn.u_mul_e("x", "w", "m"), fn.sum("m", "ax"))
        self_weight = (1.0 / (counts.to(torch.float64) + 1)).to(x.dtype).unsqueeze(1)
        out[a - first:b - first] = block.dstdata["ax"] + self_weight * x[a:b]
    return out


# ---------------------------------------------------------------------------------------------- history
class TensorHistory:
    """Histories in memory: one ``[num_nodes, width]`` tensor per propagated layer, zeros at first.
    :meth:`share_memory_` puts them in shared memory (processes of one machine then share them)."""

    def __init__(self, num_nodes: int, widths: list[int], dtype: torch.dtype = torch.float32):
        self.tables = [torch.zeros(num_nodes, w, dtype=dtype) for w in widths]

    def share_memory_(self) -> "TensorHistory":
        for table in self.tables:
            table.share_memory_()
        return self

    def gather(self, layer: int, ids: Tensor) -> Tensor:
        return self.tables[layer][ids]

    def update(self, layer: int, ids: Tensor, rows: Tensor) -> None:
        self.tables[layer][ids] = rows.detach().to(self.tables[layer].dtype)


class MappedHistory(TensorHistory):
    """Histories in files under ``directory`` (``history-<layer>.f32``), mapped shared: larger than
    memory, and shared by every process of the machine that opens the same directory (``create``
    zero-fills them first; the others attach)."""

    def __init__(self, directory: str | os.PathLike, num_nodes: int, widths: list[int], *, create: bool = True):
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.tables = []
        for layer, width in enumerate(widths):
            path = directory / f"history-{layer}.f32"
            if not create and path.stat().st_size != num_nodes * width * 4:
                raise ValueError(f"{path} holds {path.stat().st_size} bytes, not {num_nodes} x {width} float32")
            array = np.memmap(path, dtype=np.float32, mode="w+" if create else "r+", shape=(num_nodes, width))
            self.tables.append(torch.from_numpy(array))


# ---------------------------------------------------------------------------------------------- sampling
@dataclasses.dataclass
class CVLayer:
    """One propagated layer of a batch: ``sampled`` (a block from the layer's nodes to the next
    layer's, its edge weights ``(d_u / |n^(u)|) P_uv`` in ``sampled_weight``), ``full`` (every in-edge
    of the next layer's nodes, from ``full_sources``' rows: the histories to read, weights ``P_uv``)
    and ``self_weight`` (``P_uu`` of the next layer's nodes)."""

    sampled: Graph
    sampled_weight: Tensor
    full: Graph
    full_sources: Tensor
    full_weight: Tensor
    self_weight: Tensor


@dataclasses.dataclass
class CVBatch:
    """``nodes[l]``: the global ids of layer ``l``'s nodes (``nodes[0]`` read ``P X``; ``nodes[-1]``
    are the seeds; each layer's nodes start with the next layer's); ``layers[l]`` propagates
    ``nodes[l] -> nodes[l + 1]``."""

    nodes: list[Tensor]
    layers: list[CVLayer]

    @property
    def seeds(self) -> Tensor:
        return self.nodes[-1]


class ControlVariateSampler:
    """Samples ``fanout`` in-neighbours per node for each of ``num_layers`` propagated layers
    (``None``: every neighbour, the exact computation) and builds what the estimator needs (see the
    module docstring). Draws are :class:`~unigraph.sampling.NeighborSampler`'s (keyed by node)."""

    def __init__(self, num_layers: int, fanout: int | None, *, seed: int = 0):
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be an int >= 1, got {num_layers!r}")
        if fanout is not None and (isinstance(fanout, bool) or not isinstance(fanout, int) or fanout < 1):
            raise ValueError(f"fanout must be None (every neighbour) or an int >= 1, got {fanout!r}")
        self.num_layers, self.fanout, self.seed = num_layers, fanout, seed

    def sample(self, graph: Graph | InCSR, seeds: Tensor, *, key: int) -> CVBatch:
        csr = in_csr_view(graph)
        degree = csr.ptr[1:] - csr.ptr[:-1]
        fanout = self.fanout if self.fanout is not None else max(1, int(degree.max()) if degree.numel() else 1)
        blocks = NeighborSampler([fanout] * self.num_layers, seed=self.seed).sample(csr, seeds, key=key)
        nodes = [blocks.input_nodes[:block.num_src_nodes] for block in blocks.blocks] + [blocks.seeds]
        layers = []
        for l, block in enumerate(blocks.blocks):
            src, dst = block.src, block.dst
            dst_ids = nodes[l + 1]
            d_dst = degree[dst_ids]
            drawn = torch.bincount(dst, minlength=block.num_dst_nodes)
            scale = d_dst.to(torch.float64) / drawn.clamp_min(1).to(torch.float64)
            sampled_weight = scale[dst] * gcn_weights(d_dst[dst], degree[nodes[l][src]])
            counts, positions = csr_ranges(csr.ptr, dst_ids)
            unique, local = torch.unique(csr.indices[positions], return_inverse=True)
            indptr = torch.zeros(dst_ids.numel() + 1, dtype=torch.int64)
            torch.cumsum(counts, 0, out=indptr[1:])
            full = block_from_csr(indptr, local, unique.numel(), None)
            full_weight = gcn_weights(counts.repeat_interleave(counts), degree[unique][local])
            layers.append(CVLayer(block, sampled_weight, full, unique, full_weight, 1.0 / (d_dst.to(torch.float64) + 1)))
        return CVBatch(nodes, layers)


# ---------------------------------------------------------------------------------------------- the model
class ControlVariateGCN(nn.Module):
    """GCN on preprocessed ``P X`` with control-variate aggregation (see the module docstring).

    ``forward(batch, ax, history)``: ``ax`` holds ``P X`` for ``batch.nodes[0]``; ``history`` is a
    store with one table per propagated layer (widths :attr:`history_widths`); in training mode
    the activations computed for the batch replace their histories. Returns the seeds' logits.
    """

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, num_layers: int = 2):
        super().__init__()
        if num_layers < 2:
            raise ValueError(f"num_layers must be >= 2 (one preprocessed layer, then propagated ones), got {num_layers}")
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.history_widths = widths[1:-1]

    @property
    def num_propagated(self) -> int:
        return len(self.linears) - 1

    def forward(self, batch: CVBatch, ax: Tensor, history) -> Tensor:
        h = F.relu(self.linears[0](ax))
        for l, layer in enumerate(batch.layers):
            ids, dtype = batch.nodes[l], h.dtype
            stale = history.gather(l, ids).to(dtype)                      # read before this step's update
            known = history.gather(l, layer.full_sources).to(dtype)
            agg = ops.gspmm(layer.sampled, "u_mul_e", "sum", h - stale, layer.sampled_weight.to(dtype).unsqueeze(1))
            agg = agg + ops.gspmm(layer.full, "u_mul_e", "sum", known, layer.full_weight.to(dtype).unsqueeze(1))
            agg = agg + layer.self_weight.to(dtype).unsqueeze(1) * h[:layer.sampled.num_dst_nodes]
            if self.training:
                history.update(l, ids, h)
            h = self.linears[l + 1](agg)
            if l + 1 < self.num_propagated:
                h = F.relu(h)
        return h


def exact_logits(model: ControlVariateGCN, graph: Graph, ax: Tensor) -> Tensor:
    """The model's exact output on every node of ``graph`` (full aggregation with ``update_all``):
    the reference the estimator is unbiased for."""
    graph = UserGraph.view(graph)   # update_all, on a graph of either class
    ptr = graph.in_csr()[0]
    degree = ptr[1:] - ptr[:-1]
    src, dst = graph.src, graph.dst
    weight = gcn_weights(degree[dst], degree[src])
    h = F.relu(model.linears[0](ax))
    for l in range(model.num_propagated):
        with graph.local_scope():
            graph.ndata["h"] = h
            graph.edata["w"] = weight.to(h.dtype).unsqueeze(1)
            graph.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "agg"))
            agg = graph.ndata["agg"] + (1.0 / (degree.to(h.dtype) + 1)).unsqueeze(1) * h
        h = model.linears[l + 1](agg)
        if l + 1 < model.num_propagated:
            h = F.relu(h)
    return h


# ---------------------------------------------------------------------------------------------- training
@dataclasses.dataclass
class CVResult:
    """What :func:`train_control_variate` measured: accuracies after the last epoch, per-epoch
    seconds (training only) and losses, and the rows of ``P X`` read per epoch (the receptive field)."""

    val_acc: float
    test_acc: float
    epoch_seconds: list[float]
    losses: list[float]
    ax_rows: int


def train_control_variate(graph: Graph, ax: Tensor, y: Tensor, masks: tuple[Tensor, Tensor, Tensor], *,
                          fanout: int | None, hidden: int = 64, num_layers: int = 2, epochs: int = 20,
                          batch_size: int = 256, lr: float = 0.01, seed: int = 0, history=None,
                          dtype: torch.dtype = torch.float32) -> tuple[ControlVariateGCN, CVResult]:
    """Train :class:`ControlVariateGCN` with ``fanout`` sampled neighbours (``None``: every one) on
    the training nodes, mini-batches of ``batch_size``, Adam; evaluate exactly (:func:`exact_logits`)."""
    import time  # noqa: PLC0415

    from unigraph.sampling.counter_rng import GOLDEN, mix64_int  # noqa: PLC0415
    torch.manual_seed(seed)
    num_classes = int(y.max()) + 1
    model = ControlVariateGCN(ax.shape[1], hidden, num_classes, num_layers).to(dtype)
    history = history if history is not None else TensorHistory(graph.num_nodes, model.history_widths, dtype)
    sampler = ControlVariateSampler(model.num_propagated, fanout, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    train = masks[0].nonzero().squeeze(1)
    csr = in_csr_view(graph)
    seconds, losses, ax_rows = [], [], 0
    for epoch in range(epochs):
        model.train()
        generator = torch.Generator().manual_seed(seed * 1000 + epoch)
        order = train[torch.randperm(train.numel(), generator=generator)]
        began, total, rows = time.perf_counter(), 0.0, 0
        for b, seeds in enumerate(order.split(batch_size)):
            batch = sampler.sample(csr, seeds, key=mix64_int(seed + epoch * GOLDEN + b))
            rows += batch.nodes[0].numel()
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(batch, ax[batch.nodes[0]].to(dtype), history), y[seeds])
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
        seconds.append(time.perf_counter() - began)
        losses.append(total / math.ceil(train.numel() / batch_size))
        ax_rows = rows
    model.eval()
    with torch.no_grad():
        predicted = exact_logits(model, graph, ax.to(dtype)).argmax(1)
    val, test = (float((predicted[m] == y[m]).double().mean()) for m in masks[1:])
    return model, CVResult(val, test, seconds, losses, ax_rows)
