"""The machine's memory bandwidth, measured STREAM-style (McCalpin's copy and triad kernels).

* copy:  ``b[i] = a[i]``            16 bytes per element (one float64 read, one write)
* triad: ``a[i] = b[i] + s * c[i]``  24 bytes per element (two reads, one write)

As in STREAM, write-allocate traffic is not counted, the best repeat is the figure (min / median /
max also recorded), and each array should be at least 4x the last-level cache (the default size
ensures it where the cache size is known; ``meets_stream_rule`` says whether a run did). The
kernels are torch's own ``copy_`` and ``add(out=)``, which split large tensors over torch's
intra-op threads, so measuring at each thread count shows what ``--threads`` can reach. This is
the ceiling a memory-bound graph kernel is held against (:mod:`unigraph.benchmarking.traffic`).

On a GPU, :func:`device_copy` measures the same ceiling: one device-to-device copy of float32
arrays far beyond the L2 cache, bytes read and written counted.
"""
from __future__ import annotations

import math

import torch

from unigraph.benchmarking.environment import last_level_cache_bytes, synchronize
from unigraph.benchmarking.timing import interleaved

BYTES_PER_ELEMENT = {"copy": 16, "triad": 24}
MIN_ELEMENTS = 2**24  # 128 MiB per float64 array


def default_elements() -> int:
    """At least 4x the last-level cache per array (STREAM's rule), and no fewer than 2^24."""
    cache = last_level_cache_bytes()
    return max(MIN_ELEMENTS, math.ceil(4 * cache / 8) if cache else 0)


def stream(threads: list[int] | tuple[int, ...], elements: int | None = None, repeats: int = 5) -> dict:
    """Copy and triad bandwidth in GB/s (10^9 bytes per second) at each thread count.

    Returns ``{"elements", "array_mb", "meets_stream_rule", "threads": {t: {"copy_gbps", "triad_gbps",
    "copy_gbps_median", "triad_gbps_median", "copy": Timing summary, "triad": ...}}}``.
    """
    elements = default_elements() if elements is None else elements
    if isinstance(elements, bool) or not isinstance(elements, int) or elements < 1:
        raise ValueError(f"elements must be an int >= 1, got {elements!r}")
    if not threads or any(isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in threads):
        raise ValueError(f"threads must be a non-empty list of ints >= 1, got {threads!r}")
    # copy writes c into b, triad reads them: the values stay fixed whatever the order (checked below)
    a = torch.zeros(elements, dtype=torch.float64)
    b = torch.full((elements,), 0.5, dtype=torch.float64)
    c = torch.full((elements,), 0.5, dtype=torch.float64)
    calls = {"copy": lambda: b.copy_(c), "triad": lambda: torch.add(b, c, alpha=3.0, out=a)}
    cache = last_level_cache_bytes()
    out = {"elements": elements, "array_mb": round(elements * 8 / 2**20, 1),
           "last_level_cache_mb": round(cache / 2**20, 1) if cache else None,
           "meets_stream_rule": bool(cache) and elements * 8 >= 4 * cache, "threads": {}}
    before = torch.get_num_threads()
    try:
        for t in threads:
            torch.set_num_threads(t)
            timings = interleaved(calls, repeats, warmup=1)
            row = {}
            for kernel, timing in timings.items():
                gigabytes = BYTES_PER_ELEMENT[kernel] * elements / 1e9
                row[f"{kernel}_gbps"] = round(gigabytes / (timing.min_ms / 1e3), 2)
                row[f"{kernel}_gbps_median"] = round(gigabytes / (timing.median_ms / 1e3), 2)
                row[kernel] = timing.summary()
            out["threads"][t] = row
    finally:
        torch.set_num_threads(before)
    if not (bool((a == 2.0).all()) and bool((b == 0.5).all())):  # 0.5 + 3 * 0.5: every element was written
        raise RuntimeError("the triad kernel produced a wrong value: the bandwidth figures are not trustworthy")
    return out


DEVICE_COPY_ELEMENTS = 2**28  # float32: 1 GiB per array, far beyond any GPU's L2 cache


def device_copy(device: torch.device | str, elements: int | None = None, repeats: int = 5,
                min_run_s: float = 0.02) -> dict:
    """A device-to-device copy ``b.copy_(a)`` of ``elements`` float32 values on ``device`` (a GPU,
    or the CPU in dry runs): GB/s counting the bytes read and written (8 per element), the best
    repeat as the figure, as STREAM's copy. Short copies are batched up to ``min_run_s`` and the
    device synchronized before each clock stop. Returns ``{"kind": "device_copy", "device",
    "elements", "array_mb", "copy_gbps", "copy_gbps_median", "copy": Timing summary}``."""
    device = torch.device(device)
    elements = (DEVICE_COPY_ELEMENTS if device.type == "cuda" else 1 << 22) if elements is None else elements
    if isinstance(elements, bool) or not isinstance(elements, int) or elements < 1:
        raise ValueError(f"elements must be an int >= 1, got {elements!r}")
    a = torch.full((elements,), 0.5, dtype=torch.float32, device=device)
    b = torch.empty_like(a)
    timing = interleaved({"copy": lambda: b.copy_(a)}, repeats, warmup=1, min_run_s=min_run_s,
                         sync=lambda: synchronize(device))["copy"]
    if not bool((b == 0.5).all()):
        raise RuntimeError("the device copy produced a wrong value: the bandwidth figure is not trustworthy")
    gigabytes = 8 * elements / 1e9
    return {"kind": "device_copy", "device": str(device), "elements": elements,
            "array_mb": round(elements * 4 / 2**20, 1), "copy_gbps": round(gigabytes / (timing.min_ms / 1e3), 1),
            "copy_gbps_median": round(gigabytes / (timing.median_ms / 1e3), 1), "copy": timing.summary()}


def best_gbps(measurement: dict, threads: int, kernel: str = "copy") -> float:
    """The ``kernel`` bandwidth measured at ``threads`` (the nearest measured count below it, else
    the smallest)."""
    rows = measurement["threads"]
    counts = sorted(int(t) for t in rows)
    below = [t for t in counts if t <= threads]
    chosen = below[-1] if below else counts[0]
    row = rows.get(chosen, rows.get(str(chosen)))
    return row[f"{kernel}_gbps"]


def describe(measurement: dict) -> str:
    """One line for a report: copy / triad GB/s per thread count and the array size (a
    :func:`device_copy` measurement: its copy GB/s)."""
    if measurement.get("kind") == "device_copy":
        return (f"device copy bandwidth on {measurement['device']} ({measurement['array_mb']} MiB float32 arrays, "
                f"bytes read + written): {measurement['copy_gbps']:.1f} GB/s (median "
                f"{measurement['copy_gbps_median']:.1f})")
    parts = [f"{t} thread{'s' if int(t) > 1 else ''}: copy {r['copy_gbps']:.1f}, triad {r['triad_gbps']:.1f} GB/s"
             for t, r in measurement["threads"].items()]
    rule = "" if measurement["meets_stream_rule"] else " (arrays smaller than 4x the last-level cache: a cache figure)"
    return f"STREAM-like bandwidth ({measurement['array_mb']} MiB arrays{rule}): " + "; ".join(parts)
