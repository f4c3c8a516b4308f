"""MetaLayer against PyG's: a full edge/node/global model (PyG's documented example) in float64,
outputs and gradients; which models are called with what; str(); errors."""
import pytest
import torch
from torch.nn import Linear, ReLU, Sequential

from pyg_compare import TOL
from unigraph.nn.models import MetaLayer

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")


def _mean_by(values, index, size):
    sums = values.new_zeros(size, values.size(-1)).index_add_(0, index, values)
    return sums / torch.bincount(index, minlength=size).clamp(min=1).unsqueeze(-1)


class EdgeModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Sequential(Linear(2 * 4 + 3 + 2, 3), ReLU(), Linear(3, 3))

    def forward(self, src, dst, edge_attr, u, batch):
        return self.mlp(torch.cat([src, dst, edge_attr, u[batch]], dim=1))


class NodeModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Sequential(Linear(4 + 3 + 2, 4), ReLU(), Linear(4, 4))

    def forward(self, x, edge_index, edge_attr, u, batch):
        msg = _mean_by(torch.cat([x[edge_index[0]], edge_attr], 1), edge_index[1], x.size(0))
        return self.mlp(torch.cat([msg[:, :4] + x, msg[:, 4:], u[batch]], dim=1))


class GlobalModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Linear(2 + 4, 2)

    def forward(self, x, edge_index, edge_attr, u, batch):
        return self.mlp(torch.cat([u, _mean_by(x, batch, u.size(0))], dim=1))


def test_full_block_matches_pyg():
    torch.manual_seed(0)
    models = (EdgeModel(), NodeModel(), GlobalModel())
    theirs = pyg_models.MetaLayer(*models).double()
    ours = MetaLayer(*models).double()
    assert str(ours) == str(theirs)
    x = torch.randn(8, 4, dtype=torch.float64)
    ei = torch.cat([torch.randint(0, 4, (2, 10)), 4 + torch.randint(0, 4, (2, 10))], dim=1)
    ea, u = torch.randn(20, 3, dtype=torch.float64), torch.randn(2, 2, dtype=torch.float64)
    batch = torch.tensor([0] * 4 + [1] * 4)
    results = []
    for layer in (theirs, ours):
        layer.zero_grad()
        inputs = [t.clone().requires_grad_() for t in (x, ea, u)]
        out = layer(inputs[0], ei, inputs[1], inputs[2], batch)
        sum(o.square().sum() for o in out).backward()
        grads = [t.grad for t in inputs] + [p.grad.clone() for p in layer.parameters()]
        results.append(list(out) + grads)
    for mine, reference in zip(results[1], results[0]):
        torch.testing.assert_close(mine, reference, **TOL)


def test_models_are_optional_and_get_pyg_arguments():
    calls = []

    def record(*args):
        calls.append(args)
        return args[0]

    x, ei = torch.randn(5, 2), torch.tensor([[0, 1, 4], [2, 3, 0]])
    batch = torch.tensor([0, 0, 1, 1, 1])
    out = MetaLayer(record, None, None)(x, ei, None, None, batch)
    assert torch.equal(calls[0][0], x[ei[0]]) and torch.equal(calls[0][1], x[ei[1]])
    assert torch.equal(calls[0][4], batch[ei[0]])
    assert out[0] is x and torch.equal(out[1], x[ei[0]]) and out[2] is None
    assert MetaLayer()(x, ei) == (x, None, None)
    assert str(MetaLayer()) == ("MetaLayer(\n  edge_model=None,\n  node_model=None,\n"
                                "  global_model=None\n)")


def test_bad_edge_index():
    with pytest.raises(ValueError, match="edge_index"):
        MetaLayer()(torch.randn(3, 2), torch.tensor([0, 1, 2]))
