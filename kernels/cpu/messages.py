"""The element-wise binary operators shared by the CPU kernels, as an inlined numba function.

Operator codes (a kernel argument, so one compiled kernel serves every op): ``ADD=2, SUB=3,
MUL=4, DIV=5``; g-SpMM's ``u_add_e`` etc. use the same codes. Copy ops have kernels of their
own that read only the operand they copy.
"""
from __future__ import annotations

import numba

ADD, SUB, MUL, DIV = 2, 3, 4, 5
CODES = {"add": ADD, "sub": SUB, "mul": MUL, "div": DIV,
         "u_add_e": ADD, "u_sub_e": SUB, "u_mul_e": MUL, "u_div_e": DIV}


@numba.njit(inline="always")
def apply(op, a, b):
    if op == MUL:
        return a * b
    if op == ADD:
        return a + b
    if op == SUB:
        return a - b
    return a / b
