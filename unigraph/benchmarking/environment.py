"""What every benchmark records beside its timings (the machine, library versions, the size of every
thread pool, the load average, memory), and the helpers that keep measurements comparable (one
thread setting for torch, numba and DGL; device synchronization)."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import pathlib
import platform
import resource
import sys

import torch

import unigraph
from unigraph import _openmp

VERSIONED = ("torch-scatter", "torch-sparse", "torch-geometric", "pyg-lib", "dgl", "numba", "triton", "numpy", "scipy")


def optional_module(name: str):
    """The module if it is installed, else None (without importing heavy packages needlessly)."""
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def _cpu_model() -> str:
    cpuinfo = pathlib.Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def last_level_cache_bytes() -> int | None:
    """The largest CPU cache of cpu0 (Linux sysfs), or None when unknown."""
    sizes = []
    for index in pathlib.Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        text = (index / "size").read_text().strip() if (index / "size").exists() else ""
        if text[:-1].isdigit() and text[-1] in "KMG":
            sizes.append(int(text[:-1]) * {"K": 2**10, "M": 2**20, "G": 2**30}[text[-1]])
    return max(sizes) if sizes else None


def memory_gb() -> float | None:
    if not hasattr(os, "sysconf"):
        return None
    return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)


def available_memory_gb() -> float | None:
    """``MemAvailable`` of /proc/meminfo (what can be allocated without swapping), or None."""
    meminfo = pathlib.Path("/proc/meminfo")
    if not meminfo.exists():
        return None
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return round(int(line.split()[1]) / 2**20, 2)
    return None


def peak_memory_gb() -> float:
    """This process's peak resident memory so far (``ru_maxrss``; kB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**30 if sys.platform == "darwin" else 2**20), 2)


def current_memory_gb() -> float | None:
    """This process's resident memory now (Linux /proc/self/statm), or None elsewhere."""
    statm = pathlib.Path("/proc/self/statm")
    if not statm.exists():
        return None
    return round(int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30, 2)


def _kernel_threads() -> int | None:
    """The threads unigraph's numba kernels run with now (torch's count, at most numba's pool:
    ``unigraph/kernels/cpu/threads.py``), or None without numba. Starts numba's pool the way the
    kernels do, which leaves torch's count alone (``numba.get_num_threads()`` first would not)."""
    if optional_module("numba") is None:
        return None
    from unigraph.kernels.cpu import kernel_threads, start_numba_threads
    start_numba_threads()
    return kernel_threads()


def thread_counts(dgl_module=None) -> dict:
    """The size of every thread pool a measurement can use, as they are now ("numba": the threads
    unigraph's kernels get, see :func:`_kernel_threads`)."""
    numba_threads = _kernel_threads()
    counts = {"torch_intra_op": torch.get_num_threads(), "torch_inter_op": torch.get_num_interop_threads(),
              "numba": numba_threads,
              "dgl": (dgl_module.utils.get_num_threads() if dgl_module is not None
                      and hasattr(dgl_module.utils, "get_num_threads") else None)}
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        counts[var] = os.environ.get(var)
    counts["OMP_WAIT_POLICY"] = _openmp.wait_policy_in_effect()   # what libgomp read, not what the variable says now
    return counts


def allocator_settings() -> dict:
    """The malloc settings the process started with (glibc's ``MALLOC_*`` variables, a preloaded
    allocator) and the bound of unigraph's own output pool: they change how much of a full-batch
    epoch is page faults (benchmarks/allocator.py)."""
    from unigraph.kernels.cpu import alloc
    return {**{k: v for k, v in sorted(os.environ.items()) if k.startswith("MALLOC_") or k == "LD_PRELOAD"},
            "unigraph_output_pool_bytes": alloc.pool().max_bytes}


def threads_text(counts: dict) -> str:
    """``thread_counts()`` as one line for a report."""
    pools = ", ".join(f"{name.replace('_intra_op', '').replace('_inter_op', ' inter-op')} {value}"
                      for name, value in counts.items() if value is not None and not name.isupper())
    env = ", ".join(f"{name}={value}" for name, value in counts.items() if value is not None and name.isupper())
    return pools + (f" ({env})" if env else "")


def machine(device: torch.device | str = "cpu") -> dict:
    device = torch.device(device)
    numba_threads = _kernel_threads()
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else None, "torch_threads": torch.get_num_threads(),
            "numba_threads": numba_threads, "device": str(device),
            "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "memory_gb": memory_gb(), "last_level_cache_mb": (round(last_level_cache_bytes() / 2**20, 1)
                                                               if last_level_cache_bytes() else None)}


def versions() -> dict:
    out = {"unigraph": unigraph.__version__, "torch": torch.__version__}
    for dist in VERSIONED:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def load_average() -> tuple[float, float, float] | None:
    """The 1/5/15-minute load average (a shared or busy machine makes timings noisy)."""
    if not hasattr(os, "getloadavg"):
        return None
    return tuple(round(x, 2) for x in os.getloadavg())


def set_threads(threads: int, dgl_module=None) -> None:
    """The same number of CPU threads for torch, numba and DGL (each has its own pool)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    torch.set_num_threads(threads)
    numba = optional_module("numba")
    if numba is not None:
        from unigraph.kernels.cpu import start_numba_threads
        start_numba_threads()   # the pool as unigraph starts it (its wait policy: kernels/cpu/openmp.py)
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    if dgl_module is not None:
        dgl_module.utils.set_num_threads(threads)


def synchronize(device: torch.device | str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def describe(command: str, device: torch.device | str = "cpu", dgl_module=None) -> dict:
    """Everything a results file carries about where it was measured, ``command`` being what
    reproduces it (call at the start of a run; :func:`finish` adds the end-of-run figures)."""
    return {"command": command, "machine": machine(device), "versions": versions(),
            "threads": thread_counts(dgl_module), "allocator": allocator_settings(), "loadavg_start": load_average(),
            "available_memory_gb_start": available_memory_gb()}


def finish(environment: dict) -> dict:
    """``environment`` with the load average and peak memory at the end of the run."""
    return {**environment, "loadavg_end": load_average(), "peak_memory_gb": peak_memory_gb()}
