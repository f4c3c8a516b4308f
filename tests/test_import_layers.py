"""The import graph of the package, read from the source with ``ast`` (nothing is imported).

Two rules of the layering (docs/porting_from_dgl.md, unigraph/user_graph.py):

* the core graph (``unigraph/graph.py``) sits in no import circle: it imports only modules
  that never import it back, directly or not;
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


def test_the_reader_sees_the_known_arrows():
    graph = import_graph()
    assert "unigraph.graph" in graph["unigraph.ops"]
    assert "unigraph.ops" in graph["unigraph.message_passing.lazy"]
    assert "unigraph.graph_compat" in graph["unigraph.graph"]
    assert "unigraph.message_passing.dgl_style" in graph["unigraph.user_graph"]
    # a circle the reader must find: a -> b -> a
    assert _circle_through({"a": {"b"}, "b": {"c", "a"}, "c": set()}, "a") == ["a", "b", "a"]


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
