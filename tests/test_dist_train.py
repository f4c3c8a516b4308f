"""Training on partition sets across real processes (gloo, torch.distributed.rpc), and failing processes.

Each job starts real processes with :func:`unigraph.train.launch` (each imports torch and unigraph:
several seconds on a busy machine), so the jobs are few and small. Every wait in them is bounded
(process-group and RPC timeouts, the launcher's timeout) and pytest-timeout bounds each test.
"""
from __future__ import annotations

import os
import pathlib
import signal
import time

import pytest
import torch
import torch.nn.functional as F

from dist_helpers import write_pid
from unigraph.data import planted_partition
from unigraph.distributed import format as fmt
from unigraph.distributed.job import DistJobSpec, build_model, join_job, make_trainer, run_partitioned_job
from unigraph.distributed.layout import JobLayout
from unigraph.distributed.loader import epoch_tasks, equal_num_batches
from unigraph.distributed.partition import partition_dataset
from unigraph.distributed.peers import serve
from unigraph.graph import Graph
from unigraph.sampling import NeighborSampler
from unigraph.train import LaunchError, TrainConfig, launch
from unigraph.train.job import ModelSpec
from unigraph.train.trainer import make_optimizer

MODEL = ModelSpec("sage", num_layers=2, hidden_channels=8, dropout=0.0)
CONFIG = dict(batch_size=8, fanouts=(4, 3), patience=None, restore_best=False, progress="off", seed=3, timeout=60)
# Shared memory a job's processes could leave: torch's segments (named after the creating pid),
# TensorPipe's, gloo's. (Python's own "sem.mp-*" semaphores are left out on purpose: nothing in a
# job creates them, the launcher included, and other programs on a shared machine do, at any time.)
SHM_PREFIXES = ("torch_", "tensorpipe", "gloo", "unigraph")
JOB_TIMEOUT = 600  # a loaded 2-core machine starts each process's torch in several seconds


def small_dataset():
    return planted_partition(400, num_features=6, train_per_class=30, num_val=80, num_test=120, seed=1)


def make_set(directory, parts: int) -> fmt.PartitionSetInfo:
    return partition_dataset(small_dataset(), parts, directory, method="random", seed=0)


def shm_entries() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith(SHM_PREFIXES)} if os.path.isdir("/dev/shm") else set()


# ---------------------------------------------------------------------- what each process runs
def train_resume_run(spec: DistJobSpec, checkpoint_dir: str) -> dict:
    """A 3-epoch run; then a run stopped after 2 epochs (checkpointed) and resumed to 3."""
    result = {}
    with join_job(spec) as process:
        if process.role.is_trainer:
            for name, config in (("full", TrainConfig(epochs=3, **CONFIG)),
                                 ("stopped", TrainConfig(epochs=2, checkpoint_dir=checkpoint_dir, **CONFIG)),
                                 ("resumed", TrainConfig(epochs=3, checkpoint_dir=checkpoint_dir, resume=True,
                                                         **CONFIG))):
                trainer = make_trainer(process, build_model(spec, process.info).double(), config)
                fit = trainer.fit()
                result[name] = {"losses": fit.losses, "state": trainer.model.state_dict(),
                                "val": [m.val_acc for m in fit.history], "test": [m.test_acc for m in fit.history]}
            result.update(traffic=process.peers.traffic(), saved=dict(process.graph.saved),
                          cache=(len(process.features.cache), process.features.hits))
    if process.server is not None:  # after every process left: the machine's memory over the whole job
        result["memory"] = process.server.close()
    return {"kind": process.role.kind, **result}


def trainer_seeds(info: fmt.PartitionSetInfo, layout: JobLayout, train: torch.Tensor) -> list[torch.Tensor]:
    """Every trainer's seeds (renumbered ids), in trainer order: its share of its machine's training nodes."""
    offsets = layout.machine_offsets(info.offsets)
    shares = []
    for m in range(layout.num_machines):
        nodes = torch.nonzero(train[offsets[m]:offsets[m + 1]]).squeeze(1) + offsets[m]
        shares += [layout.trainer_share(nodes, t) for t in range(layout.trainers_per_machine)]
    return shares


def replay(info: fmt.PartitionSetInfo, epochs: int, layout: JobLayout | None = None) -> dict:
    """One process, the whole (renumbered) graph, the global batches the trainers take together."""
    dataset = small_dataset()
    orig = torch.from_numpy(fmt.original_ids(info))
    new_of_orig = torch.empty_like(orig)
    new_of_orig[orig] = torch.arange(orig.numel())
    graph = Graph(torch.stack([new_of_orig[dataset.graph.src], new_of_orig[dataset.graph.dst]]), num_nodes=orig.numel())
    x, y, train = dataset.x[orig].double(), dataset.y[orig], dataset.train_mask[orig]
    spec = DistJobSpec(str(info.directory), MODEL, TrainConfig(epochs=epochs, **CONFIG))
    model = build_model(spec, info).double()
    config = spec.train
    optimizer = make_optimizer(model.parameters(), config)
    shares = trainer_seeds(info, layout or JobLayout(info.num_parts, info.num_parts), train)
    num_batches = equal_num_batches([s.numel() for s in shares], config.batch_size)
    sampler = NeighborSampler(list(config.fanouts))
    losses, val, test = [], [], []
    masks = [dataset.val_mask[orig], dataset.test_mask[orig]]
    for epoch in range(1, epochs + 1):
        tasks = [epoch_tasks(share, num_batches, config.seed, epoch, True) for share in shares]
        total = 0.0
        for b in range(num_batches):
            seeds = torch.cat([t[b][0] for t in tasks])
            blocks = sampler.sample(graph, seeds, key=tasks[0][b][1])
            loss = F.cross_entropy(model(blocks.blocks, x[blocks.input_nodes]), y[seeds])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        losses.append(total / num_batches)
        with torch.no_grad():
            out = model.eval()(graph, x).argmax(-1)
            model.train()
        val.append(float((out[masks[0]] == y[masks[0]]).double().mean()))
        test.append(float((out[masks[1]] == y[masks[1]]).double().mean()))
    return {"losses": losses, "state": model.state_dict(), "val": val, "test": test}


def assert_same_run(run: dict, reference: dict, rtol: float = 1e-9) -> None:
    """The same losses, weights (float64, up to summation order) and accuracies."""
    torch.testing.assert_close(torch.tensor(run["losses"]), torch.tensor(reference["losses"]), rtol=rtol, atol=1e-12)
    for name, value in reference["state"].items():
        torch.testing.assert_close(run["state"][name], value, rtol=rtol, atol=1e-12)
    assert run["val"] == reference["val"] and run["test"] == reference["test"]


def test_two_machines_train_like_one_process_and_resume_exactly(tmp_path):
    """2 machines, each a server (2 of the 4 parts, merged, in shared memory, with a halo cache)
    and a trainer attached to it; layer-wise evaluation across the machines."""
    info = make_set(tmp_path / "parts", 4)
    spec = DistJobSpec(str(tmp_path / "parts"), MODEL, TrainConfig(**CONFIG), cache_size=10)
    shm_before = shm_entries()
    results = launch(train_resume_run, 4, args=(spec, str(tmp_path / "ckpt")), timeout=JOB_TIMEOUT)
    assert [r["kind"] for r in results] == ["server", "trainer"] * 2
    reference = replay(info, 3, JobLayout(4, 2))
    for result in results[1::2]:
        assert_same_run(result["full"], reference)
        # The resumed run equals the uninterrupted one up to summation order: DDP re-buckets its
        # gradients after its first step, so a fresh DDP sums one step's all-reduce in another order.
        assert_same_run(result["resumed"], result["full"], rtol=1e-12)
        assert result["traffic"]["requests"] > 0 and result["traffic"]["bytes_received"] > 0  # remote rows were read
        assert result["saved"]["sample_rows"] > 0                                 # halo rows sampled locally
        assert result["cache"][0] == 10 and result["cache"][1] > 0                # the halo cache served rows
    for machine, server in enumerate(results[0::2]):
        shared = server["memory"]["shared_bytes"]
        assert shared["partition"] > 0 and shared["cache"] > 0 and shared["tables"] > 0
        assert set(server["memory"]["processes"]) == {f"server{machine}", f"trainer{machine}_0"}
    assert shm_entries() - shm_before == set()                                  # nothing named in /dev/shm


@pytest.mark.parametrize("machines", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_several_trainers_per_machine_with_sampler_processes_train_like_one_process(tmp_path, machines):
    """Each machine: a server and 2 trainers, each getting its batches from a sampler process, all
    attached to the server's shared memory: the same run as one process. (2 machines: 10
    processes, and the samplers draw the other machine's rows from their halo: slow.)"""
    info = make_set(tmp_path / "parts", 2)
    spec = DistJobSpec(str(tmp_path / "parts"), MODEL, TrainConfig(**CONFIG), trainers_per_machine=2,
                       num_samplers=1, cache_size=5)
    results = launch(sampler_run, 5 * machines, args=(spec,), timeout=JOB_TIMEOUT)
    layout = JobLayout(2, machines, 2, 1)
    reference = replay(info, 2, layout)
    assert [r["kind"] for r in results] == ["server", "trainer", "sampler", "trainer", "sampler"] * machines
    for rank in layout.trainer_ranks():
        assert_same_run(results[rank], reference)
    if machines > 1:   # the samplers drew the other machine's rows from the halo: no request
        assert results[2]["traffic"]["requests"] == 0 and results[2]["saved"]["sample_rows"] > 0
    for machine in range(machines):
        memory = results[5 * machine]["memory"]
        assert set(memory["processes"]) == {f"server{machine}", f"trainer{machine}_0", f"trainer{machine}_1",
                                            f"sampler{machine}_0_0", f"sampler{machine}_1_0"}
        for name, peaks in memory["processes"].items():                         # every process mapped the partition
            assert peaks["Pss_Shmem"] > 0, name


def sampler_run(spec: DistJobSpec) -> dict:
    result = {}
    with join_job(spec) as process:
        if process.role.is_trainer:
            trainer = make_trainer(process, build_model(spec, process.info).double(), TrainConfig(epochs=2, **CONFIG))
            fit = trainer.fit()
            assert trainer.loader.stats["sample_work"] == 0.0                      # nothing sampled in the trainer
            result = {"losses": fit.losses, "state": trainer.model.state_dict(),
                      "val": [m.val_acc for m in fit.history], "test": [m.test_acc for m in fit.history]}
    if process.server is not None:
        result["memory"] = process.server.close()
    return {**result, "kind": process.role.kind, "traffic": process.peers.traffic(), "saved": dict(process.graph.saved)}


# ---------------------------------------------------------------------- failures
class DyingServer:
    """A graph server that kills its process at its ``after``-th request (an owner dying mid-answer)."""

    def __init__(self, server, marker: str, after: int):
        self.server, self.marker, self.after, self.seen = server, marker, after, 0

    def answer(self, request, ids, *args):
        self.seen += 1
        if self.seen >= self.after:
            pathlib.Path(self.marker).write_text(str(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        return self.server.answer(request, ids, *args)


def failing_run(spec: DistJobSpec, mode: str, marker: str) -> None:
    write_pid(f"{marker}.pid{os.environ['RANK']}")
    with join_job(spec) as process:
        if mode == "owner" and process.role.is_server and process.role.machine == 1:
            serve(DyingServer(process.server, marker, after=5))
        if mode == "sampler" and process.role.kind == "sampler":
            graph = process.graph

            def dying(*args):
                pathlib.Path(marker).write_text(str(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)
            graph.sample_async = dying                                           # the first batch kills it
        if not process.role.is_trainer:
            return
        trainer = make_trainer(process)
        if mode == "trainer" and process.role.trainer == 1:
            step = trainer.train_step

            def dying_step(batch, b):
                if trainer.loader.epoch == 2 and b == 1:
                    pathlib.Path(marker).write_text(str(time.time()))
                    os.kill(os.getpid(), signal.SIGKILL)
                return step(batch, b)
            trainer.train_step = dying_step
        trainer.fit()


FAILURES = {  # mode: (machines, trainers per machine, samplers per trainer, the rank that dies)
    "trainer": (1, 2, 0, 2),   # a trainer killed mid-epoch (its peer waits in DDP's all-reduce)
    "owner": (2, 1, 0, 2),     # a machine's server killed while answering the other machine's request
    "sampler": (1, 1, 1, 2),   # a sampler process killed while its trainer waits for a batch
}
ENDS_WITHIN_SECONDS = 10.0  # from the death to the launcher's error (stated in docs/distributed.md; ~1 s measured)


@pytest.mark.parametrize("mode", [pytest.param("trainer", marks=pytest.mark.slow), "owner",
                                  pytest.param("sampler", marks=pytest.mark.slow)])
def test_a_dying_process_ends_the_job_quickly_and_cleanly(tmp_path, mode):
    machines, trainers, samplers, victim = FAILURES[mode]
    make_set(tmp_path / "parts", 2)
    spec = DistJobSpec(str(tmp_path / "parts"), MODEL, TrainConfig(epochs=50, **CONFIG), trainers_per_machine=trainers,
                       num_samplers=samplers)
    processes = JobLayout(2, machines, trainers, samplers).world_size
    marker = str(tmp_path / "died")
    shm_before = shm_entries()
    try:
        launch(failing_run, processes, args=(spec, mode, marker), timeout=JOB_TIMEOUT)
    except LaunchError as failure:
        message = str(failure)
    else:
        pytest.fail("the job did not fail")
    ended = time.time()
    assert pathlib.Path(marker).exists(), f"the job failed before the planned death: {message}"
    died = float(pathlib.Path(marker).read_text())
    assert ended - died < ENDS_WITHIN_SECONDS, f"the job ended {ended - died:.1f}s after the death"
    assert message.startswith(f"rank {victim} failed first: it was killed by signal 9"), message  # the dead one is blamed
    for rank in range(processes):                                                # no orphans
        pid = int(pathlib.Path(f"{marker}.pid{rank}").read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert shm_entries() - shm_before == set()                                  # nothing left in shared memory
