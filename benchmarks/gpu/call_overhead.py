"""Where a small g-SpMM's time goes on the GPU: the host's time per call and the device kernels
each call launches, per way of calling the same copy_u/sum.

The first H100 run (2026-11-26) timed the Triton g-SpMM at 0.16-0.25 ms on graphs where
cuSPARSE took 0.04 ms and unigraph's own scatter backend 0.07 ms (host-bound sizes), and ``auto``
faster than the very backend it picked when that backend was named (uniform degree 256:
0.54 vs 0.68 ms, the same Triton kernel). This part measures, without guessing, for each of:

* ``torch_native``: ``index_select`` + ``index_add`` (the floor of two aten calls);
* ``triton_launcher``: :func:`unigraph.kernels.triton.spmm_node.spmm_node` called directly (the
  launcher's Python plus Triton's own launch);
* ``unigraph:<backend>`` through ``unigraph.ops.gspmm(..., backend=<backend>)`` and ``unigraph:auto``;

``host_us``: the host's time per call with no synchronization inside the loop (what bounds a
small graph's call); ``latency_us``: one call then a synchronize (median); ``kernels_per_call``
and their names: the device kernels ``torch.profiler`` saw per call (an extra copy or check
shows here); ``syncs_per_call``: the host waits among them; on the small graph, for the Triton
calls and ``auto``, ``python_top``: the Python functions with the most own time per call
(cProfile), which name the host work to cut. Small graph first (host-bound), then
one large graph, where only extra device work can separate a named backend from ``auto``.
"""
from __future__ import annotations

import pathlib
import statistics
import time
from typing import Callable

import torch

SMALL = dict(nodes=4096, degree=4, width=16, calls=300, latency_calls=50)
LARGE = dict(nodes=65_536, degree=256, width=16, calls=30, latency_calls=10)
DRY = dict(nodes=16, degree=2, width=4, calls=3, latency_calls=2)
SYNC_NAMES = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "aten::_local_scalar_dense", "aten::nonzero")


def calls_for(g, x: torch.Tensor, backends: list[str]) -> dict[str, Callable[[], torch.Tensor]]:
    from unigraph import ops
    from unigraph.kernels.triton.spmm_node import spmm_node
    src, dst, n = g.src, g.dst, g.num_nodes
    gt = g.tensors()

    calls = {"torch_native": lambda: x.new_zeros((n, x.shape[1])).index_add_(0, dst, x.index_select(0, src)),
             "triton_launcher": lambda: spmm_node(gt.in_ptr, gt.in_src, gt.in_eid, gt.num_dst, "copy_u", "sum", x,
                                                  None, (x.shape[1],), None, None)[0]}
    for name in backends + ["auto"]:
        calls[f"unigraph:{name}"] = (lambda b=None if name == "auto" else name: ops.gspmm(g, "copy_u", "sum", x,
                                                                                           backend=b))
    return calls


def host_us(call: Callable[[], object], n: int, sync: Callable[[], None]) -> float:
    sync()
    began = time.perf_counter()
    for _ in range(n):
        call()
    host = time.perf_counter() - began
    sync()
    return round(host * 1e6 / n, 2)


def latency_us(call: Callable[[], object], n: int, sync: Callable[[], None]) -> float:
    times = []
    for _ in range(n):
        sync()
        began = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - began)
    return round(statistics.median(times) * 1e6, 2)


def kernels_seen(call: Callable[[], object], device: torch.device, sync: Callable[[], None], calls: int = 5) -> dict:
    """Device kernels and host waits per call, as ``torch.profiler`` saw them."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync()
    with profile(activities=activities) as prof:
        for _ in range(calls):
            call()
        sync()
    kernels: dict[str, int] = {}
    syncs = 0
    for event in prof.events():
        if device.type == "cuda" and event.device_type == torch.autograd.DeviceType.CUDA:
            kernels[event.name[:90]] = kernels.get(event.name[:90], 0) + 1
        elif event.name in SYNC_NAMES:
            syncs += 1
    return {"kernels_per_call": round(sum(kernels.values()) / calls, 2),
            "kernels": {k: round(v / calls, 2) for k, v in sorted(kernels.items(), key=lambda kv: -kv[1])[:8]},
            "syncs_per_call": round(max(0, syncs - 1) / calls, 2)}  # the profile's own final sync left out


PROFILED = ("triton_launcher", "unigraph:triton_node", "unigraph:auto")


def python_top(call: Callable[[], object], n: int, top: int = 12) -> list[str]:
    """The ``top`` functions by own time over ``n`` calls: "us/call  calls/call  where"."""
    import cProfile
    import pstats
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        call()
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    return [f"{tt * 1e6 / n:8.2f} us {nc / n:6.2f}x {pathlib.Path(file).name}:{line}({func})"
            for (file, line, func), (cc, nc, tt, ct, callers) in rows]


def measure(device: torch.device, dry_run: bool, backends: list[str], log: Callable[[str], None]) -> dict:
    from benchmarks import kernels
    from unigraph.benchmarking.environment import synchronize

    def sync():
        synchronize(device)
    out = {}
    for label, plan in (("small", DRY if dry_run else SMALL), ("large", DRY if dry_run else LARGE)):
        g = kernels.make_graph("uniform", plan["nodes"], plan["degree"], seed=5, device=device).to(device).prepare()
        x = torch.randn(g.num_nodes, plan["width"], device=device)
        rows = {}
        with torch.no_grad():
            for name, call in calls_for(g, x, backends).items():
                try:
                    call()  # compiles, fills caches
                    sync()
                except Exception as err:  # noqa: BLE001 - a way of calling that fails is recorded, not fatal
                    rows[name] = {"error": f"{type(err).__name__}: {str(err)[:200]}"}
                    continue
                rows[name] = {"host_us": host_us(call, plan["calls"], sync),
                              "latency_us": latency_us(call, plan["latency_calls"], sync),
                              **kernels_seen(call, device, sync, calls=2 if dry_run else 5)}
                if label == "small" and name in PROFILED:
                    rows[name]["python_top"] = python_top(call, 2 if dry_run else 100)
                    sync()
                log(f"call overhead, {label} graph ({g.num_nodes} nodes, {g.num_edges} edges, F={plan['width']}): "
                    f"{name}: host {rows[name]['host_us']} us/call, latency {rows[name]['latency_us']} us, "
                    f"{rows[name]['kernels_per_call']} kernels and {rows[name]['syncs_per_call']} host waits per "
                    f"call: {rows[name]['kernels']}")
        out[label] = {"graph": {"nodes": g.num_nodes, "edges": g.num_edges, "width": plan["width"]}, "calls": rows}
    return out
