r"""torch's own dropout masks on the CPU, the same bits ~14x sooner: a faster kernel for
``aten::bernoulli_.float``, installed when ``unigraph`` is imported.

Why: ``F.dropout`` / ``nn.Dropout`` in a user's model draw their mask with
``torch.empty_like(x).bernoulli_(1 - p)``, and torch's CPU kernel makes it one element at a time
from its Mersenne Twister (~16 ns an element: ~700 ms for an arxiv-sized 169k x 256 hidden layer,
more than the layers' matrix products). A user's script calls torch's dropout, not ours, so
whatever unigraph's layers save, a step stays dropout-bound.

What: for a contiguous float32/float64 tensor of at least :data:`MIN_ELEMENTS` elements this
kernel reads the generator's state (``Generator.get_state``), makes the very numbers torch would
(``unigraph.kernels.cpu.mt19937``: the twist in blocks, the 53-bit comparison vectorized) and
writes the state back as torch would leave it. Masks, the generator's state after, and so every
later random number are bit for bit torch's (``F.dropout`` of large tensors goes further, in one
pass: :mod:`unigraph.torch_dropout`, which shares this module's state handling). Every
other call goes to torch's own kernel (kept with ``torch.library.get_kernel``): smaller tensors
(the Python call costs more than it saves there), other dtypes or layouts, a generator that is not
a CPU one, a ``p`` outside [0, 1] (torch's error), another Python thread alive that might draw
random numbers (torch's kernel holds the generator's lock for the whole draw; reading and writing
the state from Python cannot; :data:`QUIET_THREADS` and tqdm's monitor never draw), while :func:`enabled` ``(False)`` is in force, or numba missing.

Guard: before its first draw the kernel compares itself with torch's on a private generator
(lengths and offsets that cross the twist's blocks, both dtypes, several ``p``); on any difference
(another torch build drawing otherwise) it stays off for the process and warns once.

``UNIGRAPH_TORCH_BERNOULLI=0`` in the environment leaves torch's kernel alone (nothing is
registered). Benchmarks time the peers' rows inside ``enabled(False)``: with unigraph imported
their ``F.dropout`` would otherwise run this kernel too.
"""
from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import sys
import threading
import warnings

import torch

OP = "aten::bernoulli_.float"
MIN_ELEMENTS = 4096       # below it the Python call costs more than the faster draw saves
_DTYPES = (torch.float32, torch.float64)
_STATE_BYTES = 5056       # torch's CPUGeneratorImplState: the layout read below
_LEFT, _NEXT, _WORDS = 8, 16, 24   # byte offsets of left (int32), next (uint64), state (624 x uint64)
ENV = "UNIGRAPH_TORCH_BERNOULLI"

_library = None           # the torch.library registration, while installed
_original = None          # torch's own CPU kernel
_enabled = True
_checked: bool | None = None   # None: not yet compared with torch's; then the verdict


def install() -> bool:
    """Register the kernel (once; ``unigraph``'s import calls this). Returns whether it is
    installed: not with ``UNIGRAPH_TORCH_BERNOULLI=0``, without numba, or on a torch without
    ``torch.library.get_kernel`` (2.9+), where no call could reach torch's own kernel."""
    global _library, _original
    if _library is not None:
        return True
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if importlib.util.find_spec("numba") is None or not hasattr(torch.library, "get_kernel"):
        return False
    _library, _original = override("bernoulli_.float", _kernel, "CPU")
    return True


def override(name: str, kernel, key: str):
    """Register ``kernel`` (called with the dispatch key set first) for ``aten::name`` at the
    dispatch ``key``. Returns the registration (``_destroy()`` undoes it) and torch's own kernel for
    that key, kept for every case the new one does not take."""
    original = torch.library.get_kernel(f"aten::{name}", key)
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # torch warns that a registered kernel is overridden: that is the point, and the
        # overridden one is still called (``original``) for every case not handled there
        warnings.simplefilter("ignore")
        library.impl(name, kernel, key, with_keyset=True)
    return library, original


def uninstall() -> None:
    """Give the operator back to torch's kernel (tests; ``install`` registers it again)."""
    global _library
    if _library is not None:
        _library._destroy()
        _library = None


def installed() -> bool:
    return _library is not None


@contextlib.contextmanager
def enabled(flag: bool):
    """Take (``True``, the default) or bypass (``False``: torch's kernels) the faster draw, and
    :mod:`unigraph.torch_dropout`'s one-pass dropout, inside the block. The numbers are the same
    either way; benchmarks bypass both for the peers' rows."""
    global _enabled
    saved, _enabled = _enabled, bool(flag)
    try:
        yield
    finally:
        _enabled = saved


def _kernel(keyset, self, p=0.5, generator=None):
    # no lock of our own: fast_draws_allowed requires that no other thread that might draw is alive
    if (_takes(self, p, generator) and fast_draws_allowed()
            and _draw(self, p, generator if generator is not None else torch.default_generator)):
        return self
    return _original.call_boxed(keyset, self, p, generator=generator)


def _takes(self, p, generator) -> bool:
    return (self.numel() >= MIN_ELEMENTS and self.dtype in _DTYPES and self.is_contiguous()
            and not self.is_neg() and 0.0 <= p <= 1.0
            and (generator is None or generator.device.type == "cpu"))


# Threads known never to draw random numbers: unigraph's watchers (a launched rank's parent watch,
# the memory monitors), tqdm's monitor and torch.compile's compile workers. Any other live thread
# might draw between our read and write of the generator's state, which torch's kernel, holding
# the generator's lock, excludes.
QUIET_THREADS = frozenset({"unigraph-parent-watch", "unigraph-memory", "unigraph-peak-memory"})


def _alone() -> bool:
    """No other Python thread could draw from the generator between our read and write of it."""
    if threading.active_count() == 1:
        return True
    current, compiling = threading.current_thread(), _compile_workers()
    return all(t is current or t.name in QUIET_THREADS or type(t).__module__ == "tqdm._monitor" or t in compiling
               for t in threading.enumerate())


def _compile_workers() -> frozenset:
    """The threads of torch.compile's compile pool (inductor's ``AsyncCompile.pool``, kept alive
    after a process's first compilation): they generate and build code and never draw. Found
    through torch's internals; where those differ, none are known and torch's kernel runs."""
    async_compile = sys.modules.get("torch._inductor.async_compile")
    pool = getattr(getattr(async_compile, "AsyncCompile", None), "pool", None)
    if pool is None or not hasattr(pool, "cache_info") or pool.cache_info().currsize == 0:
        return frozenset()
    return frozenset(getattr(pool(), "_threads", ()))


def _draw(self, p: float, generator: torch.Generator) -> bool:
    """``self``'s Bernoulli(p) draws from ``generator``, torch's numbers, its state advanced;
    False (nothing drawn) where :func:`with_state` declines the state."""
    from unigraph.kernels.cpu import mt19937
    out = self.detach().view(-1).numpy()
    return with_state(generator, lambda words, left, next_: mt19937.bernoulli(words, left, next_, threshold(p), out))


def threshold(p: float):
    """``v < p * 2^53`` for torch's 53-bit integer ``v``, as the integer test ``v < ceil(p * 2^53)``
    (exact: scaling by a power of two)."""
    import numpy as np
    return np.uint64(math.ceil(p * 2.0 ** 53))


def with_state(generator: torch.Generator, run) -> bool:
    """Run ``run(words, left, next_) -> (left, next_)`` on ``generator``'s Mersenne Twister state
    (624 uint32 words, updated in place by ``run``; torch's counters) and write the state back as
    torch leaves it. False (nothing run) for a state of another layout, or counters that torch's
    own draws never leave (one set by hand with ``set_state``): the kernels read words by them,
    unchecked. The caller holds the generator alone (:func:`fast_draws_allowed`)."""
    import numpy as np
    from unigraph.kernels.cpu import mt19937
    state = generator.get_state()
    raw = state.numpy()
    if raw.size != _STATE_BYTES:
        return False
    left = int(raw[_LEFT:_LEFT + 4].view(np.int32)[0])
    next_ = int(raw[_NEXT:_NEXT + 8].view(np.uint64)[0])
    if not (left == 1 or (2 <= left <= mt19937.N and next_ == mt19937.N - left + 1)):
        return False
    words = raw[_WORDS:_WORDS + 8 * mt19937.N].view(np.uint64).astype(np.uint32)
    left, next_ = run(words, left, next_)
    after = raw.copy()
    after[_LEFT:_LEFT + 4].view(np.int32)[0] = left
    after[_NEXT:_NEXT + 8].view(np.uint64)[0] = next_
    after[_WORDS:_WORDS + 8 * mt19937.N].view(np.uint64)[:] = words
    generator.set_state(torch.from_numpy(after))
    return True


def fast_draws_allowed() -> bool:
    """Whether a faster draw may run now: :func:`enabled`, no other thread that might draw alive,
    and the kernel agreed with torch's (checked once)."""
    return _enabled and _alone() and _agrees_with_torch()


def _agrees_with_torch() -> bool:
    """Once per process: this kernel's draws and the state it leaves equal torch's on a private
    generator; otherwise torch's kernel is kept and a warning says so."""
    global _checked
    _checked = judged(_checked, _compare, "torch_bernoulli: the faster bernoulli_")
    return _checked


def judged(checked: bool | None, compare, what: str) -> bool:
    """A kernel's verdict against torch's: ``checked`` once decided; else ``compare()`` (None when
    equal, else what differed), with a warning naming ``what`` on a difference."""
    if checked is not None:
        return checked
    difference = compare()
    if difference is not None:
        warnings.warn(f"unigraph.{what} differs from this torch's ({difference}); torch's own kernel stays in use",
                      RuntimeWarning, stacklevel=4)
    return difference is None


def _compare() -> str | None:
    """None when equal; else what differed. Lengths and offsets cross the 624-word blocks."""
    cpu_keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    for dtype in _DTYPES:
        for before, length, p in ((0, 1, 0.5), (7, 311, 0.3), (618, 313, 0.9), (1, 2000, 1.0 - 0.6),
                                  (623, 5000, 1e-3), (5, 1250, 1.0), (3, 1300, 0.0)):
            drawn = []
            for ours in (False, True):
                g = torch.Generator().manual_seed(1234 + before)
                torch.rand(before, generator=g)
                out = torch.empty(length, dtype=dtype)
                if not ours:
                    _original.call_boxed(cpu_keys, out, p, generator=g)
                elif not _draw(out, p, g):
                    return f"a generator state of {g.get_state().numel()} bytes, or counters not torch's"
                drawn.append((out, g.get_state(), torch.rand(3, generator=g)))
            (a, state_a, next_a), (b, state_b, next_b) = drawn
            if not (torch.equal(a, b) and torch.equal(state_a, state_b) and torch.equal(next_a, next_b)):
                return f"{dtype}, {length} draws after {before}, p={p}"
    return None
