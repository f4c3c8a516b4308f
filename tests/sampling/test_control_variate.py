"""VR-GCN's control-variate estimator: exact with every neighbour (forward and gradients) and with
current histories, unbiased with stale ones, P X preprocessed exactly, and 2 sampled neighbours
per node training to the accuracy of full neighbourhoods."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from unigraph.graph import Graph
from unigraph.sampling.control_variate import (ControlVariateGCN, ControlVariateSampler, MappedHistory, TensorHistory,
                                               exact_logits, gcn_weights, precompute_ax, train_control_variate)
from unigraph.storage.generate import PlantedSpec, planted_stream_dataset


def _graph(n=60, e=300, seed=0):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    dst[:40] = 7                                                   # a hub; nodes may have no in-edges
    return Graph(torch.from_numpy(np.stack([src, dst])), num_nodes=n)


def _dense_p(graph):
    n = graph.num_nodes
    degree = torch.bincount(graph.dst, minlength=n).double()
    p = torch.zeros(n, n, dtype=torch.float64)
    p.index_put_((graph.dst, graph.src), gcn_weights(degree[graph.dst], degree[graph.src]), accumulate=True)
    return p + torch.diag(1.0 / (degree + 1))


def test_precompute_ax_equals_the_dense_product(tmp_path):
    graph = _graph()
    x = torch.randn(60, 5, dtype=torch.float64)
    reference = _dense_p(graph) @ x
    torch.testing.assert_close(precompute_ax(graph, x, block_rows=7), reference, rtol=0, atol=1e-12)
    out = torch.zeros(20, 5, dtype=torch.float64)
    precompute_ax(graph, x, rows=(30, 50), block_rows=3, out=out)        # a trainer's share of the rows
    torch.testing.assert_close(out, reference[30:50], rtol=0, atol=1e-12)
    from unigraph.storage.convert import write_arrays
    from unigraph.storage.loader import mapped_csr
    chunked = write_arrays(tmp_path, name="g", num_nodes=60, src=graph.src, dst=graph.dst, x=x.numpy())
    torch.testing.assert_close(precompute_ax(mapped_csr(chunked), chunked.tensor("x")), reference, rtol=0, atol=1e-12)


def _model_and_batch(fanout, seeds, key=3, layers=3):
    torch.manual_seed(0)
    graph = _graph()
    ax = torch.randn(60, 4, dtype=torch.float64)
    model = ControlVariateGCN(4, 6, 3, num_layers=layers).double()
    batch = ControlVariateSampler(model.num_propagated, fanout).sample(graph, seeds, key=key)
    return graph, ax, model, batch


def test_every_neighbour_is_the_exact_computation_forward_and_backward():
    seeds = torch.tensor([7, 0, 33, 59])
    graph, ax, model, batch = _model_and_batch(None, seeds)
    history = TensorHistory(60, model.history_widths, torch.float64)
    for table in history.tables:                                   # any history: its terms cancel
        table.normal_()
    model.eval()
    out = model(batch, ax[batch.nodes[0]], history)
    reference = exact_logits(model, graph, ax)[seeds]
    torch.testing.assert_close(out, reference, rtol=0, atol=1e-12)
    grads = torch.autograd.grad(out.square().sum(), list(model.parameters()))
    expected = torch.autograd.grad(reference.square().sum(), list(model.parameters()))
    for g, e in zip(grads, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-10)


def test_current_histories_make_one_sample_exact():
    """With h-bar = h the sampled term vanishes and the history term is the exact aggregation, for
    any sample (two layers: the one propagated layer's history is relu(P X W0))."""
    seeds = torch.tensor([7, 1, 2, 40])
    graph, ax, model, _ = _model_and_batch(1, seeds, layers=2)
    history = TensorHistory(60, model.history_widths, torch.float64)
    with torch.no_grad():
        history.tables[0][:] = torch.relu(model.linears[0](ax))
        model.eval()
        reference = exact_logits(model, graph, ax)[seeds]
        for key in range(5):
            batch = ControlVariateSampler(1, 1).sample(graph, seeds, key=key)
            torch.testing.assert_close(model(batch, ax[batch.nodes[0]], history), reference, rtol=0, atol=1e-12)


def test_stale_histories_are_unbiased():
    """Mean over 600 samples of one neighbour against the exact output, within 5 standard errors."""
    seeds = torch.tensor([7, 1, 2, 40, 13])
    graph, ax, model, _ = _model_and_batch(1, seeds, layers=2)
    history = TensorHistory(60, model.history_widths, torch.float64)
    history.tables[0].normal_()
    model.eval()
    with torch.no_grad():
        reference = exact_logits(model, graph, ax)[seeds]
        outs = torch.stack([model(batch, ax[batch.nodes[0]], history) for batch in
                            (ControlVariateSampler(1, 1).sample(graph, seeds, key=k) for k in range(600))])
    error = (outs.mean(0) - reference).abs()
    standard_error = outs.std(0) / 600 ** 0.5
    assert bool((error <= 5 * standard_error + 1e-12).all())
    assert float(outs.std(0).max()) > 1e-3                          # a stale history leaves variance to test


def test_training_updates_the_histories_of_computed_nodes_only():
    seeds = torch.tensor([7, 0])
    graph, ax, model, batch = _model_and_batch(2, seeds, layers=2)
    history = TensorHistory(60, model.history_widths, torch.float64)
    model.eval()
    model(batch, ax[batch.nodes[0]], history)
    assert not history.tables[0].any()                             # evaluation leaves them alone
    model.train()
    model(batch, ax[batch.nodes[0]], history)
    touched = history.tables[0].abs().sum(1) > 0
    expected = torch.zeros(60, dtype=torch.bool)
    expected[batch.nodes[0]] = True
    assert torch.equal(touched, expected & (torch.relu(model.linears[0](ax)).abs().sum(1) > 0))


def test_mapped_history_is_shared_through_its_files(tmp_path):
    a = MappedHistory(tmp_path, 10, [3, 2])
    a.update(1, torch.tensor([4, 9]), torch.ones(2, 2))
    b = MappedHistory(tmp_path, 10, [3, 2], create=False)
    assert b.gather(1, torch.tensor([4, 5, 9])).tolist() == [[1, 1], [0, 0], [1, 1]]
    with pytest.raises(ValueError, match="not 11 x 3 float32"):
        MappedHistory(tmp_path, 11, [3], create=False)


def test_two_sampled_neighbours_train_to_the_accuracy_of_full_neighbourhoods():
    """A generated graph whose labels need the neighbours, GCN with two layers, 10 epochs: 2 sampled
    neighbours per node end within 2 points of every neighbour (3,000 test nodes; measured on
    seeds 4-7: within 0.6 points). One thread: many small ops, which extra threads only slow
    down on a busy machine."""
    spec = PlantedSpec(6000, num_features=16, avg_degree=10, homophily=0.75, class_separation=0.4,
                       train_fraction=0.3, val_fraction=0.1, test_fraction=0.5, seed=4)
    data = planted_stream_dataset(spec)
    ax = precompute_ax(data.graph, data.x)
    masks = (data.train_mask, data.val_mask, data.test_mask)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _, full = train_control_variate(data.graph, ax, data.y, masks, fanout=None, epochs=10, batch_size=256)
        _, cv = train_control_variate(data.graph, ax, data.y, masks, fanout=2, epochs=10, batch_size=256)
    finally:
        torch.set_num_threads(threads)
    assert full.test_acc > 0.62
    assert abs(cv.test_acc - full.test_acc) <= 0.02, (cv.test_acc, full.test_acc)
    assert cv.ax_rows < full.ax_rows / 3                            # the receptive field it saves
