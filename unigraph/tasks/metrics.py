"""Evaluation metrics computed as OGB computes them, without the ``ogb`` package.

* :func:`accuracy` - OGB's ``acc``: per task, the fraction of labelled rows predicted exactly
  (rows whose label is NaN are unlabelled), averaged over tasks.
* :func:`roc_auc` - the area under the ROC curve of binary labels, ties counted as half (the
  Mann-Whitney statistic; equal to scikit-learn's ``roc_auc_score``); :func:`multitask_roc_auc`
  is OGB's ``rocauc``: the mean over tasks that have both classes among their labelled rows.
* :func:`hits_at_k` - OGB's ``hits@K``: the fraction of positive scores *strictly above* the
  K-th highest negative score (1.0 when there are fewer than K negatives).
* :func:`mrr` - OGB's ``mrr``: each positive is ranked against its own row of negatives; a tie
  counts half (rank = 1 + #greater + #equal / 2); returns the per-positive reciprocal ranks and
  hits@1/3/10, as OGB's evaluator does.
* :class:`Evaluator` - ``Evaluator("ogbn-arxiv").eval({"y_true": ..., "y_pred": ...})`` with OGB's
  dataset names, input dicts and output keys.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def _tensor(value, name: str) -> Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch tensor or numpy array, got {type(value).__name__}")
    return value.detach().cpu()


def _columns(value, name: str) -> Tensor:
    value = _tensor(value, name)
    if value.dim() == 1:
        value = value.unsqueeze(1)
    if value.dim() != 2:
        raise ValueError(f"{name} must have shape [N] or [N, num_tasks], got {list(value.shape)}")
    return value


def accuracy(y_true, y_pred) -> float:
    """OGB's ``acc`` over ``[N, T]`` (or ``[N]``) labels and predicted labels."""
    y_true, y_pred = _columns(y_true, "y_true"), _columns(y_pred, "y_pred")
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred must have the same shape, got {list(y_true.shape)} and {list(y_pred.shape)}")
    scores = []
    for task in range(y_true.shape[1]):
        truth, pred = y_true[:, task], y_pred[:, task]
        labelled = truth == truth  # NaN marks an unlabelled row
        if bool(labelled.any()):
            scores.append(float((truth[labelled] == pred[labelled]).double().mean()))
    if not scores:
        raise ValueError("accuracy needs at least one labelled row")
    return sum(scores) / len(scores)


def roc_auc(y_true, y_score) -> float:
    """Binary ROC-AUC (labels 0/1, any real scores; ties count half). Needs both classes."""
    y_true, y_score = _tensor(y_true, "y_true").flatten(), _tensor(y_score, "y_score").flatten().double()
    if y_true.shape != y_score.shape:
        raise ValueError(f"y_true and y_score must have as many entries, got {y_true.numel()} and {y_score.numel()}")
    if bool(torch.isnan(y_score).any()):
        raise ValueError("y_score holds NaN; ROC-AUC needs real scores")
    positive = y_true == 1
    if not bool(((y_true == 0) | positive).all()):
        raise ValueError(f"y_true must hold 0/1 labels, got values {torch.unique(y_true).tolist()[:6]}")
    num_pos = int(positive.sum())
    num_neg = y_true.numel() - num_pos
    if num_pos == 0 or num_neg == 0:
        raise ValueError(f"ROC-AUC needs both classes, got {num_pos} positive and {num_neg} negative labels")
    order = torch.argsort(y_score)
    _, inverse, counts = torch.unique_consecutive(y_score[order], return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    ranks = torch.empty_like(y_score)
    ranks[order] = ((ends - counts + 1 + ends) / 2)[inverse]  # 1-based, the mean rank of each tie group
    return float((ranks[positive].sum() - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg))


def multitask_roc_auc(y_true, y_score) -> float:
    """OGB's ``rocauc``: mean ROC-AUC over the tasks (columns) that have both classes among
    their labelled (non-NaN) rows."""
    y_true, y_score = _columns(y_true, "y_true"), _columns(y_score, "y_pred")
    if y_true.shape != y_score.shape:
        raise ValueError(f"y_true and y_pred must have the same shape, got {list(y_true.shape)} and {list(y_score.shape)}")
    scores = []
    for task in range(y_true.shape[1]):
        truth = y_true[:, task]
        labelled = truth == truth
        if bool((truth[labelled] == 1).any()) and bool((truth[labelled] == 0).any()):
            scores.append(roc_auc(truth[labelled], y_score[labelled, task]))
    if not scores:
        raise ValueError("no task has both positive and negative labels: ROC-AUC is undefined")
    return sum(scores) / len(scores)


def link_auc(pos_scores, neg_scores) -> float:
    """ROC-AUC of positive against negative edge scores."""
    pos, neg = _tensor(pos_scores, "pos_scores").flatten(), _tensor(neg_scores, "neg_scores").flatten()
    return roc_auc(torch.cat([torch.ones(pos.numel()), torch.zeros(neg.numel())]), torch.cat([pos, neg]))


def hits_at_k(pos_scores, neg_scores, k: int) -> float:
    """OGB's ``hits@K``: positives scored strictly above the K-th best negative (shared negatives)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    pos, neg = _tensor(pos_scores, "pos_scores").flatten(), _tensor(neg_scores, "neg_scores").flatten()
    if pos.numel() == 0:
        raise ValueError("hits@K needs at least one positive score")
    if neg.numel() < k:
        return 1.0
    kth = torch.topk(neg, k).values[-1]
    return float((pos > kth).sum()) / pos.numel()


def mrr(pos_scores, neg_scores) -> dict[str, Tensor]:
    """OGB's ``mrr`` for ``pos_scores [B]`` against ``neg_scores [B, M]`` (each positive against
    its own negatives): per-positive ``mrr_list`` and ``hits@1/3/10_list``."""
    pos, neg = _tensor(pos_scores, "pos_scores").flatten(), _tensor(neg_scores, "neg_scores")
    if neg.dim() != 2 or neg.shape[0] != pos.numel():
        raise ValueError(f"neg_scores must have shape [num_pos, num_neg] = [{pos.numel()}, M], got {list(neg.shape)}")
    pos = pos.view(-1, 1)
    rank = 0.5 * ((neg > pos).sum(1) + (neg >= pos).sum(1)) + 1
    return {"hits@1_list": (rank <= 1).float(), "hits@3_list": (rank <= 3).float(),
            "hits@10_list": (rank <= 10).float(), "mrr_list": 1.0 / rank.float()}


# OGB dataset -> its metric (the leaderboards' choice), for the datasets whose metric is available here.
OGB_METRICS = {
    "ogbn-arxiv": "acc", "ogbn-products": "acc", "ogbn-papers100M": "acc", "ogbn-mag": "acc",
    "ogbn-proteins": "rocauc",
    "ogbl-collab": "hits@50", "ogbl-ddi": "hits@20", "ogbl-ppa": "hits@100", "ogbl-citation2": "mrr",
    "ogbl-wikikg2": "mrr", "ogbl-biokg": "mrr", "ogbl-vessel": "rocauc",
    "ogbg-molhiv": "rocauc", "ogbg-ppa": "acc", "ogbg-moltox21": "rocauc", "ogbg-molbace": "rocauc",
}


class Evaluator:
    """OGB's evaluator interface: ``Evaluator(name).eval(input_dict)``.

    ``name`` is an OGB dataset name (see :data:`OGB_METRICS`) or a metric itself (``"acc"``,
    ``"rocauc"``, ``"hits@K"``, ``"mrr"``). Node and graph property datasets take
    ``{"y_true", "y_pred"}`` (``[N, T]`` or ``[N]``); link datasets take ``{"y_pred_pos",
    "y_pred_neg"}``. Outputs use OGB's keys (``{"acc": ...}``, ``{"hits@50": ...}``, the ``*_list``
    entries for ``mrr``; ``"rocauc"`` for link data scores positives against negatives).
    """

    def __init__(self, name: str):
        metric = OGB_METRICS.get(name, name)
        valid = metric in ("acc", "rocauc", "mrr") or (metric.startswith("hits@") and metric[5:].isdigit()
                                                      and int(metric[5:]) > 0)
        if not valid:
            raise ValueError(f"unknown dataset or metric {name!r}; datasets: {', '.join(sorted(OGB_METRICS))}; "
                             "metrics: acc, rocauc, hits@K, mrr")
        self.name, self.eval_metric = name, metric
        self.link = name.startswith("ogbl-") or metric.startswith("hits@") or metric == "mrr"

    def eval(self, input_dict: dict) -> dict:
        if not isinstance(input_dict, dict):
            raise TypeError(f"eval takes a dict, got {type(input_dict).__name__}")
        keys = ("y_pred_pos", "y_pred_neg") if self.link else ("y_true", "y_pred")
        missing = [k for k in keys if k not in input_dict]
        if missing:
            raise ValueError(f"{self.name} expects the keys {list(keys)}; missing {missing}")
        a, b = (input_dict[k] for k in keys)
        metric = self.eval_metric
        if metric == "acc":
            return {"acc": accuracy(a, b)}
        if metric == "rocauc":
            return {"rocauc": link_auc(a, b) if self.link else multitask_roc_auc(a, b)}
        if metric == "mrr":
            return mrr(a, b)
        return {metric: hits_at_k(a, b, int(metric[5:]))}
