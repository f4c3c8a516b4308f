"""Models as lists of layers (pipeline stages): running the layers in order is the model's forward."""
from __future__ import annotations

import pytest
import torch

from unigraph.data import planted_partition
from unigraph.models import ViG
from unigraph.sampling import NeighborSampler
from unigraph.train.layers import model_layers
from unigraph.train.models import build_node_classifier, model_names
from unigraph.train.vig import vig_balance, vig_layers


def run_layers(layers, graphs, x):
    for layer, graph in zip(layers, graphs):
        x = layer(graph, x)
    return x


@pytest.mark.parametrize("name", model_names())
@pytest.mark.parametrize("on_blocks", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_layers_in_order_are_the_model(name, on_blocks, training):
    data = planted_partition(120, num_features=10, num_val=20, num_test=20, seed=2)
    torch.manual_seed(0)
    model = build_node_classifier(name, data.num_features, data.num_classes, num_layers=3, hidden_channels=6,
                                  dropout=0.3).train(training)
    if on_blocks:
        batch = NeighborSampler([3, 3, 2]).sample(data.graph, torch.arange(15), key=4)
        graphs, x = batch.blocks, data.x[batch.input_nodes]
    else:
        graphs, x = [data.graph] * 3, data.x
    torch.manual_seed(1)
    expected = model(graphs if on_blocks else data.graph, x)
    torch.manual_seed(1)
    got = run_layers(model_layers(model), graphs, x)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    if training:  # the layers' random draws are the model's, in the same order
        torch.manual_seed(2)
        assert not torch.equal(run_layers(model_layers(model), graphs, x), expected)


def test_sparse_bag_of_words_input_takes_the_same_path():
    data = planted_partition(100, num_features=40, num_val=10, num_test=10, seed=3)
    x = (torch.rand(100, 40) < 0.02).float()  # mostly zeros: GCN/GAT project it as a sparse matrix
    for name in ("gcn", "gat"):
        torch.manual_seed(0)
        model = build_node_classifier(name, 40, data.num_classes, dropout=0.5)
        torch.manual_seed(5)
        expected = model(data.graph, x)
        torch.manual_seed(5)
        torch.testing.assert_close(run_layers(model_layers(model), [data.graph] * 2, x), expected, rtol=1e-6, atol=1e-6)


def test_layers_share_the_model_parameters():
    model = build_node_classifier("gat", 8, 3)
    layer_params = {id(p) for layer in model_layers(model) for p in layer.parameters()}
    assert layer_params == {id(p) for p in model.parameters()}


def test_only_known_models_split():
    with pytest.raises(TypeError, match="cannot split a Linear into layers"):
        model_layers(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="unknown model 'resnet'"):
        build_node_classifier("resnet", 4, 2)
    with pytest.raises(ValueError, match="heads applies to the GAT model only"):
        build_node_classifier("gcn", 4, 2, heads=2)


@pytest.mark.parametrize("training", [False, True])
def test_vig_layers_in_order_are_the_vig(training):
    torch.manual_seed(0)
    vig = ViG(num_classes=5, channels=16, depth=4, k=4, image_size=16).train(training)
    images = torch.randn(3, 3, 16, 16)
    expected = vig(images)
    h = images
    layers = vig_layers(vig)
    assert len(layers) == 2 + 8  # stem, 4 x (Grapher, FFN), head
    for layer in layers:
        h = layer(h)
    torch.testing.assert_close(h, expected, rtol=1e-6, atol=1e-6)
    assert vig_balance(vig, 2) == (5, 5) and vig_balance(vig, 4) == (3, 2, 2, 3)
