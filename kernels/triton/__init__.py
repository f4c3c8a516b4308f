"""Triton kernels for the graph operators: fused, never materializing the E x F messages.

One module per kernel family, each in the order of Triton's tutorials (prose, autotune
configurations, kernel, launcher):

* :mod:`~unigraph.kernels.triton.spmm_node`: g-SpMM node-parallel, one program per destination
  row of the in-CSR and feature block; sum/max/min (with arg outputs), every binary op.
* :mod:`~unigraph.kernels.triton.spmm_edge`: g-SpMM edge-parallel, one program per block of COO
  edges, accumulating with atomics; sum, and max/min for float32/float64 (atomic max/min do
  not exist for half precision).
* :mod:`~unigraph.kernels.triton.sddmm`: g-SDDMM edge-parallel, add/sub/mul/div/dot/copy with
  u/v/e targets.
* :mod:`~unigraph.kernels.triton.edge_softmax`: softmax over each destination's in-edges, one
  program per row, online maximum (one pass for the statistics, one to write).
* :mod:`~unigraph.kernels.triton.gat`: GAT's aggregation fused with an online softmax per
  destination (FlashAttention-style, no E x H score tensor), and its backward.

Shared conventions live in :mod:`~unigraph.kernels.triton.runtime` (compiled vs interpreted
kernels, index width, accumulation dtype, block sizes) and the message combinators in
:mod:`~unigraph.kernels.triton.messages`.

Compiled or interpreted: like ``triton.jit`` itself, these modules read ``TRITON_INTERPRET``
once, when they are imported. With ``TRITON_INTERPRET=1`` every kernel runs in Triton's CPU
interpreter (numpy, slow: for tests on small graphs); without it they compile for a CUDA GPU.
``unigraph.backends.triton`` imports them only when a kernel first runs.

Inputs arrive checked by the ops front door (``unigraph.ops.spec``): launchers trust shapes,
dtypes and index ranges, and kernels mask every load and store at block edges.
"""
