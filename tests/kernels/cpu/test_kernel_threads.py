"""Every numba kernel runs with ``torch.get_num_threads()`` threads at the time of the call, never
more (``unigraph/kernels/cpu/threads.py``): counted at every kernel's entry, and as CPU time over
wall time in fresh processes (one thread set by the user, in a DataLoader worker, in launched ranks);
and kernels still run in a child forked after numba's pool started (numba's GNU OpenMP layer
terminates such a child on its first parallel kernel: the serial twins run there)."""
from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys

import pytest
import torch
from proc_helpers import json_report

numba = pytest.importorskip("numba")

from unigraph import Graph, ops  # noqa: E402
from unigraph.kernels.cpu import threads  # noqa: E402

HERE = pathlib.Path(__file__).parent


def _kernel_modules() -> None:
    """Import every module that declares kernels (declaring registers them)."""
    import unigraph.kernels.cpu.coo  # noqa: F401
    import unigraph.kernels.cpu.dropout  # noqa: F401
    import unigraph.kernels.cpu.gat  # noqa: F401
    import unigraph.kernels.cpu.sddmm  # noqa: F401
    import unigraph.kernels.cpu.softmax  # noqa: F401
    import unigraph.kernels.cpu.spmm  # noqa: F401
    import unigraph.kernels.sampling  # noqa: F401


def _graph(nodes: int, edges: int, seed: int = 0) -> Graph:
    generator = torch.Generator().manual_seed(seed)
    return Graph(torch.randint(0, nodes, (2, edges), generator=generator), num_nodes=nodes)


def _every_kernel(g: Graph, width: int) -> list[torch.Tensor]:
    """Calls that reach every declared kernel (forward and backward) on the numba backend; returns
    their outputs, gradients and samples (float64, repeatable after ``torch.manual_seed``)."""
    from unigraph.nn.dropout import dropout, keep_mask, relu_dropout
    from unigraph.ops.small_graph_lane import add_relu, aggregate, extreme
    from unigraph.sampling import NeighborSampler
    n, m = g.num_nodes, g.num_edges
    leaf = {"dtype": torch.float64, "requires_grad": True}
    u, h = torch.randn(n, width, **leaf), torch.randn(n, 2, width // 2, **leaf)
    e, w = torch.rand(m, width, **leaf), torch.rand(m, 1, **leaf)
    el, er = torch.randn(n, 2, **leaf), torch.randn(n, 2, **leaf)
    outs = [ops.gspmm(g, op, reduce, u=a, e=b, backend="numba")
            for op, a, b in (("copy_u", u, None), ("u_mul_e", u, w), ("u_add_e", u, e)) for reduce in ("sum", "max")]
    outs += [ops.gsddmm(g, "add", u, e, "u", "e", backend="numba"), ops.gsddmm(g, "dot", u, u, "u", "v", backend="numba"),
             ops.gsddmm(g, "add", u.view(n, 1, width), w.view(m, 1, 1), "u", "e", backend="numba"),
             ops.gsddmm(g, "dot", h, h[:, :1], "u", "v", backend="numba"),
             ops.edge_softmax(g, e, backend="numba"), ops.gat_attention(g, h, el, er, backend="numba"),
             dropout(u, 0.5), relu_dropout(u, 0.5), keep_mask((m, 4), 0.5, u),
             aggregate(g.src, g.dst, u, None, n, True), aggregate(g.src, g.dst, u, w.view(-1), n, True),
             aggregate(g.src, g.dst, u, None, n, True, g.in_degree_counts()),   # a mean: divide_rows, both ways
             extreme(g.src, g.dst, u, n, "max", True), add_relu(g.src, g.dst, u, e, n, True)]
    with _one_pass_dropout():
        # torch's own, in one pass at any size here; times u so that its backward gets a contiguous
        # gradient (sum's is expanded: torch's product takes that one)
        outs.append(torch.nn.functional.dropout(u, 0.5) * u)
    sum(out.sum() for out in outs).backward()
    samples = []
    for num_threads in (1, None, 2):
        batch = NeighborSampler([3, 3], path="numba", num_threads=num_threads).sample(g, torch.arange(min(n, 64)), key=1)
        samples += [batch.input_nodes] + [block.edge_index for block in batch.blocks]
    return [out.detach() for out in outs] + [t.grad for t in (u, h, e, w, el, er)] + samples


@contextlib.contextmanager
def _one_pass_dropout():
    """unigraph.torch_dropout's path for every size, with the suite's other threads out of the way."""
    from unigraph import torch_bernoulli, torch_dropout
    saved = torch_dropout.MIN_ELEMENTS, torch_bernoulli._alone
    torch_dropout.MIN_ELEMENTS, torch_bernoulli._alone = 1, lambda: True
    try:
        yield
    finally:
        torch_dropout.MIN_ELEMENTS, torch_bernoulli._alone = saved


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, up to float64 rounding where fast-math reassociation applies: the serial twin is
    other machine code, so a sum may be vectorized in another order (a few ulp; integers, arg
    indices, masks and samples are equal bit for bit)."""
    if not a.is_floating_point():
        return torch.equal(a, b)
    return a.dtype == b.dtype and torch.allclose(a, b, rtol=1e-12, atol=1e-12)


def test_every_kernel_runs_with_torchs_thread_count_at_call_time(monkeypatch):
    _kernel_modules()
    threads.start_numba_threads()
    pool = threads._pool_size
    if pool < 2:
        pytest.skip("numba's pool has one thread here (NUMBA_NUM_THREADS=1): nothing to tell apart")
    seen: list[tuple[str, int]] = []

    def recorder(name, kernel):
        def record(*args):
            seen.append((name, threads._get_threads()))
            return kernel(*args)
        return record

    declared = set()
    for module, name, _, _ in threads._KERNELS:
        declared.add(name)
        monkeypatch.setattr(sys.modules[module], name, recorder(name, getattr(sys.modules[module], name)))
    numba_before = threads._get_threads()
    torch_before = torch.get_num_threads()
    big, small = _graph(3000, 30000), _graph(40, 120)
    try:
        for torch_threads in (1, 2):
            torch.set_num_threads(torch_threads)
            for g, width, expected in ((big, 32, {min(torch_threads, pool)}), (small, 4, {1})):
                seen.clear()
                _every_kernel(g, width)
                counts = {name: {n for each, n in seen if each == name} for name in declared}
                assert set(counts) == declared and all(counts.values()), \
                    f"kernels never called: {sorted(k for k, v in counts.items() if not v)}"
                wrong = {name: n for name, n in counts.items() if name != "sample_rows" and n != expected}
                assert not wrong, f"torch threads {torch_threads}, {g.num_edges} edges: {wrong}, expected {expected}"
                # the sampler: num_threads=1 (its default) gives 1; None and 2 give torch's count
                assert counts["sample_rows"] == {1, min(torch_threads, pool)}   # (sample_layer calls it)
                assert threads._get_threads() == numba_before and torch.get_num_threads() == torch_threads
    finally:
        torch.set_num_threads(torch_before)


def test_kernel_threads_rule(monkeypatch):
    threads.start_numba_threads()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert threads.kernel_threads(10 ** 9) == 1
        assert threads.kernel_threads(threads.SERIAL_WORK - 1) == 1
        torch.set_num_threads(64)   # more than numba's pool: the pool is the bound
        assert threads.kernel_threads(10 ** 9) == threads._pool_size
        assert threads.kernel_threads(None, limit=1) == 1
        monkeypatch.setattr(threads, "_forked", True)
        assert threads.kernel_threads(10 ** 9) == 1
    finally:
        torch.set_num_threads(before)


def _cpu_time_scenarios(*names: str) -> subprocess.Popen:
    env = dict(os.environ, NUMBA_NUM_THREADS="2")
    env.pop("OMP_NUM_THREADS", None)
    return subprocess.Popen([sys.executable, str(HERE / "kernel_threads_child.py"), *names],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=HERE)


@pytest.mark.timeout(400)
def test_one_thread_means_cpu_time_equals_wall_time_for_a_large_gspmm():
    """numba's pool has 2 threads in every process here; torch has 1 (set by the user, by the
    DataLoader worker, by the launcher): CPU time / wall time stays ~1 (it was
    1.76-1.97 with numba's own count). Other load on the machine can only lower the ratio, so the
    bound holds on a busy machine; the per-kernel count test above is the exact check."""
    report = json_report(_cpu_time_scenarios("main", "dataloader", "launch"), timeout=360)
    assert set(report) == {"main", "dataloader", "launch"}
    for scenario, measured in report.items():
        assert measured["torch_threads"] == 1, (scenario, measured)
        assert measured["ratio"] < 1.3, f"{scenario}: CPU time / wall time {measured['ratio']:.2f} with one thread"


_FORK_PROGRAM = r"""
import os, pickle, sys, torch
sys.path[:0] = sys.argv[1:3]   # this folder, and tests/ (proc_helpers)
from test_kernel_threads import _every_kernel, _graph, same

def results():
    torch.manual_seed(0)
    return _every_kernel(_graph(3000, 30000), 8)

torch.set_num_threads(2)
parent = results()   # starts numba's pool in this process
read, write = os.pipe()
pid = os.fork()
if pid == 0:   # a DataLoader worker forked after the first training step
    torch.set_num_threads(1)   # as DataLoader does (torch's own OpenMP hangs in a forked child otherwise)
    os.close(read)
    with os.fdopen(write, "wb") as f:
        pickle.dump(results(), f)
    os._exit(0)
os.close(write)
with os.fdopen(read, "rb") as f:
    child = pickle.load(f)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert len(parent) == len(child)
for i, (a, b) in enumerate(zip(parent, child)):
    assert same(a, b), (i, (a - b).abs().max() if a.is_floating_point() else None)
print("ok")
"""


@pytest.mark.timeout(400)
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_kernels_run_in_a_child_forked_after_numbas_pool_started():
    """Every kernel, forward and backward, gives the same results (:func:`same`) in the parent
    (parallel builds, 2 threads) and in a child forked after them (serial twins, one thread; the
    child used to die of SIGTERM on its first kernel)."""
    done = subprocess.run([sys.executable, "-c", _FORK_PROGRAM, str(HERE), str(HERE.parents[1])], capture_output=True, text=True,
                          timeout=360, env=dict(os.environ, NUMBA_NUM_THREADS="2"))
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
