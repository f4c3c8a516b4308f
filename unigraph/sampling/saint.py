"""GraphSAINT random-walk subgraph sampling with its normalization coefficients
(Zeng et al., ICLR 2020, "GraphSAINT: Graph Sampling Based Inductive Learning Method")."""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.sampling.batch import EID, Subgraph
from unigraph.sampling.counter_rng import KeySequence, layer_key, mix64_int, row_keys, uniform
from unigraph.sampling.csr_view import InCSR, check_node_ids, in_csr_view
from unigraph.sampling.subgraph import induced_subgraph

_MAX_EDGE_NORM = 1e4


def random_walks(csr: InCSR, roots: Tensor, walk_length: int, key: int) -> Tensor:
    """``[len(roots), walk_length + 1]`` node ids: walks that step to a uniformly random
    in-neighbour (the source of a random in-edge), staying put at a node without in-edges.
    Walker ``i``'s step ``s`` draws from the counter-based generator keyed by ``(key, s, i)``."""
    walks = [roots]
    walker = torch.arange(roots.numel(), device=roots.device)
    current = roots
    for step in range(walk_length):
        start = csr.ptr[current]
        degree = csr.ptr[current + 1] - start
        draw = uniform(row_keys(layer_key(key, step), walker), 0)
        offset = (draw * degree.to(torch.float64)).to(torch.int64)
        current = torch.where(degree > 0, csr.indices[(start + offset).clamp(max=csr.indices.numel() - 1)], current)
        walks.append(current)
    return torch.stack(walks, dim=1)


class RandomWalkSampler:
    """GraphSAINT-RW: each batch is the subgraph induced by the nodes of random walks.

    Use with a :class:`NodeLoader` whose items are the candidate roots (all nodes, usually) and
    whose ``batch_size`` is the number of roots per subgraph (GraphSAINT's ``r``); each root starts
    one walk of ``walk_length`` steps (``h``) along in-edges. The batch is a :class:`Subgraph` over
    the distinct visited nodes (sorted by id) with every edge among them, and with the
    normalization coefficients below.

    Normalization (GraphSAINT section 3.2): ``num_presample`` subgraphs are drawn up front (roots
    uniformly at random, ``roots_per_subgraph`` each), counting in how many each node (``C_v``)
    and each edge (``C_e``) occurs; PyG's ``sample_coverage`` corresponds to ``num_presample *
    mean subgraph size / N``. Then

    * ``node_norm[v] = num_presample / (C_v * N)`` weights node ``v``'s loss, so that the
      mini-batch loss ``sum(node_norm * loss)`` is an unbiased estimate of the full-graph mean loss;
    * ``edge_norm[e] = C_dst(e) / C_e`` weights edge ``e``'s message (``1 / alpha`` of the paper,
      ``alpha = p(e) / p(dst)``), so that aggregation over a subgraph is unbiased.

    As in PyG, a node never sampled counts ``C_v = 0.1``; an edge never sampled gets
    ``edge_norm = 0.1`` if its destination was never sampled either, and ratios are clipped at
    ``1e4``. (PyG uses the source's count in ``edge_norm``; the paper and unigraph the
    destination's, the node that aggregates. On symmetric graphs the two differ only in which of
    an edge pair carries which ratio.)

    Roots drawn by a loader are a shuffled batch of its items (distinct within a batch) rather than
    independent draws: for ``roots_per_subgraph << N`` the inclusion probabilities are the same
    to first order.
    """

    def __init__(self, graph: Graph, walk_length: int, *, roots_per_subgraph: int, num_presample: int = 50,
                 seed: int = 0):
        for name, value, minimum in (("walk_length", walk_length, 0), ("roots_per_subgraph", roots_per_subgraph, 1),
                                     ("num_presample", num_presample, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
        csr = in_csr_view(graph)
        if roots_per_subgraph > csr.num_nodes:
            raise ValueError(f"roots_per_subgraph={roots_per_subgraph} exceeds the graph's {csr.num_nodes} nodes")
        self.walk_length = walk_length
        self._keys = KeySequence(seed)
        self.num_nodes = csr.num_nodes
        self.num_presample = num_presample
        node_count = torch.zeros(csr.num_nodes, dtype=torch.float64)
        edge_count = torch.zeros(csr.eids.numel(), dtype=torch.float64)
        generator = torch.Generator().manual_seed(seed)
        for sample in range(num_presample):
            roots = torch.randperm(csr.num_nodes, generator=generator)[:roots_per_subgraph].to(csr.device)
            nodes, graph_sample = self._walk_subgraph(csr, roots, mix64_int(seed + sample))
            node_count[nodes.cpu()] += 1
            edge_count[graph_sample.edata[EID].cpu()] += 1
        # edge e's destination, in edge-id order
        dst_of_edge = torch.empty(csr.eids.numel(), dtype=torch.int64)
        dst_of_edge[csr.eids.cpu()] = torch.repeat_interleave(torch.arange(csr.num_nodes), (csr.ptr[1:] - csr.ptr[:-1]).cpu())
        edge_norm = (node_count[dst_of_edge] / edge_count).clamp(0, _MAX_EDGE_NORM)
        edge_norm[torch.isnan(edge_norm)] = 0.1
        node_count[node_count == 0] = 0.1
        self.node_norm = (num_presample / (node_count * csr.num_nodes)).float()
        self.edge_norm = edge_norm.float()

    def __repr__(self) -> str:
        return f"RandomWalkSampler(walk_length={self.walk_length}, num_presample={self.num_presample})"

    def num_items(self, graph: Graph | InCSR) -> int:
        """Items are root node ids."""
        return in_csr_view(graph).num_nodes

    def _walk_subgraph(self, csr: InCSR, roots: Tensor, key: int) -> tuple[Tensor, Graph]:
        nodes = torch.unique(random_walks(csr, roots, self.walk_length, key))
        return nodes, induced_subgraph(csr, nodes)

    def sample(self, graph: Graph | InCSR, roots, *, key: int | None = None) -> Subgraph:
        """The subgraph of walks from ``roots``, with ``node_norm`` and ``edge_norm``. ``key`` fixes
        the walks; without it the next key of the sampler's ``seed`` is used."""
        csr = in_csr_view(graph)
        if csr.num_nodes != self.num_nodes:
            raise ValueError(f"this RandomWalkSampler was set up for a graph of {self.num_nodes} nodes, "
                             f"not this one ({csr.num_nodes} nodes)")
        roots = check_node_ids("roots", roots, csr.num_nodes, csr.device)
        key = self._keys.resolve(key)
        nodes, subgraph = self._walk_subgraph(csr, roots, key)
        return Subgraph(nodes=nodes, graph=subgraph, node_norm=self.node_norm.to(csr.device)[nodes],
                        edge_norm=self.edge_norm.to(csr.device)[subgraph.edata[EID]])
