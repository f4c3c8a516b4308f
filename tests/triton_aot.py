"""Compile every Triton kernel variant the launchers produce for an H100 (sm_90), without a GPU.

The CPU tests run the kernels in Triton's interpreter, which never type-checks a loop-carried
value, lowers an atomic, allocates registers or runs ptxas: a kernel can pass every interpreter
test and still fail to compile for a GPU. This script closes that gap on a machine without one.

How: in a process *without* ``TRITON_INTERPRET`` (so the kernels are defined compiled, with the
GPU block sizes of :mod:`unigraph.kernels.triton.runtime`), it calls the backends' own methods on
small CPU tensors with every autotuned kernel's ``run`` replaced by a recorder: the launchers
build their real arguments (dtypes, constexprs, grid) and hand them over instead of launching.
Each recorded launch is then compiled, for every configuration its autotuner would try (after
its pruning), with Triton's own argument binder and ``triton.compile`` for ``GPUTarget("cuda",
90, 32)``, down to a cubin (ptxas included). ``--int64`` also forces 64-bit address arithmetic;
``--spills`` runs Triton's ptxas again with ``-v`` on each PTX and reports registers and spills
(a configuration whose tile does not fit the registers its ``num_warps`` leave spills to local memory).

It leans on Triton internals (``JITFunction`` binder, ``_pack_args``), checked with the Triton of
the development machine; the GPU runs Triton 3.6, so this is a strong smoke check, not proof.

    python tests/triton_aot.py            # the quick matrix (float32 + float16, one config each)
    python tests/triton_aot.py --full     # every dtype, op, reduce and configuration
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

if os.environ.get("TRITON_INTERPRET"):
    raise SystemExit("run without TRITON_INTERPRET: this compiles the kernels for a GPU")

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, make_backend  # noqa: E402
from triton.runtime.autotuner import Autotuner  # noqa: E402
from triton.runtime.jit import create_function_from_signature  # noqa: E402

import unigraph  # noqa: E402
from unigraph import backends as registry  # noqa: E402
from unigraph.kernels.triton import edge_softmax, gat, runtime, sddmm, spmm_edge, spmm_node  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
LAUNCHER_MODULES = (edge_softmax, gat, sddmm, spmm_edge, spmm_node)
DTYPES_QUICK = (torch.float32, torch.float16)
DTYPES_FULL = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class Recorder:
    """Replaces ``Autotuner.run``: records ``(autotuner, args, kwargs)`` instead of launching."""

    def __init__(self):
        self.launches: list[tuple[Autotuner, tuple, dict]] = []

    def __enter__(self):
        self._run = Autotuner.run
        recorder = self

        def record(autotuner, *args, grid=None, warmup=False, **kwargs):
            recorder.launches.append((autotuner, args, kwargs))
        Autotuner.run = record
        self._checks = {m: m.check_launchable for m in LAUNCHER_MODULES if hasattr(m, "check_launchable")}
        for module in self._checks:
            module.check_launchable = lambda *tensors: None  # CPU tensors stand in for GPU ones
        return self

    def __exit__(self, *exc):
        Autotuner.run = self._run
        for module, check in self._checks.items():
            module.check_launchable = check


def force_int64(enabled: bool):
    """Make every launcher choose 64-bit address arithmetic (or restore the size rule)."""
    for module in LAUNCHER_MODULES:
        if hasattr(module, "needs_int64"):
            module.needs_int64 = (lambda *extents: True) if enabled else runtime.needs_int64


def graph(hub: bool = False) -> unigraph.Graph:
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(0, 40, (300,), generator=gen)
    dst = torch.randint(0, 40, (300,), generator=gen)
    if hub:
        dst[:200] = 0
    return unigraph.Graph(torch.stack([src, dst]), num_nodes=40).prepare()


def exercise(dtypes, full: bool) -> None:
    """Call every Triton launcher through the backends' methods (inputs are garbage-free but the
    kernels never run: only their arguments matter)."""
    g = graph().tensors()
    backends = registry.all_backends()  # no availability check: nothing runs
    node, edge = backends["triton_node"], backends["triton_edge"]
    ops = ["copy_u", "copy_e", "add", "sub", "mul", "div"] if full else ["copy_u", "mul"]
    reduces = ["sum", "max", "min"] if full else ["sum", "max"]
    for dtype in dtypes:
        x = torch.randn(40, 4, 16).to(dtype)
        w = torch.randn(300, 4, 1).to(dtype)
        for op in ops:
            u = None if op == "copy_e" else x
            e = None if op == "copy_u" else (x[:1].expand(300, 4, 16).contiguous() if op == "copy_e" else w)
            name = op if op.startswith("copy") else f"u_{op}_e"
            for reduce in reduces:
                node.gspmm(g, name, reduce, u, e)
                if reduce == "sum" or dtype in spmm_edge.ATOMIC_DTYPES_FOR_EXTREMES:
                    edge.gspmm(g, name, reduce, u, e)
        for op in (["add", "sub", "mul", "div", "copy_lhs", "copy_rhs", "dot"] if full else ["add", "dot"]):
            node.gsddmm(g, op, x, x if op != "copy_lhs" else None, "u", "v")
        node.gsddmm(g, "mul", x, w, "u", "e")  # broadcast offsets
        scores = torch.randn(300, 4).to(dtype)
        node.edge_softmax(g, scores)
        h, el, er = torch.randn(40, 4, 16).to(dtype), torch.randn(40, 4).to(dtype), torch.randn(40, 4).to(dtype)
        for edge_scores, mask in ([(None, None), (scores, (scores > 0).to(dtype))] if full else [(None, None)]):
            out, row_max, row_sum = node.gat_attention(g, h, el, er, edge_scores, 0.2, mask)
            gat.gat_backward((g.in_ptr, g.in_src, g.in_eid), (g.out_ptr, g.out_dst, g.out_eid), g.num_src, g.num_dst,
                             h, el, er, edge_scores, 0.2, mask, torch.zeros(40, 4, 16).to(dtype), row_max, row_sum,
                             torch.randn(40, 4, 16).to(dtype), (True, True, True, edge_scores is not None))


def compile_launch(autotuner: Autotuner, args: tuple, kwargs: dict, config, backend) -> object:
    """``triton.compile`` of one recorded launch under ``config`` for :data:`TARGET`."""
    fn = autotuner.fn
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    full = {**kwargs, **config.all_kwargs()}
    bound_args, specialization, options = binder(*args, **full)
    options, signature, constexprs, attrs = fn._pack_args(backend, full, bound_args, specialization, options)
    return triton.compile(ASTSource(fn, signature, constexprs, attrs), target=TARGET, options=options.__dict__)


def registers_and_spills(ptx: str) -> tuple[int, int]:
    """(registers per thread, bytes of spill stores) that ptxas reports for ``ptx`` on sm_90a."""
    from triton.backends.nvidia.compiler import get_ptxas
    ptxas = get_ptxas(TARGET.arch).path  # the one Triton itself uses for this architecture
    with tempfile.TemporaryDirectory() as folder:
        source = pathlib.Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        done = subprocess.run([str(ptxas), "-v", "--gpu-name=sm_90a", str(source), "-o", str(source.with_suffix(".o"))],
                              capture_output=True, text=True, timeout=300)
    report = done.stderr + done.stdout
    registers = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    if done.returncode or registers is None:
        raise RuntimeError(f"ptxas -v failed: {report[-500:]}")
    return int(registers.group(1)), int(spills.group(1)) if spills else 0


def configs_of(autotuner: Autotuner, args: tuple, kwargs: dict, every: bool) -> list:
    autotuner.nargs = dict(zip(autotuner.arg_names, args))
    try:
        configs = autotuner.prune_configs(kwargs)
    finally:
        autotuner.nargs = None
    return list(configs) if every else list(configs)[:1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="every dtype, op, reduce and autotune configuration")
    parser.add_argument("--int64", action="store_true", help="also with 64-bit address arithmetic forced")
    parser.add_argument("--spills", action="store_true", help="report registers and spill stores (ptxas -v)")
    args = parser.parse_args(argv)
    assert not runtime.INTERPRETED, "the kernels must be defined compiled"
    recorder = Recorder()
    with recorder:
        exercise(DTYPES_FULL if args.full else DTYPES_QUICK, args.full)
        if args.int64:
            force_int64(True)
            try:
                exercise((torch.float32,), False)
            finally:
                force_int64(False)
    backend = make_backend(TARGET)
    seen, failures, spilling, started = set(), [], [], time.perf_counter()
    for autotuner, launch_args, kwargs in recorder.launches:
        for config in configs_of(autotuner, launch_args, kwargs, args.full):
            binder = create_function_from_signature(autotuner.fn.signature, autotuner.fn.params, backend)
            _, specialization, _ = binder(*launch_args, **{**kwargs, **config.all_kwargs()})
            key = (autotuner.fn.__name__, str(specialization), str(config))
            if key in seen:
                continue
            seen.add(key)
            try:
                compiled = compile_launch(autotuner, launch_args, kwargs, config, backend)
            except Exception as err:  # noqa: BLE001 - every failure is collected and reported, then exit 1
                failures.append(f"{autotuner.fn.__name__} {config} {specialization}: {type(err).__name__}: "
                                f"{str(err).strip().splitlines()[-1][:300] if str(err).strip() else ''}")
                print("FAIL", failures[-1], flush=True)
                continue
            note = f"shared={compiled.metadata.shared}"
            if args.spills:
                registers, spill = registers_and_spills(compiled.asm["ptx"])
                note += f" registers={registers} spill_stores={spill}"
                if spill:
                    spilling.append(f"{autotuner.fn.__name__} {config} {specialization}: {spill} bytes")
            print(f"ok   {autotuner.fn.__name__:<28} {str(config):<60} {note}", flush=True)
    print(f"{len(seen)} variants compiled for sm_90 in {time.perf_counter() - started:.0f} s; "
          f"{len(failures)} failed", flush=True)
    for failure in failures:
        print("  -", failure)
    if args.spills:
        print(f"{len(spilling)} variants spill registers to local memory:")
        for entry in spilling:
            print("  -", entry)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
