"""The Vision GNN (:class:`unigraph.models.ViG`) cut into pipeline stages.

Each image is its own kNN graph over its patch tokens, built inside every :class:`Grapher` block
from that image's tokens only. A batch of images therefore splits into micro-batches along the
batch dimension with nothing lost between them (unlike the nodes of one big graph), and every
activation has a fixed shape ``[images, tokens, channels]``: no padding is needed.

Layers, in order: the stem (convolutions + position embedding), the ``2 * depth`` blocks
(Grapher, FFN, Grapher, FFN, ...) and the head (token mean + classifier). By default the blocks
are spread evenly over the stages, the stem joins the first stage and the head the last.

Batch normalization inside the blocks normalizes each micro-batch by its own statistics (as in
GPipe), so a pipelined step equals the sequential model run on the same micro-batches with their
gradients accumulated, not the model run on the whole batch at once.
"""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.models import ViG
from unigraph.train.config import PipelineConfig
from unigraph.train.distributed import DistContext
from unigraph.train.layers import balanced, stage_bounds
from unigraph.train.pipeline import summed_cross_entropy
from unigraph.train.stages import build_schedule, example, make_layout, sync_replicas


class ViGStem(torch.nn.Module):
    """Images ``[B, C, H, W]`` -> patch tokens ``[B, n, channels]`` plus the position embedding
    (``ViG.forward``'s first step; shares the ViG's parameters)."""

    def __init__(self, vig: ViG):
        super().__init__()
        self.stem = vig.stem
        self.pos_embed = vig.pos_embed

    def forward(self, images: Tensor) -> Tensor:
        return self.stem(images).flatten(2).transpose(1, 2) + self.pos_embed


class ViGHead(torch.nn.Module):
    """Tokens -> logits: the mean token through the ViG's classification head."""

    def __init__(self, vig: ViG):
        super().__init__()
        self.head = vig.head

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(tokens.mean(dim=1))


def vig_layers(vig: ViG) -> list[torch.nn.Module]:
    """``[stem, block_0, ..., block_{2 depth - 1}, head]``; run in order they are ``vig.forward``."""
    if not isinstance(vig, ViG):
        raise TypeError(f"vig_layers expects a unigraph.models.ViG, got {type(vig).__name__}")
    return [ViGStem(vig), *vig.blocks, ViGHead(vig)]


def vig_balance(vig: ViG, stages: int) -> tuple[int, ...]:
    """Layers per stage: the blocks spread evenly, plus the stem on the first and the head on the last."""
    balance = list(balanced(len(vig.blocks), stages))
    balance[0] += 1
    balance[-1] += 1
    return tuple(balance)


@torch.no_grad()
def token_shapes(layers: list[torch.nn.Module], image_shape: tuple[int, ...], dtype: torch.dtype,
                 device: torch.device) -> list[tuple[int, ...]]:
    """Per-image output shape of every layer (one eval-mode pass over two blank images)."""
    modes = [layer.training for layer in layers]
    h, shapes = torch.zeros((2,) + tuple(image_shape), dtype=dtype, device=device), []
    for layer in layers:
        layer.eval()
        h = layer(h)
        shapes.append(tuple(h.shape[1:]))
    for layer, mode in zip(layers, modes):
        layer.train(mode)
    return shapes


class ViGPipeline:
    """Trains a :class:`ViG` on batches of ``batch_size`` images with its layers cut into stages.

    Runs in every rank of a job of ``pipeline.stages * pipeline.replicas`` processes; rank
    ``r * stages + s`` runs stage ``s`` of replica ``r``. Each replica takes its own image batches;
    ``batch_size`` (per replica) must be a multiple of ``pipeline.micro_batches``.
    :meth:`train_step` returns the batch's mean loss on the last stage (0.0 on the others).
    """

    def __init__(self, vig: ViG, pipeline: PipelineConfig, batch_size: int, *, context: DistContext,
                 lr: float = 0.01, device: torch.device | None = None):
        if batch_size % pipeline.micro_batches:
            raise ValueError(f"batch_size={batch_size} must be a multiple of micro_batches={pipeline.micro_batches} "
                             "(every micro-batch has the same shape)")
        if batch_size // pipeline.micro_batches < 2:
            raise ValueError(f"micro-batches of {batch_size // pipeline.micro_batches} image cannot train the ViG head's "
                             "batch normalization (it needs 2 or more); use a larger batch or fewer micro-batches")
        self.device = device or context.device
        self.layout = make_layout(context, pipeline.stages, pipeline.replicas)
        layers = vig_layers(vig.to(self.device))
        balance = pipeline.balance or vig_balance(vig, pipeline.stages)
        start, stop = stage_bounds(len(layers), pipeline.stages, balance)[self.layout.stage]
        image_shape = (vig.in_channels, vig.image_size, vig.image_size)
        dtype = next(vig.parameters()).dtype
        shapes = [image_shape] + token_shapes(layers, image_shape, dtype, self.device)
        per_micro_batch = batch_size // pipeline.micro_batches
        self.module = torch.nn.Sequential(*layers[start:stop])
        self.schedule = build_schedule(
            self.module, self.layout, self.device,
            example((per_micro_batch,) + shapes[start], dtype, self.device, requires_grad=start > 0),
            example((per_micro_batch,) + shapes[stop], dtype, self.device, requires_grad=True),
            pipeline.micro_batches, pipeline.schedule, summed_cross_entropy)
        self.optimizer = torch.optim.SGD(self.module.parameters(), lr=lr, momentum=0.9)
        self.batch_size = batch_size

    def train_step(self, images: Tensor | None, labels: Tensor | None, *, step_optimizer: bool = True) -> float:
        """One batch: the first stage passes ``images``, the last ``labels`` (others may pass None)."""
        self.module.train()
        self.optimizer.zero_grad(set_to_none=True)
        args = (images.to(self.device),) if self.layout.is_first else ()
        losses = [] if self.layout.is_last else None
        target = labels.to(self.device) if self.layout.is_last else None
        self.schedule.step(*args, target=target, losses=losses, return_outputs=False,
                           loss_kwargs={"count": self.batch_size})
        sync_replicas(self.module, self.layout)
        if step_optimizer:
            self.optimizer.step()
        return float(sum(loss.detach() for loss in losses)) if self.layout.is_last else 0.0
