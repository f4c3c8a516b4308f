r"""WLConv: one round of Weisfeiler-Lehman colour refinement, with PyG's colours.

PyG's layer names each new colour by Python's ``hash`` of the tuple ``(own colour, sorted
neighbour colours...)`` and numbers the hashes in the order nodes first show them, in a dict
(``layer.hashmap``) kept across calls. Here the same tuple hash is computed for all nodes at once
in int64 torch arithmetic (CPython's tuple hash, an xxHash-like mix over unsigned 64-bit words,
wraps exactly as two's-complement int64 does), so the colours, and the ``hashmap`` itself, are
PyG's. The mix runs once per tuple position, vectorised over the nodes that have that many
neighbours: ``1 + max in-degree`` steps, ``O(E)`` work in all. Before its first use, the mix is
checked against Python's own ``hash`` on sample tuples; an interpreter whose tuple hash differs
(not CPython, not 64-bit) gets a ``RuntimeError`` rather than different colours.

Looking hashes up in the dict would be a Python loop over the nodes, so a sorted tensor copy of
its keys (and values) is kept beside it; it is rebuilt when ``hashmap`` is another object or has
another length than when the copy was made (``reset_parameters()``, an assignment, entries added
from outside). What that check cannot see: an existing entry's value changed in place, keeping the
length; after such an edit assign the dict again (``layer.hashmap = dict(layer.hashmap)``).
"""
from __future__ import annotations

import sys
from typing import Any

import torch
from torch import Tensor

from unigraph.call_forms import resolve

_MODULUS = (1 << 61) - 1        # CPython's integer hash modulus (sys.hash_info.modulus on 64-bit builds)
_PRIME_1 = 11400714785074694791 - (1 << 64)   # the tuple hash's xxPRIME constants, as signed int64
_PRIME_2 = 14029467366897019727 - (1 << 64)
_PRIME_5 = 2870177450012600261
_LENGTH_MASK = _PRIME_5 ^ 3527539
_LOW_31 = (1 << 31) - 1
_checked = False


def _int_hashes(values: Tensor) -> Tensor:
    """Python's ``hash(int(v))`` of every int64 ``v``: ``|v| mod (2^61 - 1)`` with ``v``'s sign, -1 -> -2."""
    rest = torch.remainder(values, _MODULUS)                      # in [0, modulus), no overflow
    hashes = torch.where(values < 0, -torch.remainder(_MODULUS - rest, _MODULUS), rest)
    return torch.where(hashes == -1, torch.full_like(hashes, -2), hashes)


def _mix(acc: Tensor, lane: Tensor) -> Tensor:
    """One step of CPython's tuple hash: ``rotl31(acc + lane * P2) * P1`` on 64-bit words."""
    acc = acc + lane * _PRIME_2
    acc = (acc << 31) | ((acc >> 33) & _LOW_31)   # rotate left by 31 (>> is arithmetic: mask the sign fill)
    return acc * _PRIME_1


def _finish(acc: Tensor, lengths: Tensor) -> Tensor:
    acc = acc + (lengths ^ _LENGTH_MASK)
    return torch.where(acc == -1, torch.full_like(acc, 1546275796), acc)


def tuple_hashes(first: Tensor, rest: Tensor, owner: Tensor) -> Tensor:
    """``hash((first[i], *rest[owner == i]))`` for every ``i``, ``rest`` grouped by ``owner`` in
    tuple order (``owner`` sorted, stable)."""
    count = first.shape[0]
    acc = _mix(torch.full_like(first, _PRIME_5), _int_hashes(first))
    lengths = torch.bincount(owner, minlength=count)
    start = torch.cumsum(lengths, 0) - lengths
    position = torch.arange(owner.shape[0], device=owner.device) - start[owner]
    order = torch.argsort(position, stable=True)   # position 0 of every tuple, then position 1, ...
    lanes, owners = _int_hashes(rest)[order], owner[order]
    begin = 0
    for size in torch.bincount(position).tolist():   # one step per tuple position, vectorised over the tuples
        nodes = owners[begin:begin + size]
        acc[nodes] = _mix(acc[nodes], lanes[begin:begin + size])
        begin += size
    return _finish(acc, lengths + 1)


def _check_interpreter() -> None:
    """The vectorised hash must be this interpreter's ``hash`` of a tuple; checked once."""
    global _checked
    if _checked:
        return
    samples = [(0,), (3, 1, 2), (-1, 0, 7), (2**62 + 5, -(2**63), 2**61 - 1, -(2**61)), (12, 12, 12, 12, 12)]
    first = torch.tensor([s[0] for s in samples])
    rest = torch.tensor([v for s in samples for v in s[1:]], dtype=torch.long)
    owner = torch.tensor([i for i, s in enumerate(samples) for _ in s[1:]], dtype=torch.long)
    got = tuple_hashes(first, rest, owner).tolist()
    if sys.hash_info.width != 64 or got != [hash(s) for s in samples]:
        raise RuntimeError("WLConv reproduces CPython's 64-bit tuple hash (PyG numbers its colours by it), but this "
                           f"interpreter ({sys.implementation.name} {sys.version.split()[0]}, hash width "
                           f"{sys.hash_info.width}) hashes tuples differently")
    _checked = True


class WLConv(torch.nn.Module):
    r"""The Weisfeiler-Lehman operator from the `"A Reduction of a Graph to a Canonical Form and an
    Algebra Arising During this Reduction"
    <https://www.iti.zcu.cz/wl2018/pdf/wl_paper_translation.pdf>`_ paper: one round of colour
    refinement,

    .. math::
        \mathbf{x}^{\prime}_i = \textrm{hash} \left( \mathbf{x}_i, \{\!\{
        \mathbf{x}_j \colon j \in \mathcal{N}(i) \}\!\} \right)

    where the multiset of neighbour colours is taken in sorted order and each distinct hash gets
    the next free integer colour (``hashmap``, kept across calls, so several graphs refined by one
    layer share one palette). The colours equal PyG's (see the module docstring for how). No
    gradients: the output is integers.

    :meth:`histogram` counts the colours of each graph of a batch.

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` (``edge_index`` a tensor, a
          ``SparseTensor`` or a torch sparse ``adj_t``; values ignored, repeated edges counted);
          node colours :math:`(|\mathcal{V}|)` (int64) or one-hot :math:`(|\mathcal{V}|, C)`
        - **output:** node colours :math:`(|\mathcal{V}|)` (int64)
    """

    def __init__(self):
        super().__init__()
        self.hashmap: dict[int, int] = {}
        self._mirror: tuple | None = None   # (the dict it mirrors, its length, sorted keys, their colours)

    def reset_parameters(self) -> None:
        """Forget every colour (a new, empty ``hashmap``)."""
        self.hashmap = {}
        self._mirror = None

    @torch.no_grad()
    def forward(self, x: Tensor | Any, edge_index: Any) -> Tensor:
        who = "WLConv"
        if isinstance(x, (tuple, list)) or isinstance(edge_index, (tuple, list)):
            raise TypeError(f"{who} expects node colours as one tensor (one colour per node of one graph), not a "
                            "(source, destination) pair")
        call = resolve(who, x, edge_index, values="edge_attr")   # (every stored entry one edge, nothing merged)
        g, x = call.graph, call.x
        colours = _colours(who, x)
        if g.is_bipartite or g.num_src_nodes != colours.shape[0]:
            raise ValueError(f"{who} refines the colours of one graph: it needs one colour per node and a square "
                             f"adjacency, got {colours.shape[0]} colours and a graph of {g.num_src_nodes} source and "
                             f"{g.num_dst_nodes} destination nodes")
        _check_interpreter()
        # neighbour colours grouped by destination, ascending within each group (two stable sorts)
        neighbour = colours.index_select(0, g.src)
        by_colour = torch.argsort(neighbour, stable=True)
        order = by_colour[torch.argsort(g.dst[by_colour], stable=True)]
        hashes = tuple_hashes(colours, neighbour[order], g.dst[order])
        return self._palette(hashes)

    def _palette(self, hashes: Tensor) -> Tensor:
        """The colour of every hash: its ``hashmap`` entry, or the next free colour, numbered in the
        order the nodes first show the new hashes (as PyG's loop over the nodes does)."""
        keys, values = self._sorted_hashmap(hashes.device)
        unique, inverse = torch.unique(hashes, return_inverse=True)
        slot = torch.searchsorted(keys, unique).clamp(max=max(keys.numel() - 1, 0))
        known = keys[slot] == unique if keys.numel() else torch.zeros_like(unique, dtype=torch.bool)
        node = torch.arange(hashes.numel(), device=hashes.device)
        first = torch.full_like(unique, hashes.numel()).scatter_reduce(0, inverse, node, "amin")
        new = (~known).nonzero().squeeze(1)
        new = new[torch.argsort(first[new])]
        palette = torch.where(known, values[slot] if keys.numel() else unique, unique)
        palette[new] = torch.arange(len(self.hashmap), len(self.hashmap) + new.numel(), device=hashes.device)
        if new.numel():
            self.hashmap.update(zip(unique[new].tolist(), palette[new].tolist()))
            merged_keys, merged_values = torch.cat([keys, unique[new]]), torch.cat([values, palette[new]])
            sort = torch.argsort(merged_keys)
            self._mirror = (self.hashmap, len(self.hashmap), merged_keys[sort], merged_values[sort])
        return palette[inverse]

    def _sorted_hashmap(self, device: torch.device) -> tuple[Tensor, Tensor]:
        mirror = self._mirror
        if mirror is None or mirror[0] is not self.hashmap or mirror[1] != len(self.hashmap):
            keys = torch.tensor(list(self.hashmap.keys()), dtype=torch.long)
            values = torch.tensor(list(self.hashmap.values()), dtype=torch.long)
            sort = torch.argsort(keys)
            mirror = self._mirror = (self.hashmap, len(self.hashmap), keys[sort], values[sort])
        if mirror[2].device != device:
            mirror = self._mirror = mirror[:2] + (mirror[2].to(device), mirror[3].to(device))
        return mirror[2], mirror[3]

    def histogram(self, x: Tensor, batch: Tensor | None = None, norm: bool = False) -> Tensor:
        """``[num_graphs, num_colours]``: how many nodes of each graph (``batch``, the graph of
        every node; one graph if None) have each colour of ``hashmap``; ``norm=True`` divides each
        row by its Euclidean norm (float32, as PyG)."""
        if not isinstance(x, Tensor) or x.dim() != 1 or x.dtype != torch.long:
            raise TypeError(f"WLConv.histogram expects colours as a 1-D int64 tensor, got "
                            f"{x.dtype if isinstance(x, Tensor) else type(x).__name__}")
        num_colours = len(self.hashmap)
        if x.numel() and (int(x.min()) < 0 or int(x.max()) >= num_colours):
            raise ValueError(f"WLConv.histogram: colours must be in [0, {num_colours}) (the hashmap's colours), got "
                             f"values in [{int(x.min())}, {int(x.max())}]")
        if batch is None:
            batch = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        if not isinstance(batch, Tensor) or batch.shape != x.shape or batch.dtype != torch.long:
            raise ValueError("WLConv.histogram expects batch as an int64 tensor with one graph id per colour")
        if batch.numel() and int(batch.min()) < 0:
            raise ValueError(f"WLConv.histogram: batch ids must be >= 0, got {int(batch.min())}")
        num_graphs = int(batch.max()) + 1 if batch.numel() else 0
        counts = torch.bincount(batch * num_colours + x, minlength=num_graphs * num_colours)
        out = counts.view(num_graphs, num_colours)
        if norm:
            out = out.to(torch.float)
            out = out / out.norm(dim=-1, keepdim=True)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _colours(who: str, x: Any) -> Tensor:
    """Integer colours from ``x``: int64 as given, or the column of the one in each one-hot row."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{who} expects node colours as one tensor, got {type(x).__name__}")
    if x.dim() > 1:
        if x.dim() != 2 or not bool(((x.sum(dim=-1) == 1) & ((x == 0) | (x == 1)).all(dim=-1)).all()):
            raise ValueError(f"{who} expects colours as int64 [num_nodes] or one-hot rows [num_nodes, C] (a single "
                             f"1 per row), got a tensor of shape {list(x.shape)} that is not one-hot")
        return x.argmax(dim=-1)
    if x.dtype != torch.long:
        raise TypeError(f"{who} expects integer colours of dtype int64 (or one-hot rows), got {x.dtype}")
    return x
