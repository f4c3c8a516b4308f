"""SplineConv: its B-spline basis and weighting, written in torch, against an independent
reference, and the layer against PyG's.

PyG's SplineConv needs ``pyg_lib`` (its compiled ``spline_basis``/``spline_weighting``), which is
not installed here. So the basis is checked against a reference built differently: the uniform
B-spline by the Cox-de Boor recursion, knot by knot, and the weighting by gathering each edge's
weight matrices (``einsum``). PyG's layer (its propagation, root term, bias, call forms) then runs
with that reference in place of ``pyg_lib``'s two kernels, and ours must equal it in values and
gradients. Where ``pyg_lib`` is installed, ``test_equals_pyg_lib`` compares with PyG's own
kernels too.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges
from unigraph.nn.spline_conv import spline_basis, spline_weighting

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
pyg_spline = pytest.importorskip("torch_geometric.nn.conv.spline_conv")
# PyG's layer warns on every CPU call (about its own kernels)
pytestmark = pytest.mark.filterwarnings("ignore:We do not recommend using the non-optimized CPU version")


# ---------------------------------------------------------------------- the reference
def cardinal_bspline(degree: int, t: torch.Tensor) -> torch.Tensor:
    """The uniform B-spline of ``degree`` (support [0, degree + 1]) by the Cox-de Boor recursion."""
    if degree == 0:
        return ((t >= 0) & (t < 1)).to(t.dtype)
    return (t * cardinal_bspline(degree - 1, t) + (degree + 1 - t) * cardinal_bspline(degree - 1, t - 1)) / degree


def reference_basis(pseudo, kernel_size, is_open_spline, degree):
    """PyG's ``spline_basis`` contract: for offsets ``k`` (dimension 0 varying fastest) the knot
    ``(trunc(v_d) + k_d) mod K_d`` with weight ``prod_d M(frac(v_d) + degree - k_d)``,
    ``v_d = pseudo_d * (K_d - degree * open_d)``."""
    sizes, opens = kernel_size.tolist(), is_open_spline.tolist()
    columns, indices = [], []
    for reversed_offsets in itertools.product(range(degree + 1), repeat=pseudo.shape[1]):
        offsets = reversed_offsets[::-1]
        value, index, stride = torch.ones_like(pseudo[:, 0]), torch.zeros(pseudo.shape[0], dtype=torch.long), 1
        for d, (k, size, is_open) in enumerate(zip(offsets, sizes, opens)):
            v = pseudo[:, d] * (size - degree * is_open)
            value = value * cardinal_bspline(degree, v - v.detach().floor() + degree - k)
            index = index + ((v.detach().trunc().long() + k) % size) * stride
            stride *= size
        columns.append(value)
        indices.append(index)
    return torch.stack(columns, 1), torch.stack(indices, 1)


def reference_weighting(x, weight, basis, weight_index):
    return torch.einsum("es,ei,esio->eo", basis, x, weight[weight_index])


@pytest.fixture
def pyg_with_reference_kernels(monkeypatch):
    """PyG's SplineConv with the reference standing in for pyg_lib's kernels (where it is missing)."""
    if pyg_spline.spline_basis is None:
        monkeypatch.setattr(pyg_spline, "spline_basis", reference_basis)
        monkeypatch.setattr(pyg_spline, "spline_weighting", reference_weighting)
    return pyg_nn.SplineConv


# ---------------------------------------------------------------------- the basis
@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("dims", [(4,), (3, 5), (4, 3, 5)])
def test_basis_equals_the_cox_de_boor_reference(degree, dims):
    """Values and pseudo-coordinate gradients, open and closed dimensions mixed, pseudo-coordinates
    on the knots and at 0 and 1 included."""
    gen = torch.Generator().manual_seed(degree)
    num_dims = len(dims)
    kernel_size = torch.tensor(dims)
    for opens in {(1,) * num_dims, (0,) * num_dims, tuple(d % 2 for d in range(num_dims))}:
        is_open = torch.tensor(opens, dtype=torch.uint8)
        pseudo = torch.rand(40, num_dims, dtype=torch.float64, generator=gen)
        pseudo[:3] = torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64).view(3, 1)
        pseudo_ref = pseudo.clone().requires_grad_()
        pseudo = pseudo.requires_grad_()
        basis, index = spline_basis(pseudo, kernel_size, is_open, degree)
        expected, expected_index = reference_basis(pseudo_ref, kernel_size, is_open, degree)
        assert torch.equal(index, expected_index)
        torch.testing.assert_close(basis, expected, **TOL)
        torch.testing.assert_close(basis.detach().sum(1), torch.ones(40, dtype=torch.float64), **TOL)
        grad = torch.randn(basis.shape, dtype=torch.float64, generator=gen)
        (basis * grad).sum().backward()
        (expected * grad).sum().backward()
        torch.testing.assert_close(pseudo.grad, pseudo_ref.grad, **TOL)


def test_weighting_equals_the_gathered_matrices():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(12, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.randn(10, 3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    basis = torch.rand(12, 8, dtype=torch.float64, generator=gen, requires_grad=True)
    index = torch.randint(0, 10, (12, 8), generator=gen)
    out, expected = spline_weighting(x, weight, basis, index), reference_weighting(x, weight, basis, index)
    torch.testing.assert_close(out, expected, **TOL)
    grad = torch.randn(out.shape, dtype=torch.float64, generator=gen)
    ours = torch.autograd.grad((out * grad).sum(), (x, weight, basis))
    theirs = torch.autograd.grad((expected * grad).sum(), (x, weight, basis))
    for mine, reference in zip(ours, theirs):
        torch.testing.assert_close(mine, reference, **TOL)


# ---------------------------------------------------------------------- the layer
def pair(reference, in_channels=4, seed: int = 0, **options):
    torch.manual_seed(seed)
    options.setdefault("dim", 3)
    options.setdefault("kernel_size", 4)
    theirs = reference(in_channels, 6, **options)
    ours = loaded(theirs, U.SplineConv(in_channels, 6, **options))
    return theirs, ours


def inputs(num_nodes: int = 9, num_edges: int = 24, width: int = 4, dim: int = 3):
    x = torch.randn(num_nodes, width, dtype=torch.float64)
    return x, random_edges(num_nodes, num_edges), torch.rand(num_edges, dim, dtype=torch.float64)


@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("is_open_spline", [True, [True, False]])
@pytest.mark.parametrize("aggr", ["mean", "add", "max"])
def test_options_equal_pygs(pyg_with_reference_kernels, degree, is_open_spline, aggr):
    theirs, ours = pair(pyg_with_reference_kernels, kernel_size=[5, 3], is_open_spline=is_open_spline,
                        degree=degree, aggr=aggr)
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, edge_attr)


@pytest.mark.parametrize("root_weight", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_root_and_bias_equal_pygs(pyg_with_reference_kernels, root_weight, bias):
    theirs, ours = pair(pyg_with_reference_kernels, root_weight=root_weight, bias=bias)
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, edge_attr, size=(9, 9))


def test_call_forms_equal_pygs(pyg_with_reference_kernels):
    from torch_sparse import SparseTensor
    theirs, ours = pair(pyg_with_reference_kernels, (4, 7))
    x_src, x_dst = torch.randn(8, 4, dtype=torch.float64), torch.randn(3, 7, dtype=torch.float64)
    edge_index, edge_attr = random_edges(8, 20, num_dst=3), torch.rand(20, 3, dtype=torch.float64)
    assert assert_same(theirs, ours, (x_src, x_dst), edge_index, edge_attr).shape == (3, 6)
    assert_same(theirs, ours, (x_src, None), edge_index, edge_attr, (8, 3))
    assert_same(theirs, ours, (x_src, x_dst), SparseTensor.from_edge_index(edge_index, edge_attr, (8, 3)).t())
    theirs, ours = pair(pyg_with_reference_kernels, flow="target_to_source")
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, edge_attr)
    theirs.flow = ours.flow = "source_to_target"
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_attr, (9, 9, 3), check_invariants=True).coalesce()
    assert_same(theirs, ours, x, coo)
    expected = theirs(x, edge_index, edge_attr)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=9), x, edge_attr), expected, **TOL)
    assert_same(theirs, ours, x, torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 3, dtype=torch.float64))


def test_one_dimensional_pseudo_coordinates(pyg_with_reference_kernels):
    theirs, ours = pair(pyg_with_reference_kernels, dim=1, kernel_size=5, degree=2)
    x, edge_index, edge_attr = inputs(dim=1)
    assert_same(theirs, ours, x, edge_index, edge_attr)


def test_lazy_width_repr_and_state_dict(pyg_with_reference_kernels):
    torch.manual_seed(0)
    theirs = pyg_with_reference_kernels((-1, -1), 6, dim=3, kernel_size=[3, 4]).double()
    ours = U.SplineConv((-1, -1), 6, dim=3, kernel_size=[3, 4]).double()
    assert str(ours) == str(theirs) == "SplineConv((-1, -1), 6, dim=3)"
    x, edge_index, edge_attr = inputs()
    x = (x, torch.randn(9, 5, dtype=torch.float64))
    theirs(x, edge_index, edge_attr), ours(x, edge_index, edge_attr)   # each sized and initialized
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name, value in theirs.state_dict().items():
        assert ours.state_dict()[name].shape == value.shape, name
    assert torch.equal(ours.kernel_size, torch.tensor([3, 4, 4])) and ours.K == theirs.K == 48
    assert ours.weight.abs().max() <= 1 / math.sqrt(48 * 4)   # PyG's uniform(K * F_in)
    assert_same(theirs, loaded(theirs, ours), x, edge_index, edge_attr)


@pytest.mark.skipif(pyg_spline.spline_basis is None, reason="pyg_lib (PyG's spline kernels) is not installed")
@pytest.mark.parametrize("degree", [1, 2, 3])
def test_equals_pyg_lib(degree):
    theirs, ours = pair(pyg_nn.SplineConv, kernel_size=[5, 3, 4], is_open_spline=[True, False], degree=degree)
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, edge_attr)


def test_refusals():
    ours = U.SplineConv(4, 6, dim=3, kernel_size=4).double()
    x, edge_index, edge_attr = inputs()
    with pytest.raises(ValueError, match="needs edge_attr"):
        ours(x, edge_index)
    with pytest.raises(ValueError, match="edge_attr with 3 features"):
        ours(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match="x with 4 features"):
        ours(torch.randn(9, 5, dtype=torch.float64), edge_index, edge_attr)
    with pytest.raises(ValueError, match="degree must be 1, 2 or 3"):
        U.SplineConv(4, 6, dim=3, kernel_size=4, degree=4)
    with pytest.raises(ValueError, match="kernel_size must be positive"):
        U.SplineConv(4, 6, dim=2, kernel_size=[3, 0])
    with pytest.raises(ValueError, match="needs kernel_size >= 2"):
        U.SplineConv(4, 6, dim=1, kernel_size=1, degree=2)
