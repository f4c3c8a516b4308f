"""What sound message compilation costs per call: ``MessagePassing.propagate`` traces ``message()``
again on every call (see ``unigraph/message_passing/base.py``, "Why every call traces") instead of
replaying a cached trace. This times that trace, the whole fused ``propagate`` and the layer's
forward on a Cora-sized synthetic graph (2,708 nodes, 10,556 edges), for GCNConv's message (which
reads only its arguments, so its trace is cached and not paid per call) and for a custom one that
reads an attribute (traced on every call).

Each figure is the CPU time of this process per call, on one thread (torch's and numba's), the
fastest of ``--repeats`` rounds of ``--calls`` calls: CPU time is what a call costs whether or
not other processes share the cores (on a busy machine wall time mostly measures the waiting).

    python benchmarks/message_tracing.py
    python benchmarks/message_tracing.py --calls 20 --repeats 2      # a smoke run
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time
from typing import Callable

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from benchmarks.compile import CustomMessagePassing, synthetic_graph  # noqa: E402
from benchmarks.environment import optional_module, set_threads  # noqa: E402
from unigraph.message_passing.tracing import trace  # noqa: E402
from unigraph.nn import GCNConv  # noqa: E402


def fastest_us(fn: Callable[[], object], calls: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - start) / calls * 1e6)
    return best


def measure(name: str, layer, graph, propagate_kwargs: dict, forward: Callable[[], object], calls: int,
            repeats: int) -> dict:
    inputs = layer._message_inputs(graph, propagate_kwargs)

    def trace_once():
        return trace(lambda factory: layer.message(**{n: factory(n, d) if isinstance(v, torch.Tensor) else v
                                                      for n, d, v in inputs}))

    with torch.no_grad():
        forward()  # one-time costs (formats, normalization caches) outside the timing
        row = {"layer": name,
               "trace_us": fastest_us(trace_once, calls, repeats),
               "propagate_us": fastest_us(lambda: layer.propagate(graph, **propagate_kwargs), calls, repeats),
               "forward_us": fastest_us(forward, calls, repeats)}
    row["traced_every_call"] = not layer._pure_message  # else its trace is cached (reads only its arguments)
    row["trace_share_of_forward"] = row["trace_us"] / row["forward_us"] if row["traced_every_call"] else 0.0
    return row


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2708)
    parser.add_argument("--edges", type=int, default=10556)
    parser.add_argument("--width", type=int, default=16, help="feature width the message sees")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    numba = optional_module("numba")
    threads = (torch.get_num_threads(), numba.get_num_threads() if numba is not None else None)
    set_threads(1, None)
    try:
        return _measure_all(args)
    finally:  # the caller's thread counts back (a test process, say)
        torch.set_num_threads(threads[0])
        if numba is not None:
            numba.set_num_threads(threads[1])


def _measure_all(args) -> list[dict]:
    torch.manual_seed(0)
    graph = synthetic_graph(args.nodes, args.edges).prepare()
    x = torch.randn(args.nodes, args.width)
    weight = torch.rand(args.edges)
    gcn = GCNConv(args.width, args.width)
    custom = CustomMessagePassing(args.width, args.width)
    rows = [
        measure("GCNConv (edge_weight.view(-1, 1) * x_j)", gcn, graph, {"x": x, "edge_weight": weight},
                lambda: gcn(graph, x), args.calls, args.repeats),
        measure("custom (tanh(x_j / tau) * w - x_i)", custom, graph, {"x": x, "edge_weight": weight},
                lambda: custom(graph, x, weight), args.calls, args.repeats),
    ]
    print(f"graph: {args.nodes} nodes, {args.edges} edges, width {args.width}; one thread; CPU microseconds per call")
    print(f"{'layer':42s} {'trace us':>9s} {'every call':>10s} {'propagate us':>13s} {'forward us':>11s} "
          f"{'trace/forward':>13s}")
    for r in rows:
        print(f"{r['layer']:42s} {r['trace_us']:9.1f} {str(r['traced_every_call']):>10s} {r['propagate_us']:13.1f} "
              f"{r['forward_us']:11.1f} {r['trace_share_of_forward']:13.1%}")
    return rows


if __name__ == "__main__":
    main()
