"""The processes of a partitioned job: joining it (:func:`join_job`) and running a role (:func:`run_partitioned_job`).

Every process runs :func:`run_partitioned_job` with the same :class:`DistJobSpec`; its rank
decides its role (:mod:`unigraph.distributed.layout`). Joining, in order:

1. the gloo process group (every process) and the trainers' group; the RPC group;
2. the **server** loads its machine's parts into shared memory; barrier;
3. the server fills the machine's halo feature cache from the other servers; barrier;
4. trainers and samplers **attach** to their server's memory (and register with it, which then
   watches their memory: :meth:`~unigraph.distributed.server.GraphServer.memory`); samplers start
   answering their trainer; barrier.

Then trainers train (:func:`train_partition`), while servers and samplers answer requests until
every process has left (RPC's graceful shutdown). Each process returns a summary; a server's
holds its machine's memory: the peak of the summed PSS of the machine's processes and each one's
peak PSS and USS.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import time
from typing import Iterator

import torch
import torch.distributed as dist

import unigraph
from unigraph.distributed import format as fmt
from unigraph.distributed.layout import JobLayout, Role, sampler_name
from unigraph.distributed.peers import RpcPeers, control, serve
from unigraph.distributed.sampler import serve_sampling
from unigraph.distributed.server import GraphServer, attach
from unigraph.distributed.store import DistFeatureStore, DistGraph
from unigraph.distributed.train import DistTrainer, MachineTables, concrete_fanouts, peak_rss_bytes
from unigraph.train.config import TrainConfig
from unigraph.train.distributed import init_distributed, shutdown
from unigraph.train.job import ModelSpec
from unigraph.train.models import build_node_classifier
from unigraph.train.rng import seed_everything


@dataclasses.dataclass
class DistJobSpec:
    """Everything a process of a partitioned job needs (plain data: it travels to spawned processes).

    ``trainers_per_machine``, ``num_samplers`` (per trainer): the layout; the number of machines
    follows from ``WORLD_SIZE``. ``cache_size``: halo feature rows each machine caches.
    ``rank_offset`` is added to the launcher's rank (``--node-rank`` times the processes per
    machine when one ``unigraph train`` starts the processes of one machine of several).
    ``eval_fanouts``: ``None`` evaluates layer-wise (exact), else on sampled blocks.
    """

    partitions: str
    model: ModelSpec = dataclasses.field(default_factory=lambda: ModelSpec("sage"))
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    trainers_per_machine: int = 1
    num_samplers: int = 0
    cache_size: int = 0
    prefetch: int = 2
    eval_fanouts: tuple[int, ...] | None = None
    eval_batch_size: int = 1024
    eval_batch_edges: int | None = None   # None: a training batch's in-edges (DistTrainer)
    backend: str = "auto"
    threads: int | None = None
    rank_offset: int = 0
    device: str = "auto"
    verify: bool = True

    def layout(self, info: fmt.PartitionSetInfo, world_size: int) -> JobLayout:
        per_machine = 1 + self.trainers_per_machine * (1 + self.num_samplers)
        if world_size % per_machine:
            raise ValueError(f"WORLD_SIZE={world_size} is not a multiple of the {per_machine} processes of a machine "
                             f"(1 server + {self.trainers_per_machine} trainer(s) x (1 + {self.num_samplers} "
                             "sampler(s)))")
        return JobLayout(info.num_parts, world_size // per_machine, self.trainers_per_machine, self.num_samplers)


def build_model(spec: DistJobSpec, info: fmt.PartitionSetInfo) -> torch.nn.Module:
    seed_everything(spec.train.seed)
    m = spec.model
    return build_node_classifier(m.name, info.num_features, info.num_classes, num_layers=m.num_layers,
                                 hidden_channels=m.hidden_channels, heads=m.heads, dropout=m.dropout)


@dataclasses.dataclass
class JobProcess:
    """One process of a partitioned job, joined and ready (see :func:`join_job`)."""

    spec: DistJobSpec
    info: fmt.PartitionSetInfo
    layout: JobLayout
    role: Role
    trainers: object            # the trainers' process group
    peers: RpcPeers
    graph: DistGraph
    features: DistFeatureStore | None
    device: torch.device
    server: GraphServer | None = None

    @property
    def samplers(self) -> list[str] | None:
        """RPC names of this trainer's sampler processes (``None`` without any)."""
        return [sampler_name(self.role.machine, self.role.trainer, s) for s in range(self.spec.num_samplers)] or None

    @property
    def tables(self) -> MachineTables:
        """This machine's layer-wise inference tables (asked of its server)."""
        return MachineTables(machine=self.role.machine, timeout=self.spec.train.timeout)


def machine_seeds(local) -> torch.Tensor:
    return local.first + torch.nonzero(local.train_mask).squeeze(1)


@contextlib.contextmanager
def join_job(spec: DistJobSpec) -> Iterator[JobProcess]:
    """Join the job as the environment says, take this process's role (see the module docstring)
    and wait until every process is ready. Leaving the block shuts RPC down gracefully (answering
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
    layout = spec.layout(info, context.world_size)
    role = layout.role(context.rank)
    if spec.device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {spec.device!r}")
    use_cuda = spec.device == "cuda" or (spec.device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but no CUDA GPU is visible")
    trainer_index = None if not role.is_trainer else role.machine * layout.trainers_per_machine + role.trainer
    if use_cuda and role.is_trainer:  # NCCL needs each trainer's device current before the group exists
        torch.cuda.set_device(trainer_index % torch.cuda.device_count())
    trainers = dist.new_group(layout.trainer_ranks(), timeout=datetime.timedelta(seconds=spec.train.timeout),
                              backend="nccl" if use_cuda else "gloo")
    options = rpc.TensorPipeRpcBackendOptions(rpc_timeout=spec.train.timeout, num_worker_threads=8)
    rpc.init_rpc(role.name, rank=context.rank, world_size=context.world_size, rpc_backend_options=options)
    server = None
    try:
        peers = RpcPeers(spec.train.timeout)
        if role.is_server:
            server = GraphServer.load(spec.partitions, layout, role.machine, verify=spec.verify)
            serve(server)
            server.watch(os.getpid(), role.name)
        dist.barrier()  # every machine's partition is served
        if server is not None and spec.cache_size:
            fanouts = concrete_fanouts(spec.train.fanouts, spec.model.num_layers, info.max_in_degree)
            server.fill_cache(DistGraph(server.local, peers), machine_seeds(server.local), fanouts, spec.cache_size)
        dist.barrier()  # every cache is filled
        if server is not None:
            local, cache = server.local, server.cache
        else:
            local, cache = attach(control(role.machine, "describe", timeout=spec.train.timeout), info, layout)
            control(role.machine, "watch", os.getpid(), role.name, timeout=spec.train.timeout)
        graph = DistGraph(local, peers)
        if role.kind == "sampler":
            serve_sampling(graph, spec.train.timeout)
        dist.barrier()  # samplers answer before any trainer asks
        device = torch.device("cuda", trainer_index % torch.cuda.device_count()) if use_cuda and role.is_trainer \
            else torch.device("cpu")
        features = DistFeatureStore(graph, cache) if role.is_trainer else None
        yield JobProcess(spec, info, layout, role, trainers, peers, graph, features, device, server)
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
    if process.server is not None:
        summary["machine_memory"] = process.server.close()
    return {"rank": process.role.rank, "role": process.role.name, "kind": process.role.kind,
            "machine": process.role.machine, "peak_rss_bytes": peak_rss_bytes(),
            "traffic": process.peers.traffic(), **summary}


def make_trainer(process: JobProcess, model: torch.nn.Module | None = None, config: TrainConfig | None = None
                 ) -> DistTrainer:
    """The :class:`DistTrainer` of a trainer process (the job's model and config unless given)."""
    spec, info = process.spec, process.info
    return DistTrainer(model if model is not None else build_model(spec, info), process.graph, process.features,
                       config or spec.train, layout=process.layout, role=process.role,
                       group=process.trainers if process.layout.num_trainers > 1 else None, device=process.device,
                       samplers=process.samplers, prefetch=spec.prefetch, eval_fanouts=spec.eval_fanouts,
                       eval_batch_size=spec.eval_batch_size, tables=process.tables,
                       eval_batch_edges=spec.eval_batch_edges)


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
            "cache": {"cached_rows": len(features.cache), "hits": features.hits, "misses": features.misses},
            "loader": dict(trainer.loader.stats), "timing": dict(trainer.timing), "training": dict(trainer.training),
            "num_batches": trainer.num_batches, "parameter_bytes": parameters,
            "model_state": {k: v.cpu() for k, v in trainer.model.state_dict().items()}}
