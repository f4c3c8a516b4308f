"""The calling conventions every layer accepts, normalized in one place.

A layer's ``forward(a, b, ...)`` takes either

- **the graph form** ``conv(g, x)``: ``g`` a :class:`unigraph.Graph`, a DGL graph or block
  (homogeneous), or a PyG ``Data``/``Batch`` (its ``edge_index`` and ``num_nodes``); or
- **PyG's form** ``conv(x, edge_index)``: ``edge_index`` a ``[2, E]`` integer tensor (row 0 the
  sources, row 1 the destinations), a torch-sparse ``SparseTensor`` or a torch sparse adjacency
  (COO/CSR/CSC). Both sparse kinds follow PyG's ``adj_t`` convention: entry ``[dst, src]`` is the
  edge ``src -> dst``, of shape ``[num_dst, num_src]``; its values are the edge weights of layers
  that take ``edge_weight`` and are ignored by the others, as in PyG. ``size=(num_src, num_dst)``
  sets the node counts; otherwise they come from ``x`` (``x.size(0)``, or the rows of a
  ``(x_src, x_dst)`` pair, which makes the graph bipartite).

:func:`resolve` turns either into a :class:`Call` holding a ``Graph``; the layers never see the
other forms. Converted *structures* are cached per adjacency object, keyed on its identity and,
for each of its index tensors (``edge_index``; a ``SparseTensor``'s ``rowptr`` and ``col``; a
torch sparse matrix's indices), the in-place version counter, storage address and shape; a hit
also re-reads ``PROBES`` evenly spaced entries of each index tensor (all of them in a graph of at
most ``PROBES`` edges) and compares them with those it was built from, which catches a buffer
rewritten behind the version counter. A DGL graph is keyed on its structure object, which DGL
replaces when edges are added or removed. Values (edge weights, relation ids) are never cached:
they are read from the adjacency on every call, so ``SparseTensor.set_value_`` and any write to
them is seen. So a full-batch loop converts once, and an index tensor changed in place is
converted again. The cache holds weak references to the adjacency and at most ``CACHE_SIZE``
graphs, so it keeps nothing alive. Inference-mode tensors have no version counter: they are
converted on every call. The same ``Graph`` object comes back on a hit, so everything cached on
it (formats, self-loops, GCN's normalization) is reused too. What this cannot see is listed in
docs/call_forms.md ("What the fast paths assume").

Everything that is not one of these forms is refused with a ``TypeError``/``ValueError`` naming the
accepted forms, before any kernel runs.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import weakref
from typing import Any

import torch
from torch import Tensor

from unigraph.convert import sparse_entries
from unigraph.graph import Graph
from unigraph.ops import native_lane

FORMS = ("conv(g, x) with g a unigraph.Graph, a DGL graph or a PyG Data/Batch; "
         "conv(x, edge_index) with edge_index a [2, E] integer tensor, a torch_sparse.SparseTensor "
         "or a torch sparse adjacency adj_t[dst, src]")
CACHE_SIZE = 32
_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc)


@dataclasses.dataclass(frozen=True)
class Call:
    """One layer call in the graph form: the graph, the node features, the edge weights (given, or
    the sparse adjacency's values), and how the caller passed the graph (to answer in kind)."""
    graph: Graph
    x: Any
    edge_weight: Tensor | None
    form: str          # "graph", "edge_index", "sparse_tensor" or "torch_sparse"
    adjacency: Any     # what the caller passed as the graph
    edge_attr: Tensor | None = None  # a sparse adjacency's values, with values="edge_attr"

    def attention_result(self, out: Tensor, graph: Graph, alpha: Tensor):
        """``out`` with the attention weights, in PyG's return form for the caller's form:
        ``(out, (edge_index, alpha))`` for a Graph/DGL/PyG object or an edge_index tensor,
        ``(out, adj)`` with ``alpha`` as the values of a ``SparseTensor`` input, and
        ``(out, (adj, alpha))`` for a torch sparse adjacency (``alpha`` in ``adj``'s order).
        ``graph`` is the graph the attention ran on (with its self-loops)."""
        if self.form == "sparse_tensor":
            from torch_sparse import SparseTensor
            return out, SparseTensor(row=graph.dst, col=graph.src, value=alpha,
                                     sparse_sizes=(graph.num_dst_nodes, graph.num_src_nodes))
        if self.form == "torch_sparse":
            # the edges are unique (an adjacency cannot hold multi-edges), so coalescing only sorts
            adj = torch.sparse_coo_tensor(torch.stack([graph.dst, graph.src]), alpha,
                                          (graph.num_dst_nodes, graph.num_src_nodes) + tuple(alpha.shape[1:]))
            adj = adj.coalesce()
            return out, (adj, adj.values())
        return out, (graph.edge_index, alpha)


def resolve(who: str, first: Any, second: Any, *, size: Any = None, edge_weight: Tensor | None = None,
            edge_attr: Tensor | None = None, values: str = "edge_weight") -> Call:
    """The :class:`Call` for ``layer(first, second, ..., size=size, edge_weight=edge_weight)``;
    ``edge_attr`` is only checked (a sparse adjacency has no edge order for it). ``values`` says what
    a sparse adjacency's values are: ``"edge_weight"`` (one float per edge, duplicates summed) or
    ``"edge_type"`` (one relation id per edge, in the adjacency's storage order, nothing merged);
    they come back as ``Call.edge_weight``; or ``"edge_attr"`` (edge features, one row per stored
    entry in storage order, nothing merged, as PyG reads a ``SparseTensor``'s values for layers that
    take ``edge_attr``): they come back as ``Call.edge_attr``. A PyG ``EdgeIndex`` is an
    ``edge_index`` whose ``sparse_size`` (when set) gives ``size``."""
    if (size is None and type(first) is Tensor and type(second) is Tensor and first.dim()
            and second.dim() == 2 and second.shape[0] == 2 and second.layout == torch.strided
            and not second.is_floating_point()):
        # PyG's conv(x, edge_index), the form of nearly every call (a new edge_index every
        # mini-batch): what the general path below concludes for it, without its recognition steps
        n = first.shape[0]
        return Call(_edge_index_graph(who, second, (n, n), False), first, edge_weight, "edge_index", second)
    if _is_graph_object(first):
        if size is not None:
            raise ValueError(f"{who}: size={size!r} belongs to the conv(x, edge_index) form; a graph object "
                             "carries its own node counts")
        if _is_sparse_tensor(second):  # (a torch sparse tensor here is sparse node features)
            raise TypeError(f"{who} got a graph and then an adjacency ({_describe(second)}); accepted forms: {FORMS}")
        return Call(_graph_of(who, first), second, edge_weight, "graph", first)
    if _is_adjacency(second):
        _check_features(who, first)
        adjacency, size = _edge_index_size(who, second, size)
        graph, weights, form = _from_adjacency(who, first, adjacency, size, values)
        if edge_attr is not None and form != "edge_index":
            raise ValueError(f"{who} got edge_attr with a sparse adjacency, whose edges have no order the rows of "
                             "edge_attr could follow; pass edge_index as a [2, E] tensor (rows in its column order)")
        if values == "edge_attr":
            return Call(graph, first, edge_weight, form, second, weights)
        if weights is not None and edge_weight is not None:
            raise ValueError(f"{who} got edge weights twice: as edge_weight and as the values of the sparse "
                             "adjacency; pass one")
        return Call(graph, first, edge_weight if edge_weight is not None else weights, form, second)
    raise TypeError(f"{who} cannot read its arguments ({_describe(first)}, {_describe(second)}){_hint(first, second)}; "
                    f"accepted forms: {FORMS}")


# ---------------------------------------------------------------------- recognizing the forms
def _is_dgl_graph(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "dgl" and hasattr(obj, "num_src_nodes")


def _is_pyg_data(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "torch_geometric" and hasattr(obj, "edge_index")


def _is_graph_object(obj: Any) -> bool:
    if isinstance(obj, (Tensor, tuple, list)):  # features; also: dynamo cannot read a builtin type's __module__
        return False
    return isinstance(obj, Graph) or _is_dgl_graph(obj) or _is_pyg_data(obj)


def is_graph_object(obj: Any) -> bool:
    """Whether ``obj`` is a graph the graph form ``conv(g, x)`` takes (Graph, DGL graph, PyG Data)."""
    return _is_graph_object(obj)


def _edge_index_size(who: str, adj: Any, size: Any) -> tuple[Any, Any]:
    """A PyG ``EdgeIndex`` as a plain tensor, its ``sparse_size`` (when complete) as ``size``."""
    if not (type(adj).__name__ == "EdgeIndex" and type(adj).__module__.split(".")[0] == "torch_geometric"):
        return adj, size
    rows, cols = adj.sparse_size()
    if rows is not None and cols is not None:
        if size is not None and tuple(size) != (rows, cols):
            raise ValueError(f"{who}: size={tuple(size)} contradicts the EdgeIndex's sparse_size {(rows, cols)}")
        size = (rows, cols)
    return adj.as_tensor(), size


def _is_sparse_tensor(obj: Any) -> bool:
    return type(obj).__name__ == "SparseTensor" and type(obj).__module__.split(".")[0] == "torch_sparse"


def _is_adjacency(obj: Any) -> bool:
    if _is_sparse_tensor(obj):
        return True
    return isinstance(obj, Tensor) and (obj.layout in _SPARSE_LAYOUTS or (obj.dim() == 2 and obj.shape[0] == 2
                                                                          and not obj.is_floating_point()))


def is_sparse_adjacency(obj: Any) -> bool:
    """Whether ``obj`` is a ``SparseTensor`` or a torch sparse (COO/CSR/CSC) tensor."""
    return _is_sparse_tensor(obj) or (isinstance(obj, Tensor) and obj.layout in _SPARSE_LAYOUTS)


def _describe(obj: Any) -> str:
    if isinstance(obj, Tensor):
        layout = "" if obj.layout == torch.strided else f", {obj.layout}"
        return f"Tensor of shape {list(obj.shape)}, {obj.dtype}{layout}"
    if isinstance(obj, (tuple, list)):
        return f"{type(obj).__name__} of ({', '.join(_describe(item) for item in obj)})"
    return type(obj).__name__


def _hint(first: Any, second: Any) -> str:
    """Why the arguments were refused, where a likely mistake can be named."""
    if _is_adjacency(first) or _is_graph_object(second):
        return ": the graph and the features look swapped"
    if isinstance(second, Tensor) and second.layout == torch.strided:
        if second.is_floating_point() and second.dim() == 2 and second.shape[0] == 2:
            return f": edge_index must be an integer tensor, got {second.dtype}"
        if not second.is_floating_point():
            hint = " (it looks transposed: pass edge_index.t())" if second.dim() == 2 and second.shape[1] == 2 else ""
            return f": edge_index must have shape [2, E], got {list(second.shape)}{hint}"
    return ""


def _check_features(who: str, x: Any) -> None:
    items = x if isinstance(x, (tuple, list)) else (x,)
    if isinstance(x, (tuple, list)) and len(x) != 2:
        raise ValueError(f"{who}: x must be one tensor or a (source, destination) pair, got a sequence of {len(x)}")
    for i, item in enumerate(items):
        if item is None and i == 1:
            continue
        if not isinstance(item, Tensor):
            raise TypeError(f"{who}: node features must be tensors, got {_describe(x)}; accepted forms: {FORMS}")


# ---------------------------------------------------------------------- the cache
_CACHE: collections.OrderedDict = collections.OrderedDict()


def _cached(obj: Any, stamp: Any, key: tuple, build, probed: tuple = (), seen=None) -> Any:
    """``build()`` cached under ``(id(obj),) + key`` while ``obj`` is alive, its ``stamp`` is
    unchanged and the sampled entries of its ``probed`` index tensors read as when it was built;
    ``stamp`` None means it cannot be tracked: no caching. ``seen(value, probed)``, where given,
    reads those entries as they were at the build from the built value itself, at the first hit
    (see :func:`_edge_index_graph`), instead of reading them at every build."""
    return _cached_all((obj,), stamp, key, build, probed, seen)


def _cached_all(objs: tuple, stamp: Any, key: tuple, build, probed: tuple = (), seen=None) -> Any:
    """:func:`_cached` for a value built from several objects (a dict of adjacencies): it hits only
    while every one of them is alive, the same object, ``stamp`` is unchanged and the probes match."""
    if stamp is None:
        return build()
    full_key = tuple(map(id, objs)) + key
    entry = _CACHE.get(full_key)
    if entry is not None and _alive(entry[0], objs) and entry[1] == stamp:
        if entry[3] is None:
            entry[3] = seen(entry[2], probed)
        if _probes_match(entry[3], probed):
            _CACHE.move_to_end(full_key)
            return entry[2]
    value = build()
    # the weak references' callbacks drop the entry as soon as one object dies (so a reused id cannot hit)
    drop = lambda _, k=full_key: _CACHE.pop(k, None)   # noqa: E731
    refs = tuple([weakref.ref(obj, drop) for obj in objs])
    _CACHE[full_key] = [refs, stamp, value, None if seen is not None else _probes(probed)]
    _CACHE.move_to_end(full_key)
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


def _alive(refs: tuple, objs: tuple) -> bool:
    """Every weak reference still points at its object (the same one, not a reuse of its id)."""
    for ref, obj in zip(refs, objs):
        if ref() is not obj:
            return False
    return True


def clear_cache() -> None:
    _CACHE.clear()


def _stamp(*tensors: Tensor) -> tuple | None:
    """What a hit re-checks of an adjacency's index tensors, besides the probes: each one's in-place
    version, storage address and shape (a ``.data =`` or ``set_`` swap moves the address). None for
    inference tensors (no version counter): then nothing is cached. None while torch.compile traces
    (no trace reads versions, storage addresses or ids): the compiled program builds the graph
    itself on every call (unigraph.traced_structure)."""
    if torch.compiler.is_compiling():
        return None
    stamp = []
    for t in tensors:   # (loops, not generators, here and in _cached_all: a new graph every batch reads them)
        if t.is_inference():
            return None
        stamp.append((t._version, t.data_ptr(), tuple(t.shape)))
    return tuple(stamp)


# Writes that bypass the version counter (``.data``, ``.numpy()``, DLPack, ``untyped_storage()``)
# change no stamp. Reading every index on every call would cost as much as a layer's own pass over
# the edges, so a hit re-reads PROBES entries of each index tensor, evenly spaced along its last
# dimension, and compares them with those read when the entry was built: every entry of a graph
# with at most PROBES edges (exact there), and a rewritten buffer (a loader copying the next batch
# in) in bigger ones. A write to a few entries of a bigger graph between the probes is not seen.
PROBES = 512


def _positions(t: Tensor) -> Tensor:
    """The probed entries of ``t`` as ``torch.take`` indexes it (row-major, whatever the strides)."""
    return _positions_of(t.numel(), t.shape[-1], t.device)


@functools.lru_cache(maxsize=64)
def _positions_of(numel: int, length: int, device: torch.device) -> Tensor:
    """:func:`_positions` for a shape: the same for every batch of one size, so kept (~40 us of
    small torch calls per new graph on the 2-core machine; only ``torch.take`` reads it)."""
    with torch.inference_mode(False):  # kept across calls: a normal tensor whatever mode asked first
        at = torch.arange(min(length, PROBES), device=device)
        if length > PROBES:
            at = at * (length - 1) // (PROBES - 1)
        rows = numel // length if length else 0
        return (torch.arange(rows, device=device)[:, None] * length + at).reshape(-1)


def _probes(tensors: tuple) -> tuple:
    """``(positions, entries there)`` of each index tensor, read now."""
    if torch.compiler.is_compiling():
        return ()
    return tuple((at, torch.take(t, at)) for t in tensors for at in (_positions(t),))


def _probes_match(probes: tuple, tensors: tuple) -> bool:
    return not probes or all(torch.equal(torch.take(t, at), seen) for (at, seen), t in zip(probes, tensors))


# ---------------------------------------------------------------------- conversions
def _graph_of(who: str, obj: Any) -> Graph:
    if isinstance(obj, Graph):
        return obj
    if _is_dgl_graph(obj):
        # DGL replaces its structure object (g._graph) when edges are added or removed
        structure = getattr(obj, "_graph", None)
        # the entry holds the structure object, so its id stays its own while cached
        stamp = (id(structure), obj.num_src_nodes(), obj.num_dst_nodes(), obj.num_edges())
        entry = _cached(obj, stamp if structure is not None else None, ("dgl",),
                        lambda: (structure, _structure_of_dgl(obj)))
        return entry[1]
    edge_index, num_nodes = obj.edge_index, obj.num_nodes
    if edge_index is None:
        raise ValueError(f"{who} got a {type(obj).__name__} without edge_index")
    return _edge_index_graph(who, edge_index, (num_nodes, num_nodes), False)


def _structure_of_dgl(dgl_graph: Any) -> Graph:
    src, dst = dgl_graph.edges(order="eid")
    edge_index = torch.stack([src, dst]).to(torch.int64)
    if dgl_graph.is_block:
        return Graph(edge_index, num_src_nodes=dgl_graph.num_src_nodes(), num_dst_nodes=dgl_graph.num_dst_nodes())
    if len(dgl_graph.canonical_etypes) != 1:
        raise ValueError(f"a layer takes a DGL graph with one edge type, got {dgl_graph.canonical_etypes}; use "
                         "unigraph.HeteroGraph.from_dgl and a heterogeneous layer")
    return Graph(edge_index, num_nodes=dgl_graph.num_nodes())


def _node_counts(who: str, x: Any, size: Any) -> tuple[tuple[int, int], bool]:
    """``((num_src, num_dst), bipartite)`` from ``size`` or the features, as PyG infers them."""
    pair = isinstance(x, (tuple, list))
    if size is not None:
        if (not isinstance(size, (tuple, list)) or len(size) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in size)):
            raise ValueError(f"{who}: size must be a pair (num_src_nodes, num_dst_nodes) of ints >= 0, got {size!r}")
        return (size[0], size[1]), pair or size[0] != size[1]
    if pair:
        x_src, x_dst = x
        return (x_src.shape[0], x_dst.shape[0] if x_dst is not None else x_src.shape[0]), True
    if x.dim() == 0:
        raise ValueError(f"{who}: node features must have one row per node, got a scalar")
    return (x.shape[0], x.shape[0]), False


def _from_adjacency(who: str, x: Any, adj: Any, size: Any, values: str = "edge_weight"
                    ) -> tuple[Graph, Tensor | None, str]:
    if _is_sparse_tensor(adj):
        return _from_sparse_tensor(who, x, adj, size, values)
    if adj.layout in _SPARSE_LAYOUTS:
        return _from_torch_sparse(who, x, adj, size, values)
    counts, bipartite = _node_counts(who, x, size)
    return _edge_index_graph(who, adj, counts, bipartite), None, "edge_index"


def propagate_structure(who: str, adj: Any, counts: tuple[int, int]) -> tuple[Graph, Tensor | None]:
    """``(graph, values)`` for ``MessagePassing.propagate``'s first argument in PyG's forms, through
    the cache above: an ``edge_index`` (a ``[2, E]`` integer tensor or ``EdgeIndex``) with
    ``counts`` = (nodes its row 0 indexes, nodes its row 1 indexes), bipartite where they differ;
    or a ``SparseTensor`` / torch sparse ``adj_t`` (its shape gives the counts), whose values come
    back one per stored entry in storage order, the graph's edge order (PyG hands them to
    ``message`` as they are stored, nothing merged). ``values`` is None for an ``edge_index``."""
    if type(adj) is Tensor and adj.layout == torch.strided:   # (the common case, first: every call reads it)
        return _edge_index_graph(who, adj, counts, counts[0] != counts[1]), None
    if is_sparse_adjacency(adj):
        graph, values, _ = _from_adjacency(who, None, adj, None, "edge_attr")
        return graph, values
    adj, _ = _edge_index_size(who, adj, None)   # an EdgeIndex as its plain tensor
    return _edge_index_graph(who, adj, counts, counts[0] != counts[1]), None


def _edge_index_graph(who: str, edge_index: Tensor, counts: tuple[int, int], bipartite: bool) -> Graph:
    return _cached(edge_index, _stamp(edge_index), ("edge_index", counts, bipartite),
                   lambda: _new_graph(who, edge_index, counts, bipartite), (edge_index,), _entries_at_build)


def _entries_at_build(graph: Graph, probed: tuple) -> tuple:
    """:func:`_probes` of ``edge_index`` (``probed``) as it read when ``graph`` was built from it:
    read from the graph's own copy of its rows (``Graph`` copies and checks the indices it is given
    and refuses any later change of that copy), so a new ``edge_index`` every batch, never seen
    again, costs no probe (~8 us of a layer's call on a PyG batch of small graphs, 2-core machine).
    ``torch.take`` reads ``[2, E]`` row-major: the source row's probed columns, then the same
    columns of the destination row (:func:`_positions_of`)."""
    (edge_index,) = probed
    at = _positions(edge_index)
    columns = at[:at.numel() // 2]
    src, dst = graph._coo()
    return ((at, torch.cat([src.index_select(0, columns), dst.index_select(0, columns)]).to(edge_index.dtype)),)


def _new_graph(who: str, edge_index: Tensor, counts: tuple[int, int], bipartite: bool) -> Graph:
    try:
        edges = edge_index.shape[-1] if isinstance(edge_index, Tensor) and edge_index.dim() else 0
        avoid = native_lane.may_avoid_csr(edges, edge_index.device)
        if avoid != "scatter":  # the first call builds both CSRs (or, small, the in-degrees): in the pass that checks
            return Graph._with_formats(edge_index, counts[0], counts[1], bipartite, csr=avoid is None)
        if bipartite:
            return Graph(edge_index, num_src_nodes=counts[0], num_dst_nodes=counts[1])
        return Graph(edge_index, num_nodes=counts[0])
    except (TypeError, ValueError) as err:  # the Graph names the problem; say who was called
        raise type(err)(f"{who}: {err}") from None


def _adjacency_counts(who: str, x: Any, shape: tuple[int, int], size: Any) -> tuple[tuple[int, int], bool]:
    num_dst, num_src = shape
    if size is not None and tuple(size) != (num_src, num_dst):
        raise ValueError(f"{who}: size={tuple(size)} contradicts the sparse adjacency adj_t of shape "
                         f"[{num_dst}, {num_src}] (= [num_dst_nodes, num_src_nodes])")
    return (num_src, num_dst), isinstance(x, (tuple, list)) or num_src != num_dst


def _from_sparse_tensor(who: str, x: Any, adj: Any, size: Any, values: str = "edge_weight"
                        ) -> tuple[Graph, Tensor | None, str]:
    counts, bipartite = _adjacency_counts(who, x, tuple(adj.sizes())[:2], size)
    storage = adj.storage
    index = (storage.rowptr(), storage.col())
    # the structure is cached; the values are read on every call (``set_value_`` puts in a new tensor)
    graph = _cached(adj, _stamp(*index), ("sparse_tensor", counts, bipartite),
                    lambda: _new_graph(who, torch.stack([storage.col(), storage.row()]), counts, bipartite), index)
    return graph, _values(who, storage.value(), values), "sparse_tensor"


def _from_torch_sparse(who: str, x: Any, adj: Tensor, size: Any, values: str = "edge_weight"
                       ) -> tuple[Graph, Tensor | None, str]:
    if adj.sparse_dim() != 2 or (adj.dense_dim() != 0 and values != "edge_attr"):
        raise ValueError(f"{who}: a sparse adjacency must be a 2-D matrix adj_t[dst, src] with scalar values, got "
                         f"shape {list(adj.shape)}")
    counts, bipartite = _adjacency_counts(who, x, tuple(adj.shape[:2]), size)
    as_stored = values in ("edge_type", "edge_attr")  # ids or features: never summed, so read as stored
    if adj.requires_grad:  # weights with a history: converted (differentiably) on every call
        if as_stored:
            dst, src, value = sparse_entries(adj)
            return _new_graph(who, torch.stack([src, dst]), counts, bipartite), _values(who, value, values), \
                "torch_sparse"
        coo = (adj if adj.layout == torch.sparse_coo else adj.to_sparse_coo()).coalesce()
        dst, src = coo.indices()
        return _new_graph(who, torch.stack([src, dst]), counts, bipartite), _weights(who, coo.values()), "torch_sparse"
    # the structure (and where each stored entry goes) is cached; the values are read on every call
    index = _index_tensors(adj)
    stamp = _stamp(*index)
    graph, slot = _cached(adj, stamp if stamp is None else stamp + (adj._version,),
                          ("torch_sparse", counts, bipartite, values),
                          lambda: _torch_sparse_structure(who, adj, counts, bipartite, values), index)
    value = adj._values() if adj.layout == torch.sparse_coo else adj.values()
    if as_stored:
        return graph, _values(who, value, values), "torch_sparse"
    if slot is not None:  # duplicates summed, entries in (dst, src) order, as coalesce() does
        value = value.new_zeros(graph.num_edges).index_add_(0, slot, value)
    return graph, _weights(who, value), "torch_sparse"


def _torch_sparse_structure(who: str, adj: Tensor, counts: tuple[int, int], bipartite: bool,
                            values: str) -> tuple[Graph, Tensor | None]:
    """The graph of a torch sparse adjacency and ``slot``: the edge each stored entry is summed
    into, or None when that is the entry's own position (coalesced storage in (dst, src) order:
    a coalesced COO or a CSR without duplicates). Relation ids keep the storage order (slot None)."""
    dst, src, _ = sparse_entries(adj)
    if values in ("edge_type", "edge_attr"):
        return _new_graph(who, torch.stack([src, dst]), counts, bipartite), None
    keys, slot = torch.unique(dst * counts[0] + src, sorted=True, return_inverse=True)
    edges = torch.stack([keys % counts[0], keys // counts[0]]) if counts[0] else torch.stack([src, dst])
    identity = slot.numel() == keys.numel() and bool((slot == torch.arange(slot.numel(), device=slot.device)).all())
    return _new_graph(who, edges, counts, bipartite), None if identity else slot


def _index_tensors(adj: Any) -> tuple:
    """The tensors that hold an adjacency's structure (what a cache hit re-checks)."""
    if _is_sparse_tensor(adj):
        return adj.storage.rowptr(), adj.storage.col()
    if isinstance(adj, Tensor) and adj.layout == torch.sparse_coo:
        return (adj._indices(),)
    if isinstance(adj, Tensor) and adj.layout == torch.sparse_csr:
        return adj.crow_indices(), adj.col_indices()
    if isinstance(adj, Tensor) and adj.layout == torch.sparse_csc:
        return adj.ccol_indices(), adj.row_indices()
    return (adj,)


def _values(who: str, value: Tensor | None, kind: str) -> Tensor | None:
    if kind == "edge_weight":
        return _weights(who, value)
    if kind == "edge_attr":
        return value
    if value is None:
        raise ValueError(f"{who}: a sparse adjacency given without edge_type must hold the relation id of each edge "
                         "as its values (PyG's SparseTensor form); this one has no values")
    if value.dim() != 1 or value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise ValueError(f"{who}: the sparse adjacency's values must be one integer relation id per edge, got "
                         f"shape {list(value.shape)}, {value.dtype}")
    return value


def _weights(who: str, value: Tensor | None) -> Tensor | None:
    if value is None:
        return None
    if value.dim() != 1 or not value.is_floating_point():
        raise ValueError(f"{who}: the sparse adjacency's values must be one float per edge (edge weights), got "
                         f"shape {list(value.shape)}, {value.dtype}")
    return value


# ---------------------------------------------------------------------- relation ids (R-GCN)
def resolve_typed(who: str, first: Any, second: Any, edge_type: Any) -> tuple[Graph, Any, Any]:
    """``(graph, x, edge_type)`` for R-GCN's forms: ``conv(g, x, edge_type)`` (any graph object),
    ``conv(x, edge_index, edge_type)``, and ``conv(x, adj_t)`` with the relation ids as the values
    of a ``SparseTensor`` (PyG's form) or of a torch sparse adjacency (in its storage order).
    ``edge_type`` beside a sparse adjacency is refused: which id belongs to which entry would be a
    guess. ``edge_type`` itself is checked by the layer."""
    call = resolve(who, first, second, values="edge_type")
    if call.form in ("sparse_tensor", "torch_sparse"):
        if edge_type is not None:
            raise ValueError(f"{who} got edge_type and a sparse adjacency, whose values are the relation ids; pass "
                             "the ids as the adjacency's values, or edge_index as a [2, E] tensor with edge_type")
        edge_type = call.edge_weight
    return call.graph, call.x, edge_type
