"""unigraph.dgl.dataloading and dgl.data: DGL's mini-batch loop on unigraph's samplers, with DGL
blocks (ids in srcdata/dstdata[dgl.NID]); the citation datasets from local Planetoid files."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
from unigraph.dgl import dataloading


def test_blocks_are_dgl_blocks_with_their_ids():
    g = udgl.rand_graph(40, 200)
    g.ndata["feat"], g.ndata["label"] = torch.randn(40, 4), torch.arange(40)
    sampler = dataloading.NeighborSampler([3, -1], prefetch_node_feats=["feat"], prefetch_labels=["label"])
    loader = dataloading.DataLoader(g, torch.arange(10, 30), sampler, batch_size=8, shuffle=True, seed=0)
    conv = udgl.nn.SAGEConv(4, 2, "mean")
    for input_nodes, output_nodes, blocks in loader:
        assert all(isinstance(b, udgl.DGLGraph) and b.is_block for b in blocks)
        assert torch.equal(blocks[0].srcdata[udgl.NID], input_nodes)
        assert torch.equal(blocks[-1].dstdata[udgl.NID], output_nodes)
        assert torch.equal(blocks[-1].dstdata["label"], output_nodes)
        src, dst = blocks[-1].edges()
        global_src = blocks[-1].srcdata[udgl.NID][src.long()]
        global_dst = blocks[-1].dstdata[udgl.NID][dst.long()]
        assert bool(g.has_edges_between(global_src, global_dst).all())
        for block in blocks:   # every block names its edges in g (DGL's blocks always do)
            parent_src, parent_dst = g.find_edges(block.edata[udgl.EID])
            src, dst = block.edges()
            assert torch.equal(parent_src, block.srcdata[udgl.NID][src.long()])
            assert torch.equal(parent_dst, block.dstdata[udgl.NID][dst.long()])
        h = blocks[0].srcdata["feat"]
        for block in blocks:
            h = conv(block, h[:, :4] if h.shape[1] >= 4 else h.repeat(1, 2))
        assert h.shape == (len(output_nodes), 2)


def test_citation_datasets_read_local_files(planetoid_root):
    data = udgl.data.CoraGraphDataset(raw_dir=str(planetoid_root), transform=udgl.AddSelfLoop(), verbose=False)
    g = data[0]
    assert (g.num_nodes(), g.num_edges(), data.num_classes) == (2708, 10556 + 2708, 7)
    assert int(g.ndata["train_mask"].sum()) == 140 and int(g.ndata["test_mask"].sum()) == 1000
    torch.testing.assert_close(g.ndata["feat"].sum(1)[g.ndata["feat"].sum(1) > 0], torch.ones(2708))
    with pytest.raises(FileNotFoundError):
        udgl.data.PubmedGraphDataset(raw_dir=str(planetoid_root / "nowhere"), verbose=False)
