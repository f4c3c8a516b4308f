"""One training step of each implementation under ``torch.profiler``, summed up small enough for
the GPU run's JSON: where a step's time goes (the top operators by self time, on the device when
it has one, else on the CPU) and how often it waits for the device (the calls that copy a value
to the host or synchronize). The first H200 run found unigraph 2.2x slower than PyG's SAGEConv on
the same mini-batch blocks and 1.5x slower on a Cora-sized GCN, with no device time left to ask
why: the next run records it.
"""
from __future__ import annotations

import time
from typing import Callable

import torch

# operators and runtime calls after which the host waits for the device
SYNCS = ("aten::_local_scalar_dense", "aten::item", "aten::nonzero", "aten::is_nonzero", "aten::equal",
         "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
TOP = 12


def profile_steps(calls: dict[str, Callable[[], object]], device: torch.device, steps: int = 3,
                  sync: Callable[[], None] | None = None) -> dict:
    """``{name: summary}`` of ``steps`` calls of each callable (each warmed up once first)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out = {}
    for name, call in calls.items():
        call()
        if sync is not None:
            sync()
        began = time.perf_counter()
        with profile(activities=activities) as prof:
            for _ in range(steps):
                call()
            if sync is not None:
                sync()
        wall_ms = (time.perf_counter() - began) * 1e3 / steps
        out[name] = summarize(prof.key_averages(), steps, device.type == "cuda", wall_ms)
    return out


def summarize(averages, steps: int, on_device: bool, wall_ms: float) -> dict:
    def self_us(event) -> float:
        if on_device:
            return float(getattr(event, "self_device_time_total", 0.0) or 0.0)
        return float(event.self_cpu_time_total)
    events = list(averages)
    top = sorted((e for e in events if self_us(e) > 0), key=self_us, reverse=True)[:TOP]
    aten_calls = sum(e.count for e in events if e.key.startswith("aten::"))
    return {
        "wall_ms_per_step": round(wall_ms, 3),
        "time": "device (self)" if on_device else "CPU (self)",
        "top": [{"op": e.key, "calls_per_step": round(e.count / steps, 1),
                 "us_per_step": round(self_us(e) / steps, 1)} for e in top],
        "syncs_per_step": {e.key: round(e.count / steps, 1) for e in events if e.key in SYNCS and e.count},
        "aten_calls_per_step": round(aten_calls / steps, 1),
        "cpu_us_per_step": round(sum(float(e.self_cpu_time_total) for e in events) / steps, 1),
    }


def markdown(profiles: dict) -> list[str]:
    """A few lines per profiled part: wall time, host waits and the top operators of each row."""
    lines = []
    for part, rows in profiles.items():
        lines += [f"### Profile: {part}", "", "| implementation | wall ms / step | aten calls / step | host waits / step "
                  "| top operators (us / step) |", "| --- | --- | --- | --- | --- |"]
        for name, p in rows.items():
            waits = ", ".join(f"{k.split('::')[-1]} {v:g}" for k, v in p["syncs_per_step"].items()) or "none"
            top = ", ".join(f"{t['op'].split('::')[-1]} {t['us_per_step']:g}" for t in p["top"][:6])
            lines.append(f"| {name} | {p['wall_ms_per_step']} | {p['aten_calls_per_step']:g} | {waits} | {top} |")
        lines.append("")
    return lines
