"""unigraph.benchmarking.peers: a peer's row runs with torch's own bernoulli_ kernel."""
from unigraph import torch_bernoulli
from unigraph.benchmarking.peers import as_run_by, ours


def test_a_peers_call_runs_without_the_faster_kernel_and_ours_with_it():
    seen = {}

    def step(name):
        seen[name] = torch_bernoulli._enabled
        return name
    for name in ("pyg", "dgl", "pyg (compiled)", "unigraph", "unigraph:auto", "unigraph + its dropout"):
        assert as_run_by(name, step)(name) == name
    assert seen == {"pyg": False, "dgl": False, "pyg (compiled)": False, "unigraph": True, "unigraph:auto": True,
                    "unigraph + its dropout": True}
    assert torch_bernoulli._enabled and ours("unigraph") and not ours("dgl")
