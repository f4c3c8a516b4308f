"""The graph ops as benchmark cases: their inputs, the unigraph call, DGL's and PyG's equivalents, and
the bytes each must move. Named as in the kernel suite (``copy_u/sum``, ``u_mul_e/sum``, ...).

=============  ===============================================  ==========================================
case           unigraph call                                    inputs (all leaves need gradients)
=============  ===============================================  ==========================================
copy_u/sum     ``gspmm(g, "copy_u", "sum", x)``                  x ``[N_src, F]``
copy_u/mean    ``gspmm(g, "copy_u", "mean", x)``                 x ``[N_src, F]``
copy_u/max     ``gspmm(g, "copy_u", "max", x)``                  x ``[N_src, F]``
u_mul_e/sum    ``gspmm(g, "u_mul_e", "sum", x, w)``              x ``[N_src, F]``, w ``[E, 1]`` (GCN's weight)
u_dot_v        ``gsddmm(g, "dot", x, y, "u", "v")``              x ``[N_src, F]``, y ``[N_dst, F]``
u_add_v        ``gsddmm(g, "add", x, y, "u", "v")``              x ``[N_src, F]``, y ``[N_dst, F]``
edge_softmax   ``edge_softmax(g, s)``                            s ``[E, H]``
gat            ``gat_attention(g, h, el, er, 0.2)``              h ``[N_src, H, F / H]``, el, er ``[N, H]``
=============  ===============================================  ==========================================

Peers (each only where it has a natural kernel; their structures are built once, before timing):

* ``dgl``: ``dgl.ops`` (``copy_u_sum``, ``u_mul_e_sum``, ``u_dot_v``, ``edge_softmax``, ...).
* ``pyg (scatter)``: what PyG's ``MessagePassing`` runs on an ``edge_index``: gather the messages,
  ``torch_geometric.utils.scatter`` / ``softmax`` by destination.
* ``pyg (torch-sparse)``: what it runs on a ``SparseTensor`` ``adj_t`` (torch-sparse installed):
  ``torch_sparse.matmul`` for the g-SpMM ops (sum, mean, max; weighted for u_mul_e).
  Reports keep the faster of PyG's two rows as "PyG at its best", labelled.

:data:`MODEL_OPS` lists the ops each built-in model's layer calls (checked against the layers by
``tests/test_bench_cli.py``).
"""
from __future__ import annotations

import importlib.util
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

import unigraph
from unigraph import ops
from unigraph.backends.base import Request
from unigraph.benchmarking import traffic

OPS = ("copy_u/sum", "copy_u/mean", "copy_u/max", "u_mul_e/sum", "u_dot_v", "u_add_v", "edge_softmax", "gat")
MODES = ("fwd", "fwd+bwd")
MODEL_OPS = {"gcn": ("u_mul_e/sum",), "sage": ("copy_u/mean",), "gat": ("gat",), "gin": ("copy_u/sum",)}
PYG_SCATTER, PYG_SPARSE = "pyg (scatter)", "pyg (torch-sparse)"
NEGATIVE_SLOPE = 0.2


def _check(op: str, width: int, heads: int) -> None:
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; choose from {OPS}")
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be an int >= 1, got {width!r}")
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise ValueError(f"heads must be an int >= 1, got {heads!r}")
    if op == "gat" and width % heads:
        raise ValueError(f"gat needs width divisible by heads (heads x head width), got width {width}, heads {heads}")


def request_of(op: str, width: int, heads: int, device: torch.device | str = "cpu") -> Request:
    """The request the ops front door builds for a case: what the selector and its cost model see
    (``feature_width`` is the elements per output row; for dot, per row before the sum)."""
    _check(op, width, heads)
    device = torch.device(device)
    if op.startswith(("copy_u", "u_mul_e")):
        name, reduce = op.split("/")
        return Request("gspmm", name, reduce, width, torch.float32, device)
    if op in ("u_dot_v", "u_add_v"):
        return Request("gsddmm", "dot" if op == "u_dot_v" else "add", None, width, torch.float32, device)
    if op == "edge_softmax":
        return Request("edge_softmax", "softmax", None, heads, torch.float32, device)
    return Request("gat_attention", "gat", None, width, torch.float32, device)


def make_inputs(op: str, g: unigraph.Graph, width: int, heads: int, device: torch.device | str = "cpu",
                seed: int = 0) -> dict[str, Tensor]:
    """The leaf tensors of one case (standard normal, seeded, requiring gradients)."""
    _check(op, width, heads)
    gen = torch.Generator().manual_seed(seed)
    ns, nd, e = g.num_src_nodes, g.num_dst_nodes, g.num_edges

    def leaf(*shape):
        return torch.randn(shape, generator=gen).to(device).requires_grad_(True)

    if op.startswith("copy_u"):
        return {"x": leaf(ns, width)}
    if op == "u_mul_e/sum":
        return {"x": leaf(ns, width), "w": leaf(e, 1)}
    if op in ("u_dot_v", "u_add_v"):
        return {"x": leaf(ns, width), "y": leaf(nd, width)}
    if op == "edge_softmax":
        return {"s": leaf(e, heads)}
    return {"h": leaf(ns, heads, width // heads), "el": leaf(ns, heads), "er": leaf(nd, heads)}


def unigraph_call(op: str, g: unigraph.Graph, t: dict, backend: str | None = None) -> Tensor:
    """The op through unigraph's front door (``backend=None``: the current choice, ``auto`` by default)."""
    if op.startswith(("copy_u", "u_mul_e")):
        name, reduce = op.split("/")
        return ops.gspmm(g, name, reduce, t["x"], t.get("w"), backend=backend)
    if op in ("u_dot_v", "u_add_v"):
        return ops.gsddmm(g, "dot" if op == "u_dot_v" else "add", t["x"], t["y"], "u", "v", backend=backend)
    if op == "edge_softmax":
        return ops.edge_softmax(g, t["s"], backend=backend)
    return ops.gat_attention(g, t["h"], t["el"], t["er"], NEGATIVE_SLOPE, backend=backend)


def explain(op: str, g: unigraph.Graph, t: dict, backend: str | None = None, mode: str = "fwd"):
    """``unigraph.explain`` for this case in ``mode``: which backend ``auto`` picks, and why (a
    ``fwd+bwd`` call is differentiated, a ``fwd`` one runs under no_grad, as :func:`in_mode` times them)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    grad = mode == "fwd+bwd"
    if op.startswith(("copy_u", "u_mul_e")):
        name, reduce = op.split("/")
        return unigraph.explain(g, name, reduce, t["x"], backend=backend, grad=grad)
    if op in ("u_dot_v", "u_add_v"):
        return unigraph.explain(g, "dot" if op == "u_dot_v" else "add", None, t["x"], backend=backend, grad=grad)
    if op == "edge_softmax":
        return unigraph.explain(g, "edge_softmax", None, t["s"], backend=backend, grad=grad)
    return unigraph.explain(g, "gat_attention", None, t["h"], backend=backend, grad=grad)


def traffic_of(op: str, shape: traffic.Shape, width: int, heads: int, mode: str) -> int:
    """Bytes the case must move in ``mode`` (``fwd``, or ``fwd+bwd`` = forward + backward), per
    :mod:`unigraph.benchmarking.traffic`."""
    _check(op, width, heads)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")

    def one(backward: bool) -> dict:
        if op.startswith(("copy_u", "u_mul_e")):
            name, reduce = op.split("/")
            return traffic.gspmm(shape, name, reduce, u_width=width, e_width=1, out_width=width, backward=backward)
        if op == "u_dot_v":
            return traffic.gsddmm(shape, "dot", lhs_width=width, rhs_width=width, out_width=1, backward=backward)
        if op == "u_add_v":
            return traffic.gsddmm(shape, "add", lhs_width=width, rhs_width=width, out_width=width, backward=backward)
        if op == "edge_softmax":
            return traffic.edge_softmax(shape, heads, backward=backward)
        return traffic.gat_attention(shape, heads, width // heads, backward=backward)

    return traffic.total(one(False)) + (traffic.total(one(True)) if mode == "fwd+bwd" else 0)


# ---------------------------------------------------------------------- peers
class PeerGraphs:
    """One graph in the peers' own structures, built once (outside timing)."""

    def __init__(self, g: unigraph.Graph, dgl_module=None, pyg: bool = True):
        self.src, self.dst, self.n_src, self.n_dst = g.src, g.dst, g.num_src_nodes, g.num_dst_nodes
        self.dgl = self.adj_t = None
        self.skipped: dict[str, str] = {}
        if dgl_module is not None:
            try:
                if g.is_bipartite:
                    self.dgl = dgl_module.create_block((g.src, g.dst), num_src_nodes=self.n_src,
                                                       num_dst_nodes=self.n_dst, device=g.device)
                else:
                    self.dgl = dgl_module.graph((g.src, g.dst), num_nodes=self.n_src, device=g.device)
            except dgl_module.DGLError as err:  # e.g. a CPU-only DGL build and a GPU graph
                self.skipped["dgl"] = f"cannot place the graph on {g.device}: {err}"
            else:
                self.dgl.create_formats_()
        self.pyg = pyg and importlib.util.find_spec("torch_geometric") is not None
        if pyg and not self.pyg:
            self.skipped["pyg"] = "torch_geometric is not installed"
        if self.pyg and importlib.util.find_spec("torch_sparse") is not None:
            import torch_sparse
            order = torch.arange(g.num_edges, device=g.device, dtype=torch.float32)
            adj = torch_sparse.SparseTensor(row=g.dst, col=g.src, value=order, sparse_sizes=(self.n_dst, self.n_src))
            self.edge_of_slot = adj.storage.value().long()  # the edge id of each CSR slot
            self.adj_t = adj.set_value(None)
        elif self.pyg:
            self.skipped[PYG_SPARSE] = "torch-sparse is not installed"


def peer_calls(op: str, p: PeerGraphs, t: dict) -> dict[str, Callable[[], Tensor]]:
    """Every peer implementation of ``op`` available here, as zero-argument callables."""
    calls: dict[str, Callable[[], Tensor]] = {}
    src, dst = p.src, p.dst
    if p.dgl is not None:
        import dgl
        dg = p.dgl
        table = {
            "copy_u/sum": lambda: dgl.ops.copy_u_sum(dg, t["x"]),
            "copy_u/mean": lambda: dgl.ops.copy_u_mean(dg, t["x"]),
            "copy_u/max": lambda: dgl.ops.copy_u_max(dg, t["x"]),
            "u_mul_e/sum": lambda: dgl.ops.u_mul_e_sum(dg, t["x"], t["w"]),
            "u_dot_v": lambda: dgl.ops.u_dot_v(dg, t["x"], t["y"]),
            "u_add_v": lambda: dgl.ops.u_add_v(dg, t["x"], t["y"]),
            "edge_softmax": lambda: dgl.ops.edge_softmax(dg, t["s"]),
            "gat": lambda: dgl.ops.u_mul_e_sum(dg, t["h"], dgl.ops.edge_softmax(dg, F.leaky_relu(
                dgl.ops.u_add_v(dg, t["el"], t["er"]), NEGATIVE_SLOPE)).unsqueeze(-1)),
        }
        calls["dgl"] = table[op]
    if p.pyg:
        from torch_geometric.utils import scatter, softmax

        def gather_scatter(messages: Tensor, reduce: str) -> Tensor:
            return scatter(messages, dst, 0, p.n_dst, reduce)

        table = {
            "copy_u/sum": lambda: gather_scatter(t["x"].index_select(0, src), "sum"),
            "copy_u/mean": lambda: gather_scatter(t["x"].index_select(0, src), "mean"),
            "copy_u/max": lambda: gather_scatter(t["x"].index_select(0, src), "max"),
            "u_mul_e/sum": lambda: gather_scatter(t["x"].index_select(0, src) * t["w"], "sum"),
            "u_dot_v": lambda: (t["x"].index_select(0, src) * t["y"].index_select(0, dst)).sum(-1, keepdim=True),
            "u_add_v": lambda: t["x"].index_select(0, src) + t["y"].index_select(0, dst),
            "edge_softmax": lambda: softmax(t["s"], dst, num_nodes=p.n_dst),
            "gat": lambda: gather_scatter(t["h"].index_select(0, src) * softmax(F.leaky_relu(
                t["el"].index_select(0, src) + t["er"].index_select(0, dst), NEGATIVE_SLOPE), dst,
                num_nodes=p.n_dst).unsqueeze(-1), "sum"),
        }
        calls[PYG_SCATTER] = table[op]
    if p.adj_t is not None and op in ("copy_u/sum", "copy_u/mean", "copy_u/max", "u_mul_e/sum"):
        import torch_sparse
        adj_t = p.adj_t
        if op == "u_mul_e/sum":
            calls[PYG_SPARSE] = lambda: torch_sparse.matmul(
                adj_t.set_value(t["w"].view(-1).index_select(0, p.edge_of_slot), layout="csr"), t["x"], reduce="sum")
        else:
            reduce = op.split("/")[1]
            calls[PYG_SPARSE] = lambda: torch_sparse.matmul(adj_t, t["x"], reduce=reduce)
    return calls


# ---------------------------------------------------------------------- modes
def in_mode(forward: Callable[[], Tensor], leaves: dict[str, Tensor], mode: str) -> Callable[[], object]:
    """``forward`` as timed in ``mode``: under ``no_grad`` (``fwd``), or followed by the backward to
    every leaf with one fixed upstream gradient (``fwd+bwd``)."""
    if mode == "fwd":
        def run():
            with torch.no_grad():
                return forward()
        return run
    if mode != "fwd+bwd":
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    inputs = list(leaves.values())
    grad_out: dict[str, Tensor] = {}

    def run():
        out = forward()
        if "g" not in grad_out or grad_out["g"].shape != out.shape:
            grad_out["g"] = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device)
        return torch.autograd.grad(out, inputs, grad_out["g"], allow_unused=True)
    return run
