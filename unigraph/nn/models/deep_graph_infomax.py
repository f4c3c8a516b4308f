r"""Deep Graph Infomax (`"Deep Graph Infomax" <https://arxiv.org/abs/1809.10341>`_): an encoder
:math:`\mathcal{E}` trained without labels by telling apart the patches of the real input from
those of a corrupted one (:math:`\mathcal{C}`), both scored against a summary :math:`\mathcal{R}` of
the real patches.

.. math::
    \mathbf{H} = \mathcal{E}(\mathbf{X}, \mathbf{A}), \quad
    \tilde{\mathbf{H}} = \mathcal{E}(\mathcal{C}(\mathbf{X}, \mathbf{A})), \quad
    \mathbf{s} = \mathcal{R}(\mathbf{H})

    D(\mathbf{h}_i, \mathbf{s}) = \sigma(\mathbf{h}_i^{\top} \mathbf{W} \mathbf{s}), \quad
    \mathcal{L} = -\frac{1}{N}\sum_i \log(D(\mathbf{h}_i, \mathbf{s}) + \epsilon)
                  -\frac{1}{N}\sum_i \log(1 - D(\tilde{\mathbf{h}}_i, \mathbf{s}) + \epsilon)

with :math:`\epsilon = 10^{-15}`.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor
from torch.nn import Parameter

EPS = 1e-15  # keeps log() finite where the discriminator saturates


def _reset_module(module: Any) -> None:
    """Reset a user module as PyG's models do: through its own ``reset_parameters`` when it has one,
    else through each child's, recursively (a plain callable is left alone)."""
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
        return
    for child in module.children() if hasattr(module, "children") else ():
        _reset_module(child)


class DeepGraphInfomax(torch.nn.Module):
    """Args:
        hidden_channels (int): width :math:`F` of the encoder's output (the bilinear form is
            :math:`F \\times F`).
        encoder (torch.nn.Module or callable): :math:`\\mathcal{E}`, called with the model's arguments.
        summary (callable): :math:`\\mathcal{R}`, called as ``summary(pos_z, *args, **kwargs)``.
        corruption (callable): :math:`\\mathcal{C}`, called with the model's arguments; it returns the
            corrupted positional arguments then the corrupted keyword values (in the order the keywords
            were given), or one value when there is one argument.

    Shapes:
        - **forward:** the encoder's inputs -> ``(pos_z [N, F], neg_z [N, F], summary [F] or [B, F])``
        - **discriminate:** ``z [N, F]``, ``summary [F]`` -> ``[N]``
    """

    def __init__(self, hidden_channels: int, encoder: Any, summary: Callable, corruption: Callable):
        super().__init__()
        if isinstance(hidden_channels, bool) or not isinstance(hidden_channels, int) or hidden_channels <= 0:
            raise ValueError(f"DeepGraphInfomax: hidden_channels must be a positive int, got {hidden_channels!r}")
        for name, fn in (("encoder", encoder), ("summary", summary), ("corruption", corruption)):
            if not callable(fn):
                raise TypeError(f"DeepGraphInfomax: {name} must be callable, got {type(fn).__name__}")
        self.hidden_channels = hidden_channels
        self.encoder = encoder
        self.summary = summary
        self.corruption = corruption
        self.weight = Parameter(torch.empty(hidden_channels, hidden_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_module(self.encoder)
        _reset_module(self.summary)
        bound = 1.0 / math.sqrt(self.hidden_channels)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def forward(self, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor, Tensor]:
        """``(pos_z, neg_z, summary)``: the encoding of the inputs, of their corruption, and the
        summary of the former."""
        pos_z = self.encoder(*args, **kwargs)
        neg_args, neg_kwargs = self._corrupted(args, kwargs)
        neg_z = self.encoder(*neg_args, **neg_kwargs)
        return pos_z, neg_z, self.summary(pos_z, *args, **kwargs)

    def _corrupted(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        out = self.corruption(*args, **kwargs)
        out = out if isinstance(out, tuple) else (out,)
        # the leading values replace the positional arguments, the rest the keywords in their order;
        # keywords the corruption does not return stay as given
        neg_kwargs = dict(kwargs)
        neg_kwargs.update(zip(kwargs.keys(), out[len(args):]))
        return out[: len(args)], neg_kwargs

    def discriminate(self, z: Tensor, summary: Tensor, sigmoid: bool = True) -> Tensor:
        """The score :math:`\\mathbf{z}_i^{\\top} \\mathbf{W} \\mathbf{s}` of every patch against the
        summary, through the logistic sigmoid unless ``sigmoid=False``."""
        summary = summary.t() if summary.dim() > 1 else summary
        score = z @ (self.weight @ summary)
        return torch.sigmoid(score) if sigmoid else score

    def loss(self, pos_z: Tensor, neg_z: Tensor, summary: Tensor) -> Tensor:
        """The binary cross-entropy of telling real patches (label 1) from corrupted ones (label 0)."""
        pos = -torch.log(self.discriminate(pos_z, summary) + EPS).mean()
        neg = -torch.log(1 - self.discriminate(neg_z, summary) + EPS).mean()
        return pos + neg

    def test(self, train_z: Tensor, train_y: Tensor, test_z: Tensor, test_y: Tensor,
             solver: str = "lbfgs", *args: Any, **kwargs: Any) -> float:
        """Accuracy on ``(test_z, test_y)`` of a scikit-learn logistic regression fitted on
        ``(train_z, train_y)`` (extra arguments go to ``LogisticRegression``)."""
        try:
            from sklearn.linear_model import LogisticRegression
        except ImportError as err:
            raise ImportError("DeepGraphInfomax.test needs scikit-learn (pip install scikit-learn)") from err

        def numpy(t: Tensor) -> Any:
            return t.detach().cpu().numpy()

        clf = LogisticRegression(*args, solver=solver, **kwargs).fit(numpy(train_z), numpy(train_y))
        return clf.score(numpy(test_z), numpy(test_y))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.hidden_channels})"
