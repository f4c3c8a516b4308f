"""The :class:`Graph`: a validated edge list with lazily cached formats and degree statistics."""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator, MutableMapping

import torch
from torch import Tensor

from unigraph.structure import GraphTensors, build_csr


@dataclasses.dataclass(frozen=True)
class DegreeStats:
    """The graph statistics the backend selector reads (plain Python numbers).

    ``cv_in_degree`` is the coefficient of variation of the in-degree over destination nodes
    (standard deviation / mean; 0 for a graph without edges): about 0 for regular graphs,
    about 1 for Erdos-Renyi graphs at low degree, well above 1 for power-law graphs.
    """

    num_src_nodes: int
    num_dst_nodes: int
    num_edges: int
    mean_in_degree: float
    max_in_degree: int
    cv_in_degree: float
    max_out_degree: int


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


def _check_count(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, Tensor) and value.dim() == 0 and not value.is_floating_point():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


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
    return edge_index.to(torch.int64)


def _check_range(index: Tensor, size: int, row_name: str, size_name: str) -> None:
    if index.numel() == 0:
        return
    low, high = int(index.min()), int(index.max())
    if low < 0:
        at = int((index < 0).nonzero()[0])
        raise ValueError(f"edge_index[{row_name}] holds the negative index {low} (first at edge {at}); indices must be >= 0")
    if high >= size:
        at = int((index >= size).nonzero()[0])
        raise ValueError(
            f"edge_index[{row_name}] holds index {high} (first out-of-range at edge {at}) but {size_name}={size}; "
            f"valid indices are 0..{size - 1}" if size > 0 else
            f"edge_index[{row_name}] holds index {high} but {size_name}=0: a graph without nodes cannot have edges")


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

    Structure formats (in-CSR, out-CSR, degree statistics) are built on first use and cached;
    call :meth:`prepare` to build them up front (needed before ``torch.compile``).
    Node and edge features can ride along in :attr:`ndata` / :attr:`edata` (``srcdata`` /
    ``dstdata`` for bipartite graphs).
    """

    def __init__(self, edge_index: Any, num_nodes: int | None = None, *,
                 num_src_nodes: int | None = None, num_dst_nodes: int | None = None):
        edge_index = _as_edge_index(edge_index)
        num_nodes = _check_count("num_nodes", num_nodes)
        num_src_nodes = _check_count("num_src_nodes", num_src_nodes)
        num_dst_nodes = _check_count("num_dst_nodes", num_dst_nodes)
        src, dst = edge_index[0].contiguous(), edge_index[1].contiguous()
        bipartite = num_src_nodes is not None or num_dst_nodes is not None
        if bipartite and num_nodes is not None:
            raise ValueError("give either num_nodes (homogeneous graph) or num_src_nodes/num_dst_nodes "
                             f"(bipartite graph), not both (got num_nodes={num_nodes}, "
                             f"num_src_nodes={num_src_nodes}, num_dst_nodes={num_dst_nodes})")

        def inferred(index: Tensor) -> int:
            return int(index.max()) + 1 if index.numel() else 0

        if bipartite:
            n_src = num_src_nodes if num_src_nodes is not None else inferred(src)
            n_dst = num_dst_nodes if num_dst_nodes is not None else inferred(dst)
            _check_range(src, n_src, "0", "num_src_nodes")
            _check_range(dst, n_dst, "1", "num_dst_nodes")
        else:
            n_src = n_dst = num_nodes if num_nodes is not None else max(inferred(src), inferred(dst))
            _check_range(src, n_src, "0", "num_nodes")
            _check_range(dst, n_dst, "1", "num_nodes")
        self._init_unchecked(src, dst, n_src, n_dst, bipartite)

    def _init_unchecked(self, src: Tensor, dst: Tensor, num_src: int, num_dst: int, bipartite: bool) -> None:
        self._src, self._dst = src, dst
        self.num_src_nodes, self.num_dst_nodes = num_src, num_dst
        self.is_bipartite = bipartite
        self._cache: dict[str, Any] = {}
        self.srcdata = (FeatureStore(num_src, "srcdata", "source nodes") if bipartite
                        else FeatureStore(num_src, "ndata", "nodes"))
        self.dstdata = FeatureStore(num_dst, "dstdata", "destination nodes") if bipartite else self.srcdata
        self.edata = FeatureStore(src.numel(), "edata", "edges")

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

        The in-CSR is cached directly, so no sort is needed. ``validate=False`` skips the range
        checks for producers (samplers) that guarantee valid input. A producer that already has
        the destination of every entry (``dst``, the expanded ``indptr``) and ``edge_ids``
        (``arange(len(indices))``) can pass them, and the graph is built with no torch work.
        """
        num_dst = indptr.numel() - 1
        if validate:
            _check_integer("indptr", indptr)
            _check_integer("indices", indices)
            if indptr.dim() != 1 or indices.dim() != 1:
                raise ValueError(f"indptr and indices must be 1-D, got shapes {list(indptr.shape)} and {list(indices.shape)}")
            if num_dst < 0:
                raise ValueError("indptr must have at least one entry (num_dst_nodes + 1)")
            indptr, indices = indptr.to(torch.int64), indices.to(torch.int64)
            if int(indptr[0]) != 0 or int(indptr[-1]) != indices.numel() or bool((indptr[1:] < indptr[:-1]).any()):
                raise ValueError(f"indptr must start at 0, be non-decreasing and end at len(indices)={indices.numel()}")
        if dst is None:
            counts = indptr[1:] - indptr[:-1]
            dst = torch.repeat_interleave(torch.arange(num_dst, device=indptr.device), counts,
                                          output_size=indices.numel())
        elif validate and dst.shape != indices.shape:
            raise ValueError(f"dst must have one entry per index ({indices.numel()}), got shape {list(dst.shape)}")
        if edge_ids is None:
            edge_ids = torch.arange(indices.numel(), device=indices.device)
        num_src = num_src_nodes if num_src_nodes is not None else (num_dst if not bipartite else (int(indices.max()) + 1 if indices.numel() else 0))
        if not bipartite and num_src != num_dst:
            raise ValueError(f"a homogeneous graph needs num_src_nodes == num_dst_nodes, got {num_src} and {num_dst}; "
                             "pass bipartite=True for a block")
        if validate:
            _check_range(indices, num_src, "0", "num_src_nodes")
        graph = cls._trusted(indices, dst, num_src, num_dst, bipartite)
        graph._cache["in_csr"] = (indptr, indices, edge_ids)
        return graph

    # ------------------------------------------------------------------ basic properties
    @property
    def src(self) -> Tensor:
        return self._src

    @property
    def dst(self) -> Tensor:
        return self._dst

    @property
    def edge_index(self) -> Tensor:
        return torch.stack([self._src, self._dst])

    @property
    def num_edges(self) -> int:
        return self._src.numel()

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

    # ------------------------------------------------------------------ cached formats
    def in_csr(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(ptr, src_sorted, eid)``: in-edges grouped by destination (see unigraph.structure)."""
        if "in_csr" not in self._cache:
            self._cache["in_csr"] = build_csr(self._dst, self._src, self.num_dst_nodes)
        return self._cache["in_csr"]

    def out_csr(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(ptr, dst_sorted, eid)``: out-edges grouped by source."""
        if "out_csr" not in self._cache:
            self._cache["out_csr"] = build_csr(self._src, self._dst, self.num_src_nodes)
        return self._cache["out_csr"]

    def tensors(self) -> GraphTensors:
        """All formats at once, as the ops front door hands them to a backend."""
        if "tensors" not in self._cache:
            self._cache["tensors"] = GraphTensors(
                self._src, self._dst, *self.in_csr(), *self.out_csr(), self.num_src_nodes, self.num_dst_nodes)
        return self._cache["tensors"]

    def in_degrees(self) -> Tensor:
        ptr = self.in_csr()[0]
        return ptr[1:] - ptr[:-1]

    def out_degrees(self) -> Tensor:
        ptr = self.out_csr()[0]
        return ptr[1:] - ptr[:-1]

    def stats(self) -> DegreeStats:
        """Degree statistics for the backend selector (computed once)."""
        if "stats" not in self._cache:
            deg_in = self.in_degrees().to(torch.float64)
            deg_out = self.out_degrees()
            mean = self.num_edges / max(self.num_dst_nodes, 1)
            std = float(deg_in.std(unbiased=False)) if deg_in.numel() else 0.0
            self._cache["stats"] = DegreeStats(
                num_src_nodes=self.num_src_nodes, num_dst_nodes=self.num_dst_nodes, num_edges=self.num_edges,
                mean_in_degree=mean,
                max_in_degree=int(deg_in.max()) if deg_in.numel() else 0,
                cv_in_degree=std / mean if mean > 0 else 0.0,
                max_out_degree=int(deg_out.max()) if deg_out.numel() else 0,
            )
        return self._cache["stats"]

    def prepare(self) -> "Graph":
        """Build every cached format and the statistics now (eagerly), and return ``self``.

        ``torch.compile`` traces a model without graph breaks only if the graph is prepared:
        building formats needs data-dependent sizes that a trace cannot capture.
        """
        self.tensors()
        self.stats()
        return self

    def is_prepared(self) -> bool:
        return "tensors" in self._cache and "stats" in self._cache

    def memo(self, key: Any, build: Any) -> Any:
        """The value this graph keeps under ``key``, made by ``build()`` on the first call.

        For values that depend on the graph's structure alone (a normalization, a graph with
        self-loops, a backend decision), so that they are computed once per graph. ``key`` must
        be hashable and say everything the value depends on besides the structure; namespace
        it (e.g. ``("unigraph.nn", "gcn_norm", ...)``) so that callers cannot collide.
        """
        cache = self._cache
        if key not in cache:
            cache[key] = build()
        return cache[key]

    # ------------------------------------------------------------------ transforms
    def _derived(self, src: Tensor, dst: Tensor, *, edata: dict[str, Tensor] | None = None,
                 num_src: int | None = None, num_dst: int | None = None, keep_ndata: bool = True) -> "Graph":
        graph = Graph._trusted(src, dst, self.num_src_nodes if num_src is None else num_src,
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
        graph = Graph._trusted(self._src.to(device), self._dst.to(device), self.num_src_nodes,
                               self.num_dst_nodes, self.is_bipartite)
        for store_name in ("srcdata", "edata") + (("dstdata",) if self.is_bipartite else ()):
            for key, value in getattr(self, store_name).items():
                getattr(graph, store_name)[key] = value.to(device)
        for key in ("in_csr", "out_csr"):
            if key in self._cache:
                graph._cache[key] = tuple(t.to(device) for t in self._cache[key])
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
        loops = torch.arange(self.num_dst_nodes, device=self.device)
        edata = {key: torch.cat([value, value.new_full((self.num_dst_nodes,) + value.shape[1:], fill_value)])
                 for key, value in self.edata.items()}
        return self._derived(torch.cat([self._src, loops]), torch.cat([self._dst, loops]), edata=edata)

    def remove_self_loops(self) -> "Graph":
        """Drop every edge ``i -> i`` (and its ``edata`` rows)."""
        keep = self._src != self._dst
        return self._derived(self._src[keep], self._dst[keep],
                             edata={key: value[keep] for key, value in self.edata.items()})

    def reverse(self) -> "Graph":
        """Flip every edge; edge ids and ``edata`` keep their order. Cached formats are reused."""
        graph = Graph._trusted(self._dst, self._src, self.num_dst_nodes, self.num_src_nodes, self.is_bipartite)
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
            graph._cache["out_csr"] = self._cache["in_csr"]
        if "out_csr" in self._cache:
            graph._cache["in_csr"] = self._cache["out_csr"]
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
        src = torch.cat([self._src, self._dst])
        dst = torch.cat([self._dst, self._src])
        key = src * max(self.num_src_nodes, 1) + dst
        unique_keys, inverse = torch.unique(key, sorted=True, return_inverse=True)
        n = max(self.num_src_nodes, 1)
        edata = {}
        for name, value in self.edata.items():
            both = torch.cat([value, value])
            out = value.new_zeros((unique_keys.numel(),) + value.shape[1:])
            index = inverse.view(-1, *([1] * (value.dim() - 1))).expand_as(both)
            torch_reduce = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}[reduce]
            edata[name] = out.scatter_reduce_(0, index, both, torch_reduce, include_self=False)
        return self._derived(unique_keys // n, unique_keys % n, edata=edata)

    # ------------------------------------------------------------------ DGL-style message passing
    def update_all(self, message_fn: Any, reduce_fn: Any, update_fn: Any = None):
        """Messages along every edge, reduced into ``dstdata`` (``ndata``), then ``update_fn``, as
        DGL's ``update_all``; built-ins live in :mod:`unigraph.function`. Returns the
        :class:`~unigraph.message_passing.MessagePlan` saying what ran."""
        from unigraph.message_passing import dgl_style
        return dgl_style.update_all(self, message_fn, reduce_fn, update_fn)

    def apply_edges(self, fn: Any):
        """Per-edge features from ``fn`` into ``edata``, as DGL's ``apply_edges``."""
        from unigraph.message_passing import dgl_style
        return dgl_style.apply_edges(self, fn)

    # ------------------------------------------------------------------ conversions
    @classmethod
    def from_pyg(cls, data: Any, num_nodes: int | None = None) -> "Graph":
        """From a PyG ``Data`` (features, labels, masks and edge attributes come along) or a bare
        ``edge_index``."""
        from unigraph import convert
        return convert.from_pyg(data, num_nodes)

    def to_pyg(self) -> Any:
        """A ``torch_geometric.data.Data`` with ``edge_index`` and every node/edge feature."""
        from unigraph import convert
        return convert.to_pyg(self)

    @classmethod
    def from_scipy(cls, matrix: Any) -> "Graph":
        """From a scipy sparse matrix: entry ``(i, j)`` is the edge ``i -> j``; its value lands
        in ``edata['weight']``. A non-square matrix gives a bipartite graph."""
        from unigraph import convert
        return convert.from_scipy(matrix)

    def to_scipy(self, fmt: str = "coo", weight: str | None = None) -> Any:
        """A scipy sparse matrix with entry ``(src, dst)``; values from ``edata[weight]`` or ones."""
        from unigraph import convert
        return convert.to_scipy(self, fmt, weight)

    @classmethod
    def from_networkx(cls, nx_graph: Any) -> "Graph":
        """From a networkx graph; nodes are numbered in ``nx_graph.nodes`` order and an
        undirected graph gets both directions of every edge."""
        from unigraph import convert
        return convert.from_networkx(nx_graph)

    def to_networkx(self) -> Any:
        """A ``networkx.MultiDiGraph`` (multi-edges and isolated nodes are kept)."""
        from unigraph import convert
        return convert.to_networkx(self)

    @classmethod
    def from_dgl(cls, dgl_graph: Any) -> "Graph":
        """From a DGL graph or block (homogeneous). Node/edge features are copied along."""
        from unigraph import convert
        return convert.from_dgl(dgl_graph)

    def to_dgl(self) -> Any:
        """A ``dgl.DGLGraph`` (or a block for bipartite graphs). Needs DGL importable."""
        from unigraph import convert
        return convert.to_dgl(self)
