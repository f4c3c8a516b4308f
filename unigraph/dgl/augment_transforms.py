r"""DGL's augmentation, feature and positional-encoding transforms (``dgl.transforms`` module
classes, all :class:`~unigraph.dgl.transform_base.BaseTransform`) and the encodings they write.

Random augmentations (for contrastive learning, GraphCL; DropEdge), each drawn from torch's global
generator with the same calls as DGL, so that ``torch.manual_seed`` (or ``dgl.seed``) reproduces
DGL's draws exactly:

* :class:`NodeShuffle`: per node type, one uniform permutation :math:`\pi` (``torch.randperm``);
  every node feature becomes :math:`x'_v = x_{\pi(v)}`; the structure is unchanged.
* :class:`DropNode` / :class:`DropEdge` (``p``): each node (per type) / edge (per relation) is
  removed independently with probability :math:`p` (one Bernoulli draw each, in id order), as
  ``remove_nodes`` / ``remove_edges`` remove them (a dropped node takes its edges along).
* :class:`AddEdge` (``ratio``): per relation :math:`(u, e, v)` with :math:`|E|` edges,
  :math:`\lfloor |E| \cdot \mathrm{ratio} \rfloor` new edges, sources uniform over the ``u`` nodes and
  destinations uniform over the ``v`` nodes (``torch.randint``), appended after the existing ones
  (their edge features are the initializer's, zeros).
* :class:`FeatMask` (``p``): for each named feature of each type, every column (last dimension) is
  zeroed with probability :math:`p`, one draw per column shared by all rows.

Deterministic feature transforms and encodings:

* :class:`RowFeatNormalizer`: :math:`x_{i} \leftarrow x_{i} / \max(1, \sum_j x_{ij})` per row
  (last dimension), after :math:`x \leftarrow x - \min x` (the minimum over the whole tensor) with
  ``subtract_min``. Rows summing to less than 1 are divided by 1, as in DGL.
* :func:`random_walk_pe` / :class:`RandomWalkPE` (Dwivedi et al. 2022): with the transition matrix
  :math:`R = D^{-1} A` (:math:`A_{ij}` the number of edges ``i -> j``, or their total weight;
  :math:`D` its row sums, a node without out-edges has a zero row), node ``i``'s encoding is
  :math:`[R_{ii}, (R^2)_{ii}, \dots, (R^k)_{ii}]`, float32.
* :func:`svd_pe` / :class:`SVDPE` (Hussain et al. 2022): with the SVD :math:`A = U \Sigma V^\top`
  (singular values decreasing), the encoding is :math:`[U_m \Sigma_m^{1/2}, V_m \Sigma_m^{1/2}]`
  for the :math:`m = \min(k, N)` largest, zero-padded to :math:`2k` columns; with
  ``random_flip`` each node's row is multiplied by a random sign. The SVD is SciPy's, as DGL's
  (so the vectors are DGL's, signs included), and the signs come from NumPy's global generator,
  as DGL draws them (``np.random.seed`` / ``dgl.seed`` reproduce DGL's).
* :class:`ToLevi`: the Levi graph of a homogeneous graph: node types ``'node'`` (the nodes) and
  ``'edge'`` (one node per edge, same ids), relations ``('node', 'n2e', 'edge')`` (``src(e) -> e``)
  and ``('edge', 'e2n', 'node')`` (``e -> dst(e)``), both in edge id order; node features go to
  ``'node'``, edge features to ``'edge'``.

The dense encodings build an N x N matrix, as DGL does; they refuse graphs above
:data:`unigraph.dgl.positional.DENSE_NODES` nodes, like ``lap_pe``.

Where this differs from DGL 2.1: the transforms write new feature tensors instead of changing the
caller's tensors in place (DGL's ``RowFeatNormalizer`` and ``FeatMask`` overwrite the tensor the
graph holds, which the original graph of a clone shares); ``random_walk_pe`` with edge weights on a
graph with repeated edges uses the total weight of the edges ``i -> j`` (DGL multiplies it by
their count as well); ``ToLevi`` keeps isolated nodes with the highest ids (DGL infers the node
count from the edges and ends with features longer than its node count); ``FeatMask`` masks the
last dimension of a feature of more than two dimensions (DGL indexes dimension 1 with a mask sized
by the last one and fails unless they agree).
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl.base import DGLError
from unigraph.dgl.convert import heterograph
from unigraph.dgl.positional import DENSE_NODES, _homogeneous
from unigraph.dgl.transform_base import BaseTransform
from unigraph.dgl.transforms import _graph_only

__all__ = [
    "NodeShuffle", "DropNode", "DropEdge", "AddEdge", "FeatMask", "RowFeatNormalizer", "RandomWalkPE", "SVDPE",
    "ToLevi", "random_walk_pe", "svd_pe",
]


# ---------------------------------------------------------------------- argument checks
def _probability(p: Any, what: str) -> float:
    if isinstance(p, bool) or not isinstance(p, Real) or not 0.0 <= float(p) <= 1.0:
        raise DGLError(f"{what}: p must be a probability in [0, 1], got {p!r}")
    return float(p)


def _positive_int(k: Any, what: str) -> int:
    if isinstance(k, bool) or not isinstance(k, Integral) or int(k) < 1:
        raise DGLError(f"{what}: k must be a positive int, got {k!r}")
    return int(k)


def _names(names: Any, what: str) -> list[str]:
    if names is None:
        return []
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise DGLError(f"{what} must be a list of feature names, got {names!r}")
    return list(names)


def _dense_size(g: Any, what: str) -> int:
    n = g.num_nodes()
    if n > DENSE_NODES:
        raise DGLError(f"{what} builds an N x N matrix (as DGL does): {n} nodes is above its "
                       f"{DENSE_NODES:,}-node limit")
    return n


def _bernoulli(p: float, count: int) -> Tensor:
    """``count`` independent draws, True with probability ``p``, on the CPU: the same call on
    torch's generator as DGL's ``Bernoulli(p).sample([count])``."""
    return torch.distributions.Bernoulli(probs=torch.tensor(p)).sample(torch.Size([count])).bool()


def _slots(g: Any, node_names: list[str], edge_names: list[str], what: str) -> list[tuple[Any, str]]:
    """The feature stores and keys the names designate, in DGL's order (each node feature over the
    node types that hold it, then each edge feature over the relations that hold it). A name no
    type holds is an error, raised before anything is changed."""
    _graph_only(g, what)
    slots = []
    for names, types, store_of, kind in ((node_names, g.ntypes, lambda t: g.nodes[t].data, "node"),
                                         (edge_names, g.canonical_etypes, lambda t: g.edges[t].data, "edge")):
        for name in names:
            found = [store_of(t) for t in types if name in store_of(t)]
            if not found:
                raise DGLError(f"{what}: no {kind} type of the graph has a feature {name!r}")
            slots.extend((store, name) for store in found)
    return slots


# ---------------------------------------------------------------------- random augmentations
class NodeShuffle(BaseTransform):
    """DGL's ``transforms.NodeShuffle``: a copy of ``g`` whose node features are permuted, one
    uniform random permutation per node type shared by all its features (the edges and edge
    features stay as they are, so features move to other positions in the structure)."""

    def __call__(self, g: Any):
        out = _graph_only(g, "NodeShuffle").clone()
        for ntype in out.ntypes:
            perm = torch.randperm(out.num_nodes(ntype)).to(out.device)   # drawn on the CPU, as DGL's
            store = out.nodes[ntype].data
            for key, value in list(store.items()):
                store[key] = value[perm]
        return out


class DropNode(BaseTransform):
    """DGL's ``transforms.DropNode``: a copy of ``g`` without a random subset of its nodes, each
    node of each type dropped with probability ``p`` (with its edges); the kept nodes and edges
    keep their order and features."""

    def __init__(self, p: float = 0.5):
        self.p = _probability(p, "DropNode")

    def __call__(self, g: Any):
        out = _graph_only(g, "DropNode").clone()
        if self.p == 0:
            return out
        for ntype in out.ntypes:
            drop = _bernoulli(self.p, out.num_nodes(ntype)).to(out.device)
            out.remove_nodes(drop.nonzero().flatten(), ntype=ntype)
        return out


class DropEdge(BaseTransform):
    """DGL's ``transforms.DropEdge``: a copy of ``g`` without a random subset of its edges, each
    edge of each relation dropped with probability ``p``; the nodes and the kept edges keep their
    order and features."""

    def __init__(self, p: float = 0.5):
        self.p = _probability(p, "DropEdge")

    def __call__(self, g: Any):
        out = _graph_only(g, "DropEdge").clone()
        if self.p == 0:
            return out
        for cet in out.canonical_etypes:
            drop = _bernoulli(self.p, out.num_edges(cet)).to(out.device)
            out.remove_edges(drop.nonzero().flatten(), etype=cet)
        return out


class AddEdge(BaseTransform):
    """DGL's ``transforms.AddEdge``: a copy of ``g`` with ``int(num_edges * ratio)`` random edges
    appended to each relation, both ends uniform over their node types (repeats and self-loops
    possible); their edge features are zeros. ``ratio == 0`` returns ``g`` itself, as DGL does."""

    def __init__(self, ratio: float = 0.2):
        if isinstance(ratio, bool) or not isinstance(ratio, Real) or float(ratio) < 0:
            raise DGLError(f"AddEdge: ratio must be a non-negative number, got {ratio!r}")
        self.ratio = float(ratio)

    def __call__(self, g: Any):
        _graph_only(g, "AddEdge")
        if self.ratio == 0:
            return g
        out = g.clone()
        for cet in out.canonical_etypes:
            count = int(out.num_edges(cet) * self.ratio)
            if count == 0:   # (a relation between empty node types has nothing to draw from)
                continue
            src = torch.randint(0, out.num_nodes(cet[0]), (count,), dtype=out.idtype, device=out.device)
            dst = torch.randint(0, out.num_nodes(cet[2]), (count,), dtype=out.idtype, device=out.device)
            out.add_edges(src, dst, etype=cet)
        return out


class FeatMask(BaseTransform):
    """DGL's ``transforms.FeatMask``: zeroes random columns of the node features
    ``node_feat_names`` and edge features ``edge_feat_names`` (on every type that has them), each
    column with probability ``p``, drawn anew per feature and type. Changes ``g``'s features (new
    tensors) and returns ``g``. A feature must have at least two dimensions; the mask is over the
    last one."""

    def __init__(self, p: float = 0.5, node_feat_names: Sequence[str] | None = None,
                 edge_feat_names: Sequence[str] | None = None):
        self.p = _probability(p, "FeatMask")
        self.node_feat_names = _names(node_feat_names, "FeatMask: node_feat_names")
        self.edge_feat_names = _names(edge_feat_names, "FeatMask: edge_feat_names")

    def __call__(self, g: Any):
        if self.p == 0:
            return g
        slots = _slots(g, self.node_feat_names, self.edge_feat_names, "FeatMask")
        for store, key in slots:
            if store[key].dim() < 2:
                raise DGLError(f"FeatMask masks columns: feature {key!r} has shape {tuple(store[key].shape)}, "
                               "it needs at least two dimensions")
        for store, key in slots:
            value = store[key]
            mask = _bernoulli(self.p, value.shape[-1]).to(value.device)
            store[key] = value.masked_fill(mask, 0)
        return g


class RowFeatNormalizer(BaseTransform):
    r"""DGL's ``transforms.RowFeatNormalizer``: each row of the node features ``node_feat_names``
    and edge features ``edge_feat_names`` (on every type that has them) divided by
    :math:`\max(1, \text{its sum})` over the last dimension, after subtracting the feature's
    global minimum with ``subtract_min`` (then every row of a feature that is not constant sums
    to 1 where its sum was at least 1). Floating-point features only. Changes ``g``'s features
    (new tensors) and returns ``g``."""

    def __init__(self, subtract_min: bool = False, node_feat_names: Sequence[str] | None = None,
                 edge_feat_names: Sequence[str] | None = None):
        self.subtract_min = bool(subtract_min)
        self.node_feat_names = _names(node_feat_names, "RowFeatNormalizer: node_feat_names")
        self.edge_feat_names = _names(edge_feat_names, "RowFeatNormalizer: edge_feat_names")

    def row_normalize(self, feat: Tensor) -> Tensor:
        """``feat`` with every row (last dimension) normalized as described above."""
        if not feat.is_floating_point():
            raise DGLError(f"RowFeatNormalizer: features must be floating point, got {feat.dtype}")
        if self.subtract_min and feat.numel():
            feat = feat - feat.min()
        return feat / feat.sum(dim=-1, keepdim=True).clamp(min=1.0)

    def __call__(self, g: Any):
        slots = _slots(g, self.node_feat_names, self.edge_feat_names, "RowFeatNormalizer")
        for store, key in slots:
            if not store[key].is_floating_point():
                raise DGLError(f"RowFeatNormalizer: feature {key!r} is {store[key].dtype}; it must be floating point")
        for store, key in slots:
            store[key] = self.row_normalize(store[key])
        return g


# ---------------------------------------------------------------------- positional encodings
def _adjacency(g: Any, weight: Tensor | None = None) -> Tensor:
    """The dense float64 adjacency (row = source): edge counts, or summed ``weight`` per pair."""
    src, dst = (ids.to(torch.int64) for ids in g.edges())
    n = g.num_nodes()
    values = torch.ones(src.numel(), dtype=torch.float64, device=g.device) if weight is None else weight
    return torch.zeros(n, n, dtype=torch.float64, device=g.device).index_put_((src, dst), values, accumulate=True)


def random_walk_pe(g: Any, k: int, eweight_name: str | None = None) -> Tensor:
    """The probabilities of returning to each node after 1, ..., ``k`` random-walk steps, a
    float32 ``[N, k]`` tensor on ``g``'s device (DGL's ``dgl.random_walk_pe``). A step follows an
    out-edge uniformly, or in proportion to ``edata[eweight_name]`` (one value per edge; the
    weights of repeated edges add up); from a node without out-edges the walk stops (zero)."""
    g = _homogeneous(g, "random_walk_pe")
    k = _positive_int(k, "random_walk_pe")
    _dense_size(g, "random_walk_pe")
    weight = None
    if eweight_name is not None:
        if eweight_name not in g.edata:
            raise DGLError(f"random_walk_pe: the graph has no edge feature {eweight_name!r} (eweight_name)")
        weight = g.edata[eweight_name]
        if weight.numel() != g.num_edges():
            raise DGLError(f"random_walk_pe: edata[{eweight_name!r}] must hold one weight per edge, got shape "
                           f"{tuple(weight.shape)} for {g.num_edges()} edges")
        weight = weight.reshape(-1).to(torch.float64)
    adj = _adjacency(g, weight)
    step = adj / (adj.sum(1, keepdim=True) + 1e-30)   # DGL's guard: zero rows stay zero
    power, diagonals = step, [step.diagonal()]
    for _ in range(k - 1):
        power = power @ step
        diagonals.append(power.diagonal())
    return torch.stack(diagonals, dim=-1).to(torch.float32)


class RandomWalkPE(BaseTransform):
    """DGL's ``transforms.RandomWalkPE``: writes :func:`random_walk_pe` into
    ``g.ndata[feat_name]`` and returns ``g`` (a homogeneous graph)."""

    def __init__(self, k: int, feat_name: str = "PE", eweight_name: str | None = None):
        self.k = _positive_int(k, "RandomWalkPE")
        self.feat_name, self.eweight_name = feat_name, eweight_name

    def __call__(self, g: Any):
        g.ndata[self.feat_name] = random_walk_pe(g, self.k, eweight_name=self.eweight_name)
        return g


def svd_pe(g: Any, k: int, padding: bool = False, random_flip: bool = True) -> Tensor:
    """The SVD encoding ``[U_m sqrt(S_m), V_m sqrt(S_m)]`` of the adjacency (edge counts, row =
    source), ``m = min(k, N)`` largest singular values, zero columns appended up to ``2k`` when
    ``N < k`` (refused without ``padding``); with ``random_flip`` each row times a random sign
    (NumPy's global generator, as DGL). A float32 ``[N, 2k]`` tensor on ``g``'s device (DGL's
    ``dgl.svd_pe``)."""
    import scipy.linalg
    g = _homogeneous(g, "svd_pe")
    k = _positive_int(k, "svd_pe")
    n = _dense_size(g, "svd_pe")
    if n < k and not padding:
        raise DGLError(f"svd_pe: k ({k}) must not exceed the number of nodes ({n}), or pass padding=True")
    m = min(n, k)
    if n:
        u, d, vh = scipy.linalg.svd(_adjacency(g).cpu().numpy())
        root = np.sqrt(d[:m])
        encoding = np.concatenate([u[:, :m] * root, vh[:m].T * root], axis=1)
    else:
        encoding = np.zeros((0, 0))
    if random_flip:
        signs = 2 * (np.random.rand(n) > 0.5) - 1   # one sign per node row, as DGL flips them
        encoding = signs[:, None] * encoding
    out = torch.tensor(encoding, dtype=torch.float32)
    if n < k:
        out = torch.cat([out, torch.zeros(n, 2 * (k - n), dtype=torch.float32)], dim=1)
    return out.to(g.device)


class SVDPE(BaseTransform):
    """DGL's ``transforms.SVDPE``: writes :func:`svd_pe` into ``g.ndata[feat_name]`` and returns
    ``g`` (a homogeneous graph)."""

    def __init__(self, k: int, feat_name: str = "svd_pe", padding: bool = False, random_flip: bool = True):
        self.k = _positive_int(k, "SVDPE")
        self.feat_name, self.padding, self.random_flip = feat_name, bool(padding), bool(random_flip)

    def __call__(self, g: Any):
        g.ndata[self.feat_name] = svd_pe(g, self.k, padding=self.padding, random_flip=self.random_flip)
        return g


class ToLevi(BaseTransform):
    """DGL's ``transforms.ToLevi``: the Levi graph of a homogeneous graph, a heterograph with node
    types ``'edge'`` (one per edge, its id) and ``'node'`` (the nodes, same ids, isolated ones
    included) and relations ``('node', 'n2e', 'edge')`` and ``('edge', 'e2n', 'node')`` (edge
    ``e = u -> v`` becomes ``u -> e -> v``; both relations in edge id order). Node features go to
    ``'node'``, edge features to ``'edge'``; idtype and device are ``g``'s."""

    def __call__(self, g: Any):
        g = _homogeneous(g, "ToLevi")
        src, dst = g.edges()
        eids = torch.arange(g.num_edges(), dtype=g.idtype, device=g.device)
        levi = heterograph({("node", "n2e", "edge"): (src, eids), ("edge", "e2n", "node"): (eids, dst)},
                           {"node": g.num_nodes(), "edge": g.num_edges()}, idtype=g.idtype, device=g.device)
        for key, value in g.ndata.items():
            levi.nodes["node"].data[key] = value
        for key, value in g.edata.items():
            levi.nodes["edge"].data[key] = value
        return levi
