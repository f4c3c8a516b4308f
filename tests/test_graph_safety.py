"""A Graph owns its indices: it validates a copy, notices in-place changes after validation, and
``from_csr`` checks every tensor it caches. Kernels never see indices validation did not see."""
from __future__ import annotations

import pytest
import torch

import unigraph
from op_cases import cpu_test_backends
from reference import edge_softmax_ref, gspmm_ref
from unigraph import Graph, ops
from unigraph.graph import GraphModifiedError


def small_edges():
    return torch.tensor([[0, 1, 2, 3, 3, 0], [1, 2, 0, 0, 1, 3]])


@pytest.mark.parametrize("backend", cpu_test_backends())
def test_changing_the_callers_edge_index_does_not_change_the_graph(backend):
    edge_index = small_edges()
    g = Graph(edge_index, num_nodes=4)
    x = torch.randn(4, 3, dtype=torch.float64)
    want = gspmm_ref(g, "copy_u", "sum", x, None)
    edge_index.fill_(10 ** 9)  # the caller's tensor, after validation: once a segfault in numba
    edge_index[1].fill_(-5)
    torch.testing.assert_close(ops.gspmm(g, "copy_u", "sum", x, backend=backend), want)
    assert g.src.max() == 3


def test_non_contiguous_and_int32_inputs_are_copied():
    edge_index = small_edges().t().contiguous().t().to(torch.int32)  # rows with stride 2
    g = Graph(edge_index, num_nodes=4)
    assert g.src.dtype == torch.int64 and g.src.is_contiguous() and g.src.data_ptr() != edge_index.data_ptr()
    assert torch.equal(g.edge_index, small_edges())


MUTATIONS = {
    "src": lambda g: g.src.add_(100),
    "dst": lambda g: g.dst.fill_(-1),
    "in_csr indices": lambda g: g.in_csr()[1].mul_(1000),
    "in_csr eids": lambda g: g.in_csr()[2].zero_(),
    "out_csr ptr": lambda g: g.out_csr()[0].add_(1),
    "copy_ into src": lambda g: g.src.copy_(torch.arange(g.num_edges) + 10 ** 6),
    "through a view": lambda g: g.dst[:2].fill_(10 ** 6),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("backend", cpu_test_backends())
def test_in_place_change_after_validation_is_refused(mutation, backend):
    g = Graph(small_edges(), num_nodes=4).prepare()
    x = torch.randn(4, 2, 3)
    ops.gspmm(g, "copy_u", "max", x, backend=backend)  # fine before
    MUTATIONS[mutation](g)
    calls = [lambda: ops.gspmm(g, "copy_u", "max", x, backend=backend),
             lambda: ops.gsddmm(g, "dot", x, x, "u", "v", backend=backend),
             lambda: ops.edge_softmax(g, torch.randn(g.num_edges, 2), backend=backend),
             lambda: ops.gat_attention(g, x, torch.randn(4, 2), torch.randn(4, 2), backend=backend),
             g.reverse, g.add_self_loops, g.to_undirected, lambda: g.to("cpu"), g.tensors, lambda: g.edge_index]
    for call in calls:
        with pytest.raises(GraphModifiedError, match="modified in place after the graph checked it"):
            call()


def test_reverse_shares_formats_and_their_guard():
    g = Graph(small_edges(), num_nodes=4).prepare()
    r = g.reverse()
    r.in_csr()[1].fill_(77)  # g's out-CSR, shared
    with pytest.raises(GraphModifiedError):
        ops.gspmm(g, "copy_u", "sum", torch.randn(4, 2))


def test_graph_built_under_inference_mode_is_guarded():
    with torch.inference_mode():
        g = Graph(small_edges(), num_nodes=4).prepare()  # formats built under inference mode too
        block = Graph.from_csr(torch.tensor([0, 1, 3]), torch.tensor([2, 0, 1]), 3, bipartite=True,
                               validate=False)
        assert not g.src.is_inference() and not block.src.is_inference()
        assert not any(t.is_inference() for t in g.tensors().tensor_list())
        g.in_csr()[1].add_(1)
    with pytest.raises(GraphModifiedError):
        g.tensors()


def test_pickled_and_copied_graphs_keep_their_guard():
    import copy
    import pickle
    g = Graph(small_edges(), num_nodes=4).prepare()  # build_csr writes into ptr: its version is not 0
    x = torch.randn(4, 3, dtype=torch.float64)
    for clone in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        torch.testing.assert_close(ops.gspmm(clone, "copy_u", "sum", x), gspmm_ref(g, "copy_u", "sum", x, None))
        clone.in_csr()[1].add_(5)
        with pytest.raises(GraphModifiedError):
            clone.tensors()
    g.src.add_(1)
    with pytest.raises(GraphModifiedError):
        pickle.dumps(g)


# ---------------------------------------------------------------- from_csr validates what it caches

INDPTR, INDICES = torch.tensor([0, 2, 3, 5]), torch.tensor([1, 2, 0, 0, 1])


@pytest.mark.parametrize("kwargs, match", [
    (dict(edge_ids=torch.tensor([0, 1, 2, 3, 9])), r"edge_ids must be a permutation of 0..4 \(each edge id once\); "
                                                   r"got values 0..9"),
    (dict(edge_ids=torch.tensor([0, 1, 2, 3, -1])), "got values -1..3"),
    (dict(edge_ids=torch.tensor([0, 1, 1, 3, 4])), "with repeats"),
    (dict(edge_ids=torch.tensor([0, 1, 2])), "one entry per slot"),
    (dict(edge_ids=torch.tensor([0.0, 1, 2, 3, 4])), "edge_ids must hold integers"),
    (dict(dst=torch.tensor([0, 0, 1, 2, 9])), "dst must give the row of every slot"),
    (dict(dst=torch.tensor([0, 1, 1, 2, 2])), "it differs from indptr"),
    (dict(dst=torch.tensor([0, 0, 1])), "got 3 entries for 5 slots"),
    (dict(dst=torch.tensor([[0, 0, 1, 2, 2]])), "dst must be 1-D"),
    (dict(num_src_nodes=2), r"num_src_nodes == num_dst_nodes"),
    (dict(num_src_nodes=-3), "num_src_nodes must be >= 0"),
])
def test_from_csr_refuses_bad_tensors(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        Graph.from_csr(INDPTR, INDICES, **kwargs)


def test_from_csr_refuses_bad_structure():
    with pytest.raises(ValueError, match="holds index 7"):
        Graph.from_csr(INDPTR, torch.tensor([1, 2, 7, 0, 1]))
    with pytest.raises(ValueError, match="never decrease"):
        Graph.from_csr(torch.tensor([0, 3, 2, 5]), INDICES)
    with pytest.raises(TypeError, match="indices must be a torch.Tensor"):
        Graph.from_csr(INDPTR, [1, 2, 0, 0, 1])


@pytest.mark.parametrize("backend", cpu_test_backends())
def test_from_csr_with_permuted_edge_ids_numbers_edges_by_them(backend):
    edge_ids = torch.tensor([3, 0, 4, 1, 2])  # slot k holds edge edge_ids[k]
    g = Graph.from_csr(INDPTR, INDICES, edge_ids=edge_ids, dst=torch.tensor([0, 0, 1, 2, 2]))
    src, dst = torch.empty(5, dtype=torch.long), torch.empty(5, dtype=torch.long)
    src[edge_ids], dst[edge_ids] = INDICES, torch.tensor([0, 0, 1, 2, 2])
    assert torch.equal(g.src, src) and torch.equal(g.dst, dst)
    scores = torch.randn(5, 2, dtype=torch.float64)
    torch.testing.assert_close(ops.edge_softmax(g, scores, backend=backend), edge_softmax_ref(g, scores))
    e = torch.randn(5, 3, dtype=torch.float64)
    torch.testing.assert_close(ops.gspmm(g, "copy_e", "max", None, e, backend=backend),
                               gspmm_ref(g, "copy_e", "max", None, e))


def test_from_csr_copies_its_inputs():
    indptr, indices = INDPTR.clone(), INDICES.clone()
    g = Graph.from_csr(indptr, indices)
    indices.fill_(10 ** 9)
    indptr.fill_(0)
    assert torch.equal(g.in_csr()[1], INDICES) and torch.equal(g.in_csr()[0], INDPTR)


# ---------------------------------------------------------------- to_undirected cannot overflow

def test_to_undirected_with_more_than_three_billion_nodes():
    n = 2 ** 32 + 10
    g = Graph(torch.tensor([[2 ** 32 + 7, 5], [5, 2 ** 32 + 7]]), num_nodes=n)  # not allocated: no format built
    g.edata["w"] = torch.tensor([1.0, 2.0])
    u = g.to_undirected()
    assert u.num_nodes == n
    assert list(zip(u.src.tolist(), u.dst.tolist())) == [(5, 2 ** 32 + 7), (2 ** 32 + 7, 5)]  # once read as (7 -> 5)
    assert u.edata["w"].tolist() == [3.0, 3.0]


def test_to_undirected_matches_a_set_of_pairs():
    gen = torch.Generator().manual_seed(3)
    edges = torch.randint(0, 40, (2, 200), generator=gen)
    u = Graph(edges, num_nodes=40).to_undirected()
    pairs = sorted({(a, b) for a, b in edges.t().tolist()} | {(b, a) for a, b in edges.t().tolist()})
    assert list(zip(u.src.tolist(), u.dst.tolist())) == pairs


def test_num_nodes_must_fit_int64():
    with pytest.raises(ValueError, match="must fit in int64"):
        Graph(small_edges(), num_nodes=2 ** 63)
    unigraph.Graph(small_edges(), num_nodes=2 ** 63 - 1)  # large but representable: accepted lazily
