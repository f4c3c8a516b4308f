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

from unigraph.data import planted_partition
from unigraph.distributed import format as fmt
from unigraph.distributed.loader import epoch_tasks, equal_num_batches
from unigraph.distributed.partition import partition_dataset
from unigraph.distributed.peers import serve
from unigraph.distributed.train import DistJobSpec, build_model, join_job, make_trainer
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


def small_dataset():
    return planted_partition(400, num_features=6, train_per_class=30, num_val=80, num_test=120, seed=1)


def make_set(directory, parts: int) -> fmt.PartitionSetInfo:
    return partition_dataset(small_dataset(), parts, directory, method="random", seed=0)


def shm_entries() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith(SHM_PREFIXES)} if os.path.isdir("/dev/shm") else set()


# ---------------------------------------------------------------------- what each process runs
def train_resume_run(spec: DistJobSpec, checkpoint_dir: str) -> dict:
    """A 3-epoch run; then a run stopped after 2 epochs (checkpointed) and resumed to 3."""
    with join_job(spec) as process:
        if not process.role.is_trainer:
            return {}
        result = {}
        for name, config in (("full", TrainConfig(epochs=3, **CONFIG)),
                             ("stopped", TrainConfig(epochs=2, checkpoint_dir=checkpoint_dir, **CONFIG)),
                             ("resumed", TrainConfig(epochs=3, checkpoint_dir=checkpoint_dir, resume=True, **CONFIG))):
            trainer = make_trainer(process, build_model(spec, process.info).double(), config)
            fit = trainer.fit()
            result[name] = {"losses": fit.losses, "state": trainer.model.state_dict(),
                            "val": [m.val_acc for m in fit.history], "test": [m.test_acc for m in fit.history]}
        result["traffic"] = process.peers.traffic()
        return result


def replay(info: fmt.PartitionSetInfo, epochs: int) -> dict:
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
    shares = [torch.nonzero(train[first:end]).squeeze(1) + first for first, end in zip(info.offsets, info.offsets[1:])]
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


def test_four_trainers_train_like_one_process_and_resume_exactly(tmp_path):
    info = make_set(tmp_path / "parts", 4)
    spec = DistJobSpec(str(tmp_path / "parts"), MODEL, TrainConfig(**CONFIG), cache_size=10)
    results = launch(train_resume_run, 4, args=(spec, str(tmp_path / "ckpt")), timeout=300)
    reference = replay(info, 3)
    for rank, result in enumerate(results):
        assert_same_run(result["full"], reference)
        # The resumed run equals the uninterrupted one up to summation order: DDP re-buckets its
        # gradients after its first step, so a fresh DDP sums one step's all-reduce in another order.
        assert_same_run(result["resumed"], result["full"], rtol=1e-12)
        assert result["traffic"]["requests"] > 0 and result["traffic"]["bytes_received"] > 0  # remote rows were read


@pytest.mark.parametrize("parts", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_sampler_processes_deliver_the_same_batches(tmp_path, parts):
    """Trainers that each get their batches from a sampler process: the same run as one process.
    (With 2 partitions the samplers also ask the other owner for its rows: 4 processes, slow.)"""
    info = make_set(tmp_path / "parts", parts)
    spec = DistJobSpec(str(tmp_path / "parts"), MODEL, TrainConfig(**CONFIG), num_samplers=1)
    results = launch(sampler_run, 2 * parts, args=(spec,), timeout=300)
    reference = replay(info, 2)
    for rank in range(0, 2 * parts, 2):
        assert_same_run(results[rank], reference)
    if parts > 1:
        assert results[1]["traffic"]["requests"] > 0                              # the sampler asked the other owner


def sampler_run(spec: DistJobSpec) -> dict:
    with join_job(spec) as process:
        if not process.role.is_trainer:
            result = {}
        else:
            trainer = make_trainer(process, build_model(spec, process.info).double(), TrainConfig(epochs=2, **CONFIG))
            fit = trainer.fit()
            assert trainer.loader.stats["sample_work"] == 0.0                      # nothing sampled in the trainer
            result = {"losses": fit.losses, "state": trainer.model.state_dict(),
                      "val": [m.val_acc for m in fit.history], "test": [m.test_acc for m in fit.history]}
    return {**result, "traffic": process.peers.traffic()}


# ---------------------------------------------------------------------- failures
class DyingPartition:
    """A served partition that kills its process at its ``after``-th request (an owner dying mid-answer)."""

    def __init__(self, partition, marker: str, after: int):
        self.partition, self.marker, self.after, self.seen = partition, marker, after, 0

    def answer(self, request, ids, *args):
        self.seen += 1
        if self.seen >= self.after:
            pathlib.Path(self.marker).write_text(str(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        return self.partition.answer(request, ids, *args)


def failing_run(spec: DistJobSpec, mode: str, marker: str) -> None:
    pathlib.Path(f"{marker}.pid{os.environ['RANK']}").write_text(str(os.getpid()))
    with join_job(spec) as process:
        if mode == "owner" and process.role.part == 1:
            serve(DyingPartition(process.graph.local, marker, after=5))
        if mode == "sampler" and not process.role.is_trainer:
            graph = process.graph

            def dying(*args):
                pathlib.Path(marker).write_text(str(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)
            graph.sample_async = dying                                           # the first batch kills it
        if not process.role.is_trainer:
            return
        trainer = make_trainer(process)
        if mode == "trainer" and process.role.part == 1:
            step = trainer.train_step

            def dying_step(batch, b):
                if trainer.loader.epoch == 2 and b == 1:
                    pathlib.Path(marker).write_text(str(time.time()))
                    os.kill(os.getpid(), signal.SIGKILL)
                return step(batch, b)
            trainer.train_step = dying_step
        trainer.fit()


FAILURES = {  # mode: (processes, partitions, samplers per trainer); process 1 dies in each
    "trainer": (2, 2, 0),   # a trainer killed mid-epoch (its peers wait in DDP's all-reduce or on its answers)
    "owner": (2, 2, 0),     # an owner killed while answering another process's request
    "sampler": (2, 1, 1),   # a sampler process killed while its trainer waits for a batch
}
ENDS_WITHIN_SECONDS = 10.0  # from the death to the launcher's error (stated in docs/distributed.md; ~1 s measured)


@pytest.mark.parametrize("mode", ["trainer", "owner", pytest.param("sampler", marks=pytest.mark.slow)])
def test_a_dying_process_ends_the_job_quickly_and_cleanly(tmp_path, mode):
    processes, parts, samplers = FAILURES[mode]
    make_set(tmp_path / "parts", parts)
    spec = DistJobSpec(str(tmp_path / "parts"), MODEL, TrainConfig(epochs=50, **CONFIG), num_samplers=samplers)
    marker = str(tmp_path / "died")
    shm_before = shm_entries()
    try:
        launch(failing_run, processes, args=(spec, mode, marker), timeout=240)
    except LaunchError as failure:
        message = str(failure)
    else:
        pytest.fail("the job did not fail")
    ended = time.time()
    assert pathlib.Path(marker).exists(), f"the job failed before the planned death: {message}"
    died = float(pathlib.Path(marker).read_text())
    assert ended - died < ENDS_WITHIN_SECONDS, f"the job ended {ended - died:.1f}s after the death"
    assert message.startswith("rank 1 failed first: it was killed by signal 9"), message   # the dead one is blamed
    for rank in range(processes):                                                # no orphans
        pid = int(pathlib.Path(f"{marker}.pid{rank}").read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert shm_entries() - shm_before == set()                                  # nothing left in shared memory
