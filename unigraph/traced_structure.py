"""Graph structure built inside ``torch.compile``'d code, for graphs of any size.

A layer called PyG's way (``conv(x, edge_index)``) builds its :class:`~unigraph.Graph` on every
call, inside the compiled program. Eagerly that takes data-dependent steps a trace cannot hold:
the index range check reads values (``.item()``, a graph break), ``bincount``'s output size is
data, and so is the number of self-loops a graph already has. Here each of those steps is one
PyTorch custom operator whose real implementation is the eager code (the same functions of
:mod:`unigraph.structure`, so the compiled and eager paths cannot drift apart) and whose fake
implementation gives the output shapes from the input shapes:

* ``unigraph::checked_edges(edge_index, num_src, num_dst, bipartite) -> (src, dst)``: the graph's
  own int64 copies of the two rows, after the eager range check (the same ``ValueError``, raised
  when the compiled program runs, before any kernel reads an index: every later use of the graph
  depends on these outputs). Shapes ``[E]``. (While compiling, dynamo evaluates it once on the
  real data for the backend choice, see :mod:`unigraph.backends.selector`: that evaluation clamps
  instead of raising, and the program raises when it runs.)
* ``unigraph::csr(rows, cols, num_rows) -> (ptr, cols_sorted, perm)``: one CSR format, shapes
  ``[num_rows + 1]``, ``[E]``, ``[E]``.
* ``unigraph::self_loop_parts(src, dst, num_loops) -> (kept, loop_slot)``: the non-loop edge ids
  (a size only the data knows: declared as a new dynamic size, at most ``E``) and the loop slot
  of each edge, ``[E]``.

Nothing here bakes a node or edge count into the compiled program: every count stays the
symbolic size of an input. The functions below are what :class:`~unigraph.Graph` and
:mod:`unigraph.self_loops` call while compiling; eagerly they call :mod:`unigraph.structure`
directly (a custom operator's dispatch costs tens of microseconds).
"""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.structure import build_csr, checked_copies, owned_index, self_loop_parts


# ---------------------------------------------------------------------- checked edges
@torch.library.custom_op("unigraph::checked_edges", mutates_args=())
def _checked_edges(edge_index: Tensor, num_src: int, num_dst: int, bipartite: bool) -> tuple[Tensor, Tensor]:
    if torch.compiler.is_compiling():
        # Evaluated on real data while compiling (the backend choice reads the traced graph's degrees):
        # the compiled program checks the indices when it runs, with the eager error; here they are only
        # clamped into range, so that this evaluation cannot fail with an error dynamo would obscure.
        src, dst = (owned_index(row) for row in edge_index)
        return src.clamp_(0, max(num_src - 1, 0)), dst.clamp_(0, max(num_dst - 1, 0))
    return checked_copies(edge_index, num_src, num_dst, bipartite)


@_checked_edges.register_fake
def _(edge_index, num_src, num_dst, bipartite):
    shape = (edge_index.shape[1],)
    return edge_index.new_empty(shape, dtype=torch.int64), edge_index.new_empty(shape, dtype=torch.int64)


# ---------------------------------------------------------------------- CSR
@torch.library.custom_op("unigraph::csr", mutates_args=())
def _csr(rows: Tensor, cols: Tensor, num_rows: int) -> tuple[Tensor, Tensor, Tensor]:
    ptr, cols_sorted, perm = build_csr(rows, cols, num_rows)
    return ptr, cols_sorted, perm


@_csr.register_fake
def _(rows, cols, num_rows):
    return rows.new_empty((num_rows + 1,)), cols.new_empty(cols.shape), rows.new_empty(rows.shape)


# ---------------------------------------------------------------------- self-loops
@torch.library.custom_op("unigraph::self_loop_parts", mutates_args=())
def _self_loop_parts(src: Tensor, dst: Tensor, num_loops: int) -> tuple[Tensor, Tensor]:
    return self_loop_parts(src, dst, num_loops)


@_self_loop_parts.register_fake
def _(src, dst, num_loops):
    kept = torch.library.get_ctx().new_dynamic_size()
    torch._check(kept <= src.shape[0])
    return src.new_empty((kept,)), src.new_empty(src.shape)


# ---------------------------------------------------------------------- what the graph calls
def traced_checked_copies(edge_index: Tensor, num_src: int, num_dst: int,
                          bipartite: bool) -> tuple[Tensor, Tensor]:
    return torch.ops.unigraph.checked_edges(edge_index, num_src, num_dst, bipartite)


def traced_csr(rows: Tensor, cols: Tensor, num_rows: int) -> tuple[Tensor, Tensor, Tensor]:
    return tuple(torch.ops.unigraph.csr(rows, cols, num_rows))


def traced_self_loop_parts(src: Tensor, dst: Tensor, num_loops: int) -> tuple[Tensor, Tensor]:
    return tuple(torch.ops.unigraph.self_loop_parts(src, dst, num_loops))
