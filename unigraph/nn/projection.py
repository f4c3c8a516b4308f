"""Dense projections that also take sparse input features, and dropout that keeps them sparse.

Planetoid-style node features are sparse bag-of-words (Cora: 1.3% non-zeros, CiteSeer: 0.85%), so
the first layer's ``x @ W^T`` is cheapest as a sparse-dense product. torch's own backward for a
CSR product is slow on CPU (it transposes the matrix on every call), so :class:`_SparseLinear`
caches the transposed structure per sparsity pattern and computes ``dW = (X^T dY)^T`` as one
more CSR product. Dropout on a sparse matrix drops stored values only, which is the same
distribution as dense dropout (zeros stay zero) and keeps the structure, so the cache still hits.
"""
from __future__ import annotations

import collections
import contextlib
import warnings
import weakref

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.nn import pooled_linear
from unigraph.nn.dropout import dropout as dense_dropout

SPARSE_LAYOUTS = (torch.sparse_csr, torch.sparse_coo)
_TRANSPOSE_CACHE_SIZE = 8


def is_sparse(x: Tensor) -> bool:
    return x.layout in SPARSE_LAYOUTS


def _csr(crow: Tensor, col: Tensor, values: Tensor, shape: tuple) -> Tensor:
    with warnings.catch_warnings():  # "sparse CSR support is in beta" is not news here
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, shape)


def to_csr(x: Tensor) -> Tensor:
    if x.layout == torch.sparse_csr:
        return x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return x.coalesce().to_sparse_csr()


class _TransposeCache:
    """Transposed CSR structure per sparsity pattern, keyed on the index tensors' addresses. Entries
    hold copies of the index tensors, and a hit compares them with the current ones (a pass over
    the non-zeros, next to the backward product's pass per output column): an index tensor written
    in place, whichever way, or a reused address is never read as the old pattern."""

    def __init__(self, size: int):
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._size = size

    def get(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(crow_t, col_t, perm)``: ``X^T`` has rows ``crow_t``, columns ``col_t`` and values
        ``x.values()[perm]``."""
        crow, col = x.crow_indices(), x.col_indices()
        key = (crow.data_ptr(), col.data_ptr(), col.numel(), tuple(x.shape), x.device)
        entry = self._entries.get(key)
        if entry is not None and not (torch.equal(entry[0], crow) and torch.equal(entry[1], col)):
            entry = None
        if entry is None:
            rows = torch.repeat_interleave(torch.arange(x.shape[0], device=crow.device), crow[1:] - crow[:-1],
                                           output_size=col.numel())
            perm = torch.sort(col, stable=True).indices
            crow_t = torch.zeros(x.shape[1] + 1, dtype=crow.dtype, device=crow.device)
            torch.cumsum(torch.bincount(col, minlength=x.shape[1]), 0, out=crow_t[1:])
            entry = (crow.clone(), col.clone(), crow_t, rows[perm].to(col.dtype), perm)
            self._entries[key] = entry
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)
        self._entries.move_to_end(key)
        return entry[2], entry[3], entry[4]


_TRANSPOSES = _TransposeCache(_TRANSPOSE_CACHE_SIZE)


class _SparseLinear(torch.autograd.Function):
    """``x @ weight^T`` for a constant CSR ``x``; backward ``dW = (X^T dY)^T`` on the cached transpose."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor) -> Tensor:
        ctx.x = x
        return torch.sparse.mm(x, weight.t().contiguous())

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        x = ctx.x
        crow_t, col_t, perm = _TRANSPOSES.get(x)
        x_t = _csr(crow_t, col_t, x.values()[perm], (x.shape[1], x.shape[0]))
        grad_weight = torch.sparse.mm(x_t, grad_out.contiguous()).t()
        return None, grad_weight


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight^T (+ bias)`` for dense or sparse (CSR/COO) ``x``: every layer's input projection.

    A dense CPU input that is mostly zeros and needs no gradient (bag-of-words features) runs as
    a sparse product too (:func:`sparse_if_mostly_zero`, one cached CSR copy per input tensor), and
    a COO input is converted to CSR once per tensor (:func:`cached_csr`): a model built from the
    layers gets the same sparse first layer as the built-in models. Except a narrow product that
    is not differentiated (evaluation, ``no_grad``: :func:`_dense_is_cheaper`), which stays dense."""
    if not is_sparse(x) and _dense_is_cheaper(x, weight, bias):
        return pooled_linear.linear(x, weight, bias)
    x = cached_csr(x) if is_sparse(x) else sparse_if_mostly_zero(x)
    if not is_sparse(x):
        return pooled_linear.linear(x, weight, bias)
    if x.values().requires_grad:  # gradients for the sparse values: torch's own (slower) product
        out = torch.sparse.mm(x, weight.t())
    else:
        out = _SparseLinear.apply(x, weight)
    return out + bias if bias is not None else out


# The widest output a dense input's undifferentiated product keeps dense (see _dense_is_cheaper).
DENSE_FORWARD_WIDTH = 24


def _dense_is_cheaper(x: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    """Whether ``x @ weight^T`` of a dense ``x`` costs less as it is than through a cached CSR copy:
    for a product autograd will not differentiate, with at most ``DENSE_FORWARD_WIDTH`` outputs.
    A cached copy is re-checked against ``x`` exactly on every use (:func:`_copy_is_current`: a
    pass over all of ``x``), and a narrow dense product is itself about one pass over ``x``
    (memory-bound), so the sparse path cannot win it. Training keeps the sparse path: there the
    dense backward's ``dW = dY^T X`` is a second pass over ``x`` that the cached transpose avoids.
    (Cora, 2708 x 1433, fastest of 60 on the loaded 2-core machine, dense / re-check + sparse
    product: 16 outputs 2.7 / 3.1 ms at one thread, 1.4 / 1.6 ms at two; 32 outputs 4.1 / 3.4 ms
    at one thread, 1.6 / 1.9 ms at two; 64 outputs 6.9 / 3.8 and 10.2 / 2.4 ms.)"""
    if weight.dim() != 2 or weight.shape[0] > DENSE_FORWARD_WIDTH:
        return False
    return not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                             or (bias is not None and bias.requires_grad)))


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout (inverted, as ``F.dropout``) that keeps a sparse ``x`` sparse: only stored values are
    dropped."""
    if not training or p == 0.0:
        return x
    if not is_sparse(x):
        return dense_dropout(x, p, training)
    x = to_csr(x)
    return _csr(x.crow_indices(), x.col_indices(), dense_dropout(x.values(), p, training), tuple(x.shape))


# Below this fraction of non-zeros a CSR product beats a dense one on CPU by a wide margin (Cora's
# bag-of-words, 1.3% non-zeros: ~6x less time for the first GAT layer, forward and backward).
SPARSE_INPUT_DENSITY = 0.05
_DENSITY_SAMPLE_ROWS = 256
_SPARSE_COPIES: collections.OrderedDict = collections.OrderedDict()
_SEEN_ONCE = object()   # a verdict not made yet: seen once (its density is read if it is seen again)
_SPARSE_COPIES_SIZE = 4
# Inputs of fewer elements stay dense without a look: at most a few us of product to save (a PyG
# batch of 32 small graphs, 850 x 32: ~20 us dense at one thread), about what remembering each new
# tensor costs (the first sight of one made every step: ~2-4 us of each projection)
SPARSE_MIN_ELEMENTS = 1 << 15


@contextlib.contextmanager
def sparse_input(enabled: bool):
    """Turn the sparse input projection off (``enabled=False``: dense input stays dense, for an
    equal-input comparison) or on inside the block. The density threshold is part of the cache key,
    so a verdict taken inside the block is not reused outside it."""
    global SPARSE_INPUT_DENSITY
    saved = SPARSE_INPUT_DENSITY
    SPARSE_INPUT_DENSITY = saved if enabled else -1.0  # no matrix is "mostly zero" below a negative density
    try:
        yield
    finally:
        SPARSE_INPUT_DENSITY = saved


def sparse_if_mostly_zero(x: Tensor, *, first_use: bool = False) -> Tensor:
    """A CSR copy of a dense CPU feature matrix that is mostly zeros (bag-of-words), else ``x``.

    The density is estimated on the first rows, at the tensor's second sight (its first only
    remembers it); copies are cached per tensor (its storage address, in-place version, shape,
    strides and dtype), so full-batch training converts once. Every hit re-checks the copy against ``x`` exactly
    (:func:`_copy_is_current`), so a write that bypasses the version counter (``.data``,
    ``.numpy()``, DLPack, ``untyped_storage()``) is seen too: the copy is rebuilt.
    A mostly-zero tensor is converted the *second* time it is seen, not the first: converting
    (a scan of every element, then ``nonzero``) costs more than the one sparse product it would
    serve, so a tensor made anew every step (``F.dropout(x)`` in a user's model: PyG's gcn.py
    example lost ~13 ms a step to it on Cora) stays dense and pays only a cache entry (the density
    check, 256 rows, ~0.1 ms at Cora's width, ~10 us on a PyG batch of small graphs, is made at a
    second sight only), while the same input seen again (the graph's features every epoch,
    evaluation) is converted once and reused. ``first_use=True`` converts at once: for a
    caller whose input is reused by construction (the built-in models convert their input features
    before their own sparse-aware dropout, so every epoch's dropout runs on the stored values).
    Tensors of fewer than :data:`SPARSE_MIN_ELEMENTS` elements, tensors that need gradients, GPU
    tensors, inference-mode tensors (no version counter to key the cache on) and sparse tensors are
    returned as they are, and so is everything while
    ``torch.compile`` traces (its graphs hold dense tensors). A "dense" verdict is cached too, so a
    dense input seen again pays for the density check once.
    """
    if x.numel() < SPARSE_MIN_ELEMENTS or torch.compiler.is_compiling() or is_sparse(x) or x.dim() != 2 or x.requires_grad \
            or not x.is_floating_point() or x.device.type != "cpu" or x.is_inference():
        return x
    key = (x.data_ptr(), x._version, tuple(x.shape), x.stride(), x.dtype, SPARSE_INPUT_DENSITY)
    cached = _SPARSE_COPIES.get(key)
    seen = cached is not None and cached[0]() is x
    if seen:
        if cached[1] is None:  # "dense": the dense product is exact whatever x holds now
            return x
        if cached[1] is not _SEEN_ONCE and _copy_is_current(x, *cached[1:]):
            return cached[1]
    elif not first_use:   # a first sight: remembered, nothing read (most such tensors are never seen again)
        _remember(key, x, _SEEN_ONCE)
        return x
    sample = x[:_DENSITY_SAMPLE_ROWS]
    if int(torch.count_nonzero(sample)) > SPARSE_INPUT_DENSITY * sample.numel():
        _remember(key, x, None)
        return x
    return _convert(key, x)   # (seen again, first_use, or a stale copy of x: rebuilt)


def _convert(key: tuple, x: Tensor) -> Tensor:
    """The CSR copy of ``x``, remembered with the row of each stored value (for the re-check)."""
    csr = _csr_of_dense(x)
    crow = csr.crow_indices()
    rows = torch.repeat_interleave(torch.arange(x.shape[0], device=crow.device), crow.diff(),
                                   output_size=csr.values().numel())
    _remember(key, x, csr, rows)
    return csr


def _csr_of_dense(x: Tensor) -> Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return x.to_sparse_csr()


_SAME_SIZE_INTS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _copy_is_current(x: Tensor, csr: Tensor, rows: Tensor) -> bool:
    """Whether ``x`` still equals its CSR copy, exactly: as many non-zeros as the copy stores, and
    the copy's values, bit for bit, at its positions (then every other entry is zero). One pass
    over ``x`` and a gather of the non-zeros: about the sparse product's own cost, several times
    less than the dense product and than rebuilding the copy (see docs/call_forms.md)."""
    values = csr.values()
    if int(torch.count_nonzero(x)) != values.numel():
        return False
    bits = _SAME_SIZE_INTS[x.element_size()]
    return torch.equal(x[rows, csr.col_indices()].view(bits), values.view(bits))


def cached_csr(x: Tensor) -> Tensor:
    """``x`` (sparse) as CSR. A coalesced COO tensor's copy is cached per tensor and in-place
    version, and every hit re-checks it against ``x`` exactly (indices and values, bit for bit: a
    pass over the non-zeros, a fraction of the product's cost), so writes that bypass the version
    counter are seen. Uncoalesced COO tensors (a sort to convert) and COO values that need
    gradients are converted on every call."""
    if (x.layout == torch.sparse_csr or torch.compiler.is_compiling() or x.is_inference() or x.requires_grad
            or not x.is_coalesced()):
        return to_csr(x)
    key = ("csr", id(x), x._version)
    cached = _SPARSE_COPIES.get(key)
    if cached is not None and cached[0]() is x and _coo_copy_is_current(x, *cached[1:]):
        return cached[1]
    csr = to_csr(x)
    _remember(key, x, csr, x._indices()[0].clone())
    return csr


def _coo_copy_is_current(x: Tensor, csr: Tensor, rows: Tensor) -> bool:
    """Whether the coalesced COO ``x`` still holds its CSR copy's entries (the same order)."""
    index, values = x._indices(), x._values()
    bits = _SAME_SIZE_INTS[values.element_size()]
    return (index.shape[1] == rows.numel() and torch.equal(index[0], rows) and torch.equal(index[1], csr.col_indices())
            and torch.equal(values.view(bits), csr.values().view(bits)))


def _remember(key: tuple, x: Tensor, copy: Tensor | None, *extra: Tensor) -> None:
    # a weak reference: the entry holds no input alive, and `ref() is x` refuses a reused address
    _SPARSE_COPIES[key] = (weakref.ref(x), copy) + extra
    if len(_SPARSE_COPIES) > _SPARSE_COPIES_SIZE:
        _SPARSE_COPIES.popitem(last=False)


def dense(x: Tensor) -> Tensor:
    """``x`` as a dense tensor (for layers that aggregate raw features)."""
    return x.to_dense() if is_sparse(x) else x
