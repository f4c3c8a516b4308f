"""The element-wise operators shared by every CPU kernel, as inlined numba functions.

Operator codes (a kernel argument, so one compiled kernel serves every op):
``COPY_LHS=0, COPY_RHS=1, ADD=2, SUB=3, MUL=4, DIV=5``. For g-SpMM, lhs is the source-node
feature and rhs the edge feature (``copy_u`` = COPY_LHS, ``copy_e`` = COPY_RHS, ``u_mul_e`` = MUL).
"""
from __future__ import annotations

import numba

COPY_LHS, COPY_RHS, ADD, SUB, MUL, DIV = range(6)
CODES = {"copy_lhs": COPY_LHS, "copy_rhs": COPY_RHS, "copy_u": COPY_LHS, "copy_e": COPY_RHS,
         "add": ADD, "sub": SUB, "mul": MUL, "div": DIV,
         "u_add_e": ADD, "u_sub_e": SUB, "u_mul_e": MUL, "u_div_e": DIV}


@numba.njit(inline="always")
def apply(op, a, b):
    if op == MUL:
        return a * b
    if op == COPY_LHS:
        return a
    if op == ADD:
        return a + b
    if op == SUB:
        return a - b
    if op == DIV:
        return a / b
    return b
