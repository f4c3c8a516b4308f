"""The core :class:`Graph`: a validated edge list with lazily cached formats, degree statistics and
feature stores.

It imports nothing above it (the ops, message passing, the converters and the DGL face all import
it). ``unigraph.Graph``, the class users construct, is a subclass one floor up
(:mod:`unigraph.user_graph`) that adds DGL-style message passing and the conversions; DGL's graph
API is in :mod:`unigraph.dgl`. Transforms here build graphs of ``type(self)``, so a subclass's
graph stays one.
"""
from __future__ import annotations

from typing import Any, Iterator, MutableMapping

import torch
from torch import Tensor

from unigraph import graph_compat
from unigraph.graph_compat import count
from unigraph.group_reduce import group_reduce
from unigraph.self_loops import with_self_loops
from unigraph.structure import (DegreeStats, GraphTensors, build_both_csr, build_csr, check_index_range, checked_copies,
                                count_index, degree_stats, ingest_edge_index, ingest_edge_list, stats_from_degrees,
                                stats_from_moments)
from unigraph.structure import owned_index as _owned
from unigraph.traced_structure import traced_checked_copies, traced_csr


class FeatureStore(MutableMapping):
    """A dict of per-node or per-edge tensors that checks their first dimension on assignment."""

    def __init__(self, num_rows: int, what: str, rows_are: str):
        self._data: dict[str, Tensor] = {}
        self._num_rows = num_rows
        self._what = what
        self._rows_are = rows_are

    def __setitem__(self, key: str, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"{self._what}[{key!r}] must be a torch.Tensor, got {type(value).__name__}")
        if value.dim() == 0 or value.shape[0] != self._num_rows:
            got = "a scalar" if value.dim() == 0 else f"{value.shape[0]} rows"
            raise ValueError(
                f"{self._what}[{key!r}] has {got} but the graph has {self._num_rows} "
                f"{self._rows_are}; the first dimension must match")
        self._data[key] = value

    def __getitem__(self, key: str) -> Tensor:
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(f"{self._what} has no {key!r}; it holds {sorted(self._data)}") from None

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        shapes = {k: tuple(v.shape) for k, v in self._data.items()}
        return f"{self._what}({shapes})"

    def copy(self) -> "FeatureStore":
        """A new store for the same rows holding the same tensors (none is copied)."""
        out = FeatureStore(self._num_rows, self._what, self._rows_are)
        out._data = dict(self._data)
        return out


class GraphModifiedError(RuntimeError):
    """An index tensor of a :class:`Graph` (``g.src``, ``g.dst``, a cached CSR) was changed in
    place after the graph validated or built it: kernels would read indices nobody checked."""


_INT64_MAX = torch.iinfo(torch.int64).max


def _check_count(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, torch.SymInt):  # a size traced by torch.compile: checked when the compiled code runs
        torch._check(value >= 0, lambda: f"{name} must be >= 0")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, Tensor) and value.dim() == 0 and not value.is_floating_point() and value.dtype != torch.bool:
            value = int(value)
        else:
            raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    if value > _INT64_MAX:
        raise ValueError(f"{name} must fit in int64 (at most {_INT64_MAX}), got {value}")
    return int(value)  # a plain int, never a Count (see _init_unchecked)


def _plain(n: Any) -> Any:
    """``n`` as a plain ``int`` (a Count or another int subclass unwrapped); a SymInt as it is."""
    return int(n) if isinstance(n, int) and type(n) is not int else n


def _inferred_count(index: Tensor) -> int:
    """``max(index) + 1`` (0 without edges): a node count read from the indices."""
    if torch.compiler.is_compiling():
        raise RuntimeError("a Graph built inside torch.compile needs its node counts given (num_nodes, or "
                           "num_src_nodes and num_dst_nodes): inferring them reads the indices' values")
    return int(index.max()) + 1 if index.numel() else 0


def unique_pairs(first: Tensor, second: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The distinct ``(first[k], second[k])`` pairs sorted lexicographically, and for each input
    pair the position of its distinct pair. Sorting on the pair (two stable sorts) needs no key
    like ``first * n + second``, which overflows int64 once ``n`` exceeds about 3e9."""
    order = torch.sort(second, stable=True).indices
    order = order[torch.sort(first[order], stable=True).indices]
    first, second = first[order], second[order]
    starts = torch.ones(first.numel(), dtype=torch.bool, device=first.device)
    starts[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1])
    inverse = torch.empty_like(order)
    inverse[order] = torch.cumsum(starts, 0) - 1
    return first[starts], second[starts], inverse


def _check_integer(name: str, index: Tensor) -> None:
    if index.dtype == torch.bool or index.is_floating_point() or index.is_complex():
        raise TypeError(f"{name} must hold integers (int32 or int64), got {index.dtype}")


def _as_edge_index(edge_index: Any) -> Tensor:
    if not isinstance(edge_index, Tensor):
        try:
            edge_index = torch.as_tensor(edge_index)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"edge_index must be a tensor of shape [2, E], got {type(edge_index).__name__}: {err}") from None
        if edge_index.numel() == 0:  # [[], []] parses as float
            edge_index = edge_index.to(torch.int64)
    _check_integer("edge_index", edge_index)
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        hint = " (it looks transposed: pass edge_index.t())" if edge_index.dim() == 2 and edge_index.shape[1] == 2 else ""
        raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}{hint}")
    return edge_index


def _csr_num_src(num_src_nodes: int | None, indices: Tensor, num_dst: int, bipartite: bool) -> int:
    """Source nodes of a CSR graph: given, or ``num_dst`` (homogeneous), or ``max(indices) + 1``."""
    if num_src_nodes is None:
        num_src_nodes = num_dst if not bipartite else (int(indices.max()) + 1 if indices.numel() else 0)
    if not bipartite and num_src_nodes != num_dst:
        raise ValueError(f"a homogeneous graph needs num_src_nodes == num_dst_nodes, got {num_src_nodes} and "
                         f"{num_dst}; pass bipartite=True for a block")
    return num_src_nodes


class Graph:
    """A directed graph whose messages flow from ``edge_index[0]`` (source) to ``edge_index[1]``
    (destination), as in PyG.

    Args:
        edge_index: integer tensor of shape ``[2, E]`` (also accepts numpy arrays and nested lists).
        num_nodes: number of nodes of a homogeneous graph; inferred as ``max index + 1`` if omitted.
        num_src_nodes, num_dst_nodes: sizes of the two node sets of a bipartite graph (a sampled
            block, say). Giving either makes the graph bipartite; an omitted one is inferred from
            its row of ``edge_index``. By convention (as in DGL blocks) the first ``num_dst_nodes``
            source nodes are the destination nodes themselves.

    Raises ``TypeError`` for non-integer indices or sizes, ``ValueError`` for a wrong shape,
    negative or out-of-range indices, or sizes that contradict each other, before anything else.

    The graph owns its index tensors: it validates a copy of ``edge_index``, never a view of the
    caller's tensor. ``g.src``, ``g.dst`` and the cached formats are returned without copying, so
    the graph records their version counters when it validates or builds them; changing one in
    place afterwards makes the next operation on the graph raise :class:`GraphModifiedError`
    (an O(1) check in :meth:`tensors`, the formats and the transforms) instead of handing
    unchecked indices to a kernel. Clone them before changing them, and build a new graph.

    Structure formats (in-CSR, out-CSR, degree statistics) are built on first use and cached;
    call :meth:`prepare` to build them up front (needed for a graph passed to a compiled model).
    Node and edge features can ride along in :attr:`ndata` / :attr:`edata` (``srcdata`` /
    ``dstdata`` for bipartite graphs).
    """

    def __init__(self, edge_index: Any, num_nodes: int | None = None, *,
                 num_src_nodes: int | None = None, num_dst_nodes: int | None = None):
        edge_index = _as_edge_index(edge_index)
        num_nodes = _check_count("num_nodes", num_nodes)
        num_src_nodes = _check_count("num_src_nodes", num_src_nodes)
        num_dst_nodes = _check_count("num_dst_nodes", num_dst_nodes)
        bipartite = num_src_nodes is not None or num_dst_nodes is not None
        if bipartite and num_nodes is not None:
            raise ValueError("give either num_nodes (homogeneous graph) or num_src_nodes/num_dst_nodes "
                             f"(bipartite graph), not both (got num_nodes={num_nodes}, "
                             f"num_src_nodes={num_src_nodes}, num_dst_nodes={num_dst_nodes})")
        if bipartite:
            n_src = num_src_nodes if num_src_nodes is not None else _inferred_count(edge_index[0])
            n_dst = num_dst_nodes if num_dst_nodes is not None else _inferred_count(edge_index[1])
        else:
            n_src = n_dst = num_nodes if num_nodes is not None else max(_inferred_count(edge_index[0]),
                                                                        _inferred_count(edge_index[1]))
        # the graph's own copies, checked (inside a compiled program: by a custom operator when it runs)
        copies = traced_checked_copies if torch.compiler.is_compiling() else checked_copies
        src, dst = copies(edge_index, n_src, n_dst, bipartite)
        self._init_unchecked(src, dst, n_src, n_dst, bipartite)

    def _init_unchecked(self, src: Tensor, dst: Tensor, num_src: int, num_dst: int, bipartite: bool) -> None:
        # Built inside a torch.compile trace: its formats are built in the trace too
        # (unigraph.traced_structure) and kept on it; version counters are not traced (see _guard).
        self._built_in_trace = torch.compiler.is_compiling()
        if not self._built_in_trace and (src.is_inference() or dst.is_inference()):
            src, dst = _owned(src), _owned(dst)  # their version counters cannot be read: own copies
        self._src, self._dst = src, dst
        # index tensors the graph checked or built, and their version counters at that moment
        # (what _guard records; written out here: a new graph every batch builds these)
        traced = self._built_in_trace
        self._guarded_names: list[str] = [] if traced else ["src", "dst"]
        self._guarded: list[Tensor] = [] if traced else [src, dst]
        self._guarded_versions: list[int] = [] if traced else [src._version, dst._version]
        # Plain ints (or a trace's SymInts), never graph_compat.Count: torch.compile (2.13) compares a
        # SymInt with an int subclass as unequal whatever the values, so a stored Count made a traced
        # size check fail ("x has 30 rows but the graph has 30 nodes").
        num_src, num_dst = _plain(num_src), _plain(num_dst)
        self._num_src, self._num_dst = num_src, num_dst
        self.is_bipartite = bipartite
        self._cache: dict[str, Any] = {}
        self.srcdata = (FeatureStore(num_src, "srcdata", "source nodes") if bipartite
                        else FeatureStore(num_src, "ndata", "nodes"))
        self.dstdata = FeatureStore(num_dst, "dstdata", "destination nodes") if bipartite else self.srcdata
        self.edata = FeatureStore(src.numel(), "edata", "edges")

    @classmethod
    def _with_formats(cls, edge_index: Any, num_src: int, num_dst: int, bipartite: bool,
                      csr: bool = True) -> "Graph":
        """``Graph(edge_index, num_nodes=num_src)`` (``num_src_nodes`` and ``num_dst_nodes`` when
        ``bipartite``) with both CSRs and the degree statistics built in the same pass over the
        edges that copies and checks the indices (``structure.ingest_edge_index``), where that
        kernel runs; else exactly the plain constructor. For a layer given a new ``edge_index``
        (a mini-batch every step) on the CPU, whose first call builds both CSRs anyway
        (``stats``): one pass instead of three (7,500 edges: ~100 -> ~68 us with the statistics).
        ``csr=False``: no CSR, the in-degree counts instead (``structure.ingest_edge_list``), for a
        graph whose calls the small-graph rule takes (5,000 edges: ~45 -> ~10 us)."""
        if bipartite:
            plain = lambda: cls(edge_index, num_src_nodes=num_src, num_dst_nodes=num_dst)  # noqa: E731
        else:
            plain = lambda: cls(edge_index, num_nodes=num_src)  # noqa: E731
        if torch.compiler.is_compiling() or not isinstance(edge_index, Tensor) or (not bipartite and num_src != num_dst):
            return plain()
        edge_index = _as_edge_index(edge_index)
        n_src, n_dst = _check_count("num_src_nodes", num_src), _check_count("num_dst_nodes", num_dst)
        built = (ingest_edge_index if csr else ingest_edge_list)(edge_index, n_src, n_dst, bipartite)
        if built is None:
            return plain()
        src, dst, *formats = built
        graph = cls._trusted(src, dst, n_src, n_dst, bipartite)
        if csr:
            graph._keep_both_formats(*formats)
        else:
            graph._cache["in_degree_counts"] = formats[0]   # what in_degree_counts() would count
        return graph

    @classmethod
    def _trusted(cls, src: Tensor, dst: Tensor, num_src: int, num_dst: int, bipartite: bool) -> "Graph":
        """Build from indices already known to be valid int64 (internal transforms, samplers)."""
        graph = cls.__new__(cls)
        graph._init_unchecked(src, dst, num_src, num_dst, bipartite)
        return graph

    @classmethod
    def from_csr(cls, indptr: Tensor, indices: Tensor, num_src_nodes: int | None = None, *,
                 bipartite: bool = False, validate: bool = True, dst: Tensor | None = None,
                 edge_ids: Tensor | None = None) -> "Graph":
        """A graph from the compressed in-edges of each destination: the sources of destination
        ``v`` are ``indices[indptr[v]:indptr[v+1]]`` (DGL's CSC / a sampler's output).

        ``edge_ids[k]`` is the id of the edge in slot ``k`` (default ``arange(len(indices))``:
        edges are numbered in slot order, and the in-CSR is cached as given, with no sort). A
        producer that already has the destination of every slot (``dst``, the expanded
        ``indptr``) can pass it too.

        ``validate=True`` (the default) copies every tensor and checks it: integer dtypes, 1-D,
        ``indptr`` from 0 to ``len(indices)`` without decreasing, ``indices`` within
        ``num_src_nodes``, ``dst`` equal to the expanded ``indptr``, ``edge_ids`` a permutation
        of ``range(len(indices))``. ``validate=False`` skips copies and checks, for producers
        (samplers) that build these tensors themselves and guarantee them; never pass data from
        a file or a user with ``validate=False``.
        """
        if validate:
            return cls._from_checked_csr(indptr, indices, num_src_nodes, bipartite, dst, edge_ids)
        num_dst = indptr.numel() - 1
        if dst is None:
            dst = torch.repeat_interleave(torch.arange(num_dst, device=indptr.device), indptr[1:] - indptr[:-1],
                                          output_size=indices.numel())
        if edge_ids is None:
            edge_ids = torch.arange(indices.numel(), device=indices.device)
        num_src = _csr_num_src(num_src_nodes, indices, num_dst, bipartite)
        graph = cls._trusted(indices, dst, num_src, num_dst, bipartite)
        graph._set_format("in_csr", (indptr, indices, edge_ids))
        return graph

    @classmethod
    def _from_checked_csr(cls, indptr: Any, indices: Any, num_src_nodes: Any, bipartite: bool,
                          dst: Any, edge_ids: Any) -> "Graph":
        """:meth:`from_csr` with ``validate=True``: copies first, then checks the copies."""
        given = {"indptr": indptr, "indices": indices, "dst": dst, "edge_ids": edge_ids}
        owned: dict[str, Tensor] = {}
        for name, value in given.items():
            if value is None:
                continue
            if not isinstance(value, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
            _check_integer(name, value)
            if value.dim() != 1:
                raise ValueError(f"{name} must be 1-D, got shape {list(value.shape)}")
            if owned and value.device != owned["indptr"].device:
                raise ValueError(f"{name} is on {value.device} but indptr on {owned['indptr'].device}; put them on "
                                 "one device")
            owned[name] = _owned(value)
        indptr, indices = owned["indptr"], owned["indices"]
        num_dst, num_edges = indptr.numel() - 1, indices.numel()
        if num_dst < 0:
            raise ValueError("indptr must have at least one entry (num_dst_nodes + 1)")
        if int(indptr[0]) != 0 or int(indptr[-1]) != num_edges or bool((indptr[1:] < indptr[:-1]).any()):
            raise ValueError(f"indptr must start at 0, never decrease and end at len(indices)={num_edges}; got "
                             f"{indptr[0].item()}..{indptr[-1].item()}")
        rows = torch.repeat_interleave(torch.arange(num_dst, device=indptr.device), indptr[1:] - indptr[:-1],
                                       output_size=num_edges)
        if "dst" in owned and not torch.equal(owned["dst"], rows):
            raise ValueError("dst must give the row of every slot (indptr expanded); "
                             + (f"got {owned['dst'].numel()} entries for {num_edges} slots"
                                if owned["dst"].numel() != num_edges else "it differs from indptr"))
        num_src = _csr_num_src(_check_count("num_src_nodes", num_src_nodes), indices, num_dst, bipartite)
        check_index_range(indices, num_src, "0", "num_src_nodes")
        identity = torch.arange(num_edges, device=indices.device)
        edge_ids = owned.get("edge_ids", identity)
        if edge_ids.numel() != num_edges:
            raise ValueError(f"edge_ids must have one entry per slot ({num_edges}), got {edge_ids.numel()}")
        if num_edges and (int(edge_ids.min()) < 0 or int(edge_ids.max()) >= num_edges
                          or bool((torch.bincount(edge_ids, minlength=num_edges) != 1).any())):
            raise ValueError(f"edge_ids must be a permutation of 0..{num_edges - 1} (each edge id once); got values "
                             f"{int(edge_ids.min())}..{int(edge_ids.max())}"
                             + (" with repeats" if 0 <= int(edge_ids.min()) and int(edge_ids.max()) < num_edges else ""))
        if torch.equal(edge_ids, identity):  # slot order is edge order: keep the CSR as given
            graph = cls._trusted(indices, rows, num_src, num_dst, bipartite)
            graph._set_format("in_csr", (indptr, indices, edge_ids))
            return graph
        src, dst = torch.empty_like(indices), torch.empty_like(rows)  # edge ids define the order
        src[edge_ids], dst[edge_ids] = indices, rows
        return cls._trusted(src, dst, num_src, num_dst, bipartite)  # formats built (stably) from the edges

    # ------------------------------------------------------------------ basic properties
    @property
    def src(self) -> Tensor:
        """Source of every edge (the graph's own tensor: clone it before changing it)."""
        return self._coo()[0]

    @property
    def dst(self) -> Tensor:
        """Destination of every edge (the graph's own tensor: clone it before changing it)."""
        return self._coo()[1]

    @property
    def edge_index(self) -> Tensor:
        """``[2, E]``: a new tensor stacking ``src`` and ``dst``."""
        return torch.stack(self._coo())

    # The counts are graph_compat.Count: ints that may also be called, as DGL's methods are
    # (plain ints inside a torch.compile trace, see graph_compat.count).
    @property
    def num_src_nodes(self) -> int:
        return count(self._num_src)

    @property
    def num_dst_nodes(self) -> int:
        return count(self._num_dst)

    @property
    def num_edges(self) -> int:
        return count(self._src.numel())

    def _sizes(self) -> tuple[int, int, int]:
        """``(num_src_nodes, num_dst_nodes, num_edges)`` as plain ints (a trace's SymInts inside
        one): what the ops' per-call checks read, without the three ``Count`` s the public
        properties build (each read checks for a trace and makes one)."""
        return self._num_src, self._num_dst, self._src.shape[0]

    @property
    def num_nodes(self) -> int:
        if self.is_bipartite:
            raise AttributeError(
                f"a bipartite graph has num_src_nodes={self.num_src_nodes} and "
                f"num_dst_nodes={self.num_dst_nodes}; use those instead of num_nodes")
        return self.num_src_nodes

    @property
    def ndata(self) -> FeatureStore:
        if self.is_bipartite:
            raise AttributeError("a bipartite graph keeps node features in srcdata and dstdata, not ndata")
        return self.srcdata

    @property
    def device(self) -> torch.device:
        return self._src.device

    def __repr__(self) -> str:
        nodes = (f"num_src_nodes={self.num_src_nodes}, num_dst_nodes={self.num_dst_nodes}"
                 if self.is_bipartite else f"num_nodes={self.num_src_nodes}")
        return f"Graph({nodes}, num_edges={self.num_edges}, device={self.device.type})"

    # ------------------------------------------------------------------ guarding the indices
    def _guard(self, name: str, tensor: Tensor) -> None:
        """Record ``tensor``'s version counter: it holds indices the graph checked or built. A graph
        built inside a torch.compile trace records none (no trace reads version counters; its
        tensors are outputs of the compiled program, which only it holds)."""
        if torch.compiler.is_compiling():
            return
        self._guarded_names.append(name)
        self._guarded.append(tensor)
        self._guarded_versions.append(tensor._version)

    def _check_intact(self) -> None:
        """Raise :class:`GraphModifiedError` if a guarded tensor changed in place since it was recorded.

        O(1) per tensor (a version counter read). torch.compile cannot trace version counters,
        so while compiling the check runs eagerly beforehand instead (``prepare()``, called on
        the eager graph) and not inside the traced code: see docs/security.md.
        """
        if torch.compiler.is_compiling():
            return
        for tensor, version in zip(self._guarded, self._guarded_versions):   # (no list built: every op reads it)
            if tensor._version != version:
                break
        else:
            return
        for name, tensor, version in zip(self._guarded_names, self._guarded, self._guarded_versions):
            if tensor._version != version:
                raise GraphModifiedError(
                    f"the graph's {name} tensor was modified in place after the graph checked it (version {version}, "
                    f"now {tensor._version}); operations on this graph would read unchecked indices. Clone g.src/g.dst "
                    "before changing them and build a new Graph from the result")

    def __getstate__(self) -> dict:
        """Pickling (and deepcopy) carries the guarded tensors but not their version counters,
        which a copy restarts: the copy records its own when it is restored."""
        self._check_intact()
        state = self.__dict__.copy()
        del state["_guarded_versions"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._built_in_trace = False  # (also for graphs pickled before the flag existed)
        self._guarded_versions = [t._version for t in self._guarded]

    def _set_format(self, key: str, format_tensors: tuple[Tensor, ...]) -> None:
        """Cache a structure format (a CSR triple) and guard its tensors."""
        if not torch.compiler.is_compiling() and any(t.is_inference() for t in format_tensors):
            format_tensors = tuple(_owned(t) if t.is_inference() else t for t in format_tensors)
        self._cache[key] = format_tensors
        for position, tensor in enumerate(format_tensors):
            self._guard(f"{key}[{position}]", tensor)

    # ------------------------------------------------------------------ cached formats
    def in_csr(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(ptr, src_sorted, eid)``: in-edges grouped by destination (see unigraph.structure)."""
        self._check_intact()
        if "in_csr" not in self._cache:
            self._set_format("in_csr", self._build_csr(self._dst, self._src, self._num_dst))
        return self._cache["in_csr"]

    def out_csr(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(ptr, dst_sorted, eid)``: out-edges grouped by source."""
        self._check_intact()
        if "out_csr" not in self._cache:
            self._set_format("out_csr", self._build_csr(self._src, self._dst, self._num_src))
        return self._cache["out_csr"]

    def _build_csr(self, rows: Tensor, cols: Tensor, num_rows: int) -> tuple[Tensor, Tensor, Tensor]:
        if not torch.compiler.is_compiling():
            with torch.inference_mode(False):  # normal tensors: their version counters can be guarded
                return build_csr(rows, cols, num_rows)
        if not self._built_in_trace:  # a graph the compiled program is given: built once, eagerly
            raise RuntimeError("torch.compile needs the graph's formats built before tracing: call g.prepare() "
                               "once (eagerly) before running the compiled model")
        return traced_csr(rows, cols, num_rows)

    def tensors(self) -> GraphTensors:
        """All formats at once, as the ops front door hands them to a backend (every call checks
        that no index tensor changed since the graph checked it)."""
        self._check_intact()
        if "in_csr" not in self._cache and "out_csr" not in self._cache and not torch.compiler.is_compiling():
            self._build_both_formats()
        return self.memo("tensors", lambda: GraphTensors(
            self._src, self._dst, *self.in_csr(), *self.out_csr(), self._num_src, self._num_dst))  # plain ints

    def _build_both_formats(self) -> None:
        """Both CSRs in one kernel call where it can run (``structure.build_both_csr``), with the
        degree figures :meth:`stats` needs; otherwise nothing (each is built when asked)."""
        with torch.inference_mode(False):  # normal tensors: their version counters can be guarded
            built = build_both_csr(self._src, self._dst, self._num_src, self._num_dst)
        if built is not None:
            self._keep_both_formats(*built)

    def _keep_both_formats(self, in_csr: tuple, out_csr: tuple, moments: tuple) -> None:
        """Keep (and guard) both CSRs and the degree figures that came with them (:meth:`stats`)."""
        self._set_format("in_csr", in_csr)
        self._set_format("out_csr", out_csr)
        self._cache["degree_moments"] = moments

    def in_degrees(self) -> Tensor:
        ptr = self.in_csr()[0]
        return ptr[1:] - ptr[:-1]

    def out_degrees(self) -> Tensor:
        ptr = self.out_csr()[0]
        return ptr[1:] - ptr[:-1]

    def in_degree_counts(self) -> Tensor:
        """Every destination's in-degree (int64): the in-CSR's row lengths where it is built, else
        a count of ``dst`` kept on the graph (no CSR is built for it)."""
        if "in_csr" in self._cache or torch.compiler.is_compiling():
            return self.in_degrees()
        def count() -> Tensor:
            with torch.inference_mode(False):  # kept on the graph: a normal tensor whatever mode asked first
                return count_index(self._coo()[1], self._num_dst)
        return self.memo("in_degree_counts", count)

    def stats(self) -> DegreeStats:
        """Degree statistics for the backend selector (computed once). Where the counting kernel
        runs (CPU, numba) both CSRs are built with them, in one call cheaper than counting the
        degrees with torch; elsewhere they come from the CSRs the graph has and counts of the
        indices for a missing one, so that a graph whose calls need no CSR (the native lane's,
        unigraph/ops/native_lane.py) builds none, and a sampled block (in-CSR only) no out-CSR."""
        if "stats" not in self._cache:
            if "in_csr" not in self._cache and "out_csr" not in self._cache and not torch.compiler.is_compiling():
                self._build_both_formats()
            moments = self._cache.get("degree_moments")   # from the kernel that built both CSRs
            if moments is not None:
                stats = stats_from_moments(self._num_src, self._num_dst, self.num_edges, *moments)
            elif ("in_csr" in self._cache and "out_csr" in self._cache) or torch.compiler.is_compiling():
                stats = degree_stats(self.in_csr()[0], self.out_csr()[0])
            else:   # a missing CSR is not built for its row lengths (a sampled block comes with its in-CSR only)
                out_degrees = (self.out_degrees() if "out_csr" in self._cache
                               else count_index(self._coo()[0], self._num_src))
                stats = stats_from_degrees(self.in_degree_counts(), out_degrees, self.num_edges)
            self._cache["stats"] = stats
        return self._cache["stats"]

    def prepare(self, *, self_loops: bool = True) -> "Graph":
        """Build every cached format and the statistics now (eagerly), and return ``self``.

        A graph given to a ``torch.compile``'d model must be prepared: the compiled program reads
        its formats as inputs (of any size: docs/ops.md). (A graph built inside the program, as
        PyG's ``conv(x, edge_index)`` does, builds them there: :mod:`unigraph.traced_structure`.) With
        ``self_loops`` (the default) this also builds, prepared, the graph with one self-loop per
        node that GCNConv and the attention layers run on (:mod:`unigraph.self_loops`; one more
        copy of the structure: pass ``self_loops=False`` where no such layer runs).
        """
        self.tensors()
        self.stats()
        if self_loops:
            with_self_loops(self).graph.prepare(self_loops=False)
        return self

    def is_prepared(self) -> bool:
        return "tensors" in self._cache and "stats" in self._cache

    def has_memo(self, key: Any) -> bool:
        """Whether :meth:`memo` already keeps a value under ``key`` (nothing is built)."""
        return key in self._cache

    def tally(self, key: Any, add: int = 0) -> int:
        """A count kept on this graph under ``key`` (a :meth:`memo` key), after adding ``add``
        (0 reads it): how often something happened to this graph (the small-graph rule counts the
        calls it takes on a graph with no CSR yet). Not kept while ``torch.compile`` traces."""
        count = self._cache.get(key, 0) + add
        if add and (not torch.compiler.is_compiling() or self._built_in_trace):
            self._cache[key] = count
        return count

    def memo(self, key: Any, build: Any) -> Any:
        """The value this graph keeps under ``key``, made by ``build()`` on the first call.

        For values that depend on the graph's structure alone (a normalization, a graph with
        self-loops, a backend decision), so that they are computed once per graph. ``key`` must
        be hashable and say everything the value depends on besides the structure; namespace
        it (e.g. ``("unigraph.nn", "gcn_norm", ...)``) so that callers cannot collide. Make it a
        string or a tuple of plain constants (str, int, float, bool, None, torch.dtype,
        torch.device): compiled programs read this memo, and once any key is another kind of
        object (a dataclass), dynamo guards on every key by position and on their number, so
        each eager call that adds a key would recompile them.

        While ``torch.compile`` traces, a missing value is built but not kept (keeping it would be
        a side effect the compiled code replays): build what a compiled model needs eagerly, as
        :meth:`prepare` does. A graph built inside the trace (PyG's ``conv(x, edge_index)``) keeps
        it: it lives in that trace.
        """
        cache = self._cache
        if key in cache:
            return cache[key]
        value = build()
        if not torch.compiler.is_compiling() or self._built_in_trace:
            cache[key] = value
        return value

    # ------------------------------------------------------------------ transforms
    def _coo(self) -> tuple[Tensor, Tensor]:
        """``(src, dst)`` for a transform, after checking they are what the graph validated."""
        self._check_intact()
        return self._src, self._dst

    def _derived(self, src: Tensor, dst: Tensor, *, edata: dict[str, Tensor] | None = None,
                 num_src: int | None = None, num_dst: int | None = None, keep_ndata: bool = True) -> "Graph":
        graph = type(self)._trusted(src, dst, self.num_src_nodes if num_src is None else num_src,
                               self.num_dst_nodes if num_dst is None else num_dst, self.is_bipartite)
        if keep_ndata:
            for key, value in self.srcdata.items():
                graph.srcdata[key] = value
            if self.is_bipartite:
                for key, value in self.dstdata.items():
                    graph.dstdata[key] = value
        for key, value in (edata or {}).items():
            graph.edata[key] = value
        return graph

    def to(self, device: torch.device | str) -> "Graph":
        """A copy on ``device`` with features and already-built formats moved along."""
        device = torch.device(device)
        src, dst = self._coo()
        graph = type(self)._trusted(src.to(device), dst.to(device), self.num_src_nodes, self.num_dst_nodes, self.is_bipartite)
        for store_name in ("srcdata", "edata") + (("dstdata",) if self.is_bipartite else ()):
            for key, value in getattr(self, store_name).items():
                getattr(graph, store_name)[key] = value.to(device)
        for key in ("in_csr", "out_csr"):
            if key in self._cache:
                graph._set_format(key, tuple(t.to(device) for t in self._cache[key]))
        if "stats" in self._cache:
            graph._cache["stats"] = self._cache["stats"]
        return graph

    def add_self_loops(self, fill_value: float = 1.0) -> "Graph":
        """Append an edge ``i -> i`` for every destination node ``i`` (also where one exists,
        as PyG and DGL do). New edges get ``fill_value`` in every ``edata`` tensor.

        For a bipartite block the loops join destination ``i`` to source ``i``, which needs
        ``num_src_nodes >= num_dst_nodes`` (destination nodes first among the sources).
        """
        if self.num_src_nodes < self.num_dst_nodes:
            raise ValueError(f"self-loops need every destination to also be a source, but num_src_nodes="
                             f"{self.num_src_nodes} < num_dst_nodes={self.num_dst_nodes}")
        src, dst = self._coo()
        loops = torch.arange(self.num_dst_nodes, device=self.device)
        edata = {key: torch.cat([value, value.new_full((self.num_dst_nodes,) + value.shape[1:], fill_value)])
                 for key, value in self.edata.items()}
        return self._derived(torch.cat([src, loops]), torch.cat([dst, loops]), edata=edata)

    def remove_self_loops(self) -> "Graph":
        """Drop every edge ``i -> i`` (and its ``edata`` rows)."""
        src, dst = self._coo()
        keep = src != dst
        return self._derived(src[keep], dst[keep],
                             edata={key: value[keep] for key, value in self.edata.items()})

    def reverse(self) -> "Graph":
        """Flip every edge; edge ids and ``edata`` keep their order. Cached formats are reused."""
        src, dst = self._coo()
        graph = type(self)._trusted(dst, src, self.num_dst_nodes, self.num_src_nodes, self.is_bipartite)
        if self.is_bipartite:
            for key, value in self.srcdata.items():
                graph.dstdata[key] = value
            for key, value in self.dstdata.items():
                graph.srcdata[key] = value
        else:
            for key, value in self.srcdata.items():
                graph.srcdata[key] = value
        for key, value in self.edata.items():
            graph.edata[key] = value
        if "in_csr" in self._cache:
            graph._set_format("out_csr", self._cache["in_csr"])
        if "out_csr" in self._cache:
            graph._set_format("in_csr", self._cache["out_csr"])
        return graph

    def to_undirected(self, reduce: str = "sum") -> "Graph":
        """Add the reverse of every edge and merge duplicates (PyG's ``to_undirected``).

        The result is coalesced: one edge per ordered pair, sorted by (source, destination).
        ``edata`` values of merged edges are combined with ``reduce`` ("sum", "mean", "max", "min").
        """
        if self.is_bipartite:
            raise ValueError("to_undirected needs a homogeneous graph; this one is bipartite "
                             f"({self.num_src_nodes} source and {self.num_dst_nodes} destination nodes)")
        if reduce not in ("sum", "mean", "max", "min"):
            raise ValueError(f"reduce must be one of 'sum', 'mean', 'max', 'min', got {reduce!r}")
        forward, backward = self._coo()
        src, dst, inverse = unique_pairs(torch.cat([forward, backward]), torch.cat([backward, forward]))
        edata = {}
        for name, value in self.edata.items():
            edata[name] = group_reduce(torch.cat([value, value]), inverse, src.numel(), reduce)
        return self._derived(src, dst, edata=edata)

    # ------------------------------------------------------------------ DGL-style accessors
    # (the counts, num_nodes() and friends, are callable ints: see the basic properties)
    @property
    def is_block(self) -> bool:
        """DGL's name for :attr:`is_bipartite` (a sampled block)."""
        return self.is_bipartite

    def nodes(self) -> Tensor:
        """The node ids ``0..num_nodes-1`` (DGL's ``g.nodes()``)."""
        return torch.arange(self.num_nodes, device=self.device)

    def edges(self, form: str = "uv", order: str = "eid"):
        """DGL's ``g.edges(form=, order=)``: ``(src, dst)``, the edge ids, or ``(src, dst, eid)``,
        by edge id or sorted by (source, destination). See :func:`unigraph.graph_compat.edges`."""
        return graph_compat.edges(self, form, order)

    def local_scope(self):
        """``with g.local_scope():`` - feature changes made inside are undone on exit (DGL)."""
        return graph_compat.local_scope(self)
