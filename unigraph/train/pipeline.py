"""Pipeline-parallel node classification with graph-aware micro-batches, and data x pipeline.

The model's layers (:func:`unigraph.train.layers.model_layers`) are cut into stages by a GPipe-like
``balance`` list; each rank runs one stage (:class:`GraphStage`) under
``torch.distributed.pipelining`` (GPipe or 1F1B schedule). Every mini-batch is cut into
micro-batches of seeds, each with its own sampled blocks (:mod:`unigraph.train.micro_batch`), so
no edge a seed needs is lost and the micro-batch gradients add up to the whole mini-batch's.

How a stage knows its micro-batch's blocks: the schedule passes keyword arguments to *every*
stage's ``forward``, split per micro-batch like the inputs. Each step passes
``micro_batch=arange(M)``, which arrives as a one-element tensor naming the micro-batch; the stage
looks its blocks up in the list the trainer set before the step. The blocks themselves never cross
processes: every rank of a replica iterates an identical loader (same seed, same replica share)
and samples the same micro-batches, since sampling is deterministic under its keys. That costs
one sampling per stage instead of a transfer of the blocks.

Activations between stages are padded to fixed capacities (see
:func:`~unigraph.train.micro_batch.node_capacities`); the last stage pads its logits to the seeds
capacity and labels padded rows ``-100`` (ignored by the loss).

Data x pipeline: with ``replicas > 1`` each replica trains on its own share of each epoch's seeds
(the loader's ``num_replicas``/``rank``), and matching stages average their gradients after every
mini-batch (:mod:`unigraph.train.stages`).

Evaluation gathers the stages' weights on rank 0 and runs the whole model on the whole graph;
checkpoints hold the whole model, one optimizer state per stage and every rank's RNG state.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from unigraph.data import NodeDataset
from unigraph.graph import Graph
from unigraph.sampling import NeighborSampler, NodeLoader
from unigraph.train import checkpoint as ckpt
from unigraph.train.config import PipelineConfig, TrainConfig
from unigraph.train.distributed import DistContext, all_reduce_sum, current_context
from unigraph.train.layers import model_layers, stage_bounds
from unigraph.train.metrics import EpochMetrics
from unigraph.train.micro_batch import (IGNORE_LABEL, MicroBatches, MicroBatchSampler, node_capacities, pad_rows,
                                        seeds_per_micro_batch)
from unigraph.train.rng import capture_rng_state, restore_rng_state
from unigraph.train.stages import build_schedule, example, gather_to_first, make_layout, sync_replicas
from unigraph.train.trainer import Trainer, check_resume_config, make_optimizer, resolve_fanouts


class GraphStage(torch.nn.Module):
    """Layers ``start .. stop - 1`` of a node classifier as one pipeline stage.

    ``forward(h, micro_batch)``: ``h`` holds the padded input rows of layer ``start`` (only the
    first ``blocks[start].num_src_nodes`` are real), ``micro_batch`` a one-element tensor naming
    the micro-batch, whose blocks (all layers) are ``self.micro_blocks[micro_batch]``. Returns the
    output rows padded to ``out_rows``.
    """

    def __init__(self, layers: list[torch.nn.Module], start: int, stop: int, out_rows: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(layers[start:stop])
        self.start, self.stop, self.out_rows = start, stop, out_rows
        self.micro_blocks: list[list[Graph]] = []

    def forward(self, h: Tensor, micro_batch: Tensor) -> Tensor:
        blocks = self.micro_blocks[int(micro_batch.reshape(-1)[0])]
        h = h[:blocks[self.start].num_src_nodes]
        for offset, layer in enumerate(self.layers):
            h = layer(blocks[self.start + offset], h)
        return pad_rows(h, self.out_rows)


def summed_cross_entropy(logits: Tensor, labels: Tensor, count: int) -> Tensor:
    """Cross-entropy summed over a micro-batch's rows (padded rows, labelled ``-100``, are skipped) and
    divided by ``count``, the whole mini-batch's row count: the micro-batch losses add up to the
    mini-batch's mean loss, and so do their gradients."""
    return F.cross_entropy(logits, labels, ignore_index=IGNORE_LABEL, reduction="sum") / count


@torch.no_grad()
def layer_widths(layers: list[torch.nn.Module], batch, x: Tensor) -> list[tuple[int, ...]]:
    """The per-row output shape of every layer, from one eval-mode pass over a small batch (the RNG
    and batch-norm statistics are left untouched)."""
    modes = [layer.training for layer in layers]
    shapes = []
    with torch.random.fork_rng(devices=[]):
        h = x
        for layer, block in zip(layers, batch.blocks):
            layer.eval()
            h = layer(block, h)
            shapes.append(tuple(h.shape[1:]))
    for layer, mode in zip(layers, modes):
        layer.train(mode)
    return shapes


class PipelineTrainer(Trainer):
    """:class:`Trainer` with the model cut into pipeline stages (and optionally replicated).

    Runs in every rank of a job of ``pipeline.stages * pipeline.replicas`` processes
    (``torchrun`` or :func:`unigraph.train.launch`); rank ``r * stages + s`` runs stage ``s`` of
    replica ``r``. Same metrics, early stopping and checkpoints as :class:`Trainer`; the model must
    be a GCN, GAT, GraphSAGE or GIN (:func:`~unigraph.train.layers.model_layers`).

    ``config.batch_size`` is per replica (``None``: a replica's whole share of the training nodes);
    every batch is cut into ``pipeline.micro_batches`` micro-batches. For layers whose output at a
    node depends only on its in-edges (GAT, GraphSAGE, GIN's convolution) a pipelined step computes
    exactly the whole mini-batch's gradient; batch normalization (GIN's MLPs) sees each
    micro-batch's statistics, as in GPipe, and GCN normalizes by degrees within each micro-batch's
    blocks (see :mod:`unigraph.train.trainer`).

    Under ``torchrun`` in a script of your own, end each rank with
    :func:`unigraph.procs.exit_if_gloo_outlived` after ``shutdown()`` (``unigraph train`` and
    :func:`unigraph.train.launch` do): torch keeps a gloo group that the stages' ``P2POp``s used,
    and its threads can abort the interpreter's exit (``docs/faults.md``).
    """

    def __init__(self, model: torch.nn.Module, dataset: NodeDataset, config: TrainConfig, pipeline: PipelineConfig,
                 *, context: DistContext | None = None):
        if not isinstance(pipeline, PipelineConfig):
            raise TypeError(f"pipeline must be a PipelineConfig, got {type(pipeline).__name__}")
        context = context if context is not None else current_context()
        if context is None:
            raise ValueError("pipeline training needs a process group: start with torchrun or unigraph.train.launch, "
                             "and call unigraph.train.init_distributed() in each process")
        self.pipeline = pipeline
        super().__init__(model, dataset, config, context=context)

    @property
    def layout(self) -> dict:
        return {"mode": "pipeline", "world_size": self.world_size, "stages": self.pipeline.stages,
                "replicas": self.pipeline.replicas, "micro_batches": self.pipeline.micro_batches}

    def _setup_training(self) -> None:
        self.full_graph = False
        pipeline, config = self.pipeline, self.config
        self.stage_layout = make_layout(self.context, pipeline.stages, pipeline.replicas)
        layers = model_layers(self.model)
        start, stop = stage_bounds(len(layers), pipeline.stages, pipeline.balance)[self.stage_layout.stage]
        graph = self.dataset.graph
        fanouts = resolve_fanouts(config, self.model, graph)
        batch_size = self.batch_size(pipeline.replicas)
        if batch_size < pipeline.micro_batches:
            raise ValueError(f"a batch of {batch_size} seeds cannot be cut into {pipeline.micro_batches} micro-batches; "
                             "use a larger batch size or fewer micro-batches")
        capacities = node_capacities(fanouts, seeds_per_micro_batch(batch_size, pipeline.micro_batches), graph.num_nodes)
        sampler = NeighborSampler(fanouts, replace=config.replace, seed=config.seed)
        probe = sampler.sample(graph, self.train_nodes[:1], key=0).to(self.device)
        widths = [tuple(self.x.shape[1:])] + layer_widths(layers, probe, self.x[probe.input_nodes.cpu()].to(self.device))
        self.stage_module = GraphStage(layers, start, stop, capacities[stop]).to(self.device)
        self.capacities = capacities
        dtype = self.x.dtype
        example_input = example((capacities[start],) + widths[start], dtype, self.device, requires_grad=start > 0)
        example_output = example((capacities[stop],) + widths[stop], dtype, self.device, requires_grad=True)
        self.schedule = build_schedule(self.stage_module, self.stage_layout, self.device, example_input, example_output,
                                       pipeline.micro_batches, pipeline.schedule, summed_cross_entropy)
        self.optimizer = make_optimizer(self.stage_module.parameters(), config)
        self.owned_prefixes = tuple(f"convs.{i}." for i in range(start, stop))
        self.loader = NodeLoader(graph, self.train_nodes, MicroBatchSampler(sampler, pipeline.micro_batches),
                                 batch_size=batch_size, shuffle=True, num_workers=config.num_workers,
                                 timeout=config.timeout, seed=config.seed, num_replicas=pipeline.replicas,
                                 rank=self.stage_layout.replica)

    # ------------------------------------------------------------------ training
    def train_step(self, batch: MicroBatches, *, step_optimizer: bool = True) -> float:
        """One mini-batch through the pipeline; returns its loss on the last stage (0.0 elsewhere).
        With ``step_optimizer=False`` the (replica-averaged) gradients are left in ``.grad``."""
        layout, parts = self.stage_layout, batch.parts
        on_cpu = self.device.type == "cpu"
        self.stage_module.micro_blocks = [part.blocks if on_cpu else part.to(self.device).blocks for part in parts]
        micro_batch = torch.arange(len(parts), device=self.device)
        self.optimizer.zero_grad(set_to_none=True)
        args = ()
        if layout.is_first:
            args = (torch.cat([pad_rows(self.x[part.input_nodes], self.capacities[0]) for part in parts]).to(self.device),)
        target, losses = None, None
        if layout.is_last:
            labels = self.dataset.y
            target = torch.cat([pad_rows(labels[part.seeds], self.capacities[-1], IGNORE_LABEL) for part in parts])
            target, losses = target.to(self.device), []
        self.schedule.step(*args, target=target, losses=losses, return_outputs=False,
                           loss_kwargs={"count": max(1, batch.seeds.numel())}, micro_batch=micro_batch)
        sync_replicas(self.stage_module, layout)
        if step_optimizer:
            self.optimizer.step()
        return float(sum(loss.detach() for loss in losses)) if layout.is_last else 0.0

    def train_epoch(self) -> float:
        self.stage_module.train()
        total, steps = 0.0, 0
        for batch in self.loader:
            total += self.train_step(batch)
            steps += 1 if self.stage_layout.is_last else 0
        total, steps = all_reduce_sum([total, steps], self.device)
        return total / max(steps, 1)

    # ------------------------------------------------------------------ whole-model views on rank 0
    def _owned_state(self) -> dict:
        return {key: value.detach().cpu() for key, value in self.model.state_dict().items()
                if key.startswith(self.owned_prefixes)}

    def _gather_model(self) -> None:
        """Load every stage's current weights into rank 0's model (replica 0 takes part)."""
        if self.stage_layout.replica != 0:
            return
        states = gather_to_first(self._owned_state(), self.stage_layout, self.rank)
        if self.rank == 0:
            merged = self.model.state_dict()
            for state in states:
                merged.update(state)
            self.model.load_state_dict(merged)

    def evaluate(self) -> tuple[float, float, float, float]:
        self._gather_model()
        return super().evaluate()

    def save_checkpoint(self, epoch: int) -> None:
        self._gather_model()
        optimizers = None
        if self.stage_layout.replica == 0:
            optimizers = gather_to_first(self.optimizer.state_dict(), self.stage_layout, self.rank)
        rng = [None] * self.world_size
        dist.all_gather_object(rng, capture_rng_state())
        if self.rank != 0:
            return
        ckpt.save_checkpoint(self.config.checkpoint_dir, {
            "epoch": epoch, "model": self.model.state_dict(), "optimizer": optimizers, "rng": rng,
            "loader": self.loader.state_dict(), "early_stopping": self.early_stopping.state_dict(),
            "stopped_early": self.stopped_early, "history": [m.as_dict() for m in self.history],
            "config": self.config.to_dict(), "world": self.layout})

    def load_checkpoint(self) -> int:
        state = ckpt.load_checkpoint(self.config.checkpoint_dir, epochs=self.config.epochs)
        ckpt.check_compatible(state, self.layout)
        check_resume_config(state["config"], self.config)
        ckpt.check_restorable(state, self.model, self.optimizer, stage=self.stage_layout.stage)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"][self.stage_layout.stage])
        self.early_stopping.load_state_dict(state["early_stopping"])
        self.stopped_early = state["stopped_early"]
        self.history = [EpochMetrics(**m) for m in state["history"]]
        self.loader.load_state_dict(state["loader"])
        restore_rng_state(state["rng"][self.rank])
        return state["epoch"]
