"""The shape of the ops layer: a validated backend registry, a short call path that reads the
graph once, kernels that import nothing above them, caches through ``Graph.memo``, and inputs
that no kernel can read refused before any kernel runs."""
from __future__ import annotations

import ast
import inspect
import pathlib
import re

import pytest
import torch

import unigraph
from conftest import REPO_ROOT
from unigraph import backends as registry
from unigraph import ops
from unigraph.backends import Backend, Contract, Family
from unigraph.backends.scatter import ScatterBackend


@pytest.fixture
def g():
    return unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)


# --------------------------------------------------------------------------- declared contracts
def test_builtin_backends_declare_their_contracts():
    backends = registry.all_backends()
    assert set(backends) >= {"scatter", "sparse", "numba", "triton_node", "triton_edge"}
    assert backends["numba"].contract.dtypes == (torch.float32, torch.float64)
    assert backends["numba"].contract.devices == ("cpu",)
    assert backends["triton_node"].contract.interpreted_on_cpu
    assert "gat_attention" in backends["triton_node"].contract.fused_backward
    assert registry.family("triton").variants == ("triton_node", "triton_edge")
    assert "triton" not in backends  # a family is a name, not a backend
    request = registry.Request("gspmm", "copy_u", "sum", 4, torch.bfloat16, torch.device("cpu"))
    assert "not bfloat16" in backends["numba"].cannot_run(request)


@pytest.mark.parametrize("kwargs,match", [
    (dict(ops=("gspmm", "spmv")), r"Contract.ops holds \['spmv'\]"),
    (dict(dtypes=(torch.int64,)), r"Contract.dtypes holds \[torch.int64\]"),
    (dict(fused=("gat_attention",), ops=("gspmm", "gsddmm")), "Contract.fused holds"),
    (dict(fused_backward=("gat_attention",)), "Contract.fused_backward holds"),
    (dict(devices=("",)), "Contract.devices must be device type names"),
])
def test_contracts_are_validated(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Contract(**kwargs)


class _NoKernels(Backend):
    name = "no_kernels"


class _FusedWithoutKernel(ScatterBackend):
    name = "fused_without_kernel"
    contract = Contract(fused=("edge_softmax",))  # but it inherits the composed edge_softmax


class _FusedBackwardWithoutKernel(ScatterBackend):
    name = "fused_backward_without_kernel"
    contract = Contract(fused=("gat_attention",), fused_backward=("gat_attention",))

    def gat_attention(self, *args):
        return super().gat_attention(*args)


def test_registration_is_validated():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(ScatterBackend())
    with pytest.raises(ValueError, match="other than 'auto'"):
        registry.register(type("Auto", (ScatterBackend,), {"name": "auto"})())
    with pytest.raises(TypeError, match="does not implement"):
        registry.register(_NoKernels())
    with pytest.raises(TypeError, match="declares ops that need edge_softmax, which it does not implement"):
        registry.register(_FusedWithoutKernel())
    with pytest.raises(TypeError, match="fused gat_attention backward but does not implement it"):
        registry.register(_FusedBackwardWithoutKernel())
    with pytest.raises(TypeError, match="takes a unigraph.backends.Backend"):
        registry.register("scatter")
    with pytest.raises(ValueError, match="needs registered variants; missing: \\['nowhere'\\]"):
        registry.register_family(Family("fam", ("scatter", "nowhere")))
    assert "no_kernels" not in registry.names() and "fam" not in registry.names()


def test_a_family_name_is_resolved_by_the_selector_not_looked_up(g):
    with pytest.raises(ValueError, match="'triton' is a family of backends"):
        registry.get("triton")
    with pytest.raises(ValueError, match="unknown backend 'bogus'; choose one of: auto, scatter"):
        registry.get("bogus")


# --------------------------------------------------------------------------- the call path
class _Recorder(ScatterBackend):
    """Scatter kernels that record the Python frames between the op's front door and them."""

    def __init__(self, name):
        self.name, self.frames = name, []

    def _record(self, front_door: str):
        names = []
        for frame in inspect.stack()[2:]:  # above _record and the backend method
            names.append(frame.function)
            if frame.function == front_door and frame.filename.endswith("ops/__init__.py"):
                break
        self.frames.append(names)

    def gspmm(self, g, op, reduce, u, e):
        self._record("gspmm")
        return super().gspmm(g, op, reduce, u, e)

    def gsddmm(self, g, op, lhs, rhs, lhs_target, rhs_target):
        self._record("gsddmm")
        return super().gsddmm(g, op, lhs, rhs, lhs_target, rhs_target)


@pytest.fixture
def recorder():
    backend = registry.register(_Recorder("recorder"))
    yield backend
    registry.unregister("recorder")


def test_the_path_from_the_front_door_to_the_backend_is_short(g, recorder):
    """ops.gspmm -> call_gspmm -> Function.apply -> GSpMM.forward -> backend.gspmm (DGL takes 4)."""
    ops.gspmm(g, "copy_u", "sum", torch.ones(3, 2), backend="recorder")
    ops.gsddmm(g, "add", torch.ones(3, 2), torch.ones(3, 2), backend="recorder")
    for frames in recorder.frames:
        assert len(frames) <= 4, frames  # the frames above backend.gspmm, the front door included
        assert frames[-1] in ("gspmm", "gsddmm") and frames[0] == "forward"


def test_every_op_reads_the_graph_through_one_method_call(g, monkeypatch):
    """The front door takes ``g.tensors()`` exactly once per call (where a guard can sit)."""
    calls = []
    original = unigraph.Graph.tensors
    monkeypatch.setattr(unigraph.Graph, "tensors", lambda self: calls.append(1) or original(self))
    x, e = torch.randn(3, 2, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    h, el, er = (torch.randn(shape, requires_grad=True) for shape in ((3, 2, 2), (3, 2), (3, 2)))
    for name, call in [("gspmm", lambda b: ops.gspmm(g, "u_mul_e", "max", x, e, backend=b)),
                       ("gsddmm", lambda b: ops.gsddmm(g, "dot", x, x, backend=b)),
                       ("edge_softmax", lambda b: ops.edge_softmax(g, e, backend=b)),
                       ("gat_attention", lambda b: ops.gat_attention(g, h, el, er, backend=b))]:
        for backend in (None, "scatter", "numba"):
            calls.clear()
            call(backend).sum().backward()  # the backward reuses the forward's tensors
            assert len(calls) == 1, (name, backend, len(calls))


# --------------------------------------------------------------------------- layering
def _imports(path: pathlib.Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_kernels_import_nothing_above_them():
    kernels = sorted((REPO_ROOT / "kernels").rglob("*.py"))
    assert kernels
    for path in kernels:
        above = [m for m in _imports(path) if m.startswith("unigraph") and not m.startswith("unigraph.kernels")]
        assert not above, f"{path.relative_to(REPO_ROOT)} imports {above}"


def test_graph_caches_are_written_through_the_memo_only():
    """Layers, the selector and samplers use Graph.memo, never Graph._cache (graph.py owns it)."""
    offenders = []
    for root in ("unigraph", "backends", "kernels"):
        for path in sorted((REPO_ROOT / root).rglob("*.py")):
            if path.name == "graph.py" and path.parent.name == "unigraph":
                continue
            if re.search(r"\._cache\b", path.read_text()):
                offenders.append(str(path.relative_to(REPO_ROOT)))
    assert not offenders


def test_memo_builds_once_per_graph_and_key(g):
    built = []
    assert g.memo(("test", 1), lambda: built.append(1) or "value") == "value"
    assert g.memo(("test", 1), lambda: built.append(1) or "other") == "value"
    assert g.memo(("test", 2), lambda: "second") == "second" and built == [1]
    assert unigraph.Graph(g.edge_index, num_nodes=3).memo(("test", 1), lambda: "fresh") == "fresh"


# --------------------------------------------------------------------------- tensors no kernel can read
def _calls(x):
    """One call per op taking ``x`` where it takes a [3, 2] node tensor / [4, 2] edge tensor."""
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    return [("gspmm", lambda: ops.gspmm(g, "copy_u", "sum", x)),
            ("gsddmm", lambda: ops.gsddmm(g, "add", x, torch.ones(3, 2))),
            ("gat_attention", lambda: ops.gat_attention(g, x.reshape(3, 2, 1) if x.layout == torch.strided
                                                        and not x.is_nested else x, torch.ones(3, 2),
                                                        torch.ones(3, 2)))]


@pytest.mark.parametrize("kind,make,error,match", [
    ("meta", lambda: torch.ones(3, 2, device="meta"), ValueError, "is on meta but the graph is on cpu: a meta tensor"),
    ("sparse", lambda: torch.ones(3, 2).to_sparse(), TypeError, "torch.sparse_coo tensor.*dense"),
    ("sparse_csr", lambda: torch.ones(3, 2).to_sparse_csr(), TypeError, "torch.sparse_csr tensor"),
    ("nested", lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3), torch.ones(1)]), TypeError,
     "nested tensor"),
    ("complex", lambda: torch.ones(3, 2, dtype=torch.complex64), TypeError, "floating-point.*complex64"),
    ("quantized", lambda: torch.quantize_per_tensor(torch.ones(3, 2), 0.1, 0, torch.quint8), TypeError,
     "floating-point.*quint8"),
])
def test_unsupported_tensor_kinds_are_refused_naming_the_op(kind, make, error, match):
    for op, call in _calls(make()):
        with pytest.raises(error, match=f"^{op}: .*{match}"):
            call()
    g = unigraph.Graph(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    with pytest.raises(error, match=f"^edge_softmax: .*{match}"):
        ops.edge_softmax(g, make())
