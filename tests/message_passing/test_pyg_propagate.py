"""A PyG layer as PyG's docs write it: ``self.propagate(edge_index, x=x, size=None)`` with an
edge_index, a sparse adj_t or a SparseTensor, aggregation modules as ``aggr``, an ``aggregate``
override with PyG's parameters, ``edge_updater`` (unigraph/message_passing/pyg_adjacency.py).
Each form is compared with the same layer on a unigraph.Graph, or with the sums written out."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph import MessagePassing
from unigraph.nn import aggr as aggregations


class Weighted(MessagePassing):
    """x_j, times edge_weight where given; a (src, dst) pair adds the destination's own row."""

    def forward(self, x, edge_index, edge_weight=None, size=None):
        return self.propagate(edge_index, x=x, edge_weight=edge_weight, size=size)

    def message(self, x_j, edge_weight):
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j


class Difference(MessagePassing):
    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=x)

    def message(self, x_i, x_j):
        return x_j - 2 * x_i


def _edges(seed=0, n=7, e=20):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (2, e), generator=gen), torch.randn(n, 3, generator=gen, dtype=torch.float64)


def _on_graph(layer, g, **kwargs):
    return layer.propagate(g, **kwargs)


@pytest.mark.parametrize("aggr", ["sum", "mean", "max"])
@pytest.mark.parametrize("fuse", [True, False])
def test_edge_index_is_the_graph_of_its_rows(aggr, fuse):
    edge_index, x = _edges()
    w = torch.rand(edge_index.shape[1], dtype=torch.float64)
    for layer, kwargs in ((Weighted(aggr=aggr, fuse=fuse), {"edge_weight": w}), (Difference(aggr=aggr, fuse=fuse), {})):
        g = unigraph.Graph(edge_index, num_nodes=7)
        expected = _on_graph(layer, g, x=x, **kwargs)
        torch.testing.assert_close(layer.propagate(edge_index, x=x, **kwargs), expected)
        torch.testing.assert_close(layer.propagate(edge_index=edge_index, x=x, **kwargs), expected)   # PyG's keyword
        torch.testing.assert_close(layer.propagate(edge_index, x=x, size=(7, 7), **kwargs), expected)
        torch.testing.assert_close(layer.propagate(edge_index.int(), x=x, **kwargs), expected)


def test_counts_follow_pygs_size_rule():
    edge_index = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])
    x_src, x_dst = torch.randn(4, 2), torch.randn(3, 2)
    layer = Weighted()
    block = unigraph.Graph(edge_index, num_src_nodes=4, num_dst_nodes=3)
    # a pair sets both sides; a size gives them; (x, None) with a size: the destinations from it
    torch.testing.assert_close(layer.propagate(edge_index, x=(x_src, x_dst), edge_weight=None),
                               layer.propagate(block, x=(x_src, x_dst), edge_weight=None))
    torch.testing.assert_close(layer.propagate(edge_index, x=(x_src, None), edge_weight=None, size=(4, 3)),
                               layer.propagate(block, x=(x_src, None), edge_weight=None))
    # unknown side: square, as PyG
    assert layer.propagate(edge_index, x=(x_src, None), edge_weight=None).shape == (4, 2)
    with pytest.raises(ValueError, match=r"x has 4 rows but the graph's destination side \(edge_index\[1\]\) counts 3"):
        Difference().propagate(edge_index, x=x_src, size=(4, 3))   # x_i reads the destinations from x too
    with pytest.raises(ValueError, match="size must be a pair"):
        layer.propagate(edge_index, x=x_src, edge_weight=None, size=(4,))


def test_size_is_handed_to_a_message_that_reads_it_and_counts_come_from_indices_without_tensors():
    seen = []

    class Ones(MessagePassing):
        def message(self, w, size):
            seen.append(size)
            return w.view(-1, 1)

    edge_index = torch.tensor([[0, 4, 2], [1, 1, 3]])
    out = Ones(fuse=False).propagate(edge_index, w=torch.ones(3))
    # no node tensor: each side up to its largest index (PyG's aggregation: index.max() + 1 rows)
    torch.testing.assert_close(out, torch.tensor([[0.0], [2.0], [0.0], [1.0]]))
    assert seen == [[None, None]]


def test_target_to_source_reverses_and_a_sparse_adjacency_refuses_it():
    edge_index, x = _edges(1)
    layer = Difference(flow="target_to_source")
    expected = Difference().propagate(unigraph.Graph(edge_index.flip(0), num_nodes=7), x=x)
    torch.testing.assert_close(layer.propagate(edge_index, x=x), expected)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(20, dtype=torch.float64), (7, 7)).coalesce()
    with pytest.raises(ValueError, match="target_to_source' is invalid with a sparse adjacency"):
        layer.propagate(adj_t, x=x)


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_a_sparse_adj_t_gives_its_values_as_edge_weight_and_its_gradient(layout):
    edge_index = torch.tensor([[0, 1, 2, 3, 3], [0, 0, 1, 1, 2]])
    x = torch.randn(4, 3, dtype=torch.float64)
    values = torch.rand(5, dtype=torch.float64)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), values, (3, 4)).coalesce()
    adj_t = adj_t if layout == "coo" else adj_t.to_sparse_csr()
    layer = Weighted()
    block = unigraph.Graph(edge_index, num_src_nodes=4, num_dst_nodes=3)
    expected = layer.propagate(block, x=(x, None), edge_weight=values)   # storage order = (dst, src) order here
    torch.testing.assert_close(layer.propagate(adj_t, x=(x, None)), expected)
    # an explicit edge_weight wins over the values (PyG's rule: only a missing one is filled)
    torch.testing.assert_close(layer.propagate(adj_t, x=(x, None), edge_weight=2 * values), 2 * expected)
    grad_adj = adj_t.detach().requires_grad_()
    layer.propagate(grad_adj, x=(x, None)).sum().backward()
    assert grad_adj.grad is not None


def test_a_sparse_tensor_adjacency():
    torch_sparse = pytest.importorskip("torch_sparse")
    edge_index, x = _edges(2)
    values = torch.rand(20, dtype=torch.float64)
    adj_t = torch_sparse.SparseTensor.from_edge_index(edge_index, values, (7, 7)).t()
    row, col, stored = adj_t.coo()   # storage order: row = destination
    g = unigraph.Graph(torch.stack([col, row]), num_nodes=7)
    torch.testing.assert_close(Weighted().propagate(adj_t, x=x), Weighted().propagate(g, x=x, edge_weight=stored))


def test_a_cached_graph_follows_in_place_changes_of_edge_index():
    edge_index, x = _edges(3)
    layer = Difference()
    first = layer.propagate(edge_index, x=x)
    edge_index[0, :5] = (edge_index[0, :5] + 1) % 7   # in place: a new version, so a new graph
    torch.testing.assert_close(layer.propagate(edge_index, x=x),
                               layer.propagate(unigraph.Graph(edge_index.clone(), num_nodes=7), x=x))
    assert not torch.equal(first, layer.propagate(edge_index, x=x))


def test_an_index_out_of_range_is_a_value_error_and_an_index_error():
    x = torch.randn(3, 2)
    for edge_index in (torch.tensor([[-1, 1], [0, 0]]), torch.tensor([[0, 3], [0, 0]])):
        with pytest.raises(IndexError, match="valid indices are 0..2"):
            Weighted().propagate(edge_index, x=x, edge_weight=None)
        with pytest.raises(ValueError, match="valid indices are 0..2"):
            Weighted().propagate(edge_index, x=x, edge_weight=None)


def test_pygs_default_node_dim_refuses_features_that_are_not_two_dimensional():
    edge_index = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"node_dim=-2 \(PyG's default\).*shape \[2, 3, 4\].*pass node_dim=0"):
        Weighted().propagate(edge_index, x=torch.randn(2, 3, 4), edge_weight=None)   # PyG: 3 nodes; refused
    heads = torch.randn(3, 2, 4)
    out = Weighted(node_dim=0).propagate(edge_index, x=heads, edge_weight=None)
    torch.testing.assert_close(out, torch.stack([torch.zeros(2, 4), heads[0], heads[1]]))


@pytest.mark.parametrize("module", [aggregations.MeanAggregation(), aggregations.SoftmaxAggregation(learn=True),
                                    ["mean", "max"], "std"])
def test_an_aggregation_module_as_aggr(module):
    edge_index, x = _edges(4)
    x.requires_grad_()
    layer = Difference(aggr=module)
    assert isinstance(layer.aggr_module, aggregations.Aggregation)
    out = layer.propagate(edge_index, x=x)
    messages = x[edge_index[0]] - 2 * x[edge_index[1]]
    expected = layer.aggr_module(messages, edge_index[1], dim_size=7, dim=0)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    for parameter in layer.aggr_module.parameters():
        assert parameter.grad is not None
    assert float(Difference(aggr="power_mean", aggr_kwargs={"p": 3.0}).aggr_module.p) == 3.0


def test_an_aggregate_written_with_pygs_parameters_and_tuple_messages():
    class Both(MessagePassing):
        def message(self, x_j):
            return x_j, 2 * x_j

        def aggregate(self, inputs, index, dim_size, ptr=None):
            assert ptr is None
            sums = torch.zeros(dim_size, inputs[0].shape[1], dtype=inputs[0].dtype)
            return sums.index_add(0, index, inputs[0]), sums.index_add(0, index, inputs[1])

        def update(self, inputs):
            return inputs

    edge_index, x = _edges(5)
    first, second = Both().propagate(edge_index, x=x)
    expected = unigraph.ops.gspmm(unigraph.Graph(edge_index, num_nodes=7), "copy_u", "sum", x)
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(second, 2 * expected)


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
def test_edge_updater(flow):
    class EdgeDifference(MessagePassing):
        def forward(self, x, edge_index):
            e = self.edge_updater(edge_index, x=x)
            return e, self.propagate(edge_index, e=e, size=(x.shape[0], x.shape[0]))

        def edge_update(self, x_j, x_i):
            return x_j - x_i

        def message(self, e):
            return e

    edge_index, x = _edges(6)
    e, out = EdgeDifference(flow=flow)(x, edge_index)
    src, dst = edge_index if flow == "source_to_target" else edge_index.flip(0)
    torch.testing.assert_close(e, x[src] - x[dst])
    torch.testing.assert_close(out, torch.zeros_like(x).index_add(0, dst, x[src] - x[dst]))
    layer = EdgeDifference(flow=flow)
    layer.register_edge_update_forward_pre_hook(lambda module, inputs: (inputs[0], inputs[1], {"x": 2 * inputs[2]["x"]}))
    layer.register_edge_update_forward_hook(lambda module, inputs, out: out + 1)
    torch.testing.assert_close(layer(x, edge_index)[0], 2 * (x[src] - x[dst]) + 1)
    with pytest.raises(NotImplementedError, match="does not override edge_update"):
        Weighted().edge_updater(edge_index, x=x, edge_weight=None)


def test_an_uncoalesced_coo_adjacency_whose_values_need_gradients_is_refused():
    # (its stored values do not carry their gradient: silently none would reach them)
    indices = torch.tensor([[0, 0, 1], [1, 1, 0]])
    adj_t = torch.sparse_coo_tensor(indices, torch.rand(3, dtype=torch.float64), (2, 2)).requires_grad_()
    assert not adj_t.is_coalesced()
    with pytest.raises(ValueError, match="must be coalesced"):
        Weighted().propagate(adj_t, x=torch.randn(2, 3, dtype=torch.float64))


def test_the_edge_index_form_compiles_without_graph_breaks():
    class Halved(MessagePassing):   # PyG's aggregate parameters, under dynamo too
        def forward(self, x, edge_index):
            return self.propagate(edge_index, x=x)

        def aggregate(self, inputs, index, dim_size=None):
            return torch.zeros(dim_size, inputs.shape[1], dtype=inputs.dtype).index_add(0, index, inputs) / 2

    class Tanh(Difference):
        def message(self, x_i, x_j):
            return torch.tanh(x_j - x_i)

    torch._dynamo.reset()
    edge_index, x = _edges(7)
    for layer in (Difference(aggr="mean"), Tanh(aggr="max"), Halved()):
        compiled = torch.compile(layer, backend="eager", fullgraph=True)   # fullgraph: a break raises
        torch.testing.assert_close(compiled(x, edge_index), layer(x, edge_index))
        other = edge_index[:, :11].clone()
        torch.testing.assert_close(compiled(x, other), layer(x, other))


def test_pygs_hooks_see_and_may_change_every_stage():
    edge_index, x = _edges(8)
    layer = Weighted(aggr="mean")
    w = torch.rand(20, dtype=torch.float64)
    plain = layer(x, edge_index, w)
    seen = []

    def pre(stage):
        def hook(module, inputs):
            assert module is layer
            seen.append(stage)
        return hook

    def post(stage):
        def hook(module, inputs, out):
            seen.append(stage + " done")
        return hook

    handles = [layer.register_propagate_forward_pre_hook(pre("propagate")),
               layer.register_propagate_forward_hook(post("propagate")),
               layer.register_message_forward_pre_hook(pre("message")),
               layer.register_message_forward_hook(post("message")),
               layer.register_aggregate_forward_pre_hook(pre("aggregate")),
               layer.register_aggregate_forward_hook(post("aggregate"))]
    torch.testing.assert_close(layer(x, edge_index, w), plain)   # hooks that change nothing: the same result
    assert seen == ["propagate", "message", "message done", "aggregate", "aggregate done", "propagate done"]
    for handle in handles:
        handle.remove()
    assert not layer._message_forward_hooks and not layer._propagate_forward_pre_hooks

    def doubled_messages(module, inputs, out):
        assert set(inputs[0]) == {"x_j", "edge_weight"} and inputs[0]["x_j"].shape == (20, 3)
        return out * 2

    handle = layer.register_message_forward_hook(doubled_messages)
    torch.testing.assert_close(layer(x, edge_index, w), 2 * plain)
    handle.remove()

    def cast_index(module, inputs):   # PyG users' int32 workaround: the aggregation reads the hook's index
        kwargs = inputs[-1]
        assert kwargs["index"].dtype == torch.int64 and kwargs["dim_size"] == 7
        return ({**kwargs, "index": kwargs["index"].flip(0)},)

    layer.register_aggregate_forward_pre_hook(cast_index)
    messages = w.view(-1, 1) * x[edge_index[0]]
    flipped = torch.zeros(7, 3, dtype=torch.float64).index_add(0, edge_index[1].flip(0), messages)
    counts = torch.bincount(edge_index[1], minlength=7).clamp(min=1).view(-1, 1)
    torch.testing.assert_close(layer(x, edge_index, w), flipped / counts)


def test_a_layers_message_and_aggregate_runs_on_a_sparse_adjacency_as_in_pyg():
    calls = []

    class Fused(Weighted):
        def message_and_aggregate(self, adj_t, x):
            calls.append(type(adj_t).__name__)
            return torch.sparse.mm(adj_t, x) * 3   # (differs on purpose: PyG calls it, so must we)

    edge_index = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])
    x = torch.randn(4, 3, dtype=torch.float64)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(4, dtype=torch.float64), (4, 4)).coalesce()
    layer = Fused()
    plain = layer(x, edge_index)
    torch.testing.assert_close(layer(x, adj_t), 3 * plain)
    assert calls == ["Tensor"]
    layer.fuse = False   # PyG's switch: message and aggregate again
    torch.testing.assert_close(layer(x, adj_t), plain)
    assert calls == ["Tensor"]


def test_ptr_is_given_as_pyg_gives_it_for_an_edge_index():
    seen = []

    class ReadsPtr(MessagePassing):
        def message(self, x_j, index, ptr, size_i):
            seen.append((ptr, size_i, index.shape[0]))
            return x_j

    edge_index, x = _edges(9)
    expected = MessagePassing().propagate(unigraph.Graph(edge_index, num_nodes=7), x=x)
    torch.testing.assert_close(ReadsPtr(fuse=False).propagate(edge_index, x=x), expected)
    assert seen == [(None, 7, 20)]
