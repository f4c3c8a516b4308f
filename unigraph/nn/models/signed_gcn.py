r"""PyG's :class:`SignedGCN` (``torch_geometric.nn.models``): stacked
:class:`~unigraph.nn.SignedConv` layers over positive and negative edges, a 3-way link
classifier (positive / negative / no edge) and the paper's objective, with PyG's constructor,
methods, parameter names (a PyG ``state_dict`` loads) and ``str()``.

The random parts draw from torch's global generator in the same order as PyG's, so
``torch.manual_seed`` gives PyG's own splits (:meth:`SignedGCN.split_edges`) and triplets (the
structured negatives of the embedding losses). The "no edge" pairs of :meth:`SignedGCN.nll_loss`
are drawn by unigraph's sampler under PyG's ``negative_sampling`` contract (up to one per edge,
distinct, no self-loop, no edge of either sign), not PyG's draws.
"""
from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.nn.checks import check_positive
from unigraph.nn.signed_conv import SignedConv
from unigraph.nn.negative_edges import negative_edges

MAX_ROUNDS = 1000  # redraw rounds for the structured negatives before declaring a row full


def _check_pairs(edge_index, name: str, who: str, num_nodes: int | None = None) -> None:
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2 \
            or edge_index.is_floating_point() or edge_index.dtype == torch.bool:
        shape = list(edge_index.shape) if isinstance(edge_index, Tensor) else type(edge_index).__name__
        raise ValueError(f"{who} expects {name} as a [2, num_edges] integer tensor, got {shape}")
    if num_nodes is not None and edge_index.numel() and \
            (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(f"{who}: {name} holds node ids outside [0, {num_nodes})")


def _check_latent(z, who: str) -> None:
    if not isinstance(z, Tensor) or z.dim() != 2 or not z.is_floating_point():
        shape = list(z.shape) if isinstance(z, Tensor) else type(z).__name__
        raise ValueError(f"{who} expects z as a [num_nodes, channels] floating-point tensor, got {shape}")


def structured_negatives(edge_index: Tensor, num_nodes: int) -> Tensor:
    """For each edge ``(i, j)`` a node ``k`` with ``(i, k)`` not an edge (``k == i`` allowed
    unless ``(i, i)`` is an edge), drawn uniformly; the edges still unmatched are redrawn together
    each round (PyG's ``structured_negative_sampling`` with its draw order)."""
    row = edge_index[0].cpu()
    edge_keys = row * num_nodes + edge_index[1].cpu()
    full = torch.bincount(torch.unique(edge_keys) // max(num_nodes, 1), minlength=num_nodes) >= num_nodes
    if bool(full[row].any()):
        node = int(row[full[row]][0])
        raise ValueError(f"SignedGCN: node {node} has an edge to every node, so it has no negative to sample")
    k = torch.randint(num_nodes, (row.numel(),), dtype=torch.long)
    todo = torch.isin(row * num_nodes + k, edge_keys).nonzero().view(-1)
    for _ in range(MAX_ROUNDS):
        if todo.numel() == 0:
            return k.to(edge_index.device)
        redraw = torch.randint(num_nodes, (todo.numel(),), dtype=torch.long)
        k[todo] = redraw
        todo = todo[torch.isin(row[todo] * num_nodes + redraw, edge_keys)]
    raise ValueError(f"SignedGCN: no negative found for {todo.numel()} edges in {MAX_ROUNDS} rounds")


class SignedGCN(torch.nn.Module):
    r"""The signed graph convolutional network from the `"Signed Graph Convolutional Network"
    <https://arxiv.org/abs/1808.06354>`_ paper: ``num_layers`` :class:`~unigraph.nn.SignedConv`
    layers (the first with ``first_aggr=True``), each followed by ReLU, give node embeddings
    :math:`\mathbf{z}_i` (balanced and unbalanced halves, ``hidden_channels`` wide). A linear
    classifier labels a node pair positive (0), negative (1) or no edge (2),

    .. math::
        p(\cdot \mid i, j) = \operatorname{log\_softmax}\left(\mathbf{W}
        [\mathbf{z}_i \,\Vert\, \mathbf{z}_j] + \mathbf{b}\right),

    and the objective adds triplet losses over structured negatives :math:`k` of each edge
    :math:`(i, j)`:

    .. math::
        \mathcal{L} = \mathcal{L}_{nll} + \lambda \left(
        \operatorname{mean}_{(i,j) \in \mathcal{E}^+} \left[\Vert\mathbf{z}_i - \mathbf{z}_j\Vert^2
        - \Vert\mathbf{z}_i - \mathbf{z}_k\Vert^2\right]_+ +
        \operatorname{mean}_{(i,j) \in \mathcal{E}^-} \left[\Vert\mathbf{z}_i - \mathbf{z}_k\Vert^2
        - \Vert\mathbf{z}_i - \mathbf{z}_j\Vert^2\right]_+ \right)

    where :math:`\mathcal{L}_{nll}` is the mean of the classifier's NLL over positive edges,
    negative edges and sampled non-edges.

    Args:
        in_channels (int): Size of each input sample.
        hidden_channels (int): Size of each embedding (even: two halves).
        num_layers (int): Number of :class:`~unigraph.nn.SignedConv` layers.
        lamb (float, optional): The weight :math:`\lambda` of the triplet losses. (default: ``5``)
        bias (bool, optional): Accepted for PyG's signature; PyG 2.8 does not pass it on, its
            layers always learn a bias, and so do these (``False`` warns). (default: ``True``)

    Shapes:
        - **input:** node features :math:`(N, F_{in})`, positive and negative edge indices
          :math:`(2, E^+)`, :math:`(2, E^-)`
        - **output:** node embeddings :math:`(N, \text{hidden\_channels})`
    """

    def __init__(self, in_channels: int, hidden_channels: int, num_layers: int, lamb: float = 5, bias: bool = True):
        super().__init__()
        who = type(self).__name__
        check_positive(in_channels, "in_channels", who)
        check_positive(hidden_channels, "hidden_channels", who)
        check_positive(num_layers, "num_layers", who)
        if hidden_channels % 2:
            raise ValueError(f"{who} hidden_channels must be even (balanced and unbalanced halves), "
                             f"got {hidden_channels}")
        if isinstance(lamb, bool) or not isinstance(lamb, (int, float)):
            raise ValueError(f"{who} lamb must be a number, got {lamb!r}")
        if not bias:
            warnings.warn(f"{who}(bias=False): PyG's SignedGCN does not pass bias to its layers, which "
                          f"keep their biases; unigraph keeps them too, so a PyG state_dict still loads",
                          UserWarning, stacklevel=2)
        self.in_channels = in_channels
        self.hidden_channels = hidden_channels
        self.num_layers = num_layers
        self.lamb = lamb
        half = hidden_channels // 2
        self.conv1 = SignedConv(in_channels, half, first_aggr=True)
        self.convs = torch.nn.ModuleList([SignedConv(half, half, first_aggr=False) for _ in range(num_layers - 1)])
        self.lin = torch.nn.Linear(2 * hidden_channels, 3)
        self.reset_parameters()

    def reset_parameters(self):
        """Resets the layers' and the classifier's parameters."""
        self.conv1.reset_parameters()
        for conv in self.convs:
            conv.reset_parameters()
        self.lin.reset_parameters()

    def split_edges(self, edge_index: Tensor, test_ratio: float = 0.2) -> tuple[Tensor, Tensor]:
        """``(train, test)`` edges: a random ``int(test_ratio * E)`` of the edges are for testing."""
        _check_pairs(edge_index, "edge_index", "split_edges")
        if isinstance(test_ratio, bool) or not isinstance(test_ratio, (int, float)) or not 0 <= test_ratio <= 1:
            raise ValueError(f"split_edges test_ratio must be in [0, 1], got {test_ratio!r}")
        keep = torch.ones(edge_index.size(1), dtype=torch.bool)
        keep[torch.randperm(keep.numel())[:int(test_ratio * keep.numel())]] = False
        keep = keep.to(edge_index.device)
        return edge_index[:, keep], edge_index[:, ~keep]

    def create_spectral_features(self, pos_edge_index: Tensor, neg_edge_index: Tensor,
                                 num_nodes: int | None = None) -> Tensor:
        """``in_channels`` node features from a truncated SVD of the symmetric signed adjacency
        (+1 per positive edge, -1 per negative edge, duplicates summed as ``count(+) * 2 - 1``
        over both directions, as PyG builds it); needs scikit-learn and SciPy."""
        _check_pairs(pos_edge_index, "pos_edge_index", "create_spectral_features")
        _check_pairs(neg_edge_index, "neg_edge_index", "create_spectral_features")
        try:
            import scipy.sparse as sp
            from sklearn.decomposition import TruncatedSVD
        except ImportError as error:
            raise ImportError("SignedGCN.create_spectral_features needs scikit-learn and scipy") from error
        edges = torch.cat([pos_edge_index, neg_edge_index], dim=1).cpu()
        n = int(edges.max()) + 1 if num_nodes is None else num_nodes
        _check_pairs(edges, "the edges", "create_spectral_features", n)
        # a positive edge counts 2, a negative 0, in both directions; summed duplicates minus 1
        weight = torch.cat([torch.full((pos_edge_index.size(1),), 2.0), torch.zeros(neg_edge_index.size(1))])
        both = torch.cat([edges, edges.flip(0)], dim=1)
        keys, slot = torch.unique(both[0] * n + both[1], return_inverse=True)  # row-major, as coalesce
        summed = torch.zeros(keys.numel()).index_add_(0, slot, torch.cat([weight, weight]))
        index, value = torch.stack([keys // n, keys % n]).numpy(), (summed - 1).numpy()
        svd = TruncatedSVD(n_components=self.in_channels, n_iter=128)
        svd.fit(sp.coo_matrix((value, index), shape=(n, n)))
        return torch.from_numpy(svd.components_.T).to(torch.float).to(pos_edge_index.device)

    def forward(self, x: Tensor, pos_edge_index: Tensor, neg_edge_index: Tensor) -> Tensor:
        """Node embeddings from the positive and negative edges."""
        z = F.relu(self.conv1(x, pos_edge_index, neg_edge_index))
        for conv in self.convs:
            z = F.relu(conv(z, pos_edge_index, neg_edge_index))
        return z

    def discriminate(self, z: Tensor, edge_index: Tensor) -> Tensor:
        """Log-probabilities ``[E, 3]`` of positive / negative / no edge for the pairs."""
        _check_latent(z, "discriminate")
        _check_pairs(edge_index, "edge_index", "discriminate", z.size(0))
        return torch.log_softmax(self.lin(torch.cat([z[edge_index[0]], z[edge_index[1]]], dim=1)), dim=1)

    def nll_loss(self, z: Tensor, pos_edge_index: Tensor, neg_edge_index: Tensor) -> Tensor:
        """Mean NLL of the classifier over positive edges, negative edges and as many drawn
        non-edges (each group averaged, then the three averaged)."""
        _check_latent(z, "nll_loss")
        signed = torch.cat([pos_edge_index, neg_edge_index], dim=1)
        none_edge_index = negative_edges(signed, z.size(0), signed.size(1), symmetric=False, who="nll_loss")
        loss = 0
        for label, pairs in enumerate((pos_edge_index, neg_edge_index, none_edge_index)):
            loss = loss + F.nll_loss(self.discriminate(z, pairs), pairs.new_full((pairs.size(1),), label))
        return loss / 3.0

    def _triplet_gaps(self, z: Tensor, edge_index: Tensor, who: str) -> tuple[Tensor, Tensor]:
        """``(||z_i - z_j||^2, ||z_i - z_k||^2)`` per edge, ``k`` a structured negative."""
        _check_latent(z, who)
        _check_pairs(edge_index, "edge_index", who, z.size(0))
        i, j = edge_index[0], edge_index[1]
        k = structured_negatives(edge_index, z.size(0))
        return (z[i] - z[j]).pow(2).sum(dim=1), (z[i] - z[k]).pow(2).sum(dim=1)

    def pos_embedding_loss(self, z: Tensor, pos_edge_index: Tensor) -> Tensor:
        """Triplet loss: a positive neighbour closer than a sampled non-neighbour."""
        near, far = self._triplet_gaps(z, pos_edge_index, "pos_embedding_loss")
        return torch.clamp(near - far, min=0).mean()

    def neg_embedding_loss(self, z: Tensor, neg_edge_index: Tensor) -> Tensor:
        """Triplet loss: a negative neighbour farther than a sampled non-neighbour."""
        near, far = self._triplet_gaps(z, neg_edge_index, "neg_embedding_loss")
        return torch.clamp(far - near, min=0).mean()

    def loss(self, z: Tensor, pos_edge_index: Tensor, neg_edge_index: Tensor) -> Tensor:
        """The objective: :meth:`nll_loss` plus ``lamb`` times both triplet losses."""
        nll = self.nll_loss(z, pos_edge_index, neg_edge_index)
        triplets = self.pos_embedding_loss(z, pos_edge_index) + self.neg_embedding_loss(z, neg_edge_index)
        return nll + self.lamb * triplets

    def test(self, z: Tensor, pos_edge_index: Tensor, neg_edge_index: Tensor) -> tuple[float, float]:
        """``(ROC AUC, F1)`` of telling the positive test edges from the negative ones by the
        classifier's larger of its first two classes (needs scikit-learn)."""
        try:
            from sklearn.metrics import f1_score, roc_auc_score
        except ImportError as error:
            raise ImportError("SignedGCN.test needs scikit-learn (pip install scikit-learn)") from error
        with torch.no_grad():
            pos_pred = self.discriminate(z, pos_edge_index)[:, :2].max(dim=1).indices
            neg_pred = self.discriminate(z, neg_edge_index)[:, :2].max(dim=1).indices
        pred = (1 - torch.cat([pos_pred, neg_pred])).cpu()  # class 0 (positive) -> 1
        truth = torch.cat([pred.new_ones(pos_pred.numel()), pred.new_zeros(neg_pred.numel())])
        pred, truth = pred.numpy(), truth.numpy()
        auc = roc_auc_score(truth, pred)
        f1 = f1_score(truth, pred, average="binary") if pred.sum() > 0 else 0
        return auc, f1

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.hidden_channels}, num_layers={self.num_layers})"
