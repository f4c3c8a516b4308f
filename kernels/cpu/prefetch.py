"""A software prefetch for the gather loops of the CPU kernels (an LLVM intrinsic numba lacks).

A node-parallel g-SpMM reads one operand row per edge at a random address; the hardware
prefetchers cannot guess the next one, so each row costs a full memory latency unless the loop
asks for it early. ``prefetch_row(x, r)`` issues ``llvm.prefetch`` for every 64-byte line of
row ``r`` of the 2-d array ``x``; a kernel calls it for the row it will need
:data:`DISTANCE` edges later. A prefetch is a hint: it never faults (an address past the end is
ignored by the hardware, and the kernels only pass in-range rows anyway) and never changes a
result. Measured on the 2-core development machine, R-MAT 500k nodes / 8M edges, F = 64, one
thread, interleaved: copy_u/sum 15% faster.
"""
from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

LINE_BYTES = 64
DISTANCE = 16  # edges ahead: 8 to 32 measured alike (16 best by a few %)
SCATTER_AHEAD = 4  # rows ahead in the max/min gradient scatter: 2 to 16 measured alike, ~25% over none


@intrinsic
def _prefetch(typingctx, arr, row, col):
    """``llvm.prefetch(&arr[row, col], read, keep in all cache levels, data)``."""
    sig = types.void(arr, row, col)

    def codegen(context, builder, signature, args):
        arrty = signature.args[0]
        ary = context.make_array(arrty)(context, builder, args[0])
        index = [context.cast(builder, args[1], signature.args[1], types.intp),
                 context.cast(builder, args[2], signature.args[2], types.intp)]
        ptr = cgutils.get_item_pointer(context, builder, arrty, ary, index, wraparound=False)
        byte_ptr = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [byte_ptr.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [byte_ptr, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(inline="always")
def prefetch_at(x, r, c):
    """Prefetch the cache line holding ``x[r, c]`` of the 2-d array ``x``."""
    _prefetch(x, r, c)


@numba.njit(inline="always")
def prefetch_row(x, r):
    """Prefetch every cache line of row ``r`` of the 2-d C-contiguous array ``x``."""
    step = max(1, LINE_BYTES // x.itemsize)
    for c in range(0, x.shape[1], step):
        _prefetch(x, r, c)
