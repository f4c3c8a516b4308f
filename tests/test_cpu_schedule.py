"""Work-balanced row blocks of the numba kernels (unigraph.kernels.cpu.schedule)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

pytest.importorskip("numba", reason="the row scheduler belongs to the numba backend (the 'cpu' extra)")
from unigraph.kernels.cpu.schedule import _balanced_bounds, row_blocks  # noqa: E402


@given(degrees=st.lists(st.one_of(st.integers(0, 5), st.integers(0, 5000)), max_size=60),
       parts=st.integers(1, 16))
def test_blocks_cover_every_row_once_with_balanced_work(degrees, parts):
    ptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    rows = len(degrees)
    bounds = _balanced_bounds(ptr, parts)
    assert bounds[0] == 0 and bounds[-1] == rows
    assert np.all(np.diff(bounds) >= 0), "blocks must be consecutive, non-overlapping row ranges"
    work = ptr[bounds[1:]] + bounds[1:] - (ptr[bounds[:-1]] + bounds[:-1])
    heaviest_row = max((d + 1 for d in degrees), default=0)
    # a block exceeds its fair share by at most one row (a hub row cannot be split)
    assert work.max() <= -(-(int(ptr[-1]) + rows) // parts) + heaviest_row


def test_row_blocks_uses_several_blocks_per_thread_and_handles_empty_csr():
    import numba
    ptr = np.arange(0, 1001, dtype=np.int64)
    assert len(row_blocks(ptr)) - 1 == 4 * numba.get_num_threads()
    assert list(row_blocks(np.zeros(1, dtype=np.int64))) == [0, 0]
