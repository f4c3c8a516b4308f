"""Training on a partition set: :class:`DistTrainer` and the job every process of it runs.

**Processes and roles** (:mod:`unigraph.distributed.layout`). A job runs on ``M`` machines; each
runs one **graph server**, ``T`` trainers and ``S`` sampler processes per trainer. Every process
joins the gloo process group the environment describes (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``: ``torchrun`` or :func:`unigraph.train.launch`) and the job's
``torch.distributed.rpc`` group. The server loads the machine's parts into shared memory, fills
the machine's halo feature cache from the other servers, and answers the other machines'
requests; the machine's trainers and samplers **attach** to that memory (one copy per machine,
:mod:`unigraph.distributed.server`). The trainers also form their own group, over which
``DistributedDataParallel`` averages gradients (NCCL when they train on GPUs, else gloo).

**Exactly the single-machine gradient.** Trainer ``t`` of machine ``m`` takes its share of the
machine's training nodes as seeds, in ``K`` batches per epoch, the same ``K`` on every trainer
(:mod:`.loader`). Step ``b``'s global batch is the union of the trainers' batches ``b``, of known
size ``G_b`` (every trainer computes every trainer's seed count from the metadata). Each
trainer's loss is its sum of per-seed losses times ``N / G_b`` (``N`` trainers); DDP's average
is then the mean loss over the global batch, whatever the trainers' batch sizes. With the
sampler's node-keyed draws, the trainers compute the gradient one process computes on the same
global batches (``tests/test_dist_train.py`` checks the parameters against a single-process replay).

**Evaluation** never needs the whole graph in one process. By default it is **layer-wise**
(:mod:`unigraph.train.inference`, exact for GraphSAGE, GAT and GIN): the trainers of a machine
compute each hidden layer for a share of the machine's nodes into a table in the machine's shared
memory, wait for each other (a barrier of the trainers), and read the other machines' rows of
the table from their servers; the last layer runs at each trainer's share of the validation and
test nodes, and the counts are summed. With ``eval_fanouts`` it runs on sampled blocks instead
(bounded by the fanouts, not exact). ``train_acc`` is measured on the epoch's training batches.

**Failures.** Every wait is bounded by ``config.timeout`` (process groups and RPC). A process
that raises reports its error and leaves without the graceful RPC shutdown (which would wait for
the others); one that dies breaks its connections, so the others' requests and collectives fail
at once; :func:`unigraph.train.launch` (``unigraph train``) then stops every process and
reports the rank that failed first (``torchrun`` does the same). Nothing is left in shared
memory: the servers' blocks are anonymous memory files, as are TensorPipe's rings, and go with
their processes.
"""
from __future__ import annotations

import resource
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from unigraph.distributed.layout import JobLayout, Role
from unigraph.distributed.loader import DistNodeLoader, batch_sizes, equal_num_batches
from unigraph.distributed.peers import control, wait
from unigraph.distributed.sampler import DistNeighborSampler
from unigraph.distributed.server import attach_table
from unigraph.distributed.shm import SharedArrays
from unigraph.distributed.store import DistFeatureStore, DistGraph, rows_in_order
from unigraph.storage.mapped import memory_status
from unigraph.train.config import ALL_NEIGHBOURS, TrainConfig, check_fanouts
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.inference import layerwise_outputs, reach, sampled_batch_edges, table_rows
from unigraph.train.layers import num_layers
from unigraph.train.metrics import EpochMetrics
from unigraph.train.trainer import Trainer, make_optimizer


def concrete_fanouts(fanouts, num_layers: int, max_in_degree: int) -> list[int]:
    """``None`` / ``-1`` entries become the graph's largest in-degree (every in-edge)."""
    fanouts = check_fanouts(fanouts) if fanouts is not None else (ALL_NEIGHBOURS,) * num_layers
    if len(fanouts) != num_layers:
        raise ValueError(f"fanouts has {len(fanouts)} entries but the model has {num_layers} layers")
    return [max(1, max_in_degree) if f == ALL_NEIGHBOURS else f for f in fanouts]


def partitioned_layout(info, num_trainers: int) -> dict:
    """What a checkpoint of a partitioned run must match to be resumed: the set and the trainers
    (which split its training nodes)."""
    return {"mode": "partitions", "world_size": num_trainers, "partition_set": info.set_id}


def check_evaluation(config: TrainConfig) -> None:
    if config.evaluation == "full":
        raise ValueError("evaluation='full' needs the whole graph in one process; a partitioned trainer "
                         "evaluates layer-wise ('layerwise' or 'auto') or on sampled blocks (eval fanouts)")


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def resident_parts() -> dict[str, int]:
    """This process's resident memory now by kind, bytes: ``RssAnon`` (private heap), ``RssShmem``
    (touched pages of shared memory: the machine's partition, cache, tables), ``RssFile`` (empty
    where ``/proc`` lacks them: the peak, ru_maxrss, is still reported)."""
    return {name: value for name, value in memory_status().items() if name in ("RssAnon", "RssShmem", "RssFile")}


def numpy_dtype(dtype: torch.dtype) -> str:
    name = str(dtype).replace("torch.", "")
    if name not in ("float16", "float32", "float64"):
        raise ValueError(f"layer-wise evaluation keeps its tables in float16/32/64, not {name}")
    return name


class PartitionedSource:
    """Layer-wise inference over the machines (a :class:`~unigraph.train.inference.LayerSource`).

    ``tables`` is the machine's server (``need``/``needed``/``table``, through RPC or in process).
    :meth:`plan`: from the last layer down, every trainer tells the owners of the nodes its next
    layer reads (its nodes and their in-neighbours) to compute them (``"need"`` requests, one per
    owner), waits for every trainer (``barrier()``), and takes its ``share`` of its machine's list.
    Each hidden table is the machine's, in shared memory, one row per listed node; rows of other
    machines' nodes come from their servers (``"hidden"`` requests, one per owner per batch); layer
    0 reads the features through the feature store (cache included).
    """

    def __init__(self, graph: DistGraph, features: DistFeatureStore, tables, share, barrier):
        self.graph, self.features, self.machine_tables = graph, features, tables
        self.share, self.barrier = share, barrier
        self.local = graph.local
        self.ids: dict[int, torch.Tensor] = {}
        self.tables: dict[int, torch.Tensor] = {}
        self.blocks: dict[int, SharedArrays] = {}
        self.round = 0

    def in_degrees(self, nodes: torch.Tensor) -> torch.Tensor:
        return self.local.in_degrees(nodes)

    def in_edges(self, dst: torch.Tensor):
        return self.local.neighbors(dst)

    def plan(self, final_nodes: torch.Tensor, num_layers: int) -> list[torch.Tensor]:
        self.round += 1
        targets, reads = [None] * (num_layers - 1), final_nodes
        everywhere = torch.zeros(0, dtype=torch.bool)
        for layer in reversed(range(num_layers - 1)):
            wanted = reach(self, reads)
            _, owners = self.graph.split(wanted, here=everywhere.new_zeros(wanted.numel()))  # own machine included
            sent = [(owner, self.graph.peers.request(owner, "need", wanted[where], layer + 1, self.round))
                    for where, owner in owners]
            for owner, future in sent:
                wait(future, owner, "need")
            self.barrier()  # every trainer has said what it reads
            self.ids[layer + 1] = self.machine_tables.needed(layer + 1)
            reads = targets[layer] = self.share(self.ids[layer + 1])
        return targets

    def prepare(self, widths: list[int], dtype: torch.dtype) -> None:
        opened = {layer + 1: self.machine_tables.open(layer + 1, width, numpy_dtype(dtype))
                  for layer, width in enumerate(widths)}
        self.tables = {layer: torch.from_numpy(array) for layer, (array, _) in opened.items()}
        self.blocks = {layer: block for layer, (_, block) in opened.items() if block is not None}
        for layer, table in self.tables.items():
            if table.shape[0] != self.ids[layer].numel():
                raise RuntimeError(f"table {layer} of machine {self.graph.machine} holds {table.shape[0]} rows, the plan "
                                   f"lists {self.ids[layer].numel()} nodes")

    def gather(self, layer: int, ids: torch.Tensor) -> torch.Tensor:
        if layer == 0:
            return self.features.gather(ids)
        table = self.tables[layer]
        here, others = self.graph.split(ids)
        remote = [(where, owner, self.graph.peers.request(owner, "hidden", ids[where], layer)) for where, owner in others]
        pieces = [] if here is None else [(here, self._read(layer, table_rows(self.ids[layer], ids[here],
                                                                              f"table {layer}")))]
        pieces += [(where, wait(future, owner, "hidden")) for where, owner, future in remote]
        return rows_in_order(ids.numel(), pieces, table)

    def store(self, layer: int, dst: torch.Tensor, rows: torch.Tensor) -> None:
        positions = table_rows(self.ids[layer], dst, f"table {layer}")
        self.tables[layer][positions] = rows
        if layer in self.blocks and positions.numel():  # (a batch's rows: a few contiguous pages)
            self.blocks[layer].release_rows("rows", int(positions.min()), int(positions.max()) + 1)

    def _read(self, layer: int, positions: torch.Tensor) -> torch.Tensor:
        """Rows of the machine's table ``layer``, read so that its pages leave this trainer's RSS
        (:meth:`~unigraph.distributed.shm.SharedArrays.take`; the rows stay in the machine's one
        copy): the trainer's peak is its training peak plus a bounded read, not plus a page per
        row of the table it ever read or wrote."""
        if layer not in self.blocks:
            return self.tables[layer][positions]
        return torch.from_numpy(self.blocks[layer].take("rows", positions.numpy()))

    def synchronize(self, layer: int) -> None:
        self.barrier()


class MachineTables:
    """A machine's inference tables, asked of its server: over RPC (``machine`` given) or in process."""

    def __init__(self, server=None, machine: int | None = None, timeout: float = 300.0):
        self.server, self.machine, self.timeout = server, machine, timeout

    def _call(self, method: str, *args):
        if self.server is not None:
            return getattr(self.server, method)(*args)
        return control(self.machine, method, *args, timeout=self.timeout)

    def needed(self, slot: int) -> torch.Tensor:
        return self._call("needed", slot)

    def open(self, slot: int, width: int, dtype: str):
        """``(rows, shared block or None)``: see :func:`~unigraph.distributed.server.attach_table`."""
        return attach_table(self._call("table", slot, width, dtype))


class DistTrainer(Trainer):
    """Data-parallel training of ``model`` on a partition set (see the module docstring).

    It is a :class:`~unigraph.train.Trainer` whose data comes from a :class:`DistGraph` and a
    :class:`DistFeatureStore`: the training loop, early stopping and checkpoint contents are the
    Trainer's (a checkpoint also records the partition set's id and the trainers, and resuming
    otherwise is refused); construction, the epoch and evaluation are replaced.

    Args:
        model: a node classifier taking blocks (GraphSAGE, GAT, GIN, ...), built identically on
            every trainer.
        graph, features: this trainer's view of the partitioned graph.
        config: a :class:`~unigraph.train.TrainConfig`; ``batch_size`` is per trainer.
        layout, role: the job's layout and this trainer's place in it (machine, index).
        group: the trainers' process group (``None`` for a single trainer).
        device: where the model trains (features and blocks are moved there).
        samplers: RPC names of this trainer's sampler processes (``None``: sample in-process).
        prefetch: batches prepared ahead (:class:`DistNodeLoader`).
        eval_fanouts: fanouts of sampled evaluation (``None``: layer-wise, exact).
        eval_batch_size: seeds per sampled-evaluation batch.
        tables: layer-wise evaluation's tables: the machine's server (:class:`MachineTables`).
        eval_batch_edges: in-edges per layer-wise batch (``None``: as many as a training batch can
            hold, :func:`~unigraph.train.inference.sampled_batch_edges`, so that evaluation's
            batches are no bigger than training's and the trainer's peak stays training's).
    """

    def __init__(self, model: torch.nn.Module, graph: DistGraph, features: DistFeatureStore, config: TrainConfig, *,
                 layout: JobLayout, role: Role, group=None, device: torch.device | str = "cpu", samplers=None,
                 prefetch: int = 2, eval_fanouts=None, eval_batch_size: int = 1024, tables=None,
                 eval_batch_edges: int | None = None):
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if not role.is_trainer or graph.machine != role.machine or graph.num_parts != layout.num_machines:
            raise ValueError(f"trainer {role} must hold machine {role.machine} of {layout.num_machines}; it holds "
                             f"machine {graph.machine} of {graph.num_parts}")
        check_evaluation(config)
        if eval_fanouts is None and tables is None:
            raise ValueError("layer-wise evaluation needs tables (the machine's server); or give eval_fanouts")
        self.config, self.context, self.group = config, None, group
        self.job_layout, self.role = layout, role
        self.world_size = layout.num_trainers
        self.rank = role.machine * layout.trainers_per_machine + role.trainer
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.dtype = next(model.parameters()).dtype
        self.graph, self.features = graph, features
        info, local = graph.info, graph.local

        def share(mask: torch.Tensor) -> torch.Tensor:
            return layout.trainer_share(local.first + torch.nonzero(mask).squeeze(1), role.trainer)
        self.train_nodes = share(local.train_mask)
        self.eval_nodes = [share(local.val_mask), share(local.test_mask)]
        layers = len(config.fanouts) if config.fanouts is not None else num_layers(model)
        self.fanouts = concrete_fanouts(config.fanouts, layers, info.max_in_degree)
        self.eval_fanouts = None if eval_fanouts is None else concrete_fanouts(eval_fanouts, layers,
                                                                               info.max_in_degree)
        self.eval_batch_size = eval_batch_size
        counts = layout.seed_counts([info.count(p, "train") for p in range(info.num_parts)])
        if sum(counts) == 0:
            raise ValueError(f"the partition set in {info.directory} has no training nodes")
        self.num_batches = equal_num_batches(counts, config.batch_size or max(counts))
        self.eval_batch_edges = eval_batch_edges if eval_batch_edges is not None else \
            sampled_batch_edges(config.batch_size or max(counts), self.fanouts)
        self.global_batch = sum(batch_sizes(c, self.num_batches) for c in counts)  # G_b of every step b
        self.samplers, self.prefetch = samplers, prefetch
        self.inference = None if tables is None else PartitionedSource(
            graph, features, tables, lambda ids: layout.trainer_share(ids, role.trainer), self._barrier)
        self.full_graph = False
        self.early_stopping = EarlyStopping(config.patience)
        self.history: list[EpochMetrics] = []
        self.stopped_early = False
        # compute: seconds in train_step; train_seconds: the epochs' training loops (waits included);
        # peak_rss_train: the process's peak RSS when evaluation first started (the training's peak)
        self.timing = {"compute": 0.0, "steps": 0, "train_seconds": 0.0, "eval_seconds": 0.0, "peak_rss_train": 0}
        # what training (not evaluation) moved: payload bytes of this trainer's requests and of its
        # sampler processes' batches, by kind, the feature rows it gathered (remote ones, cached
        # ones), and what the halo saved (sampled rows and cached rows, with their bytes)
        self.training = dict.fromkeys(("bytes", "sample_bytes", "feature_bytes", "sampler_bytes", "rows",
                                       "remote_rows", "cache_hits", "cache_saved_bytes", "halo_sample_rows",
                                       "halo_sample_saved_bytes"), 0)
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
        return partitioned_layout(self.graph.info, self.world_size)

    def _barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier(group=self.group)

    def _all_reduce(self, values: list[float]) -> list[float]:
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.world_size > 1:
            dist.all_reduce(tensor, group=self.group)
        return tensor.tolist()

    # ------------------------------------------------------------------ training
    def _counters(self) -> dict[str, int]:
        """Traffic and feature-row counters so far (evaluation included)."""
        traffic, features, graph = self.graph.peers.traffic(), self.features, self.graph
        by_request = traffic["bytes_by_request"]
        return {"bytes": traffic["bytes_sent"] + traffic["bytes_received"] + self.loader.stats["sampler_bytes"],
                "sample_bytes": by_request.get("sample", 0), "feature_bytes": by_request.get("features", 0),
                "sampler_bytes": self.loader.stats["sampler_bytes"], "rows": features.rows,
                "remote_rows": features.hits + features.misses, "cache_hits": features.hits,
                "cache_saved_bytes": features.saved_bytes, "halo_sample_rows": graph.saved["sample_rows"],
                "halo_sample_saved_bytes": graph.saved["sample_bytes"]}

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
        if not self.timing["peak_rss_train"]:
            self.timing["peak_rss_train"] = peak_rss_bytes()
            self.timing["resident_train"] = resident_parts()
        began = time.perf_counter()
        self.model.eval()
        if self.eval_fanouts is None:
            sums = self._score_layerwise()
        else:
            sums = self._score(self.eval_nodes[0]) + self._score(self.eval_nodes[1])
        val_correct, val_count, val_loss, test_correct, test_count, _ = self._all_reduce(sums)
        self.timing["eval_seconds"] += time.perf_counter() - began
        self.timing["resident_eval"] = resident_parts()
        return (self._train_acc, val_correct / val_count if val_count else 0.0,
                test_correct / test_count if test_count else 0.0, val_loss / val_count if val_count else float("nan"))

    def _score_layerwise(self) -> list[float]:
        val, test = self.eval_nodes
        logits = layerwise_outputs(self.model, self.inference, torch.cat([val, test]),
                                   in_width=self.features.num_features, batch_edges=self.eval_batch_edges)
        labels = self.graph.local.y[torch.cat([val, test]) - self.graph.local.first]
        sums = []
        for part, nodes in ((slice(0, val.numel()), val), (slice(val.numel(), None), test)):
            out, y = logits[part], labels[part]
            sums += [float((out.argmax(-1) == y).sum()), float(nodes.numel()),
                     float(F.cross_entropy(out, y, reduction="sum")) if y.numel() else 0.0]
        return sums

    def _score(self, nodes: torch.Tensor) -> list[float]:
        """``[correct, count, loss sum]`` of this trainer's ``nodes`` on sampled blocks."""
        sampler = DistNeighborSampler(self.eval_fanouts, seed=self.config.seed)
        num_batches = max(1, -(-nodes.numel() // self.eval_batch_size))
        loader = DistNodeLoader(self.graph, nodes, sampler, features=self.features, num_batches=num_batches,
                                shuffle=False, seed=self.config.seed, prefetch=min(self.prefetch, 1))
        correct, loss = 0.0, 0.0
        with loader:
            for batch in loader:
                batch = batch.to(self.device)
                logits = self.model(batch.blocks, batch.x.to(self.dtype))
                correct += float((logits.argmax(-1) == batch.y).sum())
                loss += float(F.cross_entropy(logits, batch.y, reduction="sum"))
        return [correct, float(nodes.numel()), loss]
