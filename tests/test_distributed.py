"""Data parallelism: the distributed seed sampler, 2 ranks on gloo against one process, and failing ranks.

The multi-process tests start real ``torch.distributed`` jobs (gloo, CPU) with
:func:`unigraph.train.launch`; each rank imports torch and unigraph (a few seconds), so they are
few and small. Every job has a process-group timeout and a launcher timeout, and pytest-timeout
bounds each test: nothing can hang CI.
"""
from __future__ import annotations

import os
import time

import pytest
import torch
import torch.distributed as dist

from unigraph.data import planted_partition
from unigraph.sampling import NeighborSampler, NodeLoader
from unigraph.train import LaunchError, TrainConfig, Trainer, build_node_classifier, init_distributed, launch
from unigraph.train.distributed import shutdown
from unigraph.train.micro_batch import global_edges

DP_CONFIG = dict(epochs=4, batch_size=10, fanouts=(4, 3), patience=None, restore_best=False, progress="off", seed=3)


def small_dataset():
    # 80 training nodes (20 per class): divisible by the 2 ranks, so no rank drops a seed
    return planted_partition(240, num_features=12, num_val=60, num_test=60, seed=1)


def sage_model(dataset):
    torch.manual_seed(0)
    return build_node_classifier("sage", dataset.num_features, dataset.num_classes, hidden_channels=8,
                                 dropout=0.0).double()


# ---------------------------------------------------------------------- worker functions (run in each rank)
def data_parallel_run(checkpoint_dir: str) -> dict:
    init_distributed(timeout=60)
    try:
        return train_data_parallel(checkpoint_dir)  # its trainers are gone before the group is
    finally:
        shutdown()


def train_data_parallel(checkpoint_dir: str) -> dict:
    """Each rank samples in its own worker process (no pool is shared between ranks). Then a run
    stopped after 2 epochs (checkpointed) is resumed to the end."""
    dataset = small_dataset()
    model = sage_model(dataset)
    trainer = Trainer(model, dataset, TrainConfig(**DP_CONFIG, num_workers=1))
    batches = iter(trainer.loader)
    next(batches)  # start the workers to see who they are, then rewind to the first epoch
    workers = trainer.loader.worker_pids
    batches.close()
    trainer.loader.load_state_dict({"epoch": 0, "seed": DP_CONFIG["seed"]})
    result = trainer.fit()
    Trainer(sage_model(dataset), dataset, TrainConfig(**dict(DP_CONFIG, epochs=2), checkpoint_dir=checkpoint_dir)).fit()
    resumed = Trainer(sage_model(dataset), dataset,
                      TrainConfig(**DP_CONFIG, checkpoint_dir=checkpoint_dir, resume=True)).fit()
    return {"losses": result.losses, "val_acc": [m.val_acc for m in result.history], "pid": os.getpid(),
            "workers": workers, "state": {k: v.clone() for k, v in model.state_dict().items()},
            "resumed_losses": resumed.losses}


def hanging_rank() -> None:
    context = init_distributed(timeout=4)
    if context.rank == 1:
        time.sleep(600)  # stuck: never joins the collective
    dist.all_reduce(torch.ones(1))


# ---------------------------------------------------------------------- the distributed seed sampler (in process)
@pytest.mark.parametrize("world_size", [2, 3])
def test_each_rank_gets_a_disjoint_share_of_every_epoch(world_size):
    dataset = small_dataset()
    train = dataset.train_mask.nonzero().flatten()
    sampler = NeighborSampler([4, 3])
    loaders = [NodeLoader(dataset.graph, train, sampler, batch_size=7, seed=5, num_replicas=world_size, rank=r)
               for r in range(world_size)]
    single = NodeLoader(dataset.graph, train, sampler, batch_size=7 * world_size, seed=5)
    seen_orders = []
    for _ in range(2):  # two epochs: a new order each epoch
        per_rank = [list(loader) for loader in loaders]
        assert len({len(batches) for batches in per_rank}) == 1, "every rank must take the same number of steps"
        shares = [torch.cat([b.seeds for b in batches]) for batches in per_rank]
        union = torch.cat(shares)
        assert union.unique().numel() == union.numel(), "ranks' shares overlap"
        assert train.numel() - union.numel() < world_size
        for index, whole in enumerate(single):
            parts = [per_rank[r][index] for r in range(world_size)]
            assert set(torch.cat([p.seeds for p in parts]).tolist()) <= set(whole.seeds.tolist())
            # each seed's sampled in-edges are those it has in the single-process batch
            whole_edges = set(map(tuple, global_edges(whole, 1).t().tolist()))
            for part in parts:
                assert set(map(tuple, global_edges(part, 1).t().tolist())) <= whole_edges
        seen_orders.append(shares[0].tolist())
    assert seen_orders[0] != seen_orders[1]


# ---------------------------------------------------------------------- 2 ranks against 1 process
@pytest.mark.timeout(240)
def test_two_ranks_match_single_process_training(tmp_path):
    """Same global batch (2 x 10 seeds) and seed: the loss curve, the validation accuracies and the
    final weights match one process with batches of 20. Stated tolerance (float64): 1e-9 relative
    on losses, 1e-7 absolute on weights (only the summation order differs). Each rank samples in
    its own worker process; the single process samples in-process (the same batches by design).
    A 2-rank run checkpointed after 2 epochs and resumed ends exactly like the uninterrupted one."""
    ranks = launch(data_parallel_run, 2, args=(str(tmp_path),), timeout=200)
    for rank in ranks:
        assert rank["resumed_losses"] == rank["losses"]
    workers = [set(rank["workers"]) for rank in ranks]
    assert all(len(w) == 1 for w in workers) and not workers[0] & workers[1]
    assert not {rank["pid"] for rank in ranks} & (workers[0] | workers[1])
    dataset = small_dataset()
    model = sage_model(dataset)
    single = Trainer(model, dataset, TrainConfig(**dict(DP_CONFIG, batch_size=20))).fit()
    for rank in ranks:
        assert rank["losses"] == pytest.approx(single.losses, rel=1e-9)
        assert rank["val_acc"] == [m.val_acc for m in single.history]
    for name, value in model.state_dict().items():
        torch.testing.assert_close(ranks[0]["state"][name], value, rtol=0, atol=1e-7)
        assert torch.equal(ranks[0]["state"][name], ranks[1]["state"][name]), "DDP replicas diverged"
    assert single.losses[-1] < single.losses[0]


# ---------------------------------------------------------------------- failures end the job, fast, with the cause
# (a rank that raises, is killed or exits: tests/test_faults_distributed.py)
@pytest.mark.timeout(120)
def test_a_stuck_rank_is_ended_by_the_collective_timeout():
    began = time.monotonic()
    with pytest.raises(LaunchError) as failure:
        launch(hanging_rank, 2, timeout=100)
    message = str(failure.value)
    assert "rank 0 failed first" in message
    assert "timed out" in message.lower() or "timeout" in message.lower()
    assert time.monotonic() - began < 60


def sleeping_rank() -> None:
    time.sleep(600)  # stuck outside any collective: only the job timeout can end it


@pytest.mark.timeout(120)
def test_the_job_timeout_stops_every_rank():
    began = time.monotonic()
    with pytest.raises(LaunchError, match=r"did not finish within timeout=10s; ranks \[0\] were still running"):
        launch(sleeping_rank, 1, timeout=10)
    assert time.monotonic() - began < 40


def test_launch_and_init_check_their_arguments(monkeypatch):
    with pytest.raises(ValueError, match="nproc must be an int >= 1"):
        launch(data_parallel_run, 0)
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="RANK is not set"):
        init_distributed()
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    with pytest.raises(ValueError, match=r"RANK must be in 0..WORLD_SIZE-1 = 0..1, got 2"):
        init_distributed()
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ValueError, match="backend must be 'gloo' or 'nccl'"):
        init_distributed(backend="mpi")
