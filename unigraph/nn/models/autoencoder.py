r"""PyG's graph auto-encoders (``torch_geometric.nn.models``): :class:`InnerProductDecoder`,
:class:`GAE`, :class:`VGAE`, :class:`ARGA`, :class:`ARGVA`, with PyG's constructors, methods,
submodule names (a PyG ``state_dict`` loads) and losses.

The encoder and discriminator are the user's (any callable; a module's parameters are reset
with the model's). Negative edges for :meth:`GAE.recon_loss` are drawn when not given: up to one
per positive edge, distinct, never a self-loop nor a positive edge, uniformly among the other
pairs (PyG's ``negative_sampling`` contract; the draws come from torch's global generator, so
``torch.manual_seed`` repeats them, but they are not PyG's draws).
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

from unigraph.nn.checks import reset_module
from unigraph.nn.negative_edges import negative_edges

EPS = 1e-15        # keeps log() finite at probabilities 0 and 1
MAX_LOGSTD = 10    # log-std is clamped to this, so exp() cannot overflow


def _check_latent(z: Any, who: str) -> None:
    if not isinstance(z, Tensor) or z.dim() != 2 or not z.is_floating_point():
        shape = list(z.shape) if isinstance(z, Tensor) else type(z).__name__
        raise ValueError(f"{who} expects z as a [num_nodes, channels] floating-point tensor, got {shape}")


def _check_pairs(edge_index: Any, num_nodes: int, who: str, name: str = "edge_index") -> None:
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2 \
            or edge_index.is_floating_point() or edge_index.dtype == torch.bool:
        shape = list(edge_index.shape) if isinstance(edge_index, Tensor) else type(edge_index).__name__
        raise ValueError(f"{who} expects {name} as a [2, num_pairs] integer tensor, got {shape}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(f"{who}: {name} holds node ids outside [0, {num_nodes}) (z has {num_nodes} rows)")


class InnerProductDecoder(torch.nn.Module):
    r"""The inner product decoder from the `"Variational Graph Auto-Encoders"
    <https://arxiv.org/abs/1611.07308>`_ paper: the probability of an edge is the logistic sigmoid
    of the inner product of its end points' latent vectors,

    .. math::
        p(i, j) = \sigma\left(\mathbf{z}_i^{\top} \mathbf{z}_j\right),
        \qquad
        \hat{\mathbf{A}} = \sigma\left(\mathbf{Z}\mathbf{Z}^{\top}\right).

    No parameters.

    Shapes:
        - **forward:** ``z`` :math:`(N, d)`, ``edge_index`` :math:`(2, E)` :math:`\to` :math:`(E)`
        - **forward_all:** ``z`` :math:`(N, d)` :math:`\to` :math:`(N, N)`
    """

    def forward(self, z: Tensor, edge_index: Tensor, sigmoid: bool = True) -> Tensor:
        """Edge probabilities (logits with ``sigmoid=False``) of the pairs ``edge_index``."""
        _check_latent(z, "InnerProductDecoder")
        _check_pairs(edge_index, z.size(0), "InnerProductDecoder")
        score = (z[edge_index[0]] * z[edge_index[1]]).sum(dim=1)
        return torch.sigmoid(score) if sigmoid else score

    def forward_all(self, z: Tensor, sigmoid: bool = True) -> Tensor:
        """The dense ``[N, N]`` matrix of edge probabilities (logits with ``sigmoid=False``)."""
        _check_latent(z, "InnerProductDecoder.forward_all")
        scores = z @ z.t()
        return torch.sigmoid(scores) if sigmoid else scores


class GAE(torch.nn.Module):
    r"""The graph auto-encoder from the `"Variational Graph Auto-Encoders"
    <https://arxiv.org/abs/1611.07308>`_ paper: a user-given encoder maps the graph to latent
    node vectors :math:`\mathbf{Z}`, a decoder (default :class:`InnerProductDecoder`) scores node
    pairs, and the reconstruction loss is the binary cross entropy over positive edges
    :math:`\mathcal{E}^+` and negative pairs :math:`\mathcal{E}^-`:

    .. math::
        \mathcal{L}_{rec} = -\frac{1}{|\mathcal{E}^+|} \sum_{(i,j) \in \mathcal{E}^+}
        \log\left(p(i,j) + \epsilon\right)
        - \frac{1}{|\mathcal{E}^-|} \sum_{(i,j) \in \mathcal{E}^-} \log\left(1 - p(i,j) + \epsilon\right)

    with :math:`\epsilon = 10^{-15}`.

    Args:
        encoder (torch.nn.Module): The encoder (any callable).
        decoder (torch.nn.Module, optional): The decoder; :class:`InnerProductDecoder` when
            ``None``. (default: ``None``)
    """

    def __init__(self, encoder: Callable, decoder: Callable | None = None):
        super().__init__()
        if not callable(encoder):
            raise TypeError(f"{type(self).__name__} expects a callable encoder, got {type(encoder).__name__}")
        if decoder is not None and not callable(decoder):
            raise TypeError(f"{type(self).__name__} expects a callable decoder or None, got {type(decoder).__name__}")
        self.encoder = encoder
        self.decoder = InnerProductDecoder() if decoder is None else decoder
        GAE.reset_parameters(self)  # only the auto-encoder's part: subclasses reset the rest themselves

    def reset_parameters(self):
        """Resets the encoder's and decoder's parameters (where they know how)."""
        reset_module(self.encoder)
        reset_module(self.decoder)

    def forward(self, *args, **kwargs) -> Tensor:
        """The same as :meth:`encode`."""
        return self.encoder(*args, **kwargs)

    def encode(self, *args, **kwargs) -> Tensor:
        """Latent node vectors: the encoder on the given arguments."""
        return self.encoder(*args, **kwargs)

    def decode(self, *args, **kwargs) -> Tensor:
        """Edge probabilities: the decoder on the given arguments."""
        return self.decoder(*args, **kwargs)

    def recon_loss(self, z: Tensor, pos_edge_index: Tensor, neg_edge_index: Tensor | None = None) -> Tensor:
        """Binary cross entropy of the positive edges and the negative pairs; without
        ``neg_edge_index``, up to one negative pair per positive edge is drawn (see the module
        docstring)."""
        _check_latent(z, "recon_loss")
        _check_pairs(pos_edge_index, z.size(0), "recon_loss", "pos_edge_index")
        if neg_edge_index is None:
            neg_edge_index = negative_edges(pos_edge_index, z.size(0), pos_edge_index.size(1),
                                            symmetric=False, who="recon_loss")
        else:
            _check_pairs(neg_edge_index, z.size(0), "recon_loss", "neg_edge_index")
        pos_loss = -torch.log(self.decoder(z, pos_edge_index, sigmoid=True) + EPS).mean()
        neg_loss = -torch.log(1 - self.decoder(z, neg_edge_index, sigmoid=True) + EPS).mean()
        return pos_loss + neg_loss

    def test(self, z: Tensor, pos_edge_index: Tensor, neg_edge_index: Tensor) -> tuple[float, float]:
        """``(ROC AUC, average precision)`` of the decoder's probabilities, positive edges
        labelled 1 and negative pairs 0 (needs scikit-learn)."""
        _check_latent(z, "test")
        _check_pairs(pos_edge_index, z.size(0), "test", "pos_edge_index")
        _check_pairs(neg_edge_index, z.size(0), "test", "neg_edge_index")
        try:
            from sklearn.metrics import average_precision_score, roc_auc_score
        except ImportError as error:
            raise ImportError(f"{type(self).__name__}.test needs scikit-learn (pip install scikit-learn)") from error
        labels = torch.cat([z.new_ones(pos_edge_index.size(1)), z.new_zeros(neg_edge_index.size(1))])
        scores = torch.cat([self.decoder(z, pos_edge_index, sigmoid=True),
                            self.decoder(z, neg_edge_index, sigmoid=True)])
        labels, scores = labels.detach().cpu().numpy(), scores.detach().cpu().numpy()
        return roc_auc_score(labels, scores), average_precision_score(labels, scores)


class VGAE(GAE):
    r"""The variational graph auto-encoder from the `"Variational Graph Auto-Encoders"
    <https://arxiv.org/abs/1611.07308>`_ paper: the encoder returns :math:`(\boldsymbol{\mu},
    \log\boldsymbol{\sigma})` per node (log-std clamped to at most ``MAX_LOGSTD = 10``); in
    training the latent vectors are sampled by reparametrization, in evaluation they are the means:

    .. math::
        \mathbf{z} = \boldsymbol{\mu} + \boldsymbol{\varepsilon} \odot \exp(\log\boldsymbol{\sigma}),
        \quad \boldsymbol{\varepsilon} \sim \mathcal{N}(\mathbf{0}, \mathbf{I}),
        \qquad
        \mathcal{L}_{KL} = -\frac{1}{2N} \sum_{i=1}^{N} \sum_{k}
        \left(1 + 2\log\sigma_{ik} - \mu_{ik}^2 - \sigma_{ik}^2\right)

    Args:
        encoder (torch.nn.Module): The encoder, returning ``(mu, logstd)``.
        decoder (torch.nn.Module, optional): The decoder; :class:`InnerProductDecoder` when
            ``None``. (default: ``None``)
    """

    def __init__(self, encoder: Callable, decoder: Callable | None = None):
        super().__init__(encoder, decoder)

    def reparametrize(self, mu: Tensor, logstd: Tensor) -> Tensor:
        """A sample ``mu + eps * exp(logstd)`` in training, ``mu`` in evaluation."""
        if self.training:
            return mu + torch.randn_like(logstd) * torch.exp(logstd)
        return mu

    def encode(self, *args, **kwargs) -> Tensor:
        """Latent node vectors; keeps ``__mu__`` and ``__logstd__`` (clamped) for :meth:`kl_loss`."""
        out = self.encoder(*args, **kwargs)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise ValueError(f"{type(self).__name__}'s encoder must return (mu, logstd), got {type(out).__name__}")
        self.__mu__, self.__logstd__ = out[0], out[1].clamp(max=MAX_LOGSTD)
        return self.reparametrize(self.__mu__, self.__logstd__)

    def kl_loss(self, mu: Tensor | None = None, logstd: Tensor | None = None) -> Tensor:
        """The KL divergence to the standard normal, averaged over nodes, of the given ``mu`` and
        ``logstd`` (clamped), or of those of the last :meth:`encode` where not given."""
        if (mu is None or logstd is None) and "__mu__" not in self.__dict__:
            raise ValueError(f"{type(self).__name__}.kl_loss needs mu and logstd, or a call of encode first")
        mu = self.__mu__ if mu is None else mu
        logstd = self.__logstd__ if logstd is None else logstd.clamp(max=MAX_LOGSTD)
        return -0.5 * torch.mean(torch.sum(1 + 2 * logstd - mu ** 2 - logstd.exp() ** 2, dim=1))


class ARGA(GAE):
    r"""The adversarially regularized graph auto-encoder from the `"Adversarially Regularized
    Graph Autoencoder for Graph Embedding" <https://arxiv.org/abs/1802.04407>`_ paper: a
    :class:`GAE` whose latent vectors a discriminator :math:`D` (logits) learns to tell from
    standard normal samples :math:`\tilde{\mathbf{z}}`, while the encoder learns to fool it:

    .. math::
        \mathcal{L}_{reg} = -\frac{1}{N}\sum_i \log\left(\sigma(D(\mathbf{z}_i)) + \epsilon\right),
        \qquad
        \mathcal{L}_{D} = -\frac{1}{N}\sum_i \log\left(\sigma(D(\tilde{\mathbf{z}}_i)) + \epsilon\right)
        - \frac{1}{N}\sum_i \log\left(1 - \sigma(D(\mathbf{z}_i)) + \epsilon\right)

    (:math:`\mathbf{z}` detached in :math:`\mathcal{L}_D`; the means run over the
    discriminator's outputs).

    Args:
        encoder (torch.nn.Module): The encoder (any callable).
        discriminator (torch.nn.Module): The discriminator (any callable).
        decoder (torch.nn.Module, optional): The decoder; :class:`InnerProductDecoder` when
            ``None``. (default: ``None``)
    """

    def __init__(self, encoder: Callable, discriminator: Callable, decoder: Callable | None = None):
        super().__init__(encoder, decoder)
        if not callable(discriminator):
            raise TypeError(f"{type(self).__name__} expects a callable discriminator, "
                            f"got {type(discriminator).__name__}")
        self.discriminator = discriminator
        reset_module(self.discriminator)

    def reset_parameters(self):
        """Resets the encoder's, decoder's and discriminator's parameters."""
        super().reset_parameters()
        reset_module(self.discriminator)

    def reg_loss(self, z: Tensor) -> Tensor:
        """The encoder's adversarial loss: the discriminator should take ``z`` for real."""
        real = torch.sigmoid(self.discriminator(z))
        return -torch.log(real + EPS).mean()

    def discriminator_loss(self, z: Tensor) -> Tensor:
        """The discriminator's loss: normal samples are real, ``z`` (detached) is fake."""
        real = torch.sigmoid(self.discriminator(torch.randn_like(z)))
        fake = torch.sigmoid(self.discriminator(z.detach()))
        return -torch.log(real + EPS).mean() - torch.log(1 - fake + EPS).mean()


class ARGVA(ARGA):
    r"""The adversarially regularized variational graph auto-encoder from the `"Adversarially
    Regularized Graph Autoencoder for Graph Embedding" <https://arxiv.org/abs/1802.04407>`_
    paper: :class:`ARGA`'s adversarial losses on :class:`VGAE`'s sampled latent vectors
    (encoding, reparametrization and :math:`\mathcal{L}_{KL}` are those of the inner ``VGAE``
    submodule, which shares the encoder).

    Args:
        encoder (torch.nn.Module): The encoder, returning ``(mu, logstd)``.
        discriminator (torch.nn.Module): The discriminator (any callable).
        decoder (torch.nn.Module, optional): The decoder; :class:`InnerProductDecoder` when
            ``None``. (default: ``None``)
    """

    def __init__(self, encoder: Callable, discriminator: Callable, decoder: Callable | None = None):
        super().__init__(encoder, discriminator, decoder)
        self.VGAE = VGAE(encoder, decoder)  # PyG's attribute name: its keys are in PyG's state_dict

    @property
    def __mu__(self) -> Tensor:
        return self.VGAE.__mu__

    @property
    def __logstd__(self) -> Tensor:
        return self.VGAE.__logstd__

    def reparametrize(self, mu: Tensor, logstd: Tensor) -> Tensor:
        """:meth:`VGAE.reparametrize` (follows this model's ``training`` flag)."""
        return self.VGAE.reparametrize(mu, logstd)

    def encode(self, *args, **kwargs) -> Tensor:
        """:meth:`VGAE.encode`."""
        return self.VGAE.encode(*args, **kwargs)

    def kl_loss(self, mu: Tensor | None = None, logstd: Tensor | None = None) -> Tensor:
        """:meth:`VGAE.kl_loss`."""
        return self.VGAE.kl_loss(mu, logstd)
