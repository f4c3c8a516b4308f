"""The import graph of the package, read from the source with ``ast`` (nothing is imported).

The rules of the layering (docs/porting_from_dgl.md, unigraph/user_graph.py):

* no import circle anywhere in ``unigraph/``, ``backends/`` or ``kernels/``: every module imports
  only modules that never import it back, directly or not (a failure names each circle, module
  by module, and what to do);
* in particular the core graph (``unigraph/graph.py``) and the user-facing graph
  (``unigraph/user_graph.py``) import none of the modules that build graphs for users;
* the DGL face (``unigraph/dgl/``) is the top: no module outside it imports it.

Every import counts, including those inside functions and under ``TYPE_CHECKING``: a lazy
import is still an arrow. Importing ``a.b.c`` also runs ``a/__init__.py``; those implicit arrows
to package faces are not counted (a package's face re-exports what lies below it).
"""
from __future__ import annotations

import ast
import functools
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
# directory -> dotted prefix it installs as (pyproject's package-dir mapping)
PACKAGES = {"unigraph": "unigraph", "backends": "unigraph.backends", "kernels": "unigraph.kernels"}


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for directory, prefix in PACKAGES.items():
        for path in (ROOT / directory).rglob("*.py"):
            parts = list(path.relative_to(ROOT / directory).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([prefix, *parts])] = path
    return found


def _imports(name: str, path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The project modules ``name`` imports (the most specific module each import names)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in modules:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
    return targets


@functools.lru_cache(maxsize=1)  # one read of the tree for the three tests
def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _circle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A shortest import circle through ``start`` (breadth-first from its imports), or None."""
    parents = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph.get(node, ())):
                if target == start:
                    path = [node]
                    while parents[path[-1]] is not None:
                        path.append(parents[path[-1]])
                    return [start] + path[::-1][1:] + [start]
                if target not in parents:
                    parents[target] = node
                    following.append(target)
        frontier = following
    return None


def import_circles(graph: dict[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """``(group, circle)`` for every strongly connected group of modules (Tarjan's algorithm,
    iterative), with one shortest circle through its first module: empty when the imports form
    no circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return [(group, _circle_through({m: graph.get(m, set()) & set(group) for m in group}, group[0]))
            for group in groups]


def test_the_reader_sees_the_known_arrows():
    graph = import_graph()
    assert "unigraph.graph" in graph["unigraph.ops"]
    assert "unigraph.ops" in graph["unigraph.message_passing.lazy"]
    assert "unigraph.graph_compat" in graph["unigraph.graph"]
    assert "unigraph.message_passing.dgl_style" in graph["unigraph.user_graph"]
    # circles the reader must find: a -> b -> a, and every separate one
    assert _circle_through({"a": {"b"}, "b": {"c", "a"}, "c": set()}, "a") == ["a", "b", "a"]
    assert import_circles({"a": {"b"}, "b": {"c", "a"}, "c": set(), "d": {"e"}, "e": {"f"}, "f": {"d", "a"}}) == [
        (["a", "b"], ["a", "b", "a"]), (["d", "e", "f"], ["d", "e", "f", "d"])]
    assert import_circles({"a": {"b", "c"}, "b": {"a"}, "c": {"a"}}) == [(["a", "b", "c"], ["a", "b", "a"])]
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    # a lazy import (inside a function) is an arrow too
    assert "unigraph.backends.numba" in graph["unigraph.backends"]


def test_no_import_circle_anywhere():
    circles = import_circles(import_graph())
    lines = ["  " + " -> ".join(circle) + (f"   (circles join {', '.join(group)})" if len(group) >= len(circle) else "")
             for group, circle in circles]
    assert not circles, (
        f"{len(circles)} import circle(s) among unigraph/, backends/ and kernels/ (an import inside a function "
        "counts too: it only hides the circle). Move what both sides use down into a module both import:\n"
        + "\n".join(lines))


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_user_graph_sits_below_every_module_that_builds_graphs_for_users():
    """unigraph.Graph is what datasets, samplers, loaders, heterographs and the link tasks hand
    out: they import it, so it must reach none of them (nor the core graph)."""
    graph = import_graph()
    builders = sorted(name for name, targets in graph.items() if "unigraph.user_graph" in targets)
    assert {"unigraph.data.generators", "unigraph.sampling.batch", "unigraph.hetero.graph",
            "unigraph.tasks.link.loader", "unigraph.data.batch"} <= set(builders)
    for below in ("unigraph.user_graph", "unigraph.graph"):
        reached = sorted(_reachable(graph, below) & set(builders))
        assert not reached, f"{below} imports (directly or not) modules that import unigraph.user_graph: {reached}"


def test_no_import_circle_through_the_core_graph():
    graph = import_graph()
    circle = _circle_through(graph, "unigraph.graph")
    assert circle is None, "import circle through unigraph/graph.py: " + " -> ".join(circle)


def test_nothing_below_the_dgl_face_imports_it():
    graph = import_graph()
    offenders = sorted(f"{name} imports {target}" for name, targets in graph.items()
                       if not (name == "unigraph.dgl" or name.startswith("unigraph.dgl."))
                       for target in targets if target == "unigraph.dgl" or target.startswith("unigraph.dgl."))
    assert not offenders, offenders
