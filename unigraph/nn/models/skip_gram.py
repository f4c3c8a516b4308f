r"""What the random-walk embeddings share (:class:`~unigraph.nn.models.Node2Vec`,
:class:`~unigraph.nn.models.MetaPath2Vec`): the skip-gram loss of PyG's models over windows of
walks, each window's first node against the others,

.. math::
    \mathcal{L} = -\operatorname{mean}_{(v, c) \in P} \log \sigma(\mathbf{z}_v^{\top}\mathbf{z}_c)
    - \operatorname{mean}_{(v, c) \in N} \log\big(1 - \sigma(\mathbf{z}_v^{\top}\mathbf{z}_c)\big)

(with :data:`EPS` inside each log), and the logistic-regression test of the embeddings."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

EPS = 1e-15  # keeps log() finite where the sigmoid saturates


class SkipGram:
    """Mixin for a module with an ``embedding`` (``torch.nn.Embedding``) and ``embedding_dim``."""

    def loss(self, pos_rw: Tensor, neg_rw: Tensor) -> Tensor:
        """Skip-gram loss of the positive windows against the negative ones."""
        pos, neg = self._window_scores(pos_rw), self._window_scores(neg_rw)
        return -torch.log(torch.sigmoid(pos) + EPS).mean() - torch.log(1 - torch.sigmoid(neg) + EPS).mean()

    def _window_scores(self, windows: Tensor) -> Tensor:
        """:math:`\\mathbf{z}_v^{\\top}\\mathbf{z}_c` for each window's first node and every other."""
        if windows.dim() != 2 or windows.shape[1] < 2 or windows.is_floating_point():
            raise ValueError(f"{type(self).__name__}.loss expects integer windows [W, context_size >= 2], got "
                             f"{windows.dtype} {list(windows.shape)}")
        start = self.embedding(windows[:, 0]).unsqueeze(1)
        rest = self.embedding(windows[:, 1:].reshape(-1)).view(windows.shape[0], -1, self.embedding_dim)
        return (start * rest).sum(dim=-1).view(-1)

    def test(self, train_z: Tensor, train_y: Tensor, test_z: Tensor, test_y: Tensor,
             solver: str = "lbfgs", *args: Any, **kwargs: Any) -> float:
        """Accuracy on ``(test_z, test_y)`` of a scikit-learn logistic regression fitted on
        ``(train_z, train_y)`` (extra arguments go to ``LogisticRegression``)."""
        try:
            from sklearn.linear_model import LogisticRegression
        except ImportError as err:
            raise ImportError(f"{type(self).__name__}.test needs scikit-learn (pip install scikit-learn)") from err

        def numpy(t: Tensor) -> Any:
            return t.detach().cpu().numpy()

        clf = LogisticRegression(*args, solver=solver, **kwargs).fit(numpy(train_z), numpy(train_y))
        return clf.score(numpy(test_z), numpy(test_y))
