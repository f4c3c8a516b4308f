"""unigraph.nn.aggr against torch_geometric.nn.aggr: the same rows, groups (empty ones included)
and parameters give the same outputs and gradients (float64); arguments are checked first."""
from __future__ import annotations

import pytest
import torch

from unigraph.nn import aggr as ours
from pyg_compare import assert_same

pyg_aggr = pytest.importorskip("torch_geometric.nn.aggr", reason="PyG is the reference (test extra)")

GROUPS, F = 6, 3
INDEX = torch.tensor([0, 0, 0, 1, 3, 3, 4, 4, 4, 4])  # groups 2 and 5 empty; sorted (for the sequences)

CASES = [("SumAggregation", {}), ("MeanAggregation", {}), ("MaxAggregation", {}), ("MinAggregation", {}),
         ("MulAggregation", {}),
         ("VarAggregation", {}), ("StdAggregation", {}), ("SoftmaxAggregation", dict(t=0.5)),
         ("SoftmaxAggregation", dict(learn=True, channels=F)), ("PowerMeanAggregation", dict(p=2.0)),
         ("PowerMeanAggregation", dict(learn=True)), ("LSTMAggregation", dict(in_channels=F, out_channels=4)),
         ("MLPAggregation", dict(in_channels=F, out_channels=2, max_num_elements=3, num_layers=2,
                                 hidden_channels=5)),
         ("MultiAggregation", dict(aggrs=["mean", "std"], mode="proj", mode_kwargs=dict(in_channels=F,
                                                                                           out_channels=4))),
         ("MultiAggregation", dict(aggrs=["sum", "max", "softmax"], mode="attn",
                                   mode_kwargs=dict(in_channels=F, out_channels=4, num_heads=2))),
         ("MultiAggregation", dict(aggrs=["min", "var"], mode="logsumexp")),
         ("DegreeScalerAggregation", dict(aggr=["mean", "max"], scaler=["identity", "amplification", "linear"],
                                          deg=torch.tensor([2, 1, 0, 3])))]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_pyg(name, kwargs):
    torch.manual_seed(0)
    theirs = getattr(pyg_aggr, name)(**kwargs).double()
    mine = getattr(ours, name)(**kwargs).double()
    mine.load_state_dict(theirs.state_dict(), strict=True)
    mine.train(), theirs.train()
    x = torch.rand(INDEX.numel(), F, dtype=torch.float64) + 0.1  # powermean reads positive inputs
    assert_same(theirs, mine, x, INDEX, dim_size=GROUPS)
    assert repr(mine) == repr(theirs)


def test_resolver_names_and_checks():
    from unigraph.nn.aggr import aggregation_resolver
    assert isinstance(aggregation_resolver("add"), ours.SumAggregation)
    assert isinstance(aggregation_resolver("power_mean", p=3.0), ours.PowerMeanAggregation)
    assert isinstance(aggregation_resolver(["mean", "max"]), ours.MultiAggregation)
    mean = ours.MeanAggregation()
    with pytest.raises(ValueError, match="index holds group 6, outside \\[0, 6\\)"):
        mean(torch.randn(2, F), torch.tensor([0, 6]), dim_size=6)
    with pytest.raises(ValueError, match="index has 3 entries but x has 2 rows"):
        mean(torch.randn(2, F), torch.tensor([0, 1, 1]))
    with pytest.raises(TypeError, match="1-D integer tensor"):
        mean(torch.randn(2, F), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="needs learn=True"):
        ours.SoftmaxAggregation(channels=3)
    with pytest.raises(ValueError, match="mode='proj' needs mode_kwargs"):
        ours.MultiAggregation(["mean", "max"], mode="proj")


def test_compiled_without_graph_breaks_and_still_checked():
    import torch._dynamo as dynamo
    from unigraph.nn import PNAConv
    torch.manual_seed(0)
    x, edge_index = torch.randn(5, F), torch.tensor([[0, 1, 2, 3, 4], [1, 1, 2, 0, 0]])
    conv = PNAConv(F, 4, ["mean", "std"], ["identity", "amplification"], torch.tensor([1, 2, 2]))
    assert dynamo.explain(conv)(x, edge_index).graph_break_count == 0  # index check and degrees traced
    compiled = torch.compile(lambda h, i: ours.SoftmaxAggregation()(h, i, dim_size=3), backend="eager")
    torch.testing.assert_close(compiled(x, torch.tensor([0, 0, 1, 2, 2])),
                               ours.SoftmaxAggregation()(x, torch.tensor([0, 0, 1, 2, 2]), dim_size=3))
    with pytest.raises(ValueError, match="index holds group 3, outside \\[0, 3\\)"):
        compiled(x, torch.tensor([0, 0, 1, 2, 3]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_degree_scalers_count_a_hubs_in_degree_exactly_in_half_precision(dtype):
    """PNA's degree scalers read each node's in-degree: counted in float32 (a float16 count of ones
    stops at 2,048, bfloat16's at 256), each scale rounded once to the output's dtype. A hub of
    3,000 in-edges gets the scales of 3,000, as in float64."""
    deg = torch.tensor([0, 10, 30, 20, 5])
    index = torch.cat([torch.zeros(3000, dtype=torch.long), torch.arange(1, 41).repeat_interleave(3)])
    x = (torch.rand(index.numel(), 4, generator=torch.Generator().manual_seed(0)) + 0.5) / 1000   # (no overflow)
    scalers = ["identity", "amplification", "attenuation", "linear", "inverse_linear"]
    half = ours.DegreeScalerAggregation("sum", scalers, deg).to(dtype)
    wide = ours.DegreeScalerAggregation("sum", scalers, deg).double()
    out = half(x.to(dtype), index, dim_size=41)
    expected = wide(x.double(), index, dim_size=41)
    assert out.dtype == dtype
    # every scale within the half type's own rounding of the float64 result (the sums themselves
    # are rounded in that type: compare the hub's scales as ratios to its identity column)
    hub, hub_expected = out[0].double().view(5, 4), expected[0].view(5, 4)
    ratios, ratios_expected = hub[1:] / hub[:1], hub_expected[1:] / hub_expected[:1]
    tolerance = {torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(ratios, ratios_expected, rtol=tolerance, atol=0)
