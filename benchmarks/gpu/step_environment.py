"""The GPU run's environment step: what the run measures on. Versions (Python, torch and its CUDA, Triton,
PyG, numba, ...), the device's name, SM count, memory and L2 cache, the driver (``nvidia-smi``),
every unigraph backend's availability, and a measured device-to-device copy bandwidth (the
ceiling the kernel suite holds memory-bound kernels against)."""
from __future__ import annotations

import platform
import shutil
import subprocess
import sys

from benchmarks.gpu.common import log, step_main

STEP = "environment"


def device_properties(device) -> dict:
    import torch
    if device.type != "cuda":
        from unigraph.benchmarking.environment import machine
        return {"name": machine(device)["cpu"], "sm_count": None, "memory_gb": None, "l2_cache_mb": None,
                "capability": None}
    props = torch.cuda.get_device_properties(device)
    return {"name": props.name, "sm_count": props.multi_processor_count,
            "memory_gb": round(props.total_memory / 2**30, 1),
            "l2_cache_mb": round(getattr(props, "L2_cache_size", 0) / 2**20, 1) or None,
            "capability": f"{props.major}.{props.minor}"}


def nvidia_smi() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                           "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    return done.stdout.strip() or done.stderr.strip()


def body(results, deadline, dry_run: bool) -> None:
    import torch

    import unigraph
    from benchmarks.gpu.common import device_for
    from unigraph import backends as registry
    from unigraph.benchmarking import bandwidth, environment
    device = device_for(dry_run)
    results["python"] = sys.version.split()[0]
    results["platform"] = platform.platform()
    results["versions"] = {**environment.versions(), "torch_cuda": torch.version.cuda,
                           "hypothesis": _version("hypothesis"), "pytest": _version("pytest"),
                           "pytest-xdist": _version("pytest-xdist")}
    results["device"] = {"type": device.type, **device_properties(device)}
    results["nvidia_smi"] = nvidia_smi()
    results["machine"] = environment.machine(device)
    results["backends"] = {name: {"ok": registry.status_of(name).ok, "detail": registry.status_of(name).detail}
                           for name in registry.names()}
    results["unigraph_file"] = unigraph.__file__
    results.save()
    log(STEP, f"python {results['python']}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
              + ", ".join(f"{k} {v}" for k, v in results["versions"].items() if v and k not in ("unigraph", "torch")))
    d = results["device"]
    log(STEP, f"device {d['name']}: {d['sm_count']} SMs, {d['memory_gb']} GB, L2 {d['l2_cache_mb']} MB, "
              f"capability {d['capability']}; nvidia-smi: {results['nvidia_smi']}")
    for name, status in results["backends"].items():
        log(STEP, f"backend {name}: {'ok' if status['ok'] else 'unavailable'} - {status['detail']}")
    measured = bandwidth.device_copy(device, elements=1 << 20 if dry_run else None)
    results["bandwidth"] = measured
    log(STEP, bandwidth.describe(measured))


def _version(name: str) -> str | None:
    import importlib.metadata
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(step_main(STEP, __doc__, body))
