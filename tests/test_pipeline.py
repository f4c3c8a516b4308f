"""Pipeline parallelism with graph-aware micro-batches, data x pipeline, and the ViG pipeline.

In process: index slicing (the GPipe GNN study's micro-batches) drops edges and changes the
gradient; graph-aware micro-batches keep every edge, give every seed its whole-batch computation
tree, and their gradients add up to the whole batch's. On gloo: a 2-stage pipeline's gradient
equals the whole mini-batch's (GPipe and 1F1B), the ViG pipeline's equals the sequential model's
on the same micro-batches, and 2 replicas x 2 stages train exactly like one process.
"""
from __future__ import annotations

import pickle

import pytest
import torch
import torch.nn.functional as F

from unigraph import Graph
from unigraph.data import planted_partition
from unigraph.models import ViG
from unigraph.sampling import NeighborSampler
from unigraph.train import PipelineConfig, PipelineTrainer, TrainConfig, Trainer, init_distributed, launch
from unigraph.train.distributed import DistContext, shutdown
from unigraph.train.launch import free_port
from unigraph.train.layers import stage_bounds
from unigraph.train.micro_batch import (MicroBatchSampler, global_edges, index_slice_edges, node_capacities,
                                        pad_rows)
from unigraph.train.models import build_node_classifier
from unigraph.train.stages import make_layout
from unigraph.train.vig import ViGPipeline

FANOUTS = (4, 3)


def small_dataset():
    return planted_partition(240, num_features=12, num_val=60, num_test=60, seed=1)


def make_model(name: str, dataset):
    torch.manual_seed(0)
    extra = {"heads": 2} if name == "gat" else {}
    return build_node_classifier(name, dataset.num_features, dataset.num_classes, hidden_channels=6, dropout=0.0,
                                 **extra).double()


def small_vig():
    torch.manual_seed(0)
    return ViG(num_classes=4, channels=16, depth=2, k=4, image_size=16).double()


def vig_batch():
    gen = torch.Generator().manual_seed(7)
    return torch.randn(8, 3, 16, 16, generator=gen, dtype=torch.float64), torch.randint(0, 4, (8,), generator=gen)


def whole_batch_gradients(model, dataset, seeds, key):
    blocks = NeighborSampler(list(FANOUTS)).sample(dataset.graph, seeds, key=key)
    loss = F.cross_entropy(model(blocks.blocks, dataset.x.double()[blocks.input_nodes]), dataset.y[seeds])
    loss.backward()
    return float(loss.detach()), {name: p.grad for name, p in model.named_parameters()}


# ---------------------------------------------------------------------- workers (run in each rank)
def two_stage_gradients() -> dict:
    context = init_distributed(timeout=90)
    try:
        return pipelined_gradients(context)  # its pipelines are gone before the group is
    finally:
        shutdown()


def pipelined_gradients(context) -> dict:
    out = {}
    dataset = small_dataset()
    for name, schedule in (("sage", "gpipe"), ("gat", "1f1b")):
        model = make_model(name, dataset)
        trainer = PipelineTrainer(model, dataset, TrainConfig(batch_size=24, fanouts=FANOUTS, seed=3, progress="off"),
                                  PipelineConfig(stages=2, micro_batches=4, schedule=schedule), context=context)
        batch = next(iter(trainer.loader))
        loss = trainer.train_step(batch, step_optimizer=False)
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if k.startswith(trainer.owned_prefixes)}
        out[name] = {"seeds": batch.seeds, "key": batch.key, "loss": loss, "grads": grads}
    vig = small_vig()
    pipeline = ViGPipeline(vig, PipelineConfig(stages=2, micro_batches=4), batch_size=8, context=context)
    images, labels = vig_batch()
    loss = pipeline.train_step(images, labels, step_optimizer=False)
    out["vig"] = {"loss": loss, "grads": {k: p.grad.clone() for k, p in vig.named_parameters() if p.grad is not None}}
    return out


DXP_CONFIG = dict(epochs=3, batch_size=10, fanouts=FANOUTS, patience=None, restore_best=False, progress="off", seed=3)


def data_x_pipeline_run(checkpoint_dir: str) -> dict:
    context = init_distributed(timeout=90)
    try:
        return train_data_x_pipeline(context, checkpoint_dir)
    finally:
        shutdown()


def train_data_x_pipeline(context, checkpoint_dir: str) -> dict:
    """Train 2x2; then stop a run after 2 epochs (checkpointed) and resume it to the end."""
    dataset = small_dataset()
    model = make_model("sage", dataset)
    layout = PipelineConfig(stages=2, micro_batches=2, replicas=2)
    result = PipelineTrainer(model, dataset, TrainConfig(**DXP_CONFIG), layout, context=context).fit()
    PipelineTrainer(make_model("sage", dataset), dataset, TrainConfig(**dict(DXP_CONFIG, epochs=2),
                    checkpoint_dir=checkpoint_dir), layout, context=context).fit()
    resumed = PipelineTrainer(make_model("sage", dataset), dataset, TrainConfig(
        **DXP_CONFIG, checkpoint_dir=checkpoint_dir, resume=True), layout, context=context).fit()
    return {"losses": result.losses, "state": {k: v.clone() for k, v in model.state_dict().items()},
            "resumed_losses": resumed.losses}


# ---------------------------------------------------------------------- micro-batches keep every edge (in process)
def test_index_slicing_drops_edges_graph_aware_micro_batches_keep_all():
    graph = small_dataset().graph
    kept, dropped = index_slice_edges(graph, 4)
    assert kept + dropped == graph.num_edges
    assert dropped > graph.num_edges // 2, "contiguous index ranges of a random graph cut most edges"
    everything = [int(graph.stats().max_in_degree)] * 2
    batch = MicroBatchSampler(NeighborSampler(everything), 4).sample(graph, torch.arange(graph.num_nodes), key=11)
    in_edges = {v: set() for v in range(graph.num_nodes)}
    for u, v in graph.edge_index.t().tolist():
        in_edges[v].add(u)
    covered = set()
    for part in batch.parts:
        for layer in range(2):
            edges = global_edges(part, layer).t().tolist()
            found = {}
            for u, v in edges:
                found.setdefault(v, set()).add(u)
            block = part.blocks[layer]
            for v in part.input_nodes[:block.num_dst_nodes].tolist():
                assert found.get(v, set()) == in_edges[v], "a destination lost an in-edge"
            if layer == 1:
                covered.update(map(tuple, edges))
    assert len(covered) == graph.num_edges  # every edge of the graph, across the micro-batches, and no other
    assert covered == set(map(tuple, graph.edge_index.t().tolist()))


def test_micro_batch_trees_are_the_whole_batch_trees():
    graph = small_dataset().graph
    seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(0))[:40]
    sampler = NeighborSampler(list(FANOUTS))
    whole = sampler.sample(graph, seeds, key=99)
    micro = MicroBatchSampler(sampler, 5).sample(graph, seeds, key=99)
    assert torch.equal(torch.cat([p.seeds for p in micro.parts]), seeds)
    for layer in range(2):
        whole_in = {}
        for u, v in global_edges(whole, layer).t().tolist():
            whole_in.setdefault(v, []).append(u)
        for part in micro.parts:
            part_in = {}
            for u, v in global_edges(part, layer).t().tolist():
                part_in.setdefault(v, []).append(u)
            for v in part.input_nodes[:part.blocks[layer].num_dst_nodes].tolist():
                assert part_in.get(v, []) == whole_in.get(v, []), f"node {v} has other sampled in-edges at layer {layer}"


def test_gradients_index_sliced_versus_graph_aware():
    """Full-graph training split into 4 micro-batches: index slicing changes the gradient; graph-aware
    micro-batches (every in-edge) reproduce it exactly."""
    dataset = small_dataset()
    train = dataset.train_mask.nonzero().flatten()
    x = dataset.x.double()

    def gradients(run):
        model = make_model("sage", dataset)
        run(model)
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    def full(model):
        F.cross_entropy(model(dataset.graph, x)[train], dataset.y[train]).backward()

    def index_sliced(model):
        for chunk in torch.tensor_split(torch.arange(dataset.num_nodes), 4):
            keep = (dataset.graph.src >= chunk[0]) & (dataset.graph.src <= chunk[-1]) & \
                   (dataset.graph.dst >= chunk[0]) & (dataset.graph.dst <= chunk[-1])
            sub = Graph(torch.stack([dataset.graph.src[keep], dataset.graph.dst[keep]]) - chunk[0], chunk.numel())
            local = train[(train >= chunk[0]) & (train <= chunk[-1])] - chunk[0]
            logits = model(sub, x[chunk])[local]
            (F.cross_entropy(logits, dataset.y[chunk][local], reduction="sum") / train.numel()).backward()

    def graph_aware(model):
        everything = [int(dataset.graph.stats().max_in_degree)] * 2
        batch = MicroBatchSampler(NeighborSampler(everything), 4).sample(dataset.graph, train, key=5)
        for part in batch.parts:
            logits = model(part.blocks, x[part.input_nodes])
            (F.cross_entropy(logits, dataset.y[part.seeds], reduction="sum") / train.numel()).backward()

    reference = gradients(full)
    sliced = gradients(index_sliced)
    ours = gradients(graph_aware)
    assert (sliced - reference).norm() > 0.05 * reference.norm()
    torch.testing.assert_close(ours, reference, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("replace", [False, True])
def test_node_capacities_bound_every_micro_batch(replace):
    graph = small_dataset().graph
    fanouts = [3, 5]
    sampler = MicroBatchSampler(NeighborSampler(fanouts, replace=replace), 3)
    for key in range(5):
        seeds = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(key))[:17]
        capacities = node_capacities(fanouts, 6, graph.num_nodes)
        for part in sampler.sample(graph, seeds, key=key).parts:
            assert part.seeds.numel() <= capacities[-1]
            assert all(b.num_src_nodes <= c for b, c in zip(part.blocks, capacities))
    assert node_capacities([10, 10], 50, 300) == [300, 300, 50]
    assert node_capacities([2, 3], 4, 10**6) == [4 * 4 * 3, 4 * 4, 4]


def test_padding_and_stage_arguments_are_checked():
    padded = pad_rows(torch.ones(2, 3), 4, value=-1.0)
    assert padded.shape == (4, 3) and bool((padded[2:] == -1).all())
    with pytest.raises(ValueError, match="do not fit the capacity 1"):
        pad_rows(torch.ones(2, 3), 1)
    with pytest.raises(ValueError, match="cannot cut 2 layers into 3 stages"):
        stage_bounds(2, 3, None)
    with pytest.raises(ValueError, match="sums to 3 but the model has 2 layers"):
        stage_bounds(2, 2, (1, 2))
    assert stage_bounds(5, 2, None) == [(0, 3), (3, 5)]
    with pytest.raises(ValueError, match="1F1B schedule needs micro_batches >= stages"):
        PipelineConfig(stages=4, micro_batches=2, schedule="1f1b")
    with pytest.raises(ValueError, match="balance has 1 entries but there are 2 stages"):
        PipelineConfig(stages=2, micro_batches=2, balance=(2,))
    with pytest.raises(ValueError, match="2 stages x 2 replicas need 4 processes, but the job has 2"):
        make_layout(DistContext(0, 2, 0, "gloo", torch.device("cpu")), 2, 2)
    with pytest.raises(ValueError, match="pipeline training needs a process group"):
        PipelineTrainer(make_model("sage", small_dataset()), small_dataset(), TrainConfig(),
                        PipelineConfig(stages=2, micro_batches=2))


def test_micro_batches_travel_to_sampling_workers_intact():
    graph = small_dataset().graph
    batch = MicroBatchSampler(NeighborSampler(list(FANOUTS)), 3).sample(graph, torch.arange(10), key=2)
    copy = pickle.loads(pickle.dumps(batch))
    assert copy.key == batch.key and torch.equal(copy.seeds, batch.seeds)
    for a, b in zip(copy.parts, batch.parts):
        assert torch.equal(a.input_nodes, b.input_nodes)
        assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(a.blocks, b.blocks))


@pytest.fixture
def world_of_one(monkeypatch):
    """A gloo process group of one rank in this process (a one-stage pipeline runs without peers)."""
    for name, value in dict(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())).items():
        monkeypatch.setenv(name, value)
    context = init_distributed(timeout=30)
    yield context
    shutdown()


def test_one_stage_pipeline_trains_like_the_trainer_and_resumes(world_of_one, tmp_path):
    """Micro-batches (some empty: the last batch of each epoch has 2 seeds for 4 micro-batches) give
    the same training as whole batches; a pipeline run resumes from its checkpoint exactly."""
    dataset = small_dataset()
    config = dict(epochs=4, batch_size=26, fanouts=FANOUTS, patience=None, restore_best=False, progress="off")
    pipeline = PipelineConfig(stages=1, micro_batches=4)
    reference = Trainer(make_model("gat", dataset), dataset, TrainConfig(**config)).fit()
    piped = PipelineTrainer(make_model("gat", dataset), dataset, TrainConfig(**config), pipeline,
                            context=world_of_one).fit()
    assert piped.losses == pytest.approx(reference.losses, rel=1e-9)

    def dropout_run(epochs, resume=False, model_seed=0):
        torch.manual_seed(model_seed)
        model = build_node_classifier("gat", dataset.num_features, dataset.num_classes, hidden_channels=4, heads=2)
        trainer = PipelineTrainer(model, dataset, TrainConfig(**dict(config, epochs=epochs),
                                  checkpoint_dir=str(tmp_path), resume=resume), pipeline, context=world_of_one)
        return trainer.fit(), model

    uninterrupted, model = dropout_run(4)
    dropout_run(2)
    resumed, resumed_model = dropout_run(4, resume=True, model_seed=9)
    assert resumed.losses == uninterrupted.losses
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), resumed_model.state_dict().values()))


# ---------------------------------------------------------------------- on gloo
@pytest.fixture(scope="module")
def two_stage_results():
    return launch(two_stage_gradients, 2, timeout=200)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["sage", "gat"])
def test_pipelined_gradient_equals_the_whole_mini_batch_gradient(two_stage_results, name):
    """2 stages, 4 micro-batches (sage: GPipe, gat: 1F1B), float64: equal to 1e-10."""
    first, last = (rank[name] for rank in two_stage_results)
    assert torch.equal(first["seeds"], last["seeds"]) and first["key"] == last["key"], "stages saw different batches"
    dataset = small_dataset()
    model = make_model(name, dataset)
    loss, expected = whole_batch_gradients(model, dataset, first["seeds"], first["key"])
    assert last["loss"] == pytest.approx(loss, rel=1e-12)
    got = {**first["grads"], **last["grads"]}
    assert set(got) == set(expected), "each parameter belongs to exactly one stage"
    assert not set(first["grads"]) & set(last["grads"])
    for key, grad in expected.items():
        torch.testing.assert_close(got[key], grad, rtol=1e-10, atol=1e-12)


@pytest.mark.timeout(240)
def test_vig_pipeline_gradient_equals_sequential_micro_batches(two_stage_results):
    vig = small_vig()
    images, labels = vig_batch()
    total = 0.0
    for chunk_images, chunk_labels in zip(images.chunk(4), labels.chunk(4)):
        loss = F.cross_entropy(vig(chunk_images), chunk_labels, reduction="sum") / 8
        loss.backward()
        total += float(loss.detach())
    assert two_stage_results[1]["vig"]["loss"] == pytest.approx(total, rel=1e-12)
    got = {**two_stage_results[0]["vig"]["grads"], **two_stage_results[1]["vig"]["grads"]}
    assert set(got) == {k for k, p in vig.named_parameters()}
    for key, p in vig.named_parameters():
        torch.testing.assert_close(got[key], p.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.timeout(300)
def test_data_x_pipeline_2x2_matches_single_process(tmp_path):
    """2 replicas x 2 stages (4 processes), 2 micro-batches of each replica's 10 seeds: the loss curve
    and the weights equal one process with batches of 20 (float64; 1e-9 relative, 1e-7 absolute).
    A 2x2 run checkpointed after 2 epochs and resumed ends exactly like the uninterrupted one."""
    ranks = launch(data_x_pipeline_run, 4, args=(str(tmp_path),), timeout=260)
    for rank in ranks:
        assert rank["resumed_losses"] == rank["losses"]
    dataset = small_dataset()
    model = make_model("sage", dataset)
    single = Trainer(model, dataset, TrainConfig(**dict(DXP_CONFIG, batch_size=20))).fit()
    for rank in ranks:
        assert rank["losses"] == pytest.approx(single.losses, rel=1e-9)
    for name, value in model.state_dict().items():
        torch.testing.assert_close(ranks[0]["state"][name], value, rtol=0, atol=1e-7)
