"""Training on a partition set: :class:`DistTrainer` and the job every process of it runs.

**Processes and roles.** A job has ``T`` trainers, one per partition, and optionally ``S`` sampler
processes per trainer: ``T * (1 + S)`` processes, numbered so that process ``r`` belongs to
partition ``r // (1 + S)`` and is its trainer when ``r % (1 + S) == 0`` (so ``torchrun
--nproc-per-node`` with a multiple of ``1 + S`` keeps each trainer's samplers on its machine).
Every process joins the gloo process group the environment describes (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``: ``torchrun`` or :func:`unigraph.train.launch`) and the job's
``torch.distributed.rpc`` group. The trainers also form their own group, over which
``DistributedDataParallel`` averages gradients (NCCL when they train on GPUs, else gloo). A
trainer is also the **owner** of its partition: its RPC threads answer the other processes'
requests about its nodes (:mod:`unigraph.distributed.peers`) while its main thread trains.

**Exactly the single-machine gradient.** Trainer ``t`` takes its partition's training nodes as
seeds, in ``K`` batches per epoch, the same ``K`` on every trainer (:mod:`.loader`). Step ``b``'s
global batch is the union of the trainers' batches ``b``, of known size ``G_b`` (every trainer
reads every partition's training-node count from the metadata). Each trainer's loss is its sum
of per-seed losses times ``T / G_b``; DDP's average over the ``T`` trainers is then the mean
loss over the global batch, whatever the trainers' batch sizes. With the sampler's node-keyed
draws, ``T`` trainers compute the gradient one process computes on the same global batches
(``tests/test_dist_train.py`` checks the parameters against a single-process replay).

**Evaluation** is distributed too: each trainer scores its own validation and test nodes on
blocks (``eval_fanouts``; the default ``None`` keeps every in-edge, which for GraphSAGE, GAT and
GIN's convolution is exactly the full-graph computation) and the counts are summed over the
trainers. ``train_acc`` is measured on the epoch's training batches (in training mode).

**Failures.** Every wait is bounded by ``config.timeout`` (process groups and RPC). A process
that raises reports its error and leaves without the graceful RPC shutdown (which would wait for
the others); one that dies breaks its connections, so the others' requests and collectives fail
at once; :func:`unigraph.train.launch` (``unigraph train --nproc``) then stops every process and
reports the rank that failed first (``torchrun`` does the same). Nothing is left in shared
memory: TensorPipe's shared-memory rings are anonymous (``memfd``) and go with their processes.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import resource
import time
from typing import Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F

import unigraph
from unigraph.distributed import format as fmt
from unigraph.distributed.loader import DistNodeLoader, batch_sizes, equal_num_batches
from unigraph.distributed.local import LocalPartition
from unigraph.distributed.peers import RpcPeers, owner_name, serve
from unigraph.distributed.sampler import DistNeighborSampler, sampler_name, serve_sampling
from unigraph.distributed.store import DistFeatureStore, DistGraph
from unigraph.train.config import ALL_NEIGHBOURS, TrainConfig, check_fanouts
from unigraph.train.distributed import init_distributed, shutdown
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.layers import num_layers
from unigraph.train.job import ModelSpec
from unigraph.train.metrics import EpochMetrics
from unigraph.train.models import build_node_classifier
from unigraph.train.rng import seed_everything
from unigraph.train.trainer import Trainer, make_optimizer


def concrete_fanouts(fanouts, num_layers: int, max_in_degree: int) -> list[int]:
    """``None`` / ``-1`` entries become the graph's largest in-degree (every in-edge)."""
    fanouts = check_fanouts(fanouts) if fanouts is not None else (ALL_NEIGHBOURS,) * num_layers
    if len(fanouts) != num_layers:
        raise ValueError(f"fanouts has {len(fanouts)} entries but the model has {num_layers} layers")
    return [max(1, max_in_degree) if f == ALL_NEIGHBOURS else f for f in fanouts]


@dataclasses.dataclass
class Role:
    """What process ``rank`` of a job with ``num_samplers`` samplers per trainer does."""

    rank: int
    part: int
    sampler: int | None  # None for the trainer of ``part``, else the sampler's index

    @property
    def is_trainer(self) -> bool:
        return self.sampler is None

    @property
    def name(self) -> str:
        return owner_name(self.part) if self.is_trainer else sampler_name(self.part, self.sampler)


def partitioned_layout(info: fmt.PartitionSetInfo) -> dict:
    """What a checkpoint of a partitioned run must match to be resumed: the set (and so its trainers)."""
    return {"mode": "partitions", "world_size": info.num_parts, "partition_set": info.set_id}


def role_of(rank: int, world_size: int, num_samplers: int, num_parts: int) -> Role:
    group = 1 + num_samplers
    if world_size != num_parts * group:
        raise ValueError(f"a job on {num_parts} partitions with {num_samplers} sampler process(es) per trainer needs "
                         f"{num_parts} x {group} = {num_parts * group} processes, got WORLD_SIZE={world_size} (one "
                         "trainer per partition: partition again with --parts equal to the number of trainers)")
    return Role(rank, rank // group, None if rank % group == 0 else rank % group - 1)


class DistTrainer(Trainer):
    """Data-parallel training of ``model`` on a partition set, one trainer per partition.

    It is a :class:`~unigraph.train.Trainer` whose data comes from a :class:`DistGraph` and a
    :class:`DistFeatureStore`: the training loop, early stopping and checkpoint contents are the
    Trainer's (a checkpoint also records the partition set's id, and resuming with another set is
    refused); construction, the epoch and evaluation are replaced (see the module docstring).

    Args:
        model: a node classifier taking blocks (GraphSAGE, GAT, GIN, ...), built identically on
            every trainer.
        graph, features: this trainer's view of the partitioned graph.
        config: a :class:`~unigraph.train.TrainConfig`; ``batch_size`` is per trainer.
        group: the trainers' process group (``None`` for a single trainer).
        trainer_rank, num_trainers: this trainer's index (= its partition) and the number of trainers.
        device: where the model trains (features and blocks are moved there).
        samplers: RPC names of this trainer's sampler processes (``None``: sample in-process).
        prefetch: batches prepared ahead (:class:`DistNodeLoader`).
        eval_fanouts: fanouts of evaluation (``None``: every in-edge, exact).
        eval_batch_size: seeds per evaluation batch.
    """

    def __init__(self, model: torch.nn.Module, graph: DistGraph, features: DistFeatureStore, config: TrainConfig, *,
                 group=None, trainer_rank: int = 0, num_trainers: int = 1, device: torch.device | str = "cpu",
                 samplers=None, prefetch: int = 2, eval_fanouts=None, eval_batch_size: int = 1024):
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if graph.num_parts != num_trainers or graph.part != trainer_rank:
            raise ValueError(f"trainer {trainer_rank} of {num_trainers} must hold partition {trainer_rank} of "
                             f"{num_trainers}; it holds partition {graph.part} of {graph.num_parts}")
        self.config, self.context, self.group = config, None, group
        self.world_size, self.rank = num_trainers, trainer_rank
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.dtype = next(model.parameters()).dtype
        self.graph, self.features = graph, features
        info = graph.info
        local = graph.local
        self.train_nodes = local.first + torch.nonzero(local.train_mask).squeeze(1)
        self.eval_nodes = [local.first + torch.nonzero(mask).squeeze(1) for mask in (local.val_mask, local.test_mask)]
        layers = len(config.fanouts) if config.fanouts is not None else num_layers(model)
        self.fanouts = concrete_fanouts(config.fanouts, layers, info.max_in_degree)
        self.eval_fanouts = concrete_fanouts(eval_fanouts, layers, info.max_in_degree)
        self.eval_batch_size = eval_batch_size
        counts = [info.count(p, "train") for p in range(info.num_parts)]
        if sum(counts) == 0:
            raise ValueError(f"the partition set in {info.directory} has no training nodes")
        self.num_batches = equal_num_batches(counts, config.batch_size or max(counts))
        self.global_batch = sum(batch_sizes(c, self.num_batches) for c in counts)  # G_b of every step b
        self.samplers, self.prefetch = samplers, prefetch
        self.full_graph = False
        self.early_stopping = EarlyStopping(config.patience)
        self.history: list[EpochMetrics] = []
        self.stopped_early = False
        # compute: seconds in train_step; train_seconds: the epochs' training loops (waits included)
        self.timing = {"compute": 0.0, "steps": 0, "train_seconds": 0.0}
        # what training (not evaluation) moved: payload bytes of this trainer's requests and of its
        # sampler processes' batches, by kind, and the feature rows it gathered (remote ones, cached ones)
        self.training = dict.fromkeys(("bytes", "sample_bytes", "feature_bytes", "sampler_bytes", "rows",
                                       "remote_rows", "cache_hits"), 0)
        self._train_acc = float("nan")
        self._setup_training()

    def _setup_training(self) -> None:
        self.net = self.model
        if self.world_size > 1:
            device_ids = [self.device] if self.device.type == "cuda" else None
            self.net = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids,
                                                                 process_group=self.group)
        self.optimizer = make_optimizer(self.model.parameters(), self.config)
        sampler = DistNeighborSampler(self.fanouts, self.config.replace, seed=self.config.seed)
        self.loader = DistNodeLoader(self.graph, self.train_nodes, sampler, features=self.features,
                                     num_batches=self.num_batches, seed=self.config.seed, prefetch=self.prefetch,
                                     samplers=self.samplers)

    @property
    def layout(self) -> dict:
        return partitioned_layout(self.graph.info)

    def _all_reduce(self, values: list[float]) -> list[float]:
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.world_size > 1:
            dist.all_reduce(tensor, group=self.group)
        return tensor.tolist()

    # ------------------------------------------------------------------ training
    def _counters(self) -> dict[str, int]:
        """Traffic and feature-row counters so far (evaluation included)."""
        traffic, features = self.graph.peers.traffic(), self.features
        by_request = traffic["bytes_by_request"]
        return {"bytes": traffic["bytes_sent"] + traffic["bytes_received"] + self.loader.stats["sampler_bytes"],
                "sample_bytes": by_request.get("sample", 0), "feature_bytes": by_request.get("features", 0),
                "sampler_bytes": self.loader.stats["sampler_bytes"], "rows": features.rows,
                "remote_rows": features.hits + features.misses, "cache_hits": features.hits}

    def train_epoch(self) -> float:
        self.net.train()
        total, correct, seen = 0.0, 0.0, 0.0
        began_epoch, before = time.perf_counter(), self._counters()
        for step, batch in enumerate(self.loader):
            began = time.perf_counter()
            batch = batch.to(self.device)
            total += self.train_step(batch, step)
            correct += float((self._last_logits.argmax(-1) == batch.y).sum())
            seen += batch.y.numel()
            self.timing["compute"] += time.perf_counter() - began
            self.timing["steps"] += 1
        self.timing["train_seconds"] += time.perf_counter() - began_epoch
        for name, value in self._counters().items():
            self.training[name] += value - before[name]
        total, correct, seen = self._all_reduce([total, correct, seen])
        self._train_acc = correct / seen if seen else float("nan")
        return total / self.num_batches

    def train_step(self, batch, step: int) -> float:
        """One optimizer step; returns this trainer's share of the global batch's mean loss."""
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.net(batch.blocks, batch.x.to(self.dtype))
        loss_sum = F.cross_entropy(logits, batch.y, reduction="sum")
        global_size = int(self.global_batch[step])
        (loss_sum * (self.world_size / global_size)).backward()  # DDP averages: the global batch's mean
        self.optimizer.step()
        self._last_logits = logits.detach()
        return float(loss_sum.detach()) / global_size

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float, float]:
        """``(train_acc, val_acc, test_acc, val_loss)`` over all trainers' nodes."""
        self.model.eval()
        sums = []
        for nodes in self.eval_nodes:
            sums += self._score(nodes)
        val_correct, val_count, val_loss, test_correct, test_count, _ = self._all_reduce(sums)
        return (self._train_acc, val_correct / val_count if val_count else 0.0,
                test_correct / test_count if test_count else 0.0, val_loss / val_count if val_count else float("nan"))

    def _score(self, nodes: torch.Tensor) -> list[float]:
        """``[correct, count, loss sum]`` of this trainer's ``nodes``."""
        sampler = DistNeighborSampler(self.eval_fanouts, seed=self.config.seed)
        num_batches = max(1, -(-nodes.numel() // self.eval_batch_size))
        loader = DistNodeLoader(self.graph, nodes, sampler, features=self.features, num_batches=num_batches,
                                shuffle=False, seed=self.config.seed, prefetch=min(self.prefetch, 1))  # one ahead:
        # evaluation batches keep every in-edge and are large, and memory is the point of partitioning
        correct, loss = 0.0, 0.0
        with loader:
            for batch in loader:
                batch = batch.to(self.device)
                logits = self.model(batch.blocks, batch.x.to(self.dtype))
                correct += float((logits.argmax(-1) == batch.y).sum())
                loss += float(F.cross_entropy(logits, batch.y, reduction="sum"))
        return [correct, float(nodes.numel()), loss]


# ---------------------------------------------------------------------------------------------- the job
@dataclasses.dataclass
class DistJobSpec:
    """Everything a process of a partitioned job needs (plain data: it travels to spawned processes).

    ``rank_offset`` is added to the launcher's rank (``--node-rank`` times the processes per
    machine when one ``unigraph train`` starts the processes of one machine of several).
    """

    partitions: str
    model: ModelSpec = dataclasses.field(default_factory=lambda: ModelSpec("sage"))
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    num_samplers: int = 0
    cache_size: int = 0
    prefetch: int = 2
    eval_fanouts: tuple[int, ...] | None = None
    eval_batch_size: int = 1024
    backend: str = "auto"
    threads: int | None = None
    rank_offset: int = 0
    device: str = "auto"
    verify: bool = True


def build_model(spec: DistJobSpec, info: fmt.PartitionSetInfo) -> torch.nn.Module:
    seed_everything(spec.train.seed)
    m = spec.model
    return build_node_classifier(m.name, info.num_features, info.num_classes, num_layers=m.num_layers,
                                 hidden_channels=m.hidden_channels, heads=m.heads, dropout=m.dropout)


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclasses.dataclass
class JobProcess:
    """One process of a partitioned job, joined and ready (see :func:`join_job`)."""

    spec: DistJobSpec
    info: fmt.PartitionSetInfo
    role: Role
    trainers: object            # the trainers' process group
    peers: RpcPeers
    graph: DistGraph
    device: torch.device

    @property
    def samplers(self) -> list[str] | None:
        """RPC names of this trainer's sampler processes (``None`` without any)."""
        return [sampler_name(self.role.part, s) for s in range(self.spec.num_samplers)] or None


@contextlib.contextmanager
def join_job(spec: DistJobSpec) -> Iterator[JobProcess]:
    """Join the job as the environment says (process group, RPC), load this process's partition
    (a trainer: all of it, and serve it; a sampler: its structure, and sample for its trainer) and
    wait until every process is ready. Leaving the block shuts RPC down gracefully (answering
    requests until every process has left) and leaves the process group; leaving it with an
    error shuts down at once instead (the launcher stops the other processes)."""
    from torch.distributed import rpc  # noqa: PLC0415

    if spec.rank_offset:
        os.environ["RANK"] = str(int(os.environ["RANK"]) + spec.rank_offset)
    if spec.threads is not None:
        torch.set_num_threads(spec.threads)
    unigraph.set_backend(spec.backend)
    info = fmt.read_metadata(spec.partitions)
    context = init_distributed(timeout=spec.train.timeout, backend="gloo")
    role = role_of(context.rank, context.world_size, spec.num_samplers, info.num_parts)
    group_size = 1 + spec.num_samplers
    if spec.device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {spec.device!r}")
    use_cuda = spec.device == "cuda" or (spec.device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but no CUDA GPU is visible")
    if use_cuda and role.is_trainer:  # NCCL needs each trainer's device current before the group exists
        torch.cuda.set_device(role.part % torch.cuda.device_count())
    trainers = dist.new_group([p * group_size for p in range(info.num_parts)],
                              timeout=datetime.timedelta(seconds=spec.train.timeout),
                              backend="nccl" if use_cuda else "gloo")
    options = rpc.TensorPipeRpcBackendOptions(rpc_timeout=spec.train.timeout, num_worker_threads=8)
    rpc.init_rpc(role.name, rank=context.rank, world_size=context.world_size, rpc_backend_options=options)
    try:
        peers = RpcPeers(spec.train.timeout)
        partition = LocalPartition.load(spec.partitions, role.part, nodes=role.is_trainer, verify=spec.verify)
        graph = DistGraph(partition, peers)
        if role.is_trainer:
            serve(partition)
        else:
            serve_sampling(graph, spec.train.timeout)
        dist.barrier()  # every process answers before anyone asks
        device = torch.device("cuda", role.part % torch.cuda.device_count()) if use_cuda else torch.device("cpu")
        yield JobProcess(spec, info, role, trainers, peers, graph, device)
    except BaseException:
        rpc.shutdown(graceful=False)  # leave at once: a graceful shutdown would wait for the other processes
        raise
    rpc.shutdown()  # graceful: keeps answering requests until every process got here
    serve(None)
    serve_sampling(None)
    shutdown()


def run_partitioned_job(spec: DistJobSpec) -> dict:
    """Run this process's role in the job (see the module docstring); returns its summary."""
    with join_job(spec) as process:
        summary = train_partition(process) if process.role.is_trainer else {}
    return {"rank": process.role.rank, "role": process.role.name, "peak_rss_bytes": peak_rss_bytes(),
            "traffic": process.peers.traffic(), **summary}


def make_trainer(process: JobProcess, model: torch.nn.Module | None = None, config: TrainConfig | None = None
                 ) -> DistTrainer:
    """The :class:`DistTrainer` of a trainer process (the job's model and config unless given)."""
    spec, info = process.spec, process.info
    features = DistFeatureStore(process.graph, cache_size=spec.cache_size)
    return DistTrainer(model if model is not None else build_model(spec, info), process.graph, features,
                       config or spec.train, group=process.trainers if info.num_parts > 1 else None,
                       trainer_rank=process.role.part, num_trainers=info.num_parts, device=process.device,
                       samplers=process.samplers, prefetch=spec.prefetch, eval_fanouts=spec.eval_fanouts,
                       eval_batch_size=spec.eval_batch_size)


def train_partition(process: JobProcess) -> dict:
    """Train as the job says in a trainer process; returns its summary (metrics, traffic, timings)."""
    trainer = make_trainer(process)
    features, peers = trainer.features, process.peers
    began = time.perf_counter()
    peers.reset_traffic()  # count the training traffic only (not the cache fill)
    result = trainer.fit()
    seconds = time.perf_counter() - began
    epochs = result.history
    parameters = sum(p.numel() * p.element_size() for p in trainer.model.parameters())
    return {"epochs": len(epochs), "best_epoch": result.best_epoch, "best_val_acc": result.best_val_acc,
            "test_acc": result.test_acc, "stopped_early": result.stopped_early, "seconds": seconds,
            "losses": result.losses, "history": [m.as_dict() for m in epochs],
            "mean_epoch_ms": 1000 * sum(m.seconds for m in epochs) / max(len(epochs), 1),
            "cache": {"cached_rows": int(features.cache_ids.numel()), "hits": features.hits, "misses": features.misses},
            "loader": dict(trainer.loader.stats), "timing": dict(trainer.timing), "training": dict(trainer.training),
            "num_batches": trainer.num_batches, "parameter_bytes": parameters,
            "model_state": {k: v.cpu() for k, v in trainer.model.state_dict().items()}}
