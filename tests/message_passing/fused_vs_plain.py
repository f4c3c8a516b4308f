"""One message program run two ways and compared, values and gradients, in float64: fused (traced,
compiled to g-SpMM/g-SDDMM) against the plain path (messages gathered per edge, the function run as
written, then reduced): ``MessagePassing`` with ``fuse=True`` / ``fuse=False``, and a DGL-style
user-defined function in ``update_all`` against the same function on gathered per-edge inputs."""
from __future__ import annotations

import types

import torch

import unigraph
from unigraph import MessagePassing
from unigraph import function as fn

WIDTH = 4


def make_graph() -> unigraph.Graph:
    """Multi-edges, a self-loop, a hub (node 0) and an isolated node (node 6)."""
    src = torch.tensor([0, 0, 1, 2, 3, 4, 5, 5, 2, 1, 3, 0, 4, 6, 2])
    dst = torch.tensor([1, 1, 2, 2, 0, 0, 0, 0, 0, 3, 4, 5, 3, 0, 0])
    return unigraph.Graph(torch.stack([src, dst]), num_nodes=7)


def tensor(*shape, seed: int, grad: bool = True, dtype=torch.float64) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_(grad)


class Inputs:
    """Node features ``x``, edge features ``w`` and a parameter ``p`` (all float64 leaves)."""

    def __init__(self, g: unigraph.Graph, *, grad: bool = True, dtype=torch.float64):
        self.x = tensor(g.num_nodes, WIDTH, seed=1, grad=grad, dtype=dtype)
        self.w = tensor(g.num_edges, WIDTH, seed=2, grad=grad, dtype=dtype)
        self.p = torch.nn.Parameter(tensor(WIDTH, seed=3, dtype=dtype), requires_grad=grad)

    def leaves(self) -> list[torch.Tensor]:
        return [t for t in (self.x, self.w, self.p) if t.requires_grad]


class Layer(MessagePassing):
    """``message`` is ``body(x_j, x_i, w, p)``; ``p`` is the layer's parameter."""

    def __init__(self, body, p: torch.nn.Parameter, aggr: str = "sum"):
        super().__init__(aggr=aggr)
        self.body, self.p = body, p

    def message(self, x_j, x_i, w):
        return self.body(x_j, x_i, w, self.p)


def _grads(out: torch.Tensor, leaves: list[torch.Tensor]):
    """Gradients of a fixed weighting of ``out`` (None where none reaches a leaf or none can; also
    under a caller's no_grad, where a message may have turned grad back on)."""
    if not out.requires_grad or not leaves:
        return None
    with torch.enable_grad():
        weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype).view(out.shape)
        return torch.autograd.grad((out * weights).sum(), leaves, allow_unused=True)


def propagate(body, g, inputs: Inputs, fuse: bool, aggr: str = "sum"):
    """(output, gradients, plan) of a ``MessagePassing`` layer running ``body``."""
    layer = Layer(body, inputs.p, aggr)
    layer.fuse = fuse
    out = layer.propagate(g, x=inputs.x, w=inputs.w)
    return out.detach(), _grads(out, inputs.leaves()), layer.explain()


def update_all(body, g, inputs: Inputs, reduce: str = "sum"):
    """(output, gradients, plan) of ``g.update_all`` with ``body`` as a user-defined message."""
    g.ndata["x"], g.edata["w"] = inputs.x, inputs.w
    plan = g.update_all(lambda edges: {"m": body(edges.src["x"], edges.dst["x"], edges.data["w"], inputs.p)},
                        getattr(fn, reduce)("m", "out"))
    out = g.ndata.pop("out")
    return out.detach(), _grads(out, inputs.leaves()), plan


def update_all_plain(body, g, inputs: Inputs, reduce: str = "sum"):
    """What ``update_all`` must compute: the function on gathered per-edge inputs, then reduced."""
    edges = types.SimpleNamespace(src={"x": inputs.x.index_select(0, g.src)},
                                  dst={"x": inputs.x.index_select(0, g.dst)}, data={"w": inputs.w})
    out = unigraph.ops.gspmm(g, "copy_e", reduce, e=body(edges.src["x"], edges.dst["x"], edges.data["w"], inputs.p))
    return out.detach(), _grads(out, inputs.leaves()), None


def ran_as_written(plan) -> bool:
    """Whether the plan says the tracer refused the function (an eager fallback; DGL-style plans
    call it materialized, since the fields were gathered)."""
    return plan.mode in ("eager", "materialized") and bool(plan.reasons) and "EagerOnly" in plan.reasons[0]


def assert_same(got, want, where: str = "") -> None:
    """Outputs and gradients equal to float64 rounding; a gradient reaches both or neither."""
    (out, grads, plan), (ref, ref_grads, _) = got, want
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-12, msg=lambda m: f"{where}: {m}\n{plan}")
    assert (grads is None) == (ref_grads is None), f"{where}: gradients on one path only\n{plan}"
    for a, b in zip(grads or (), ref_grads or ()):
        assert (a is None) == (b is None), f"{where}: a gradient reached one path only\n{plan}"
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12, msg=lambda m: f"{where} gradient: {m}\n{plan}")


def fused_and_plain(body, g, inputs: Inputs, *, seed: int = 0):
    """Both paths of both front ends, each from the same random state: a list of
    (what, fused result, plain result)."""
    runs = []
    for what, fused, plain in (("MessagePassing", lambda: propagate(body, g, inputs, True),
                                lambda: propagate(body, g, inputs, False)),
                               ("update_all", lambda: update_all(body, g, inputs),
                                lambda: update_all_plain(body, g, inputs))):
        torch.manual_seed(seed)
        got = fused()
        torch.manual_seed(seed)
        runs.append((what, got, plain()))
    return runs


def assert_matches_plain(body, name: str, *, stays_fused: bool) -> None:
    """Both front ends, fused against plain; the fused attempt either stayed fused with a write
    recorded out of place (``stays_fused``) or ran the function as written, saying why."""
    g = make_graph()
    for what, got, want in fused_and_plain(body, g, Inputs(g)):
        assert_same(got, want, f"{name} via {what}")
        plan = got[2]
        if stays_fused:
            assert plan.mode != "eager" and "written in place" in plan.code, f"{name} via {what}\n{plan}"
        else:
            assert ran_as_written(plan), f"{name} via {what}\n{plan}"
