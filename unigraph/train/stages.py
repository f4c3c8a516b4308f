"""The process layout of data x pipeline parallelism and a ``torch.distributed.pipelining`` schedule
for one stage.

Layout: ``replicas * stages`` ranks; rank ``r * stages + s`` runs stage ``s`` of replica ``r``.
Each replica's ranks form a *pipeline group* (activations and their gradients go between
neighbouring stages of one replica); each stage's ranks across replicas form a *stage group*
(after every mini-batch, matching stages average their gradients in one all-reduce, which is data
parallelism between the replicas). Every rank creates every group, in the same order, as
``torch.distributed.new_group`` requires.

Shapes are given to :class:`~torch.distributed.pipelining.PipelineStage` up front (its *static*
mode): no stage runs an extra forward to discover them (which would also update batch-norm
statistics), and the buffers receiving activations have the fixed, padded shape every micro-batch
uses.
"""
from __future__ import annotations

import dataclasses
import datetime
from typing import Callable

import torch
import torch.distributed as dist
from torch import Tensor

from unigraph.train.distributed import DistContext, average_gradients


@dataclasses.dataclass
class PipelineLayout:
    """This rank's stage and replica and the groups it communicates in."""

    stage: int
    replica: int
    stages: int
    replicas: int
    pipeline_group: object   # this replica's stages (None: the default group, when there is one replica)
    stage_group: object      # this stage across replicas (None when there is one replica)

    @property
    def is_first(self) -> bool:
        return self.stage == 0

    @property
    def is_last(self) -> bool:
        return self.stage == self.stages - 1


def make_layout(context: DistContext, stages: int, replicas: int) -> PipelineLayout:
    """Create the pipeline and stage groups (a collective: every rank calls it the same way)."""
    if context.world_size != stages * replicas:
        raise ValueError(f"{stages} stages x {replicas} replicas need {stages * replicas} processes, but the job has "
                         f"{context.world_size}; start it with --nproc {stages * replicas}")
    replica, stage = divmod(context.rank, stages)
    pipeline_group = stage_group = None
    timeout = datetime.timedelta(seconds=context.timeout)
    if replicas > 1:
        for r in range(replicas):
            group = dist.new_group([r * stages + s for s in range(stages)], timeout=timeout)
            if r == replica:
                pipeline_group = group
        for s in range(stages):
            group = dist.new_group([r * stages + s for r in range(replicas)], timeout=timeout)
            if s == stage:
                stage_group = group
    return PipelineLayout(stage, replica, stages, replicas, pipeline_group, stage_group)


def build_schedule(module: torch.nn.Module, layout: PipelineLayout, device: torch.device, example_input: Tensor,
                   example_output: Tensor, micro_batches: int, schedule: str, loss_fn: Callable):
    """A :class:`PipelineStage` for ``module`` (this rank's stage) and its schedule.

    ``example_input`` / ``example_output``: one micro-batch's input and output (shapes and dtypes
    only). ``loss_fn(output, target, **loss_kwargs)`` must *sum* over the micro-batch and divide
    by the whole mini-batch's count: gradients are not rescaled (``scale_grads=False``), so the
    micro-batch gradients add up to the mini-batch's.
    """
    # imported here: torch.distributed.pipelining imports torch._dynamo (~1 s), which `import unigraph`
    # and `unigraph --help` should not pay for
    from torch.distributed import pipelining
    stage = pipelining.PipelineStage(module, layout.stage, layout.stages, device, input_args=example_input,
                                     output_args=example_output, group=layout.pipeline_group)
    schedule_class = {"gpipe": pipelining.ScheduleGPipe, "1f1b": pipelining.Schedule1F1B}[schedule]
    return schedule_class(stage, micro_batches, loss_fn=loss_fn, scale_grads=False)


def example(shape, dtype: torch.dtype, device: torch.device, requires_grad: bool) -> Tensor:
    """An uninitialized tensor standing for a micro-batch's activations (only its metadata is read)."""
    return torch.empty(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def sync_replicas(module: torch.nn.Module, layout: PipelineLayout) -> None:
    """Average this stage's gradients over the replicas (data x pipeline)."""
    average_gradients(module.parameters(), layout.stage_group, layout.replicas)


def gather_to_first(value, layout: PipelineLayout, rank: int) -> list | None:
    """Collect ``value`` from the stages of replica 0 on rank 0 (in stage order); other ranks of
    replica 0 get None. Replicas other than 0 must not call it (their copies are identical)."""
    if layout.stages == 1:
        return [value]
    gathered = [None] * layout.stages if rank == 0 else None
    dist.gather_object(value, gathered, dst=0, group=layout.pipeline_group)
    return gathered
