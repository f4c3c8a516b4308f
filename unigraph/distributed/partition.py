"""Cutting a node-classification dataset into a partition set on disk.

Methods (chosen explicitly; the one used is written into the metadata and the report):

* ``"metis"`` - METIS (Karypis and Kumar, SIAM J. Sci. Comput. 1998) through ``pymetis`` (the
  optional extra ``partition``: ``pip install 'unigraph[partition]'``) on the undirected simple
  graph, every node weighted by its in-degree + 1 (the edges its partition stores, and one for the
  node), then greedy moves (:mod:`unigraph.distributed.balance`) bring the parts' in-edges,
  training nodes and nodes within ``tolerance`` x their mean. (METIS's own multi-constraint
  partitioning left the in-edges of power-law graphs at 2.5-3.4x the mean: see that module.)
* ``"lp"`` - the built-in fallback, :func:`unigraph.sampling.partition_graph`: a breadth-first
  order cut into equal runs, refined by balanced label propagation (torch only, no extra
  package). It balances node counts (within 5%) only; edges and training nodes are balanced only
  as far as the graph's structure happens to spread them.
* ``"random"`` - every node to a uniformly random partition of exactly balanced size: no
  locality (the edge cut is about ``(P-1)/P`` of all edges), the baseline against which the
  others' cuts are judged.

No method falls back to another: an unavailable one fails with a message saying how to install
it or which method to choose instead.

Then each partition's arrays are built (:mod:`unigraph.distributed.format` lists them) and
written, and the report (edge cut, balance, halo sizes) goes into the metadata. Memory: the
whole dataset plus its in-CSR, and for METIS the undirected adjacency (``2E`` int64 pairs while
it is built).
"""
from __future__ import annotations

import importlib.metadata
import os

import numpy as np
import torch

from unigraph._optional import require
from unigraph.data import NodeDataset
from unigraph.distributed import chunked_parts
from unigraph.distributed import format as fmt
from unigraph.distributed.balance import rebalance
from unigraph.sampling.csr_view import csr_ranges
from unigraph.sampling.partition import partition_graph

METHODS = ("metis", "lp", "random")
DEFAULT_TOLERANCE = 1.03  # max / mean of each count METIS's parts are brought within
INSTALL_METIS = ("pip install 'unigraph[partition]' (or: pip install pymetis); or partition without it: --method lp "
                 "(the built-in partitioner) or --method random")


def undirected_adjacency(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(xadj, adjncy)``: the CSR of the undirected simple graph of the edges ``src -> dst``
    (both directions, no self-loops, no duplicates), as METIS wants it."""
    keep = src != dst
    src, dst = src[keep], dst[keep]
    pairs = np.unique(np.concatenate([src * num_nodes + dst, dst * num_nodes + src]))  # sorted: grouped by row
    xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(pairs // num_nodes, minlength=num_nodes), out=xadj[1:])
    return xadj, pairs % num_nodes


def metis_parts(dataset: NodeDataset, num_parts: int, seed: int, tolerance: float) -> tuple[np.ndarray, dict]:
    pymetis = require("pymetis", "partitioning with --method metis", INSTALL_METIS)
    graph = dataset.graph
    n = graph.num_nodes
    in_degree = graph.in_degrees().numpy().astype(np.int64)
    xadj, adjncy = undirected_adjacency(graph.src.numpy(), graph.dst.numpy(), n)
    result = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, adjncy), vweights=in_degree + 1,
                                options=pymetis.Options(seed=seed))
    neighbours = np.diff(xadj)
    del xadj, adjncy
    part = np.asarray(result.vertex_part, dtype=np.int64)
    moved = rebalance(part, num_parts, in_degree=in_degree, train=dataset.train_mask.numpy(), neighbours=neighbours,
                      tolerance=tolerance)
    details = {"package": f"pymetis {importlib.metadata.version('pymetis')}", "constraints": ["in-edges + 1"],
               "scheme": "pymetis default (recursive bisection up to 8 parts), then greedy moves",
               "rebalanced": ["edges", "training nodes", "nodes"], "moves": moved["moves"], "seed": seed}
    return part, details


def assign_parts(dataset: NodeDataset, num_parts: int, method: str, seed: int = 0,
                 tolerance: float = DEFAULT_TOLERANCE) -> tuple[np.ndarray, dict]:
    """``(part of every node, details of the method)``; see the module docstring."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    n = dataset.num_nodes
    if isinstance(num_parts, bool) or not isinstance(num_parts, int) or not 1 <= num_parts <= max(n, 1):
        raise ValueError(f"num_parts must be an int in 1..{max(n, 1)} (the number of nodes), got {num_parts!r}")
    if method == "metis":
        part, details = metis_parts(dataset, num_parts, seed, tolerance)
    elif method == "lp":
        part = partition_graph(dataset.graph, num_parts, seed=seed).numpy()
        details = {"package": "unigraph.sampling.partition_graph (BFS order + balanced label propagation)",
                   "constraints": ["nodes"], "seed": seed}
    else:
        generator = torch.Generator().manual_seed(seed)
        part = np.empty(n, dtype=np.int64)
        part[torch.randperm(n, generator=generator).numpy()] = np.arange(n) * num_parts // max(n, 1)
        details = {"package": "unigraph (uniform random, equal sizes)", "constraints": ["nodes"], "seed": seed}
    if part.shape != (n,) or (n and (part.min() < 0 or part.max() >= num_parts)):
        raise RuntimeError(f"the {method} partitioner returned an invalid assignment")  # never expected
    return part, {"name": method, **details}


def _balance(values: list[int]) -> float:
    """max / mean (1.0 is perfect; 0-total counts are perfectly balanced)."""
    mean = sum(values) / len(values)
    return max(values) / mean if mean else 1.0


def partition_dataset(dataset: NodeDataset, num_parts: int, out: str | os.PathLike, *, method: str = "metis",
                      seed: int = 0, tolerance: float = DEFAULT_TOLERANCE,
                      layout: str = "npz") -> fmt.PartitionSetInfo:
    """Partition ``dataset`` into ``num_parts`` parts with ``method`` and write the set to ``out``
    (``layout``: ``"npz"`` files, or ``"chunked"`` directories mapped when loaded,
    :mod:`unigraph.distributed.chunked_parts`).

    Returns the set's metadata (its ``report`` holds the edge cut, the balance of nodes, stored
    edges and training nodes with ``tolerance`` and whether every one is within it, and halo sizes;
    :func:`format_report` prints them). Node ids are renumbered partition-major
    (:mod:`unigraph.distributed.book`); each part keeps the original ids of its nodes, and the
    in-edges of its halo nodes (for sampling them without asking their owners).
    """
    if not isinstance(dataset, NodeDataset):
        raise TypeError(f"partition_dataset needs a unigraph.data.NodeDataset, got {type(dataset).__name__}")
    if layout not in fmt.LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(fmt.LAYOUTS)}, got {layout!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 1.0:
        raise ValueError(f"tolerance must be a number >= 1.0 (the largest part / the mean), got {tolerance!r}")
    assignment, details = assign_parts(dataset, num_parts, method, seed, tolerance)
    graph = dataset.graph
    n, num_edges = graph.num_nodes, graph.num_edges
    part = torch.from_numpy(assignment)
    orig_of_new = torch.sort(part, stable=True).indices            # partition-major, original order inside
    new_of_orig = torch.empty(n, dtype=torch.int64)
    new_of_orig[orig_of_new] = torch.arange(n)
    offsets = [0] + torch.cumsum(torch.bincount(part, minlength=num_parts), 0).tolist()
    ptr, sources, eids = graph.in_csr()
    out_degree = graph.out_degrees()
    index_dtype = np.int32 if n < 2 ** 31 else np.int64
    num_classes = int(dataset.y.max()) + 1 if n else 0
    set_id = fmt.new_set_id()
    directory = fmt.begin_write(out)
    parts = []
    for p in range(num_parts):
        first, end = offsets[p], offsets[p + 1]
        rows = orig_of_new[first:end]
        indptr, positions = _csr_rows(ptr, rows)
        indices = new_of_orig[sources[positions]]
        remote = (indices < first) | (indices >= end)
        halo = torch.unique(indices[remote])
        halo_indptr, halo_positions = _csr_rows(ptr, orig_of_new[halo])
        arrays = {"orig_ids": rows.numpy(), "indptr": indptr.numpy(), "indices": indices.numpy().astype(index_dtype),
                  "eids": eids[positions].numpy(), "x": dataset.x[rows].numpy(), "y": dataset.y[rows].numpy(),
                  "train_mask": dataset.train_mask[rows].numpy(), "val_mask": dataset.val_mask[rows].numpy(),
                  "test_mask": dataset.test_mask[rows].numpy(), "out_degree": out_degree[rows].numpy(),
                  "halo_ids": halo.numpy(), "halo_out_degree": out_degree[orig_of_new[halo]].numpy(),
                  "halo_indptr": halo_indptr.numpy(),
                  "halo_indices": new_of_orig[sources[halo_positions]].numpy().astype(index_dtype),
                  "halo_eids": eids[halo_positions].numpy()}
        if layout == "npz":
            entry = fmt.write_part(directory, set_id, p, arrays)
        else:
            entry = chunked_parts.write_part(directory, set_id, p, arrays, num_nodes=n, num_edges=num_edges,
                                             num_classes=num_classes)
        entry.update(nodes=end - first, edges=int(indices.numel()), train=int(arrays["train_mask"].sum()),
                     val=int(arrays["val_mask"].sum()), test=int(arrays["test_mask"].sum()), halo=int(halo.numel()),
                     halo_edges=int(halo_positions.numel()), cut_in_edges=int(remote.sum()))
        parts.append(entry)
        del arrays, indices, positions, remote, halo_positions
    cut = sum(e["cut_in_edges"] for e in parts)
    balance = {what: _balance([e[key] for e in parts]) for what, key in (("nodes", "nodes"), ("edges", "edges"),
                                                                        ("train", "train"))}
    report = {"edge_cut": cut, "edge_cut_fraction": cut / num_edges if num_edges else 0.0, "balance": balance,
              "tolerance": tolerance, "balanced": all(value <= tolerance for value in balance.values()),
              "halo_fraction": [e["halo"] / max(e["nodes"], 1) for e in parts]}
    info = fmt.PartitionSetInfo(
        directory=directory, set_id=set_id, num_parts=num_parts, num_nodes=n, num_edges=num_edges,
        num_features=dataset.num_features, feature_dtype=str(dataset.x.dtype).replace("torch.", ""),
        num_classes=num_classes,
        max_in_degree=int(graph.in_degrees().max()) if n else 0, offsets=offsets, parts=parts, method=details,
        report=report, dataset=dataset.name, layout=layout)
    fmt.write_metadata(info)
    return info


def _csr_rows(ptr: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(indptr, positions)``: the in-CSR of ``rows`` (original ids), as positions in ``ptr``'s CSR."""
    counts, positions = csr_ranges(ptr, rows)
    indptr = torch.zeros(rows.numel() + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=indptr[1:])
    return indptr, positions


def format_report(info: fmt.PartitionSetInfo) -> str:
    """The partition report as text: method, edge cut, balance (and whether it is within the
    tolerance), and one line per partition: nodes, stored edges, training nodes, ..., halo."""
    r = info.report
    balance = r["balance"]
    tolerance = r.get("tolerance")
    verdict = "" if tolerance is None else (f" (within {tolerance:.3f})" if r.get("balanced") else
                                            f" NOT WITHIN THE TOLERANCE {tolerance:.3f}")
    lines = [f"partition set {info.set_id} in {info.directory}: {info.num_parts} parts of {info.dataset} "
             f"({info.num_nodes} nodes, {info.num_edges} edges)",
             f"method: {info.method['name']} ({info.method.get('package')}; balanced on "
             f"{', '.join(info.method.get('constraints', []))}"
             + (f"; then moved {info.method['moves']}" if "moves" in info.method else "") + ")",
             f"edge cut: {r['edge_cut']} edges ({100 * r['edge_cut_fraction']:.2f}% of all); balance (max/mean): "
             f"nodes {balance['nodes']:.3f}, edges {balance['edges']:.3f}, training nodes {balance['train']:.3f}"
             + verdict,
             f"{'part':>4} {'nodes':>10} {'edges':>11} {'train':>8} {'val':>7} {'test':>7} {'halo':>9} "
             f"{'halo/nodes':>10} {'halo edges':>11} {'cut in-edges':>12}"]
    for p, e in enumerate(info.parts):
        lines.append(f"{p:>4} {e['nodes']:>10} {e['edges']:>11} {e['train']:>8} {e['val']:>7} {e['test']:>7} "
                     f"{e['halo']:>9} {e['halo'] / max(e['nodes'], 1):>10.3f} {e['halo_edges']:>11} "
                     f"{e.get('cut_in_edges', 0):>12}")
    return "\n".join(lines)
