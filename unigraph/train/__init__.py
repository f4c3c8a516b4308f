"""Training that scales: one trainer for one process or many, pipeline stages, and both.

* :class:`Trainer` - node classification, full graph or sampled mini-batches, single process or
  data parallel (``DistributedDataParallel``), metrics, progress, early stopping, checkpoints.
* :func:`launch` - start ``N`` ranks on this machine as ``torchrun`` would, failing fast.
* :class:`PipelineTrainer` - pipeline parallelism (``torch.distributed.pipelining``) with
  graph-aware micro-batches, and data x pipeline with replicas.
* :mod:`unigraph.train.vig` - the Vision GNN cut into pipeline stages.
"""
from unigraph.train.checkpoint import load_checkpoint, save_checkpoint
from unigraph.train.config import PipelineConfig, TrainConfig
from unigraph.train.distributed import DistContext, init_distributed, launched_by_environment
from unigraph.train.launch import LaunchError, launch
from unigraph.train.metrics import EpochMetrics, TrainResult
from unigraph.train.models import build_node_classifier, model_names
from unigraph.train.pipeline import PipelineTrainer
from unigraph.train.rng import seed_everything
from unigraph.train.trainer import Trainer

__all__ = ["Trainer", "TrainConfig", "PipelineConfig", "PipelineTrainer", "TrainResult", "EpochMetrics", "launch",
           "LaunchError", "DistContext", "init_distributed", "launched_by_environment", "build_node_classifier",
           "model_names", "seed_everything", "save_checkpoint", "load_checkpoint"]
