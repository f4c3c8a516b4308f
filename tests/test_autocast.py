"""``torch.autocast("cpu", dtype=torch.bfloat16)`` through every layer and model (the cases of
benchmarks/compile.py): forward and backward run, and outputs and gradients stay within bfloat16's
tolerance of the float32 run. An explicitly requested backend without bfloat16 kernels refuses
by name instead."""
from __future__ import annotations

import pytest
import torch

import unigraph
from benchmarks.compile import CASES, make_case, synthetic_graph
from op_cases import cpu_test_backends

BACKENDS = [b for b in ("auto", "sparse", "scatter", "numba") if b == "auto" or b in cpu_test_backends()]
# bfloat16 keeps 8 bits of mantissa (relative step 2**-8 = 0.4%); a layer adds and multiplies a few
# hundred such values, so its result is good to a few percent of its scale, not to float32's 1e-6.
TOLERANCE = 0.04


def graph() -> unigraph.Graph:
    g = synthetic_graph(60, 300, seed=3)
    hub = torch.stack([torch.randint(0, 60, (300,), generator=torch.Generator().manual_seed(4)),
                       torch.zeros(300, dtype=torch.int64)])  # a hub with in-degree > 256 (bf16 counts stop at 256)
    return unigraph.Graph(torch.cat([g.edge_index, hub], dim=1), num_nodes=60).prepare()


def run(name: str, g: unigraph.Graph, backend: str, autocast: bool):
    model, inputs = make_case(name, g, 6, 5, torch.float32)
    with unigraph.use_backend(backend), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = model(*inputs)
    out.float().square().mean().backward()
    return out, {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def close(got: torch.Tensor, want: torch.Tensor, scale: float, what: str) -> None:
    """Within TOLERANCE of ``want``, or of ``scale`` (the magnitude of the quantity's family: a
    gradient that is zero in exact arithmetic, a bias before a BatchNorm, is rounding noise)."""
    torch.testing.assert_close(got.float(), want, rtol=TOLERANCE, atol=TOLERANCE * max(scale, 1e-6),
                               msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_bfloat16_autocast_is_close_to_float32(name, backend):
    g = graph()
    want, want_grads = run(name, g, backend, autocast=False)
    try:
        got, grads = run(name, g, backend, autocast=True)
    except RuntimeError as err:
        if backend != "auto" and "bfloat16" in str(err) and backend in str(err):
            pytest.skip(f"{backend} has no bfloat16 kernels and says so: {str(err)[:120]}")
        raise
    assert got.dtype in (torch.bfloat16, torch.float32)
    assert torch.isfinite(got).all()
    close(got, want, float(want.abs().max()), f"{name} on {backend}")
    assert grads.keys() == want_grads.keys()
    gradient_scale = max(float(g.abs().max()) for g in want_grads.values())
    for key in grads:
        close(grads[key], want_grads[key], gradient_scale, f"{name} on {backend}: gradient of {key}")
