"""The program of ``test_threads_untouched.py`` (run in a fresh process, ``tests`` on ``sys.path``):
the user sets torch's (and later numba's) thread count, then every kind of unigraph call runs,
and after each one both counts are read back. Prints one JSON line: the calls that changed them.

A fresh process, because numba starts its thread pool once per process, and starting it used to
set torch's count to numba's (``NUMBA_NUM_THREADS``): whichever unigraph call comes first must
leave it alone, so ``main(first)`` runs a chosen entry into numba first."""
from __future__ import annotations

import json
import sys

import torch

torch.set_num_threads(1)   # the user's setting, before unigraph or numba start anything


def counts() -> tuple[int, int | None]:
    """(torch's, numba's) thread counts of this thread. Reading numba's starts its pool if nothing
    has yet, which resets torch's count: read torch's first, then put it back."""
    threads = torch.get_num_threads()
    if not _numba():
        return threads, None
    import numba
    numba_threads = numba.get_num_threads()
    torch.set_num_threads(threads)
    return threads, numba_threads


def _numba() -> bool:
    from unigraph.kernels.cpu import numba_status
    return numba_status()[0]


def _graph(nodes: int, edges: int):
    from unigraph.data import rmat
    return rmat(nodes, edges, seed=3)


def sample_numba() -> None:
    from unigraph.sampling import NeighborSampler
    NeighborSampler([5, 5], path="numba" if _numba() else "torch").sample(_graph(500, 4000), torch.arange(50), key=1)


def sample_torch() -> None:
    from unigraph.sampling import NeighborSampler
    NeighborSampler([5, 5], path="torch").sample(_graph(500, 4000), torch.arange(50), key=1)


def big_gspmm_numba() -> None:   # above threads_for's serial threshold: the parallel kernel runs as is
    from unigraph import ops
    ops.gspmm(_graph(4000, 40000), "copy_u", "sum", u=torch.randn(4000, 16), backend="numba" if _numba() else None)


def every_op_on_every_cpu_backend() -> None:
    from op_cases import cpu_test_backends
    from unigraph import ops
    from unigraph.ops.spec import GSDDMM_OPS, GSPMM_OPS, REDUCES
    for size in ((60, 300), (3000, 30000)):   # below and above the serial threshold
        g = _graph(*size)
        n, m = g.num_nodes, g.num_edges
        for backend in cpu_test_backends():
            u = torch.randn(n, 4, requires_grad=True)
            e = (torch.rand(m, 4) + 0.5).requires_grad_(True)
            for op in GSPMM_OPS:
                for reduce in REDUCES:
                    ops.gspmm(g, op, reduce, u=None if op == "copy_e" else u, e=None if op == "copy_u" else e,
                              backend=backend).sum().backward()
            for op in GSDDMM_OPS:
                ops.gsddmm(g, op, u, e if op != "dot" else u, "u", "e" if op != "dot" else "v",
                           backend=backend).sum().backward()
            ops.edge_softmax(g, e, backend=backend).sum().backward()
            h = torch.randn(n, 2, 4, requires_grad=True)
            el, er = torch.randn(n, 2, requires_grad=True), torch.randn(n, 2, requires_grad=True)
            ops.gat_attention(g, h, el, er, backend=backend).sum().backward()


_loaders: dict = {}


def loader(num_workers: int) -> None:
    """Two epochs of a loader (its workers, once started, serve every later call: they cost seconds)."""
    from unigraph.sampling import NeighborSampler, NodeLoader
    if num_workers not in _loaders:
        g = _graph(500, 4000)
        _loaders[num_workers] = NodeLoader(g, torch.arange(500), NeighborSampler([4, 4]), batch_size=100,
                                           features=torch.randn(500, 8), num_workers=num_workers, timeout=120,
                                           start_method="forkserver")
    for _ in range(2):
        for _ in _loaders[num_workers]:
            pass


def trainer_epoch(full_graph: bool) -> None:
    from unigraph.data import planted_partition
    from unigraph.train import TrainConfig, Trainer, build_node_classifier
    dataset = planted_partition(300, num_features=8, num_val=60, num_test=60, seed=1)
    model = build_node_classifier("sage", dataset.num_features, dataset.num_classes, hidden_channels=8)
    batches = {} if full_graph else {"batch_size": 40, "fanouts": (3, 3)}
    Trainer(model, dataset, TrainConfig(epochs=1, progress="off", patience=None, **batches)).fit()


def train_job_with_its_own_threads() -> None:   # `unigraph train --threads 2` in this process
    from unigraph.train import TrainConfig
    from unigraph.train.job import JobSpec, run_job
    run_job(JobSpec(synthetic_nodes=300, threads=2, train=TrainConfig(epochs=1, progress="off", patience=None)))


CALLS = {
    "sample_numba": sample_numba, "sample_torch": sample_torch, "big_gspmm_numba": big_gspmm_numba,
    "every_op_on_every_cpu_backend": every_op_on_every_cpu_backend, "loader_0_workers": lambda: loader(0),
    "loader_2_workers": lambda: loader(2), "trainer_epoch_blocks": lambda: trainer_epoch(False),
    "trainer_epoch_full_graph": lambda: trainer_epoch(True),
    "train_job_with_its_own_threads": train_job_with_its_own_threads,
}


def main(first: str, rest: bool) -> None:
    changed = []

    def check(name: str, expected: tuple[int, int | None]) -> None:
        now = counts()
        if now != expected:   # noted, then put back, so that each call is judged on its own
            changed.append(f"{name}: (torch, numba) threads {expected} -> {now}")
            torch.set_num_threads(expected[0])
            if expected[1] is not None:
                import numba
                numba.set_num_threads(expected[1])

    CALLS[first]()
    default_numba = None
    if _numba():
        import numba
        default_numba = numba.config.NUMBA_NUM_THREADS
    check(f"{first} (the first call into unigraph)", (1, default_numba))
    if rest:
        for name, call in CALLS.items():
            call()
            check(name, (1, default_numba))
        if _numba():   # the user sets numba's count too
            import numba
            numba.set_num_threads(1)
            torch.set_num_threads(1)
            for name, call in CALLS.items():
                call()
                check(f"{name} (numba at 1)", (1, 1))
    for each in _loaders.values():
        each.close()
    print(json.dumps({"changed": changed, "numba": _numba()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] == "all")
