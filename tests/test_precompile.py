"""``unigraph precompile`` (``unigraph/precompile.py``): the CPU kernels compiled for float32 and
float64 before their first use (``./dev.sh setup`` runs it), every family reported, nothing of
the caller's disturbed; without numba it compiles nothing and says why."""
from __future__ import annotations

import pytest
import torch

from unigraph import cli, precompile
from unigraph.kernels.cpu import numba_status

needs_numba = pytest.mark.skipif(not numba_status()[0], reason="needs numba")


@needs_numba
def test_the_command_compiles_each_family_in_both_precisions_and_keeps_the_random_state(capsys):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert cli.main(["precompile"]) == 0
    assert torch.equal(torch.rand(3), expected)   # the caller's random stream, as it was
    lines = capsys.readouterr().out.splitlines()
    for family in ("g-SpMM", "g-SDDMM", "edge softmax and GAT attention", "layers", "neighbour sampling",
                   "torch's dropout"):
        assert any(line.startswith(f"compiled {family} in ") for line in lines), family
    assert lines[-1].startswith("done in ")
    from unigraph.kernels.cpu import coo, gat, softmax, spmm
    for kernel in (spmm.gather_sum, spmm.binary_sum, spmm.gather_extreme, coo.scatter_sum, gat.forward,
                   softmax.edge_softmax, coo.scatter_add_relu, coo.add_relu_edge_grad):
        arrays = {str(argument) for signature in kernel.signatures for argument in signature}
        assert {"array(float32, 2d, C)", "array(float64, 2d, C)"} <= arrays, kernel
    from unigraph.kernels.cpu import mt19937
    from unigraph.kernels.cpu import dropout
    for kernel in (mt19937.bernoulli, mt19937.dropout, dropout._scale_kept):
        arrays = {str(argument) for signature in kernel.signatures for argument in signature}
        assert {"array(float32, 1d, C)", "array(float64, 1d, C)"} <= arrays, kernel


def test_without_numba_nothing_is_compiled_and_the_reason_is_given(monkeypatch):
    import unigraph.kernels.cpu as cpu
    monkeypatch.setattr(cpu, "numba_status", lambda: (False, "numba is not installed"))
    said = []
    assert precompile.precompile(said.append) == 0.0
    assert said == ["nothing to compile: numba is not available here (numba is not installed)"]
