"""The same user-written layers on PyG's MessagePassing and on unigraph's, called PyG's way
(``propagate(edge_index, ...)``), on random graphs: outputs and input gradients agree (float64).
Graphs drawn by hypothesis: empty, isolated nodes, self-loops, multi-edges, bipartite sizes with a
(source, destination) pair, int32 indices, either flow, ``size`` given or inferred."""
from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, strategies as st

import unigraph

pyg = pytest.importorskip("torch_geometric", reason="PyG's MessagePassing is the reference (test extra)")


@functools.lru_cache(maxsize=None)   # (PyG generates a propagate per class: build each class once)
def layers(base) -> dict:
    """name -> (class, aggr choices); every class written once, against ``base``."""

    class Weighted(base):   # (forward calls propagate as PyG's users do: PyG reads its arguments from it)
        def forward(self, x, edge_index, size, w):
            return self.propagate(edge_index, x=x, w=w, size=size)

        def message(self, x_j, w):
            return w.view(-1, 1) * x_j

    class EdgeWeighted(base):   # PyG's name: a sparse adj_t's values fill it
        def forward(self, x, edge_index, size, edge_weight):
            return self.propagate(edge_index, x=x, edge_weight=edge_weight, size=size)

        def message(self, x_j, edge_weight):
            return edge_weight.view(-1, 1) * x_j

    class Relative(base):
        def forward(self, x, edge_index, size):
            return self.propagate(edge_index, x=x, size=size)

        def message(self, x_i, x_j):
            return torch.tanh(x_j - 0.5 * x_i)

    class BySize(base):   # PyG's special inputs
        def forward(self, x, edge_index, size, edge_attr):
            return self.propagate(edge_index, x=x, edge_attr=edge_attr, size=size)

        def message(self, x_j, index, size_i, edge_attr):
            return x_j * (index.view(-1, 1) + 1) / max(size_i, 1) + edge_attr

    class Attention(base):   # PyG's GAT pattern: its softmax over index (with ptr and size_i)
        def __init__(self, **kwargs):
            super().__init__(node_dim=0, **kwargs)   # (1-D scores: nodes in dimension 0, as PyG's GATConv)

        def forward(self, x, edge_index, size):
            scores = tuple(part.sum(-1) for part in x) if isinstance(x, tuple) else x.sum(-1)
            return self.propagate(edge_index, x=x, alpha=scores, size=size)

        def message(self, x_j, alpha_j, alpha_i, index, ptr, size_i):
            alpha = pyg.utils.softmax(torch.nn.functional.leaky_relu(alpha_j + alpha_i, 0.2), index, ptr, size_i)
            return x_j * alpha.unsqueeze(-1)

    class Residual(base):
        def forward(self, x, edge_index, size):
            return self.propagate(edge_index, x=x, size=size)

        def message(self, x_j):
            return 2 * x_j

        def update(self, inputs, x):
            rows = inputs.shape[0]
            return inputs + (x[1] if isinstance(x, tuple) else x)[:rows]

    class OwnSum(base):   # PyG's aggregate signature
        def forward(self, x, edge_index, size):
            return self.propagate(edge_index, x=x, size=size)

        def message(self, x_j):
            return x_j.square()

        def aggregate(self, inputs, index, ptr=None, dim_size=None):
            return torch.zeros(dim_size, inputs.shape[1], dtype=inputs.dtype).index_add(0, index, inputs) - 1

    plain = ["sum", "mean", "max", "min"]
    modules = ["softmax", "std", "mul", ("mean", "max")]   # each library's own aggregation modules
    return {"weighted": (Weighted, plain), "edge_weighted": (EdgeWeighted, plain), "relative": (Relative, plain + modules), "by_size": (BySize, plain),
            "residual": (Residual, ["sum", "mean"]), "own_sum": (OwnSum, [None]), "attention": (Attention, ["sum"])}


INPUTS = {"weighted": ("w",), "edge_weighted": ("w",), "relative": (), "by_size": ("edge_attr",), "residual": (), "own_sum": (), "attention": ()}


@st.composite
def calls(draw):
    bipartite = draw(st.booleans())
    n_src = draw(st.integers(1, 7))
    n_dst = draw(st.integers(1, 7)) if bipartite else n_src
    edges = draw(st.integers(0, 16))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    flow = "source_to_target" if bipartite else draw(st.sampled_from(["source_to_target", "target_to_source"]))
    rows = (n_src, n_dst) if flow == "source_to_target" else (n_dst, n_src)
    edge_index = torch.stack([torch.randint(0, rows[0], (edges,), generator=gen),
                              torch.randint(0, rows[1], (edges,), generator=gen)])
    if draw(st.booleans()):
        edge_index = edge_index.int()
    x_src = torch.randn(n_src, 3, generator=gen, dtype=torch.float64)
    x_dst = torch.randn(n_dst, 3, generator=gen, dtype=torch.float64)
    return {"bipartite": bipartite, "edge_index": edge_index, "x_src": x_src, "x_dst": x_dst, "flow": flow,
            "size": (n_src, n_dst) if bipartite or draw(st.booleans()) else None,
            "w": torch.rand(edges, generator=gen, dtype=torch.float64),
            "edge_attr": torch.randn(edges, 3, generator=gen, dtype=torch.float64),
            "name": draw(st.sampled_from(sorted(INPUTS))), "pick": draw(st.integers(0, 7))}


@given(call=calls())
def test_unigraph_base_class_computes_what_pygs_does(call):
    results = []
    for base in (pyg.nn.MessagePassing, unigraph.MessagePassing):
        cls, aggrs = layers(base)[call["name"]]
        aggr = aggrs[call["pick"] % len(aggrs)]
        layer = cls(aggr=list(aggr) if isinstance(aggr, tuple) else aggr, flow=call["flow"])
        x_src = call["x_src"].clone().requires_grad_()
        x_dst = call["x_dst"].clone().requires_grad_()
        x = (x_src, x_dst) if call["bipartite"] else x_src
        edge_index = call["edge_index"]
        if base is pyg.nn.MessagePassing and edge_index.dtype == torch.int32:
            edge_index = edge_index.long()   # (PyG's CPU scatter needs int64; unigraph takes int32 as it is)
        out = layer(x, edge_index, call["size"], *(call[name] for name in INPUTS[call["name"]]))
        grads = torch.autograd.grad(out.sum(), [x_src, x_dst], allow_unused=True)
        results.append((out, grads))
    (theirs, their_grads), (ours, our_grads) = results
    torch.testing.assert_close(ours, theirs)
    for mine, reference in zip(our_grads, their_grads):
        if reference is None or mine is None:
            assert (reference is None or not reference.any()) and (mine is None or not mine.any())
        else:
            torch.testing.assert_close(mine, reference)


@given(call=calls(), layout=st.sampled_from(["coo", "csr", "sparse_tensor"]))
def test_a_sparse_adj_t_gives_what_pygs_propagate_gives(call, layout):
    # PyG reads a sparse adj_t's structure and hands its values to edge_weight in storage order
    call = {**call, "flow": "source_to_target"}   # (PyG refuses target_to_source with a sparse adjacency)
    edge_index, n_src = call["edge_index"].long(), call["x_src"].shape[0]
    n_dst = call["x_dst"].shape[0] if call["bipartite"] else n_src
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), call["w"], (n_dst, n_src)).coalesce()
    if layout == "csr":
        adj_t = adj_t.to_sparse_csr()
    elif layout == "sparse_tensor":
        torch_sparse = pytest.importorskip("torch_sparse")
        adj_t = torch_sparse.SparseTensor.from_torch_sparse_coo_tensor(adj_t)
    results = []
    for base in (pyg.nn.MessagePassing, unigraph.MessagePassing):
        cls, aggrs = layers(base)["edge_weighted"]
        layer = cls(aggr=aggrs[call["pick"] % len(aggrs)])
        x_src = call["x_src"].clone().requires_grad_()
        x = (x_src, call["x_dst"]) if call["bipartite"] else x_src
        out = layer(x, adj_t, None, None)   # edge_weight None: PyG fills it with the stored values
        results.append((out, torch.autograd.grad(out.sum(), x_src, allow_unused=True)[0]))
    (theirs, their_grad), (ours, our_grad) = results
    torch.testing.assert_close(ours, theirs)
    if their_grad is None or our_grad is None:
        assert (their_grad is None or not their_grad.any()) and (our_grad is None or not our_grad.any())
    else:
        torch.testing.assert_close(our_grad, their_grad)
