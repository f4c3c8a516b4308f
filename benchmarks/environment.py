"""What every benchmark records beside its timings: the machine, library versions, thread
counts; and the helpers that keep measurements comparable (one thread setting for every
library, device synchronization)."""
from __future__ import annotations

import importlib.metadata
import json
import importlib.util
import os
import pathlib
import platform

import torch

import unigraph


def optional_module(name: str):
    """The module if it is installed, else None (without importing heavy packages needlessly)."""
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def machine(device: torch.device) -> dict:
    cpu_model = platform.processor()
    if pathlib.Path("/proc/cpuinfo").exists():
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu_model,
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "numba_threads": __import__("numba").get_num_threads() if optional_module("numba") else None, "device": str(device),
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
            if hasattr(os, "sysconf") else None}
    return info


def versions() -> dict:
    out = {"unigraph": unigraph.__version__, "torch": torch.__version__}
    for dist in ("torch-scatter", "torch-sparse", "torch-geometric", "dgl", "numba", "triton", "numpy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def set_threads(threads: int, dgl_module) -> None:
    """The same number of CPU threads for torch, numba and DGL (each has its own pool)."""
    torch.set_num_threads(threads)
    if optional_module("numba") is not None:
        import numba
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    if dgl_module is not None:
        dgl_module.utils.set_num_threads(threads)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def load_average() -> tuple[float, float, float]:
    """The 1/5/15-minute load average (a shared or busy machine makes timings noisy)."""
    return tuple(round(x, 2) for x in os.getloadavg())


def write_report(result: dict, out: pathlib.Path, name: str, write_markdown) -> None:
    """``out/name.json`` (everything) and ``out/name.md`` (``write_markdown(result, path)``), then print the
    markdown."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1))
    write_markdown(result, out / f"{name}.md")
    print((out / f"{name}.md").read_text())
