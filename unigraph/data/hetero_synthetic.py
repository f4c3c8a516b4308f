r"""A built-in heterogeneous dataset: an academic graph with a planted signal (no download).

:func:`academic_graph` generates papers, authors, institutions and fields of study. Every author
and institution has a hidden *area* in ``0..A-1``, every field a *topic* in ``0..B-1``; a paper's
label is the pair of its authors' area and its fields' topic,

.. math::
    y_p = a_p \cdot B + f_p \qquad (A \cdot B \text{ classes}),

where :math:`a_p` is the area its authors were drawn from and :math:`f_p` the topic its fields
were drawn from. Each relation alone tells only half of the label (a model that reads only the
authors is right about ``1/B`` of the time at best), so a model has to read both the ``writes`` and
the ``topic_of`` neighbours of a paper; paper features are pure noise. Authors' areas follow their
institution's, so institutions carry signal two hops away, and citations lean towards papers of the
same label.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from unigraph.hetero.graph import HeteroGraph

TARGET = "paper"
FEATURE_WIDTHS = {"paper": 32, "author": 16, "institution": 8, "field": 16}


@dataclasses.dataclass
class HeteroNodeDataset:
    """A heterogeneous graph with node features (``graph.ndata[type]["x"]``), labels of the
    ``target`` node type and a split of those nodes.

    Fields: ``name``; ``graph`` (:class:`~unigraph.HeteroGraph`); ``target`` (the node type that is
    classified); ``y`` (int64 labels ``[N_target]``); ``train_mask``/``val_mask``/``test_mask``
    (bool ``[N_target]``). Checked on construction.
    """

    name: str
    graph: HeteroGraph
    target: str
    y: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.graph, HeteroGraph) or self.graph.is_block:
            raise TypeError(f"HeteroNodeDataset.graph must be a whole unigraph.HeteroGraph, got {self.graph!r}")
        if self.target not in self.graph.node_types:
            raise ValueError(f"target {self.target!r} is not a node type of the graph ({self.graph.node_types})")
        n = self.graph.num_nodes(self.target)
        for t in self.graph.node_types:
            x = self.graph.ndata[t].get("x")
            if x is None or x.dim() != 2 or not x.is_floating_point():
                raise ValueError(f"node type {t!r} needs floating-point features ndata[{t!r}]['x'] of shape [N, F]")
        if not isinstance(self.y, Tensor) or self.y.dtype != torch.int64 or self.y.shape != (n,):
            raise ValueError(f"y must be an int64 tensor of shape [{n}], got {getattr(self.y, 'dtype', self.y)} "
                             f"{list(getattr(self.y, 'shape', []))}")
        for mask_name in ("train_mask", "val_mask", "test_mask"):
            mask = getattr(self, mask_name)
            if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.shape != (n,):
                raise ValueError(f"{mask_name} must be a bool tensor of shape [{n}]")

    @property
    def x_dict(self) -> dict[str, Tensor]:
        return self.graph.collect("x")

    @property
    def num_features(self) -> dict[str, int]:
        return {t: x.shape[1] for t, x in self.x_dict.items()}

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1 if self.y.numel() else 0

    def to(self, device: torch.device | str) -> "HeteroNodeDataset":
        return dataclasses.replace(self, graph=self.graph.to(device), y=self.y.to(device),
                                   train_mask=self.train_mask.to(device), val_mask=self.val_mask.to(device),
                                   test_mask=self.test_mask.to(device))

    def __repr__(self) -> str:
        nodes = ", ".join(f"{t}={self.graph.num_nodes(t)}" for t in self.graph.node_types)
        return (f"HeteroNodeDataset({self.name!r}, target={self.target!r}, nodes: {nodes}, "
                f"edges={self.graph.num_edges()}, relations={len(self.graph.relations)}, "
                f"num_classes={self.num_classes}, train/val/test={int(self.train_mask.sum())}/"
                f"{int(self.val_mask.sum())}/{int(self.test_mask.sum())})")


def _pick(pool_by_category: list[Tensor], everyone: int, wanted: Tensor, count: Tensor, purity: float,
          gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """For item ``i``, ``count[i]`` members: each from ``pool_by_category[wanted[i]]`` with probability
    ``purity``, else any of ``everyone``. Returns ``(item of each pick, member of each pick)``."""
    item = torch.repeat_interleave(torch.arange(wanted.numel()), count)
    category = wanted[item]
    member = torch.randint(0, everyone, (item.numel(),), generator=gen)
    pure = torch.rand(item.numel(), generator=gen) < purity
    for c, pool in enumerate(pool_by_category):
        mine = pure & (category == c)
        member[mine] = pool[torch.randint(0, pool.numel(), (int(mine.sum()),), generator=gen)]
    return item, member


def _features(category: Tensor, width: int, num_classes: int, signal: float, gen: torch.Generator) -> Tensor:
    x = torch.randn(category.numel(), width, generator=gen)
    if signal:
        x[:, :num_classes] += signal * torch.nn.functional.one_hot(category, num_classes).to(x.dtype)
    return x


def academic_graph(num_papers: int = 2000, *, areas: int = 2, topics: int = 2, seed: int = 0, purity: float = 0.85,
                   signal: float = 1.5, citations: int = 3, homophily: float = 0.3, train: float = 0.4,
                   val: float = 0.2) -> HeteroNodeDataset:
    """The academic graph described in the module docstring, as a :class:`HeteroNodeDataset`.

    Sizes: ``num_papers`` papers, ``num_papers // 2`` authors, ``num_papers // 40`` institutions,
    ``num_papers // 100`` fields (each at least ``2 * areas * topics``). Each paper has 1-3 authors
    and 1-2 fields, drawn from its area / topic with probability ``purity`` (else from everyone);
    cites ``citations`` papers, of its own label with probability ``homophily``. An author's area
    is its institution's with probability ``purity``. Author, institution and field features are
    noise plus ``signal`` on the one-hot of their area / topic; paper features are noise. Relations (both directions of each link, so messages reach every type):
    ``(author, writes, paper)``, ``(paper, written_by, author)``, ``(author, affiliated_with,
    institution)``, ``(institution, employs, author)``, ``(paper, has_topic, field)``, ``(field,
    topic_of, paper)``, ``(paper, cites, paper)``. Papers are split at random into ``train`` /
    ``val`` / the rest (test). Deterministic in ``seed``.
    """
    for name, value in (("num_papers", num_papers), ("areas", areas), ("topics", topics), ("citations", citations)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    num_classes = areas * topics
    if num_papers < 10 * num_classes:
        raise ValueError(f"num_papers must be at least 10 * areas * topics = {10 * num_classes}, got {num_papers}")
    for name, value in (("purity", purity), ("homophily", homophily), ("train", train), ("val", val)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    if train + val >= 1.0:
        raise ValueError(f"train + val must leave test papers, got train={train}, val={val}")
    gen = torch.Generator().manual_seed(seed)
    n_author = max(2 * num_classes, num_papers // 2)
    n_inst = max(2 * num_classes, num_papers // 40)
    n_field = max(2 * num_classes, num_papers // 100)

    inst_cat = torch.arange(n_inst) % areas
    author_inst = torch.randint(0, n_inst, (n_author,), generator=gen)
    author_cat = torch.where(torch.rand(n_author, generator=gen) < purity, inst_cat[author_inst],
                             torch.randint(0, areas, (n_author,), generator=gen))
    field_cat = torch.arange(n_field) % topics

    a_cat = torch.randint(0, areas, (num_papers,), generator=gen)
    f_cat = torch.randint(0, topics, (num_papers,), generator=gen)
    y = a_cat * topics + f_cat
    authors_by_cat = [(author_cat == c).nonzero().flatten() for c in range(areas)]
    authors_by_cat = [pool if pool.numel() else torch.arange(n_author) for pool in authors_by_cat]
    fields_by_cat = [(field_cat == c).nonzero().flatten() for c in range(topics)]
    papers_by_label = [(y == c).nonzero().flatten() for c in range(num_classes)]
    papers_by_label = [pool if pool.numel() else torch.arange(num_papers) for pool in papers_by_label]

    writes_paper, writes_author = _pick(authors_by_cat, n_author, a_cat,
                                        torch.randint(1, 4, (num_papers,), generator=gen), purity, gen)
    topic_paper, topic_field = _pick(fields_by_cat, n_field, f_cat,
                                     torch.randint(1, 3, (num_papers,), generator=gen), purity, gen)
    citing, cited = _pick(papers_by_label, num_papers, y, torch.full((num_papers,), citations), homophily, gen)

    edges = {
        ("author", "writes", "paper"): torch.stack([writes_author, writes_paper]),
        ("paper", "written_by", "author"): torch.stack([writes_paper, writes_author]),
        ("author", "affiliated_with", "institution"): torch.stack([torch.arange(n_author), author_inst]),
        ("institution", "employs", "author"): torch.stack([author_inst, torch.arange(n_author)]),
        ("paper", "has_topic", "field"): torch.stack([topic_paper, topic_field]),
        ("field", "topic_of", "paper"): torch.stack([topic_field, topic_paper]),
        ("paper", "cites", "paper"): torch.stack([citing, cited]),
    }
    counts = {"paper": num_papers, "author": n_author, "institution": n_inst, "field": n_field}
    graph = HeteroGraph(edges, counts)
    categories = {"paper": (None, 0), "author": (author_cat, areas), "institution": (inst_cat, areas),
                  "field": (field_cat, topics)}
    for ntype, (category, kinds) in categories.items():
        width = FEATURE_WIDTHS[ntype]
        graph.ndata[ntype]["x"] = (torch.randn(counts[ntype], width, generator=gen) if category is None
                                   else _features(category, width, kinds, signal, gen))
    order = torch.randperm(num_papers, generator=gen)
    n_train, n_val = int(train * num_papers), int(val * num_papers)
    masks = [torch.zeros(num_papers, dtype=torch.bool) for _ in range(3)]
    masks[0][order[:n_train]] = True
    masks[1][order[n_train:n_train + n_val]] = True
    masks[2][order[n_train + n_val:]] = True
    return HeteroNodeDataset("academic", graph, TARGET, y, *masks)
