"""``torch.compile(fullgraph=True)`` runs layers and models on a new graph every call (mini-batch
training), of any size, with a bounded number of compiles, and equals eager in float64, forward
and backward.

What each compiled program must not bake in, and how the tests change it between calls: the node
and edge counts (every call a new graph of other sizes, with self-loops and multi-edges), the
graph object (a new one each call, or none: PyG's ``conv(x, edge_index)`` builds it inside the
program), what eager calls left in a graph's memo (an eager call on every other graph), and the
indices' validity (out-of-range indices raise the eager ``ValueError`` when the program runs).
Compiles are counted with dynamo's ``counters["stats"]["unique_graphs"]`` (one per compiled
frame variant); the bounds asserted are those docs/ops.md states.

Inductor: one small case behind ``-m slow`` (it compiles for minutes on 2 busy cores); the
default run uses aot_eager, which traces unigraph the same way (dynamo and AOTAutograd)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

import unigraph
from unigraph import models, nn
from unigraph.sampling.neighbor import NeighborSampler

# (num_nodes, num_edges): every size >= 2, none repeated; the first edges are self-loops
SIZES = [(30, 90), (45, 150), (17, 40)]


def random_edges(num_nodes: int, num_edges: int, seed: int, num_src: int | None = None) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src or num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    if num_src is None:
        src[:3] = dst[:3] = torch.tensor([0, 1, 1])  # self-loops, one of them twice (a multi-edge)
    return torch.stack([src, dst])


def features(rows: int, width: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(rows, width, generator=gen, dtype=torch.float64, requires_grad=True)


def values_and_grads(module: torch.nn.Module, call, leaves: list[torch.Tensor]) -> list[torch.Tensor]:
    out = call(module)
    if isinstance(out, dict):
        out = torch.cat([out[key] for key in sorted(out)])
    grads = torch.autograd.grad(out.square().sum(), leaves + list(module.parameters()))
    return [out.detach(), *grads]


def check_against_eager(module: torch.nn.Module, calls, *, dynamic=None, compiler="aot_eager") -> int:
    """Run each ``call(module)`` compiled and eagerly, compare outputs and gradients (inputs' and
    parameters'), and return how many graphs dynamo compiled."""
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(module, fullgraph=True, dynamic=dynamic, backend=compiler)
    for i, (call, leaves) in enumerate(calls):
        got = values_and_grads(compiled, call, leaves)
        want = values_and_grads(module, call, leaves)
        for j, (a, b) in enumerate(zip(got, want)):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=lambda m: f"call {i}, tensor {j}: {m}")
    return counters["stats"]["unique_graphs"]


class EveryLayer(torch.nn.Module):
    """GCN, GAT, GATv2, SAGE and GIN in a row, with ReLU and dropout between (run in eval mode)."""

    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([
            nn.GCNConv(4, 6), nn.GATConv(6, 3, heads=2), nn.GATv2Conv(6, 4, heads=2, concat=False),
            nn.SAGEConv(4, 5), nn.GINConv(torch.nn.Linear(5, 3))])

    def forward(self, a, b):  # (x, edge_index) or (g, x): whatever the layers take
        pyg = isinstance(a, torch.Tensor)
        h = a if pyg else b
        for i, conv in enumerate(self.convs):
            h = conv(h, b) if pyg else conv(a, h)
            if i < len(self.convs) - 1:
                h = F.dropout(F.relu(h), 0.5, self.training)
        return h


class TwoLayers(torch.nn.Module):
    """What a user composes: two layers, ReLU and dropout (run in eval mode)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.GCNConv(4, 8), nn.GATConv(8, 3, heads=2)

    def forward(self, a, b):
        if isinstance(a, torch.Tensor):  # PyG's form (x, edge_index)
            return self.conv2(F.dropout(F.relu(self.conv1(a, b)), 0.5, self.training), b)
        return self.conv2(a, F.dropout(F.relu(self.conv1(a, b)), 0.5, self.training))


def layer_calls(form: str, eager_first_every_other: bool = False, sizes=SIZES):
    calls = []
    for seed, (n, e) in enumerate(sizes):
        edge_index, x = random_edges(n, e, seed), features(n, 4, seed)
        if form == "pyg":
            calls.append((lambda m, x=x, ei=edge_index: m(x, ei), [x]))
        else:
            g = unigraph.Graph(edge_index, num_nodes=n).prepare()
            if eager_first_every_other and seed % 2:
                EveryLayer().double().eval()(g, x.detach())  # leaves decisions in the graph's memo
                TwoLayers().double().eval()(g, x.detach())
            calls.append((lambda m, x=x, g=g: m(g, x), [x]))
    return calls


@pytest.mark.parametrize("form", ["pyg", "graph"])
def test_layers_run_on_graphs_of_any_size_compiled_twice(form):
    """dynamic=None (the default): the first graph compiles a program for its sizes, the second
    a dynamic one that every later graph runs."""
    torch.manual_seed(0)
    module = EveryLayer().double().eval()
    assert check_against_eager(module, layer_calls(form, eager_first_every_other=True)) <= 2


@pytest.mark.parametrize("form", ["pyg", pytest.param("graph", marks=pytest.mark.slow)])
def test_dynamic_true_compiles_once(form):
    torch.manual_seed(0)
    module = TwoLayers().double().eval()
    assert check_against_eager(module, layer_calls(form, sizes=SIZES[:2]), dynamic=True) == 1


def test_a_model_on_sampled_blocks_compiles_twice():
    """Mini-batch training: GraphSAGE on the blocks a neighbour sampler draws, a new batch (and
    new block sizes) every step."""
    torch.manual_seed(0)
    graph = unigraph.Graph(random_edges(300, 1500, seed=7)[:, 3:], num_nodes=300)
    sampler = NeighborSampler([4, 3], seed=0)
    calls = []
    for step in range(3):
        seeds = torch.randperm(300, generator=torch.Generator().manual_seed(step))[: 8 + 5 * step]
        blocks = [block.prepare() for block in sampler.sample(graph, seeds).blocks]
        x = features(blocks[0].num_src_nodes, 4, step)
        calls.append((lambda m, b=blocks, x=x: m(b, x), [x]))
    sage = models.GraphSAGE(4, out_channels=3, hidden_channels=5, num_layers=2).double().eval()
    assert check_against_eager(sage, calls) <= 2


@pytest.mark.slow
def test_models_on_whole_graphs_compile_twice():
    for model in (models.GCN(4, out_channels=3, hidden_channels=5),
                  models.GAT(4, out_channels=3, hidden_channels=2, heads=2),
                  models.GIN(4, out_channels=3, hidden_channels=5, num_layers=2)):
        torch.manual_seed(0)
        calls = []
        for seed, (n, e) in enumerate(SIZES):
            g, x = unigraph.Graph(random_edges(n, e, seed), num_nodes=n).prepare(), features(n, 4, seed)
            calls.append((lambda m, g=g, x=x: m(g, x), [x]))
        assert check_against_eager(model.double().eval(), calls) <= 2


def test_bipartite_pairs_in_pyg_form():
    """``conv((x_src, x_dst), edge_index)``: a bipartite graph built in the program, sizes changing."""
    torch.manual_seed(0)
    conv = nn.SAGEConv((4, 3), 5).double()
    calls = []
    for seed, (n_src, n_dst, e) in enumerate([(20, 12, 50), (33, 9, 70), (14, 14, 30)]):
        x_src, x_dst = features(n_src, 4, seed), features(n_dst, 3, seed + 50)
        edge_index = random_edges(n_dst, e, seed, num_src=n_src)
        calls.append((lambda m, xs=x_src, xd=x_dst, ei=edge_index: m((xs, xd), ei), [x_src, x_dst]))
    assert check_against_eager(conv, calls) <= 2


def test_hetero_conv_compiles_without_graph_breaks():
    """HeteroConv in PyG's dict form builds a graph per relation inside the program: the range
    check runs in a custom operator, not as ``Tensor.item()`` (a graph break)."""
    torch.manual_seed(0)
    conv = nn.HeteroConv({("paper", "cites", "paper"): nn.GCNConv(4, 3),
                          ("author", "writes", "paper"): nn.SAGEConv((4, 4), 3),
                          ("paper", "rev", "author"): nn.SAGEConv((4, 4), 3)}).double()
    calls = []
    for seed, (papers, authors, e) in enumerate([(30, 20, 80), (41, 25, 100), (35, 22, 60)]):
        x = {"paper": features(papers, 4, seed), "author": features(authors, 4, seed + 50)}
        edges = {("paper", "cites", "paper"): random_edges(papers, e, seed),
                 ("author", "writes", "paper"): random_edges(papers, e, seed, num_src=authors),
                 ("paper", "rev", "author"): random_edges(authors, e, seed, num_src=papers)}
        calls.append((lambda m, x=x, edges=edges: m(x, edges), list(x.values())))
    assert check_against_eager(conv, calls) <= 2


TINY = [(20, 60), (5, 0), (1, 1), (1, 0), (2, 1), (0, 0), (25, 70)]


def tiny_calls():
    calls = []
    for seed, (n, e) in enumerate(TINY):
        gen = torch.Generator().manual_seed(seed)
        edge_index, x = torch.randint(0, max(n, 1), (2, e), generator=gen), features(n, 4, seed)
        calls.append((lambda m, x=x, ei=edge_index: m(x, ei), [x]))
    return calls


@pytest.mark.slow
def test_graphs_with_no_edges_or_one_node_are_exact():
    """Dynamo specializes sizes 0 and 1: such graphs compile programs of their own (the bound in
    docs/ops.md counts them), and each equals eager."""
    torch.manual_seed(0)
    compiles = check_against_eager(nn.GCNConv(4, 3).double(), tiny_calls(), dynamic=True)
    assert compiles <= 6


def test_size_oblivious_dynamo_compiles_tiny_graphs_into_the_dynamic_program():
    """With ``backed_size_oblivious`` (what docs/ops.md advises for mini-batches that may be tiny)
    no size is specialized: two programs at most (the second one for the empty edge_index, whose
    strides differ)."""
    import torch.fx.experimental._config as shape_config
    torch.manual_seed(0)
    with shape_config.patch(backed_size_oblivious=True):
        assert check_against_eager(nn.GCNConv(4, 3).double(), tiny_calls(), dynamic=True) <= 2


def test_out_of_range_indices_raise_the_eager_error_when_the_program_runs():
    """Bad indices on the first call (the trace) and on later ones (the compiled programs)."""
    torch._dynamo.reset()
    conv = nn.GCNConv(4, 3)
    compiled = torch.compile(conv, fullgraph=True, backend="aot_eager")
    bad = torch.tensor([[0, 1, 9], [1, 2, 0]])
    message = r"edge_index\[0\] holds index 9 \(first out-of-range at edge 2\) but num_nodes=5"
    with pytest.raises(ValueError, match=message):
        conv(torch.randn(5, 4), bad)  # eager, for the message
    with pytest.raises(ValueError, match=message):
        compiled(torch.randn(5, 4), bad)
    compiled(torch.randn(5, 4), torch.tensor([[0, 1, 2], [1, 2, 0]]))
    compiled(torch.randn(7, 4), torch.tensor([[0, 1, 2, 6], [1, 2, 0, 3]]))  # the dynamic program
    with pytest.raises(ValueError, match=message):
        compiled(torch.randn(5, 4), bad)
    with pytest.raises(ValueError, match=r"edge_index\[1\] holds the negative index -1"):
        compiled(torch.randn(6, 4), torch.tensor([[0, 1, 2], [1, -1, 0]]))


@pytest.mark.slow
def test_inductor_runs_a_small_model_on_graphs_of_any_size():
    torch.manual_seed(0)
    module = TwoLayers().double().eval()
    assert check_against_eager(module, layer_calls("pyg"), compiler="inductor") <= 2
