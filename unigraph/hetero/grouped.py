r"""Grouped (segment) matrix products: one weight matrix per group of consecutive rows.

.. math::
    \mathbf{Y}_{[p_t, p_{t+1})} = \mathbf{X}_{[p_t, p_{t+1})} \mathbf{W}_t, \qquad t = 0, \dots, T - 1

where the rows of ``X`` are sorted by group (node type, relation) and ``p`` is the running sum of
the group sizes. This is what every per-type projection of a heterogeneous layer needs; written as
a Python loop it costs one small matmul launch per group (hundreds for an R-GCN on a knowledge
graph). Here it is one product, by one of three methods:

* ``grouped_mm``: ``torch._grouped_mm`` (one kernel over all groups; forward and backward). It is
  used only where a one-time probe on that device and dtype ran it, forward and backward, and
  matched the loop (on torch 2.13's CPU build: float32), and where its layout rule holds (row
  widths of ``X``, ``W`` and ``Y`` a multiple of 16 bytes).
* ``bmm``: the rows are cut into tiles of ``B`` rows (the last tile of a group padded with zero
  rows), each tile paired with its group's weight, and all tiles multiplied by one ``torch.bmm``
  (groups of equal size need no tiles: one ``bmm`` over ``X`` viewed as ``[T, rows / T, in]``).
  Exact in every dtype and on every device; it pads at most ``B - 1`` rows per group and gathers
  one weight matrix per tile (:func:`tile_rows` says how ``B`` is chosen). It is the one-kernel
  fallback where ``grouped_mm`` cannot run; on a CPU it ranges from half to twice the speed of a
  loop, depending on how even the groups are (``benchmarks/segment_matmul.py``).
* ``loop``: one matmul per group (the reference, for tests and benchmarks).

``auto`` takes ``grouped_mm`` where it may run and ``bmm`` otherwise;
:func:`choose_method` says which and why. All three compute the same products (each output row
is one row of ``X`` times one ``W_t``, summed in the same order up to the matmul kernel's own
blocking), and their autograd gradients are the segment products of the transposes.
"""
from __future__ import annotations

import collections
from typing import Sequence

import torch
from torch import Tensor

METHODS = ("auto", "grouped_mm", "bmm", "loop")
_ALIGN_BYTES = 16
_PLAN_CACHE_SIZE = 32
_PLANS: collections.OrderedDict = collections.OrderedDict()
_PROBES: dict[tuple[str, torch.dtype], tuple[bool, str]] = {}


def check_counts(counts, rows: int, groups: int, what: str = "counts") -> list[int]:
    """``counts`` (ints or a 1-D integer tensor) as a list of ``groups`` non-negative ints summing to ``rows``."""
    if isinstance(counts, Tensor):
        if counts.dim() != 1 or counts.is_floating_point() or counts.dtype == torch.bool:
            raise TypeError(f"{what} must be a 1-D integer tensor or a list of ints, got {counts.dtype} "
                            f"{list(counts.shape)}")
        counts = counts.tolist()
    counts = list(counts)
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
        raise ValueError(f"{what} must hold non-negative ints, got {counts}")
    if len(counts) != groups:
        raise ValueError(f"{what} has {len(counts)} groups but the weight has {groups} matrices")
    if sum(counts) != rows:
        raise ValueError(f"{what} sum to {sum(counts)} rows but x has {rows}")
    return counts


def _check_operands(x: Tensor, weight: Tensor) -> None:
    if not isinstance(x, Tensor) or not isinstance(weight, Tensor):
        raise TypeError(f"x and weight must be tensors, got {type(x).__name__} and {type(weight).__name__}")
    if x.dim() != 2 or weight.dim() != 3:
        raise ValueError(f"segment_matmul expects x [rows, in] and weight [groups, in, out], got {list(x.shape)} "
                         f"and {list(weight.shape)}")
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"x has {x.shape[1]} columns but each weight matrix has {weight.shape[1]} rows")
    if x.dtype != weight.dtype or x.device != weight.device:
        raise TypeError(f"x and weight must share dtype and device, got {x.dtype}/{x.device} and "
                        f"{weight.dtype}/{weight.device}")
    if not x.is_floating_point():
        raise TypeError(f"segment_matmul needs floating-point operands, got {x.dtype}")


# ---------------------------------------------------------------------- the three methods
def _loop(x: Tensor, counts: list[int], weight: Tensor) -> Tensor:
    # split and unbind, not indexing: the backward of x[a:b] (of weight[t]) writes a gradient as large as
    # x (as weight) once per group; theirs is one cat (stack)
    parts = [rows @ w for rows, w in zip(x.split(counts), weight.unbind(0))]
    return torch.cat(parts) if parts else x.new_zeros((0, weight.shape[2]))


def _grouped_mm(x: Tensor, counts: list[int], weight: Tensor) -> Tensor:
    ends = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(device=x.device, dtype=torch.int32)
    return torch._grouped_mm(x.contiguous(), weight.contiguous(), offs=ends)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def tile_rows(counts: Sequence[int], width_in: int, width_out: int) -> int:
    """Rows per tile of the ``bmm`` method: about the mean group size (fewer, larger products; the
    padding stays below one tile per group, so at most about twice the rows), at least the narrower
    width (so the per-tile weights cost no more memory than the operands) and 16, at most 256, and
    no more than the largest group needs."""
    mean = -(-sum(counts) // max(len(counts), 1))
    tile = min(256, max(16, _next_pow2(min(width_in, width_out)), _next_pow2(mean)))
    return max(1, min(tile, _next_pow2(max(counts, default=1))))


def _tile_plan(counts: tuple[int, ...], tile: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """``(gather, tile_group, keep)``: row of ``X`` for every tile slot (``rows`` for a padding slot),
    the group of every tile, and the slots holding real rows (in row order). Cached per layout."""
    key = (counts, tile, str(device))
    plan = _PLANS.get(key)
    if plan is None:
        sizes = torch.tensor(counts, dtype=torch.int64, device=device)
        rows = int(sizes.sum())
        starts = torch.cumsum(sizes, 0) - sizes
        tiles = (sizes + tile - 1) // tile
        tile_group = torch.repeat_interleave(torch.arange(len(counts), device=device), tiles)
        first_tile = torch.cumsum(tiles, 0) - tiles
        tile_in_group = torch.arange(tile_group.numel(), device=device) - first_tile[tile_group]
        offset = (tile_in_group * tile).unsqueeze(1) + torch.arange(tile, device=device)     # [tiles, tile]
        valid = offset < sizes[tile_group].unsqueeze(1)
        gather = torch.where(valid, starts[tile_group].unsqueeze(1) + offset, rows).flatten()
        plan = (gather, tile_group, valid.flatten().nonzero().flatten())
        _PLANS[key] = plan
        if len(_PLANS) > _PLAN_CACHE_SIZE:
            _PLANS.popitem(last=False)
    _PLANS.move_to_end(key)
    return plan


def _bmm(x: Tensor, counts: list[int], weight: Tensor) -> Tensor:
    width_in, width_out = weight.shape[1], weight.shape[2]
    if len(set(counts)) == 1:  # equal groups (every relation over all nodes of one type): no padding, no copies
        return torch.bmm(x.view(len(counts), counts[0], width_in), weight).view(-1, width_out)
    tile = tile_rows(counts, width_in, width_out)
    gather, tile_group, keep = _tile_plan(tuple(counts), tile, x.device)
    padded = torch.cat([x, x.new_zeros((1, width_in))])[gather].view(-1, tile, width_in)
    out = torch.bmm(padded, weight[tile_group])
    return out.view(-1, width_out)[keep]


# ---------------------------------------------------------------------- the choice
def _probe_grouped_mm(device: torch.device, dtype: torch.dtype) -> tuple[bool, str]:
    """Run ``torch._grouped_mm`` once on this device and dtype (an empty group included, forward and
    backward) and compare it with the loop."""
    slot = (device.type, dtype)
    if slot in _PROBES:
        return _PROBES[slot]
    if not hasattr(torch, "_grouped_mm"):
        result = (False, f"torch {torch.__version__} has no torch._grouped_mm")
    else:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(11, 16, generator=gen).to(device=device, dtype=dtype).requires_grad_()
        w = torch.randn(3, 16, 8, generator=gen).to(device=device, dtype=dtype).requires_grad_()
        counts, grad = [4, 0, 7], torch.randn(11, 8, generator=gen).to(device=device, dtype=dtype)
        try:
            got = _grouped_mm(x, counts, w)
            got_grads = torch.autograd.grad(got, (x, w), grad)
        except (RuntimeError, NotImplementedError, TypeError, ValueError) as err:
            result = (False, f"torch._grouped_mm does not run on {device.type}/{dtype}: {str(err).splitlines()[0]}")
        else:
            want = _loop(x, counts, w)
            want_grads = torch.autograd.grad(want, (x, w), grad)
            tol = 1e-5 if dtype in (torch.float32, torch.float64) else 2e-2
            same = all(torch.allclose(a.float(), b.float(), rtol=tol, atol=tol * 8)
                       for a, b in zip((got,) + got_grads, (want,) + want_grads))
            result = ((True, f"torch._grouped_mm runs on {device.type}/{dtype}") if same else
                      (False, f"torch._grouped_mm disagrees with the loop on {device.type}/{dtype}"))
    _PROBES[slot] = result
    return result


def choose_method(x: Tensor, weight: Tensor) -> tuple[str, str]:
    """``(method, reason)`` that ``auto`` takes for these operands."""
    ok, reason = _probe_grouped_mm(x.device, x.dtype)
    if not ok:
        return "bmm", reason
    size = x.element_size()
    if (weight.shape[1] * size) % _ALIGN_BYTES or (weight.shape[2] * size) % _ALIGN_BYTES:
        return "bmm", (f"torch._grouped_mm needs row widths that are multiples of {_ALIGN_BYTES} bytes; "
                       f"in={weight.shape[1]}, out={weight.shape[2]} at {size} bytes each are not")
    if x.shape[0] >= 2**31:
        return "bmm", "torch._grouped_mm takes int32 offsets; x has 2**31 rows or more"
    return "grouped_mm", reason


def segment_matmul(x: Tensor, counts, weight: Tensor, *, method: str = "auto") -> Tensor:
    r"""``X[rows of group t] @ W[t]`` for every group, as one product (see the module docstring).

    Args:
        x: ``[rows, in]``, rows sorted by group.
        counts: rows per group (``T`` non-negative ints, or a 1-D integer tensor), summing to ``rows``.
        weight: ``[T, in, out]``.
        method: ``"auto"``, ``"grouped_mm"``, ``"bmm"`` or ``"loop"``; an explicit ``grouped_mm``
            that cannot run here raises ``RuntimeError`` with the reason.

    Returns:
        ``[rows, out]``.
    """
    _check_operands(x, weight)
    counts = check_counts(counts, x.shape[0], weight.shape[0])
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if x.shape[0] == 0:  # keeps the autograd connection to weight (a zero gradient)
        return x @ weight[0] if weight.shape[0] else x.new_zeros((0, weight.shape[2]))
    if method == "auto":
        method = choose_method(x, weight)[0]
    elif method == "grouped_mm":
        chosen, reason = choose_method(x, weight)
        if chosen != "grouped_mm":
            raise RuntimeError(f"segment_matmul(method='grouped_mm') cannot run here: {reason}")
    if method == "grouped_mm":
        return _grouped_mm(x, counts, weight)
    if method == "bmm":
        return _bmm(x, counts, weight)
    return _loop(x, counts, weight)


def block_segment_matmul(x: Tensor, counts, weight: Tensor, *, method: str = "auto") -> Tensor:
    r"""Block-diagonal weights per group: ``weight`` is ``[T, B, in/B, out/B]`` and row ``i`` of group
    ``t`` becomes ``concat_b(X_{i, b} W_{t, b})``, where ``X_{i, b}`` is the ``b``-th slice of
    ``in/B`` columns (R-GCN's block-diagonal decomposition; HGT's per-head relation matrices).

    Runs as one :func:`segment_matmul` over ``T * B`` groups: the rows are laid out block-major
    (block ``b`` of every row, then block ``b + 1``), which keeps them sorted by group inside each
    block.
    """
    if not isinstance(weight, Tensor) or weight.dim() != 4:
        raise ValueError(f"block weights must be [groups, blocks, in/blocks, out/blocks], got "
                         f"{list(getattr(weight, 'shape', []))}")
    groups, blocks, width_in, width_out = weight.shape
    if not isinstance(x, Tensor) or x.dim() != 2 or x.shape[1] != blocks * width_in:
        raise ValueError(f"x must be [rows, {blocks * width_in}] for {blocks} blocks of {width_in} columns, got "
                         f"{list(getattr(x, 'shape', []))}")
    counts = check_counts(counts, x.shape[0], groups)
    rows = x.shape[0]
    block_major = x.view(rows, blocks, width_in).transpose(0, 1).reshape(blocks * rows, width_in)
    weights = weight.transpose(0, 1).reshape(blocks * groups, width_in, width_out)
    out = segment_matmul(block_major, counts * blocks, weights, method=method)
    return out.view(blocks, rows, width_out).transpose(0, 1).reshape(rows, blocks * width_out)
