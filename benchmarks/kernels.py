"""Kernel microbenchmarks: every graph operator on every unigraph backend, ``auto`` and the
peers importable here, per graph density, forward and forward+backward.

Cases: the ops of :data:`OPS` (g-SpMM copy_u/sum, u_mul_e/sum with a scalar edge weight,
copy_u/mean, copy_u/max; g-SDDMM u_dot_v and u_add_v; edge softmax on GAT-shaped scores; GAT's
attention aggregation) x uniform random and R-MAT power-law graphs of ``--nodes`` nodes at mean
in-degree ``--degrees`` x feature widths ``--widths`` (GAT-shaped ops use ``width // 16`` heads of
16 features) x forward / forward+backward. A case whose E x width exceeds ``--budget`` elements
is skipped (and listed): the message-materializing implementations would need several tensors
of that size.

Implementations: every available unigraph backend (family names excluded), ``auto`` (run as a
user would: no backend argument), and the peers: torch-native gather + ``index_add_`` /
``scatter_reduce_`` (PyG without torch-scatter), torch-scatter, torch-sparse ``matmul``,
``torch.sparse`` CSR ``mm`` (cuSPARSE on a GPU), DGL (``dgl.ops``, loaded through
``benchmarks.peers.load_dgl``), ``pyg`` (``torch_geometric.utils.scatter`` / ``softmax``: what
PyG's ``MessagePassing`` runs on an ``edge_index``) and ``pyg_compiled`` (the same PyG code under
``torch.compile(dynamic=True)``, one compilation per op and mode, untimed; only the ops GCN, GIN
and GAT layers use: :data:`COMPILED_PYG_OPS`). A peer without a natural kernel for an op is "n/a".
Structures (CSR, DGL formats, SparseTensor) are built before timing, for every library alike.

Timing (the shared rule, :mod:`unigraph.benchmarking.timing`): every op and mode first runs once
on a tiny graph (kernels loaded, thread pools started); per case, every implementation runs once
(a failing one is listed with its error), then ``--repeats`` rounds in which each runs once, in
an order rotating between rounds, each run batching calls up to ``--min-run-ms``. Tables report
the fastest run (``timings_ms``; the JSON also has the median, the max and every run). The regret
of ``auto`` is the time of the backend it chose over the fastest unigraph backend, both from this
run; ``vs best`` compares with every implementation, peers included.

Bandwidth: a STREAM-like copy / triad measurement at the run's thread counts is recorded, and every
case has the bytes its op must move (:mod:`unigraph.benchmarking.traffic`), the floor time they
take at the measured copy bandwidth and the GB/s each implementation achieved (median).

Outputs (``--out``; without it ``benchmarks/results/scratch``, and ``--quick`` never writes into
``benchmarks/results``): ``kernels_<device>.json`` (machine, versions, threads, load, bandwidth,
every run), ``kernels_<device>.md`` (tables, regret, targets, bandwidth) and
``kernels_<device>.png`` (time vs density per implementation). ``--ops`` and ``--backends`` narrow a run to one op and
backend by name (``--ops u_mul_e/sum --backends numba``).

    python benchmarks/kernels.py --out benchmarks/results  # the full run (5,000 nodes; ~10 min on 2 cores)
    python benchmarks/kernels.py --quick              # a smoke run in seconds (into benchmarks/results/scratch)
    python benchmarks/kernels.py --ops u_mul_e/sum --backends numba --peers dgl  # one op, one backend, DGL
    python benchmarks/kernels.py --fit           # refit the CPU cost model to the committed results, compare
    python benchmarks/kernels.py --fit --commit  # ... and rewrite backends/cost_constants_cpu.json
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import io
import json
import math
import os
import pathlib
import statistics
import sys
import time
from typing import Callable

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/kernels.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

import unigraph  # noqa: E402
from benchmarks.environment import RESULTS, add_out_argument, machine, optional_module as _module, out_dir  # noqa: E402,F401 - RESULTS: the tests read it here
from benchmarks.environment import set_threads, synchronize, versions  # noqa: E402
from benchmarks.peers import load_dgl  # noqa: E402
from unigraph import backends as registry  # noqa: E402
from unigraph.backends.base import Request  # noqa: E402
from unigraph.backends import cost_model  # noqa: E402
from unigraph.benchmarking import bandwidth, cost_fit, environment, graph_source, op_cases, traffic  # noqa: E402
from unigraph.benchmarking.output import write_json, write_text  # noqa: E402
from unigraph.benchmarking.timing import interleaved  # noqa: E402
from unigraph.data import rmat  # noqa: E402

OPS = ["copy_u/sum", "u_mul_e/sum", "copy_u/mean", "copy_u/max", "u_dot_v", "u_add_v", "edge_softmax", "gat"]
MODES = ["fwd", "fwd+bwd"]
HEAD_WIDTH = 16  # GAT-shaped ops: width // 16 heads of 16 features
PEERS = ["torch_native", "torch_scatter", "torch_sparse", "torch_sparse_csr", "dgl", "pyg", "pyg_compiled"]
DEFAULT_PEERS = PEERS[:5]  # pyg / pyg_compiled on request (the GPU run asks; torch_native is PyG's CPU path)
COMPILED_PYG_OPS = ("copy_u/sum", "u_mul_e/sum", "gat")
# The full run fits 2 CPU cores in about ten minutes: 5,000 nodes, and cases over 21M message
# elements (E x width) skipped, which keeps degree 256 at width 16, 64 at 64 and 16 at 256.
FULL = dict(nodes=5_000, degrees=[1, 4, 16, 64, 256], widths=[16, 64, 256], budget=21_000_000)
QUICK = dict(nodes=300, degrees=[1, 16], widths=[16], budget=100_000_000)


# ====================================================================== graphs and inputs
def uniform_graph(num_nodes: int, degree: int, seed: int, device: torch.device | str = "cpu") -> unigraph.Graph:
    gen = torch.Generator(device).manual_seed(seed)
    edges = torch.randint(0, num_nodes, (2, num_nodes * degree), generator=gen, device=device)
    return unigraph.Graph(edges, num_nodes=num_nodes)


def make_graph(kind: str, num_nodes: int, degree: int, seed: int = 0, device: torch.device | str = "cpu"
               ) -> unigraph.Graph:
    """A graph of the suite, drawn on ``device`` (a GPU draws millions of edges in milliseconds;
    its random stream differs from the CPU's, so the graphs differ, not their model)."""
    if kind == "uniform":
        return uniform_graph(num_nodes, degree, seed, device)
    return rmat(num_nodes, num_nodes * degree, seed=seed, device=device)


@dataclasses.dataclass
class Inputs:
    """The leaf tensors of one case (all require grad) and the upstream gradient of its output."""

    leaves: dict[str, torch.Tensor]
    grad_out: torch.Tensor | None = None


def make_inputs(op: str, g: unigraph.Graph, width: int, device: torch.device, seed: int = 0) -> Inputs:
    """The case's leaves (:func:`unigraph.benchmarking.op_cases.make_inputs`; GAT-shaped ops get
    ``width // 16`` heads)."""
    return Inputs(op_cases.make_inputs(op, g, width, max(1, width // HEAD_WIDTH), device, seed))


def message_width(op: str, width: int) -> int:
    """Elements per edge an E x F implementation materializes (what the budget limits)."""
    return max(1, width // HEAD_WIDTH) if op == "edge_softmax" else width


def op_request(op: str, width: int, device: torch.device) -> Request:
    """The request the ops front door builds for a case (what the cost model sees)."""
    return op_cases.request_of(op, width, max(1, width // HEAD_WIDTH), device)


# ====================================================================== implementations
class PeerGraph:
    """One graph in every peer's own structure, built once (outside timing)."""

    def __init__(self, g: unigraph.Graph, device: torch.device, dgl_module):
        self.n, self.src, self.dst = g.num_nodes, g.src, g.dst
        self.degree = g.in_degrees().clamp(min=1).to(torch.float32).unsqueeze(-1)
        ptr, col, eid = g.in_csr()
        self.in_ptr, self.in_src, self.in_eid = ptr, col, eid
        self.ones_csr = torch.sparse_csr_tensor(ptr, col, torch.ones(col.numel(), device=device), (self.n, self.n))
        self.dgl = None
        if dgl_module is not None:
            try:
                self.dgl = dgl_module.graph((self.src, self.dst), num_nodes=self.n).to(device)
            except dgl_module.DGLError as err:  # a CPU-only DGL build on a GPU machine: reported, DGL skipped
                print(f"[dgl] cannot place a graph on {device}: {err}", file=sys.stderr)
            else:
                self.dgl.create_formats_()
        self.pyg = op_cases.PeerGraphs(g, None, pyg=True) if _module("torch_geometric") is not None else None
        self.sparse_tensor = None
        if _module("torch_sparse") is not None:
            import torch_sparse
            order = torch.arange(self.src.numel(), device=device, dtype=torch.float32)
            self.sparse_tensor = torch_sparse.SparseTensor(row=self.dst, col=self.src, value=order,
                                                           sparse_sizes=(self.n, self.n))
            self.sparse_perm = self.sparse_tensor.storage.value().long()  # edge id of each CSR slot
            self.sparse_tensor = self.sparse_tensor.set_value(None)


def _native_softmax(p: PeerGraph, s: torch.Tensor) -> torch.Tensor:
    index = p.dst.view(-1, *([1] * (s.dim() - 1))).expand_as(s)
    row_max = s.new_zeros((p.n,) + s.shape[1:]).scatter_reduce(0, index, s.detach(), "amax", include_self=False)
    ex = (s - row_max.index_select(0, p.dst)).exp()
    denom = s.new_zeros((p.n,) + s.shape[1:]).index_add(0, p.dst, ex)
    return ex / denom.index_select(0, p.dst)


def peer_op(peer: str, op: str, p: PeerGraph, t: dict) -> Callable[[], torch.Tensor] | None:
    """The peer's implementation of ``op`` as a zero-argument callable, or None (n/a)."""
    src, dst, n = p.src, p.dst, p.n
    if peer == "torch_native":
        def gather_sum(msg):
            return msg.new_zeros((n,) + msg.shape[1:]).index_add(0, dst, msg)
        table = {
            "copy_u/sum": lambda: gather_sum(t["x"].index_select(0, src)),
            "u_mul_e/sum": lambda: gather_sum(t["x"].index_select(0, src) * t["w"]),
            "copy_u/mean": lambda: gather_sum(t["x"].index_select(0, src)) / p.degree,
            "copy_u/max": lambda: t["x"].new_zeros((n, t["x"].shape[1])).scatter_reduce(
                0, dst.view(-1, 1).expand(-1, t["x"].shape[1]), t["x"].index_select(0, src), "amax",
                include_self=False),
            "u_dot_v": lambda: (t["x"].index_select(0, src) * t["y"].index_select(0, dst)).sum(-1, keepdim=True),
            "u_add_v": lambda: t["x"].index_select(0, src) + t["y"].index_select(0, dst),
            "edge_softmax": lambda: _native_softmax(p, t["s"]),
            "gat": lambda: gather_sum(t["h"].index_select(0, src) * _native_softmax(p, torch.nn.functional.leaky_relu(
                t["el"].index_select(0, src) + t["er"].index_select(0, dst), 0.2)).unsqueeze(-1)),
        }
        return table.get(op)
    if peer == "torch_scatter":
        ts = _module("torch_scatter")
        if ts is None:
            return None
        from torch_scatter.composite import scatter_softmax

        def scatter(msg, reduce):
            out = ts.scatter(msg, dst, dim=0, dim_size=n, reduce=reduce)
            return out[0] if isinstance(out, tuple) else out
        table = {
            "copy_u/sum": lambda: scatter(t["x"].index_select(0, src), "sum"),
            "u_mul_e/sum": lambda: scatter(t["x"].index_select(0, src) * t["w"], "sum"),
            "copy_u/mean": lambda: scatter(t["x"].index_select(0, src), "mean"),
            "copy_u/max": lambda: scatter(t["x"].index_select(0, src), "max"),
            "edge_softmax": lambda: scatter_softmax(t["s"], dst, dim=0, dim_size=n),
            "gat": lambda: scatter(t["h"].index_select(0, src) * scatter_softmax(torch.nn.functional.leaky_relu(
                t["el"].index_select(0, src) + t["er"].index_select(0, dst), 0.2), dst, dim=0,
                dim_size=n).unsqueeze(-1), "sum"),
        }
        return table.get(op)
    if peer == "torch_sparse":
        if p.sparse_tensor is None:
            return None
        import torch_sparse
        adj = p.sparse_tensor
        table = {
            "copy_u/sum": lambda: torch_sparse.matmul(adj, t["x"], reduce="sum"),
            "u_mul_e/sum": lambda: torch_sparse.matmul(
                adj.set_value(t["w"].view(-1).index_select(0, p.sparse_perm), layout="csr"), t["x"], reduce="sum"),
            "copy_u/mean": lambda: torch_sparse.matmul(adj, t["x"], reduce="mean"),
            "copy_u/max": lambda: torch_sparse.matmul(adj, t["x"], reduce="max"),
        }
        return table.get(op)
    if peer == "torch_sparse_csr":
        def weighted():
            values = t["w"].view(-1).index_select(0, p.in_eid)
            return torch.sparse_csr_tensor(p.in_ptr, p.in_src, values, (n, n))
        table = {
            "copy_u/sum": lambda: torch.sparse.mm(p.ones_csr, t["x"]),
            "u_mul_e/sum": lambda: torch.sparse.mm(weighted(), t["x"]),
            "copy_u/mean": lambda: torch.sparse.mm(p.ones_csr, t["x"]) / p.degree,
        }
        return table.get(op)
    if peer == "pyg":
        return op_cases.peer_calls(op, p.pyg, t).get(op_cases.PYG_SCATTER) if p.pyg is not None else None
    if peer == "pyg_compiled":
        if p.pyg is None or op not in COMPILED_PYG_OPS:
            return None
        fn = compiled_pyg(op, COMPILE_BACKEND["name"])
        if op == "gat":
            return lambda: fn(t["h"], t["el"], t["er"], src, dst, n)
        return lambda: fn(t["x"], t["w"], src, dst, n) if op == "u_mul_e/sum" else fn(t["x"], src, dst, n)
    if peer == "dgl":
        if p.dgl is None:
            return None
        import dgl
        dg = p.dgl
        table = {
            "copy_u/sum": lambda: dgl.ops.copy_u_sum(dg, t["x"]),
            "u_mul_e/sum": lambda: dgl.ops.u_mul_e_sum(dg, t["x"], t["w"]),
            "copy_u/mean": lambda: dgl.ops.copy_u_mean(dg, t["x"]),
            "copy_u/max": lambda: dgl.ops.copy_u_max(dg, t["x"]),
            "u_dot_v": lambda: dgl.ops.u_dot_v(dg, t["x"], t["y"]),
            "u_add_v": lambda: dgl.ops.u_add_v(dg, t["x"], t["y"]),
            "edge_softmax": lambda: dgl.ops.edge_softmax(dg, t["s"]),
            "gat": lambda: dgl.ops.u_mul_e_sum(dg, t["h"], dgl.ops.edge_softmax(dg, torch.nn.functional.leaky_relu(
                dgl.ops.u_add_v(dg, t["el"].unsqueeze(-1), t["er"].unsqueeze(-1)), 0.2))),
        }
        return table.get(op)
    raise ValueError(f"unknown peer {peer!r}")


# PyG's code for COMPILED_PYG_OPS as functions of tensors (a closure over the case's tensors would
# make dynamo guard on them and recompile for every case).
def _pyg_copy_u_sum(x, src, dst, n):
    from torch_geometric.utils import scatter
    return scatter(x.index_select(0, src), dst, 0, n, "sum")


def _pyg_u_mul_e_sum(x, w, src, dst, n):
    from torch_geometric.utils import scatter
    return scatter(x.index_select(0, src) * w, dst, 0, n, "sum")


def _pyg_gat(h, el, er, src, dst, n):
    from torch_geometric.utils import scatter, softmax
    alpha = softmax(torch.nn.functional.leaky_relu(el.index_select(0, src) + er.index_select(0, dst), 0.2), dst,
                    num_nodes=n)
    return scatter(h.index_select(0, src) * alpha.unsqueeze(-1), dst, 0, n, "sum")


_PYG_FUNCTIONS = {"copy_u/sum": _pyg_copy_u_sum, "u_mul_e/sum": _pyg_u_mul_e_sum, "gat": _pyg_gat}
COMPILE_BACKEND = {"name": "inductor"}  # --compile-backend (a dry run uses "eager": dynamo without codegen)
_COMPILED: dict[tuple[str, str], Callable] = {}


def compiled_pyg(op: str, backend: str) -> Callable:
    """``torch.compile(dynamic=True)`` of PyG's code for ``op``, made once per process. Dynamo's
    recompile limit is made an error: past it dynamo would run the code eagerly, silently."""
    if (op, backend) not in _COMPILED:
        if hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
            torch._dynamo.config.fail_on_recompile_limit_hit = True
        compiled = torch.compile(_PYG_FUNCTIONS[op], dynamic=True, backend=backend)
        limit_hit = getattr(torch._dynamo.exc, "FailOnRecompileLimitHit", ())

        def call(*args):
            try:
                return compiled(*args)
            except limit_hit as err:  # a plain Exception: reported per case like every implementation's error
                raise RuntimeError(f"dynamo's recompile limit: {str(err).splitlines()[0]}") from err
        _COMPILED[op, backend] = call
    return _COMPILED[op, backend]


# ====================================================================== timing
def with_backward(forward: Callable[[], torch.Tensor], inputs: Inputs) -> Callable[[], object]:
    leaves = list(inputs.leaves.values())

    def run():
        out = forward()
        if inputs.grad_out is None or inputs.grad_out.shape != out.shape:
            inputs.grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device)
        return torch.autograd.grad(out, leaves, inputs.grad_out, allow_unused=True)
    return run


# ====================================================================== the run
def unigraph_backends(device: torch.device, wanted: list[str] | None = None) -> list[str]:
    """The unigraph backends to time: available, real kernels on ``device`` (``wanted`` only, if given)."""
    names = []
    for name, backend in registry.all_backends().items():
        if wanted is not None and name not in wanted:
            continue
        if not backend.contract.auto or not registry.status_of(name).ok:
            continue
        if device.type == "cpu" and backend.contract.interpreted_on_cpu:
            continue  # Triton's interpreter: not a CPU kernel
        names.append(name)
    return names


def run_benchmark(args, on_case: Callable[[dict], None] | None = None) -> dict:
    """The suite's run; ``on_case(result)`` after every case (the GPU run saves partial results
    there). With ``args.budget_s`` no case starts after that many seconds: the rest are listed in
    ``not_run``."""
    device = torch.device(args.device)
    dgl_module = load_dgl() if "dgl" in args.peers else None
    if args.threads is not None:
        set_threads(args.threads, dgl_module)
    COMPILE_BACKEND["name"] = args.compile_backend
    backends = unigraph_backends(device, args.backends)
    peers = [p for p in args.peers if p != "dgl" or dgl_module is not None]
    env = environment.describe("python benchmarks/kernels.py " + " ".join(args.argv), device, dgl_module)
    if args.bandwidth == "stream" or (args.bandwidth == "auto" and device.type == "cpu"):
        threads = sorted({1, torch.get_num_threads()})
        measured = bandwidth.stream(threads, elements=1 << 18 if args.quick else None, repeats=2 if args.quick else 5)
        gbps = bandwidth.best_gbps(measured, torch.get_num_threads())
    else:  # a GPU: one device-to-device copy, counting the bytes read and written
        measured = bandwidth.device_copy(device)
        gbps = measured["copy_gbps"]
    print(bandwidth.describe(measured), flush=True)
    result = {"machine": machine(device), "versions": versions(), "environment": env, "bandwidth": measured,
              "bandwidth_gbps_used": gbps,
              "settings": {"nodes": args.nodes, "degrees": args.degrees, "widths": args.widths, "ops": args.ops,
                           "modes": args.modes, "graphs": args.sources or args.graphs, "budget_elements": args.budget,
                           "repeats": args.repeats, "min_run_ms": args.min_run_ms,
                           "quick": args.quick, "command": env["command"]},
              "implementations": {"unigraph": backends, "auto": ["auto"], "peers": peers},
              "started": datetime.datetime.now().isoformat(timespec="seconds"),
              "loadavg_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
              "cases": [], "skipped": [], "not_run": []}
    began = time.perf_counter()
    warm_up(args, backends, peers, dgl_module)
    def over_budget(what: dict) -> bool:
        if args.budget_s is None or time.perf_counter() - began <= args.budget_s:
            return False
        result["not_run"].append({**what, "reason": f"over --budget-s {args.budget_s}"})
        print(f"[budget] not run: {what}", flush=True)
        return True

    for widths, (kind, degree, build) in ((w, plan) for w in width_passes(args) for plan in graph_plan(args)):
        if over_budget({"graph": kind, "degree": degree, "widths": widths}):
            continue
        g = build().to(device).prepare()
        peer_graph = PeerGraph(g, device, dgl_module)
        for op in args.ops:
            for width in widths:
                if over_budget({"graph": kind, "degree": degree, "op": op, "width": width}):
                    continue
                stats = g.stats()
                base = {"op": op, "graph": kind, "degree": degree, "nodes": stats.num_dst_nodes,
                        "edges": stats.num_edges, "max_in_degree": stats.max_in_degree,
                        "cv_in_degree": round(stats.cv_in_degree, 3), "width": width}
                elements = stats.num_edges * message_width(op, width)
                if elements > args.budget:
                    reason = f"E x width = {elements:,} elements > budget {args.budget:,}"
                    result["skipped"] += [{**base, "mode": mode, "reason": reason} for mode in args.modes]
                    continue
                inputs = make_inputs(op, g, width, device)
                for mode in args.modes:
                    auto_choice = op_cases.explain(op, g, inputs.leaves, mode=mode).backend
                    case = {**base, "mode": mode, "auto_choice": auto_choice,
                            **measure_case(args, g, peer_graph, op, width, inputs, mode, backends, peers)}
                    _score(case, backends, peers)
                    _bandwidth(case, g, op, width, mode, result["bandwidth_gbps_used"])
                    result["cases"].append(case)
                    print(_progress_line(case), flush=True)
                    if on_case is not None:
                        on_case(result)
    result["duration_s"] = round(time.perf_counter() - began, 1)
    result["environment"] = environment.finish(env)
    result["loadavg_end"] = result["environment"]["loadavg_end"]
    return result


def graphs(args):
    """``(kind, degree, graph)`` of every graph of the run, built one at a time."""
    for kind, degree, build in graph_plan(args):
        yield kind, degree, build()


def width_passes(args) -> list[list[int]]:
    """The widths of each pass over the graphs: with ``--width-first W``, every graph at W first,
    then every graph at the other widths (a ``--budget-s`` cut then drops widths, not densities:
    the GPU run's first run reached only in-degree 4 of 256 in width order); else one pass."""
    if args.width_first is None:
        return [list(args.widths)]
    rest = [w for w in args.widths if w != args.width_first]
    return [[args.width_first]] + ([rest] if rest else [])


def graph_plan(args):
    """``(kind, degree, build)`` of every graph of the run, in run order, one at a time;
    ``build()`` makes the graph (a ``--sources`` graph is loaded to be named, then handed over)."""
    if args.sources:
        for source in args.sources:
            loaded = graph_source.load(source)
            degree = round(loaded.graph.num_edges / max(1, loaded.graph.num_dst_nodes), 1)
            yield loaded.name, degree, (lambda g=loaded.graph: g)
            del loaded
        return
    pairs = [(kind, degree) for kind in args.graphs for degree in args.degrees]
    if args.degree_major:  # every kind at a degree before the next degree: a budget cut drops the densest
        pairs.sort(key=lambda pair: args.degrees.index(pair[1]))
    where = args.device if args.on_device else "cpu"
    for kind, degree in pairs:
        yield kind, degree, (lambda kind=kind, degree=degree: make_graph(kind, args.nodes, degree, device=where))


def warm_up(args, backends: list[str], peers: list[str], dgl_module) -> None:
    """Run every op and mode once on a tiny graph, untimed: numba loads its compiled kernels and
    starts its threads, and DGL and torch their pools, on first use (the first case timed
    otherwise pays milliseconds that are no property of its kernel)."""
    device = torch.device(args.device)
    g = make_graph("uniform", 64, 4).to(device).prepare()
    peer_graph = PeerGraph(g, device, dgl_module)
    if "pyg_compiled" in peers:  # its compilations (seconds each) are no part of any case's figure
        began = time.perf_counter()
        quiet_ops = [op for op in args.ops if op in COMPILED_PYG_OPS]
        for op in quiet_ops:
            inputs = make_inputs(op, g, 16, device)
            for mode in args.modes:
                measure_case(argparse.Namespace(**{**vars(args), "repeats": 1, "min_run_ms": 0.0}), g, peer_graph,
                             op, 16, inputs, mode, [], ["pyg_compiled"])
        print(f"[pyg_compiled] compiled {len(quiet_ops)} ops x {len(args.modes)} modes with "
              f"{args.compile_backend} in {time.perf_counter() - began:.1f} s", flush=True)
    quiet = argparse.Namespace(**{**vars(args), "repeats": 1, "min_run_ms": 0.0})
    with contextlib.redirect_stderr(io.StringIO()):  # errors are reported by the timed cases
        for op in args.ops:
            inputs = make_inputs(op, g, 16, device)
            for mode in args.modes:
                measure_case(quiet, g, peer_graph, op, 16, inputs, mode, backends, peers)


def measure_case(args, g: unigraph.Graph, peer_graph: PeerGraph, op: str, width: int, inputs: Inputs, mode: str,
                 backends: list[str], peers: list[str]) -> dict:
    """Every implementation on one case: fastest and median times, all runs, errors, n/a."""
    device = torch.device(args.device)
    request = op_request(op, width, device)
    out = {"timings_ms": {}, "median_ms": {}, "max_ms": {}, "runs_ms": {}, "errors": {}, "not_applicable": []}
    runs = {}
    for impl in backends + (["auto"] if args.auto else []) + peers:
        if impl in peers:
            forward = peer_op(impl, op, peer_graph, inputs.leaves)
        elif impl != "auto" and registry.get(impl).cannot_run(request) is not None:
            forward = None  # e.g. numba on a GPU
        else:
            forward = (lambda b=None if impl == "auto" else impl: op_cases.unigraph_call(op, g, inputs.leaves, b))
        if forward is None:
            out["not_applicable"].append(impl)
            continue
        run = with_backward(forward, inputs) if mode == "fwd+bwd" else _no_grad(forward)
        try:
            run()  # the first call: kernels specialize, caches fill; an error leaves this implementation out
        except implementation_errors() as err:
            # reported, not hidden: an implementation without this path (e.g. torch.sparse CSR
            # values that need a gradient) is listed with its error in the results
            out["errors"][impl] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
            print(f"  [{impl}] {op} {mode}: {out['errors'][impl]}", file=sys.stderr)
            continue
        runs[impl] = run
    sync = (lambda: synchronize(device)) if device.type == "cuda" else None
    try:
        timings = interleaved(runs, args.repeats, warmup=1 if args.min_run_ms > 0 else 0,
                              min_run_s=args.min_run_ms / 1e3, sync=sync)
    except implementation_errors() as err:  # a later call failed (the first ones passed): the case is lost, not the run
        out["errors"]["timed runs"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
        print(f"  [timed runs] {op} {mode}: {out['errors']['timed runs']}", file=sys.stderr)
        return out
    for impl, timing in timings.items():
        out["runs_ms"][impl] = [round(r, 4) for r in timing.runs_ms]
        out["timings_ms"][impl] = round(timing.min_ms, 4)
        out["median_ms"][impl] = round(timing.median_ms, 4)
        out["max_ms"][impl] = round(timing.max_ms, 4)
    return out


def implementation_errors() -> tuple[type[BaseException], ...]:
    """What an implementation's first call on a case may raise without ending the run (it is then
    listed with its error): torch's and Python's errors, and Triton's (a kernel that does not
    compile or does not fit on this GPU is a finding of a GPU run, not its end). Evaluated only
    when an exception reaches the handler; Triton's class only if Triton was imported."""
    triton_errors = sys.modules.get("triton.errors")
    extra = (triton_errors.TritonError,) if triton_errors is not None else ()
    return (RuntimeError, NotImplementedError, TypeError, ValueError) + extra


def _no_grad(forward: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    def run():
        with torch.no_grad():
            return forward()
    return run


def _score(case: dict, backends: list[str], peers: list[str]) -> None:
    timings = case["timings_ms"]
    ours = {b: timings[b] for b in backends if b in timings}
    case["best"] = min(timings, key=timings.get) if timings else None
    case["best_unigraph"] = min(ours, key=ours.get) if ours else None
    chosen = case["auto_choice"]
    if ours and chosen in ours:
        case["regret"] = round(ours[chosen] / ours[case["best_unigraph"]], 3)
        case["vs_best"] = round(ours[chosen] / timings[case["best"]], 3)
    else:
        case["regret"] = case["vs_best"] = None
    if "dgl" in timings and ours:
        case["best_unigraph_vs_dgl"] = round(ours[case["best_unigraph"]] / timings["dgl"], 3)


def _bandwidth(case: dict, g: unigraph.Graph, op: str, width: int, mode: str, gbps: float | None) -> None:
    """The bytes the case must move, their floor time at ``gbps`` and each implementation's GB/s."""
    case["bytes"] = op_cases.traffic_of(op, traffic.Shape.of(g), width, max(1, width // HEAD_WIDTH), mode)
    case["achieved_gbps"] = {impl: float(f"{traffic.achieved_gbps(case['bytes'], ms):.4g}")
                             for impl, ms in case["median_ms"].items()}
    case["floor_ms"] = float(f"{traffic.floor_ms(case['bytes'], gbps):.4g}") if gbps else None


def _progress_line(case: dict) -> str:
    timings = " ".join(f"{k}={v:.3g}" for k, v in case["timings_ms"].items())
    return (f"{case['op']:<13}{case['graph']:<8}d={case['degree']:<4}F={case['width']:<4}{case['mode']:<8}"
            f"auto={case['auto_choice']} regret={case['regret']}  {timings}")


# ====================================================================== reports
def write_markdown(result: dict, path: pathlib.Path) -> None:
    impls = result["implementations"]["unigraph"] + ["auto"] + result["implementations"]["peers"]
    m, s = result["machine"], result["settings"]
    regrets = [c["regret"] for c in result["cases"] if c["regret"] is not None]
    lines = [f"# Kernel microbenchmarks ({m['device']})", "",
             f"Generated by `{s['command']}` on {result['started']} in {result['duration_s']} s.", "",
             f"Machine: {m['cpu']}, {m['cpu_count']} cores; threads: torch {m['torch_threads']}, "
             f"numba {m['numba_threads']}"
             + (f", GPU {m['gpu']}" if m["gpu"] else "") + f"; load average at start/end "
             f"{_load(result['loadavg_start'])} / {_load(result['loadavg_end'])}.", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v), "",
             "Threads: " + environment.threads_text(result["environment"]["threads"]) + "; every implementation of "
             "a case timed interleaved (one run of each in turn, rotating).", ""]
    if result.get("bandwidth"):
        lines += [bandwidth.describe(result["bandwidth"]) + ".", ""]
    lines += [f"Graphs: {s['nodes']:,} nodes, mean in-degree {s['degrees']}, {', '.join(s['graphs'])}; "
             f"widths {s['widths']} (GAT-shaped ops: width/16 heads of 16). Times in ms, the fastest of "
             f"the runs (see the JSON for all); **bold** is the fastest implementation.", ""]
    if regrets:
        within = sum(r <= 1.1 for r in regrets)
        worst = max(result["cases"], key=lambda c: c["regret"] or 0)
        lines += ["## Regret of `auto`", "",
                  "`auto`'s choice vs the fastest unigraph backend, per case: "
                  f"median {statistics.median(regrets):.2f}x, "
                  f"worst {max(regrets):.2f}x ({worst['op']} {worst['graph']} d={worst['degree']} F={worst['width']} "
                  f"{worst['mode']}: chose {worst['auto_choice']}, best {worst['best_unigraph']}); "
                  f"{within} of {len(regrets)} cases within the 1.1x target.", ""]
    spreads = [c["median_ms"][i] / c["timings_ms"][i] for c in result["cases"] for i in c["timings_ms"]
               if len(c["runs_ms"][i]) > 1]
    if spreads:
        lines += [f"Noise: over the {len(spreads)} measurements with several runs, the median run was "
                  f"{statistics.median(spreads) - 1:.0%} slower than the fastest (90th percentile "
                  f"{sorted(spreads)[int(0.9 * (len(spreads) - 1))] - 1:.0%}).", ""]
    lines += _dgl_target_lines(result)
    lines += _bandwidth_lines(result, impls)
    lines += ["## All cases", "",
              "| op | graph | deg | F | mode | " + " | ".join(impls) + " | auto chose | regret | vs best |",
              "|" + "---|" * (len(impls) + 8)]
    for c in result["cases"]:
        cells = []
        for impl in impls:
            if impl in c["timings_ms"]:
                value = f"{c['timings_ms'][impl]:.3g}"
                cells.append(f"**{value}**" if impl == c["best"] else value)
            else:
                cells.append("err" if impl in c["errors"] else "n/a")
        regret = f"{c['regret']:.2f}" if c["regret"] is not None else "-"
        vs_best = f"{c['vs_best']:.2f}" if c["vs_best"] is not None else "-"
        lines.append(f"| {c['op']} | {c['graph']} | {c['degree']} | {c['width']} | {c['mode']} | "
                     + " | ".join(cells) + f" | {c['auto_choice']} | {regret} | {vs_best} |")
    if result["skipped"]:
        lines += ["", f"Skipped over the memory budget ({s['budget_elements']:,} elements per E x width tensor): "
                  + ", ".join(sorted({f"{c['op']} d={c['degree']} F={c['width']}" for c in result['skipped']}))]
    errors = [(c, impl, msg) for c in result["cases"] for impl, msg in c["errors"].items()]
    if errors:
        lines += ["", "Errors (implementation could not run the case):"]
        lines += sorted({f"- {impl} on {c['op']} {c['mode']}: {msg}" for c, impl, msg in errors})
    path.write_text("\n".join(lines) + "\n")


def _load(value) -> str:
    return "-" if not value else "/".join(f"{x:.1f}" for x in value)


def _dgl_target_lines(result: dict) -> list[str]:
    rows = [c for c in result["cases"] if c["op"] == "copy_u/sum" and c["mode"] == "fwd+bwd"
            and c["width"] == 64 and "dgl" in c["timings_ms"] and c["best_unigraph"]]
    if not rows:
        return []
    lines = ["## Target: copy_u/sum forward+backward within 1.5x of DGL (F = 64)", "",
             "| graph | degree | DGL ms | best unigraph | ms | ratio | auto ratio | met |", "|---" * 8 + "|"]
    for c in rows:
        dgl_ms = c["timings_ms"]["dgl"]
        best = c["timings_ms"][c["best_unigraph"]]
        auto = c["timings_ms"].get(c["auto_choice"], float("nan"))
        lines.append(f"| {c['graph']} | {c['degree']} | {dgl_ms:.3g} | {c['best_unigraph']} | {best:.3g} | "
                     f"{best / dgl_ms:.2f} | {auto / dgl_ms:.2f} | {'yes' if auto / dgl_ms <= 1.5 else 'NO'} |")
    return lines + [""]


def _bandwidth_lines(result: dict, impls: list[str]) -> list[str]:
    """copy_u/sum against the floor its bytes set (target: within 2x), and the GB/s every
    implementation achieved in every case (medians)."""
    if not result.get("bandwidth_gbps_used") or not result["cases"]:
        return []
    gbps = result["bandwidth_gbps_used"]
    lines = [f"## Bandwidth: floor at the measured copy bandwidth ({gbps:.1f} GB/s)", "",
             "copy_u/sum must move one read of each gathered row, the indices and the output "
             "(`unigraph/benchmarking/traffic.py`); target: the fastest unigraph backend within 2x of that floor.", "",
             "| graph | degree | F | mode | MB moved | floor ms | best unigraph | median ms | x floor | GB/s | within 2x |",
             "|" + "---|" * 11]
    for c in result["cases"]:
        if c["op"] != "copy_u/sum" or not c["best_unigraph"]:
            continue
        best = c["median_ms"][c["best_unigraph"]]
        ratio = best / c["floor_ms"]
        lines.append(f"| {c['graph']} | {c['degree']} | {c['width']} | {c['mode']} | {c['bytes'] / 1e6:.3g} | "
                     f"{c['floor_ms']:.3g} | {c['best_unigraph']} | {best:.3g} | {ratio:.1f} | "
                     f"{c['achieved_gbps'][c['best_unigraph']]:.3g} | {'yes' if ratio <= 2 else 'NO'} |")
    lines += ["", "Achieved GB/s (bytes moved / median time) of every implementation:", "",
              "| op | graph | deg | F | mode | floor ms | " + " | ".join(impls) + " |", "|" + "---|" * (len(impls) + 6)]
    for c in result["cases"]:
        cells = [f"{c['achieved_gbps'][i]:.3g}" if i in c["achieved_gbps"] else "-" for i in impls]
        lines.append(f"| {c['op']} | {c['graph']} | {c['degree']} | {c['width']} | {c['mode']} | {c['floor_ms']:.3g} | "
                     + " | ".join(cells) + " |")
    return lines + [""]


def write_plot(result: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    widths = result["settings"]["widths"]
    width = 64 if 64 in widths else widths[0]
    mode = "fwd+bwd" if "fwd+bwd" in result["settings"]["modes"] else result["settings"]["modes"][0]
    impls = result["implementations"]["unigraph"] + ["auto"] + result["implementations"]["peers"]
    ops_here = result["settings"]["ops"]
    kinds = list(dict.fromkeys(c["graph"] for c in result["cases"]))  # uniform, rmat, or the --sources
    styles = dict(zip(kinds, ["-", ":", "--", "-.", (0, (1, 3)), (0, (5, 5))] * len(kinds)))
    cols = 4
    rows = math.ceil(len(ops_here) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    degrees = {c["degree"] for c in result["cases"] if c["width"] == width and c["mode"] == mode}
    if len(degrees) == 1:   # one x value: a line would be one dot per implementation on a log axis
        _bars(fig, axes, result, ops_here, impls, kinds, width, mode, degrees.pop(), plt)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return
    for ax, op in zip(axes.flat, ops_here):
        for impl in impls:
            for kind, style in styles.items():
                points = sorted((c["degree"], c["timings_ms"][impl]) for c in result["cases"]
                                if c["op"] == op and c["graph"] == kind and c["width"] == width
                                and c["mode"] == mode and impl in c["timings_ms"])
                if points:
                    ax.plot(*zip(*points), style, marker="o", markersize=3, label=impl if kind == kinds[0] else None,
                            color=_color(impls, impl), linewidth=2.2 if impl == "auto" else 1.2)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(op, fontsize=10)
        ax.set_xlabel("mean in-degree")
        ax.set_ylabel("ms")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(ops_here):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8)
    lines = ", ".join(f"{kind}: {style if isinstance(style, str) else 'dots'}" for kind, style in styles.items())
    fig.suptitle(f"{mode}, F = {width}, by mean in-degree ({result['machine']['device']}); {lines}", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bars(fig, axes, result: dict, ops_here: list[str], impls: list[str], kinds: list[str], width: int, mode: str,
          degree: int, plt) -> None:
    """One panel per op: a bar per implementation (grouped by graph when there are several), the
    median time (written at the bar's foot) with a whisker from the fastest to the slowest run, on a
    linear axis from 0 (bars on a log axis would exaggerate the differences)."""
    for ax, op in zip(axes.flat, ops_here):
        slot = 0
        ticks, names = [], []
        for kind in kinds:
            case = next((c for c in result["cases"] if c["op"] == op and c["graph"] == kind and c["width"] == width
                         and c["mode"] == mode), None)
            if case is None:
                continue
            for impl in impls:
                if impl not in case["timings_ms"]:
                    continue
                median = case.get("median_ms", {}).get(impl, case["timings_ms"][impl])
                low = case["timings_ms"][impl]
                high = case.get("max_ms", {}).get(impl, median)
                ax.bar(slot, median, color=_color(impls, impl), edgecolor="black", linewidth=1.6 if impl == "auto" else 0.4,
                       yerr=[[median - low], [high - median]], capsize=3, error_kw={"linewidth": 0.8})
                ax.annotate(f"{median:.0f}" if median >= 10 else f"{median:.2g}", (slot, 0), xytext=(0, 3),
                            textcoords="offset points", ha="center", va="bottom", fontsize=8)
                ticks.append(slot)
                names.append(impl if len(kinds) == 1 else f"{impl}\n{kind}")
                slot += 1
            slot += 0.5
        ax.set_xticks(ticks, names, fontsize=8, rotation=30 if len(ticks) > 4 else 0)
        ax.set_ylim(bottom=0)
        ax.set_title(op, fontsize=10)
        ax.set_ylabel("ms")
        ax.grid(True, axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(ops_here):]:
        ax.axis("off")
    s = result["settings"]
    fig.suptitle(f"{mode}, F = {width}, {s['nodes']:,} nodes, mean in-degree {degree} ({', '.join(kinds)}; "
                 f"{result['machine']['device']}): median of {s['repeats']} interleaved runs, whisker min - max",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.95))


def _color(impls: list[str], impl: str):
    import matplotlib
    return matplotlib.colormaps["tab10"](impls.index(impl) % 10)


# ====================================================================== fitting the cost model
def refit(paths: list[str], commit: bool) -> None:
    """Constants fitted to ``paths`` (default: the committed fit set); compared with the committed
    file, which only ``--commit`` (with the default fit set) rewrites."""
    paths = paths or list(cost_fit.FIT_SET)
    text = cost_fit.render(cost_fit.fit_constants(cost_fit.load_results(paths), paths))
    committed = cost_model.CPU_CONSTANTS_PATH
    if text == committed.read_text(encoding="utf-8"):
        print(f"identical to the committed {committed.name}")
        return
    if commit:
        if paths != list(cost_fit.FIT_SET):
            raise SystemExit(f"--commit rewrites {committed} only from the committed fit set {cost_fit.FIT_SET}; "
                             f"commit those results first")
        write_text(committed, text)
        print(f"wrote {committed}")
        return
    scratch = out_dir(argparse.Namespace(out=None, quick=False)) / committed.name
    write_text(scratch, text)
    print(f"differs from the committed {committed.name}: wrote {scratch} (--commit replaces the committed file)")


# ====================================================================== command line
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny graphs, one repeat: a smoke run")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--degrees", type=int, nargs="+")
    parser.add_argument("--widths", type=int, nargs="+")
    parser.add_argument("--ops", nargs="+", default=OPS, choices=OPS)
    parser.add_argument("--modes", nargs="+", default=MODES, choices=MODES)
    parser.add_argument("--graphs", nargs="+", default=["uniform", "rmat"], choices=["uniform", "rmat"])
    parser.add_argument("--backends", nargs="+", metavar="NAME",
                        help="unigraph backends to time, e.g. numba (default: every available one, and auto)")
    parser.add_argument("--peers", nargs="*", default=DEFAULT_PEERS, choices=PEERS)
    parser.add_argument("--budget", type=int, help="skip cases whose E x width exceeds this many elements")
    parser.add_argument("--threads", type=int, help="CPU threads for torch, numba and DGL (default: theirs)")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved timed runs per implementation (default 7)")
    parser.add_argument("--min-run-ms", type=float, default=20.0,
                        help="batch short calls until one run takes this long (default 20)")
    add_out_argument(parser)
    parser.add_argument("--name", help="file name stem of the outputs (default: kernels_<device>)")
    parser.add_argument("--fit", nargs="*", metavar="RESULTS_JSON",
                        help="fit the CPU cost-model constants (default: to the committed fit set) and compare them "
                             "with backends/cost_constants_cpu.json, then exit")
    parser.add_argument("--commit", action="store_true", help="with --fit: rewrite the committed constants")
    parser.add_argument("--budget-s", type=float, help="start no new graph after this many seconds (the rest are "
                        "listed as not run in the results)")
    parser.add_argument("--degree-major", action="store_true",
                        help="every graph kind at a degree before the next degree (a --budget-s cut drops the densest)")
    parser.add_argument("--width-first", type=int, default=None, metavar="W",
                        help="time every graph at width W (one of --widths) before the other widths")
    parser.add_argument("--on-device", action="store_true",
                        help="draw the graphs on --device (fast on a GPU; another random stream than the CPU's)")
    parser.add_argument("--bandwidth", choices=["auto", "stream", "device-copy"], default="auto",
                        help="the bandwidth measurement: STREAM-like per thread count (auto on a CPU) or one "
                             "device-to-device copy (auto on a GPU)")
    parser.add_argument("--compile-backend", default="inductor",
                        help="torch.compile backend of the pyg_compiled peer (default inductor; eager for dry runs)")
    parser.add_argument("--replot", metavar="RESULTS_JSON",
                        help="draw the PNG of a results file again (beside it), measuring nothing, then exit")
    parser.add_argument("--sources", nargs="+", metavar="GRAPH",
                        help="time these graphs (anything `unigraph bench` reads: planetoid:cora:ROOT, "
                             "arxiv_like:169343:13, a file) instead of --graphs x --degrees")
    args = parser.parse_args(argv)
    if args.backends is not None:
        unknown = sorted(set(args.backends) - set(registry.all_backends()) - {"auto"})
        if unknown:
            parser.error(f"--backends: unknown {unknown}; choose from auto, {', '.join(registry.all_backends())}")
    args.auto = args.backends is None or "auto" in args.backends
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.repeats < 1 or args.min_run_ms < 0:
        parser.error(f"--repeats must be >= 1 and --min-run-ms >= 0, got {args.repeats} and {args.min_run_ms}")
    try:
        args.out = out_dir(args)  # never the committed results without an explicit --out, never for --quick
    except ValueError as err:
        parser.error(str(err))
    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.quick:
        args.repeats, args.min_run_ms = 1, 0.0
    if args.width_first is not None and args.width_first not in args.widths:
        parser.error(f"--width-first {args.width_first} is not one of --widths {args.widths}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.replot is not None:
        source = pathlib.Path(args.replot)
        write_plot(json.loads(source.read_text(encoding="utf-8")), source.with_suffix(".png"))
        print(f"wrote {source.with_suffix('.png')}")
        return
    if args.fit is not None:
        refit(args.fit, args.commit)
        return
    result = run_benchmark(args)
    stem = args.name or f"kernels_{torch.device(args.device).type}"
    write_json(args.out / f"{stem}.json", result)
    write_markdown(result, args.out / f"{stem}.md")
    write_plot(result, args.out / f"{stem}.png")
    print(f"wrote {args.out / stem}.json, .md, .png ({result['duration_s']} s)")


if __name__ == "__main__":
    main()
