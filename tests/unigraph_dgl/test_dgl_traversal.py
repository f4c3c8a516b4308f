"""DGL's traversals and propagation (unigraph/dgl/traversal.py, unigraph/dgl/propagate.py) against
DGL itself, exactly: every frontier's ids in order, their dtypes and the number of frontiers, on
random multigraphs with self-loops and isolated nodes (BFS and DFS from one or several sources,
with duplicates, both directions, every DFS label option; topological order of random DAGs), the
empty traversals, a cycle; then the node features after prop_nodes_bfs / prop_nodes_topo /
prop_edges_dfs / prop_nodes / prop_edges with user-defined and built-in functions in float64, and
the refused inputs."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.function as ufn
from unigraph.dgl import propagate, traversal
from unigraph.dgl.base import DGLError


def _same(ours, theirs) -> None:
    """Two traversal results equal element by element, with dtypes and lengths."""
    assert isinstance(ours, tuple) and len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if isinstance(b, tuple):
            _same(a, b)
        else:
            assert a.dtype == b.dtype and a.device.type == "cpu", (a.dtype, b.dtype)
            assert torch.equal(a, b), (a, b)


def _random_graphs(dgl, count: int, dag: bool = False):
    """Pairs (ours, DGL's) of random multigraphs (self-loops, parallel edges, isolated nodes)."""
    gen = torch.Generator().manual_seed(7)
    for trial in range(count):
        n = int(torch.randint(1, 25, (), generator=gen))
        m = int(torch.randint(0, 3 * n, (), generator=gen))
        src, dst = torch.randint(0, n, (m,), generator=gen), torch.randint(0, n, (m,), generator=gen)
        if dag:
            src, dst = src[src < dst], dst[src < dst]
        idtype = (torch.int32, torch.int64)[trial % 2]
        sources = torch.randint(0, n, (int(torch.randint(1, 4, (), generator=gen)),), generator=gen).to(idtype)
        yield (udgl.graph((src, dst), num_nodes=n, idtype=idtype), dgl.graph((src, dst), num_nodes=n, idtype=idtype),
               sources)


@pytest.mark.parametrize("reverse", [False, True])
def test_bfs_frontiers_equal_dgl(dgl, reverse):
    for ours, theirs, sources in _random_graphs(dgl, 60):
        for seeds in (sources, sources[:1], sources.repeat(2)):
            _same(traversal.bfs_nodes_generator(ours, seeds, reverse), dgl.bfs_nodes_generator(theirs, seeds, reverse))
            _same(traversal.bfs_edges_generator(ours, seeds, reverse), dgl.bfs_edges_generator(theirs, seeds, reverse))


@pytest.mark.parametrize("reverse", [False, True])
def test_dfs_frontiers_equal_dgl(dgl, reverse):
    for ours, theirs, sources in _random_graphs(dgl, 60):
        _same(traversal.dfs_edges_generator(ours, sources, reverse), dgl.dfs_edges_generator(theirs, sources, reverse))
        for has_reverse_edge in (False, True):
            for has_nontree_edge in (False, True):
                args = (sources, reverse, has_reverse_edge, has_nontree_edge)
                _same(traversal.dfs_labeled_edges_generator(ours, *args),
                      dgl.dfs_labeled_edges_generator(theirs, *args))
        _same(traversal.dfs_labeled_edges_generator(ours, sources, reverse, True, True, return_labels=False),
              dgl.dfs_labeled_edges_generator(theirs, sources, reverse, True, True, return_labels=False))


@pytest.mark.parametrize("reverse", [False, True])
def test_topological_frontiers_equal_dgl(dgl, reverse):
    for ours, theirs, _ in _random_graphs(dgl, 60, dag=True):
        _same(traversal.topological_nodes_generator(ours, reverse), dgl.topological_nodes_generator(theirs, reverse))


def test_docstring_example_and_empty_traversals_as_dgl(dgl):
    edges = ([0, 1, 1, 2, 2, 3], [1, 2, 3, 3, 4, 5])
    ours, theirs = udgl.graph(edges), dgl.graph(edges)
    _same(traversal.bfs_nodes_generator(ours, 0), dgl.bfs_nodes_generator(theirs, 0))
    _same(traversal.dfs_edges_generator(ours, [0, 3]), dgl.dfs_edges_generator(theirs, [0, 3]))
    for leaf in (5, [4, 5]):   # no out-edge: DFS gives nothing
        _same(traversal.dfs_edges_generator(ours, leaf), dgl.dfs_edges_generator(theirs, leaf))
        _same(traversal.dfs_labeled_edges_generator(ours, leaf), dgl.dfs_labeled_edges_generator(theirs, leaf))
    _same(traversal.bfs_edges_generator(ours, 5), dgl.bfs_edges_generator(theirs, 5))
    _same(traversal.bfs_nodes_generator(ours, []), dgl.bfs_nodes_generator(theirs, []))
    empty_ours, empty_theirs = udgl.graph(([], [])), dgl.graph(([], []))
    _same(traversal.topological_nodes_generator(empty_ours), dgl.topological_nodes_generator(empty_theirs))


@pytest.mark.parametrize("edges", [([0, 1], [1, 0]), ([0], [0]), ([0, 1, 2], [1, 2, 1])])
def test_cycle_has_no_topological_order(dgl, edges):
    with pytest.raises(DGLError, match="cycle"):
        traversal.topological_nodes_generator(udgl.graph(edges, num_nodes=4))
    with pytest.raises(dgl.DGLError):
        dgl.topological_nodes_generator(dgl.graph(edges, num_nodes=4))


# ---------------------------------------------------------------------- propagation
def _message(edges):
    return {"m": edges.src["x"] * 2.0 + edges.data["w"][:, None]}


def _reduce(nodes):
    return {"x": nodes.data["x"] + nodes.mailbox["m"].sum(1)}


def _apply(nodes):
    return {"x": nodes.data["x"] * 0.5 + 1.0}


def _features_after(lib, run, edges, n):
    g = lib.graph(edges, num_nodes=n)
    gen = torch.Generator().manual_seed(3)
    g.ndata["x"] = torch.rand(n, 3, generator=gen, dtype=torch.float64)
    g.edata["w"] = torch.rand(len(edges[0]), generator=gen, dtype=torch.float64)
    run(lib, g)
    return g.ndata["x"]


PATH = ([0, 1, 1, 2, 2, 3, 3, 4, 0], [1, 0, 2, 1, 3, 2, 4, 3, 2])   # a two-way path with a chord
TREE = ([1, 2, 3, 4, 5], [0, 0, 2, 2, 4])
NO_NODES = torch.tensor([], dtype=torch.int64)


def lib_prop(lib):
    return propagate if lib is udgl else lib


def fn_of(lib):
    return ufn if lib is udgl else lib.function


# name: (edges, how to propagate with library `lib` on graph `g`)
RUNS = {
    "bfs": (PATH, lambda lib, g: lib_prop(lib).prop_nodes_bfs(g, 0, _message, _reduce)),
    "bfs_reverse_apply": (PATH, lambda lib, g: lib_prop(lib).prop_nodes_bfs(
        g, [4], _message, _reduce, reverse=True, apply_node_func=_apply)),
    "bfs_builtin": (PATH, lambda lib, g: lib_prop(lib).prop_nodes_bfs(
        g, [1, 3], fn_of(lib).u_mul_e("x", "w", "m"), fn_of(lib).sum("m", "x"))),
    "topo": (TREE, lambda lib, g: lib_prop(lib).prop_nodes_topo(g, _message, _reduce)),
    "topo_reverse": (TREE, lambda lib, g: lib_prop(lib).prop_nodes_topo(
        g, _message, _reduce, reverse=True, apply_node_func=_apply)),
    "dfs": (PATH, lambda lib, g: lib_prop(lib).prop_edges_dfs(g, 0, _message, _reduce)),
    "dfs_all_labels": (PATH, lambda lib, g: lib_prop(lib).prop_edges_dfs(
        g, 0, _message, _reduce, has_reverse_edge=True, has_nontree_edge=True, apply_node_func=_apply)),
    "prop_nodes": (PATH, lambda lib, g: lib_prop(lib).prop_nodes(
        g, [torch.tensor([2, 3]), [0], NO_NODES], fn_of(lib).copy_u("x", "m"), fn_of(lib).max("m", "x"), None)),
    "prop_edges": (PATH, lambda lib, g: lib_prop(lib).prop_edges(
        g, [torch.tensor([0, 4]), torch.tensor([8, 2, 3])], _message, _reduce, _apply)),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_propagation_equals_dgl(dgl, name):
    edges, run = RUNS[name]
    n = max(max(edges[0]), max(edges[1])) + 1
    ours, theirs = _features_after(udgl, run, edges, n), _features_after(dgl, run, edges, n)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


def test_dgl_propagation_examples():
    """DGL's own examples: BFS pulls give a running sum, DFS sends give a cumulative sum."""
    def message(edges):
        return {"m": edges.src["x"]}

    def reduce(nodes):
        return {"x": nodes.data["x"] + nodes.mailbox["m"].sum(1)}

    path = ([0, 1, 1, 2, 2, 3, 3, 4], [1, 0, 2, 1, 3, 2, 4, 3])
    g = udgl.graph(path)
    g.ndata["x"] = torch.ones(5, 2)
    propagate.prop_nodes_bfs(g, 0, message, reduce)
    assert torch.equal(g.ndata["x"][:, 0], torch.tensor([2.0, 4, 6, 8, 9]))
    g.ndata["x"] = torch.ones(5, 2)
    propagate.prop_edges_dfs(g, 0, message, reduce, has_reverse_edge=True)
    assert torch.equal(g.ndata["x"][:, 0], torch.tensor([1.0, 3, 5, 7, 9]))


def test_errors(dgl):
    g = udgl.graph(([0, 1], [1, 2]))
    hg = udgl.heterograph({("a", "x", "b"): ([0], [1]), ("b", "y", "a"): ([1], [0])})
    bipartite = udgl.heterograph({("u", "e", "v"): ([0, 1], [1, 0])})
    block = udgl.to_block(g, torch.tensor([1, 2]))
    bad = [
        (DGLError, "homogeneous", lambda: traversal.bfs_nodes_generator(hg, 0)),
        (DGLError, "bipartite", lambda: traversal.dfs_edges_generator(bipartite, 0)),
        (DGLError, "block", lambda: traversal.topological_nodes_generator(block)),
        (DGLError, "outside", lambda: traversal.bfs_nodes_generator(g, [3])),
        (TypeError, "integers", lambda: traversal.bfs_edges_generator(g, torch.tensor([0.0]))),
        (DGLError, "message_func", lambda: propagate.prop_nodes(g, [[1]])),
        (DGLError, "homogeneous", lambda: propagate.prop_nodes_topo(hg, _message, _reduce)),
        (DGLError, "cycle", lambda: propagate.prop_nodes_topo(udgl.graph(([0, 1], [1, 0])), _message, _reduce)),
    ]
    for error, match, call in bad:
        with pytest.raises(error, match=match):
            call()
