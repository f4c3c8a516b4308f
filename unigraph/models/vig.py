"""Vision GNN (Han et al. 2022): an image as a graph of patches, with dynamic kNN graph convolutions."""
from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import BatchNorm1d, BatchNorm2d, Conv2d, GELU, Linear, Sequential

from unigraph.models.knn import knn_graph
from unigraph.nn.checks import check_positive
from unigraph.nn.mr_conv import MRConv


class TokenNorm(torch.nn.Module):
    """BatchNorm1d over the channels of tokens ``[B, n, C]`` (ViG's 1x1-conv + BatchNorm)."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = BatchNorm1d(channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(x.reshape(-1, x.shape[-1])).view(x.shape)


class Grapher(torch.nn.Module):
    r"""ViG's graph block: Linear -> max-relative graph convolution on the kNN graph of the tokens
    -> Linear, with a residual connection.

    .. math::
        \mathbf{Y} = \sigma\big(\operatorname{MRConv}_{\mathcal{G}(\mathbf{X}W_{in})}(\mathbf{X}W_{in})\big)
        W_{out} + \mathbf{X}

    The kNN graph is rebuilt from the tokens' features on every call (cosine distance, the token
    itself included, dilated kNN), for every image of the batch at once.

    Args:
        channels (int): token width C.
        k (int, optional): neighbours per token. (default: ``9``)
        dilation (int, optional): kNN dilation. (default: ``1``)

    Shapes:
        - **input / output:** tokens :math:`(B, n, C)`
    """

    def __init__(self, channels: int, k: int = 9, dilation: int = 1):
        super().__init__()
        self.k, self.dilation = check_positive(k, "k", "Grapher"), check_positive(dilation, "dilation", "Grapher")
        self.fc_in = Sequential(Linear(channels, channels), TokenNorm(channels))
        self.graph_conv = MRConv(channels, 2 * channels,
                                 nn=Sequential(Linear(2 * channels, 2 * channels), BatchNorm1d(2 * channels), GELU()))
        self.fc_out = Sequential(Linear(2 * channels, channels), TokenNorm(channels))

    def forward(self, x: Tensor) -> Tensor:
        batch, nodes, channels = x.shape
        h = self.fc_in(x)
        graph = knn_graph(h, self.k, loop=True, cosine=True, dilation=self.dilation)
        h = self.graph_conv(graph, h.reshape(batch * nodes, channels)).view(batch, nodes, 2 * channels)
        return self.fc_out(h) + x


class FFN(torch.nn.Module):
    r"""ViG's feed-forward block: :math:`\mathbf{Y} = \sigma(\mathbf{X} W_1) W_2 + \mathbf{X}` with
    batch normalization after each Linear and GELU as :math:`\sigma`.

    Args:
        channels (int): token width C.
        hidden_channels (int, optional): hidden width. (default: ``4 * channels``)

    Shapes:
        - **input / output:** tokens :math:`(B, n, C)`
    """

    def __init__(self, channels: int, hidden_channels: int | None = None):
        super().__init__()
        hidden = hidden_channels or 4 * channels
        self.net = Sequential(Linear(channels, hidden), TokenNorm(hidden), GELU(), Linear(hidden, channels),
                              TokenNorm(channels))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x) + x


class ViG(torch.nn.Module):
    r"""A small isotropic Vision GNN (`"Vision GNN: An Image is Worth Graph of Nodes"
    <https://arxiv.org/abs/2206.00272>`_) for 32 x 32 images (CIFAR-10 shaped).

    A convolutional stem turns the image into an ``(image_size / 4)^2`` grid of patch tokens, plus
    a learned position embedding; ``depth`` pairs of :class:`Grapher` and :class:`FFN` blocks
    follow (the kNN dilation grows with depth, as in the paper); the mean token goes through a
    small classification head.

    Args:
        num_classes (int, optional): classes. (default: ``10``)
        channels (int, optional): token width. (default: ``64``)
        depth (int, optional): Grapher + FFN pairs. (default: ``4``)
        k (int, optional): neighbours per token. (default: ``9``)
        image_size (int, optional): input height and width, divisible by 4. (default: ``32``)
        in_channels (int, optional): image channels. (default: ``3``)
        max_dilation (int, optional): largest kNN dilation. (default: ``2``)

    Shapes:
        - **input:** images :math:`(B, 3, 32, 32)`
        - **output:** logits :math:`(B, \text{num\_classes})`
    """

    def __init__(self, num_classes: int = 10, channels: int = 64, depth: int = 4, k: int = 9, image_size: int = 32,
                 in_channels: int = 3, max_dilation: int = 2):
        super().__init__()
        for name, value in (("num_classes", num_classes), ("channels", channels), ("depth", depth),
                            ("image_size", image_size), ("in_channels", in_channels)):
            check_positive(value, name, "ViG")
        if image_size % 4 or channels % 2:
            raise ValueError(f"ViG needs image_size divisible by 4 and an even channel count, got {image_size}, {channels}")
        self.image_size, self.in_channels = image_size, in_channels
        self.stem = Sequential(
            Conv2d(in_channels, channels // 2, 3, stride=2, padding=1), BatchNorm2d(channels // 2), GELU(),
            Conv2d(channels // 2, channels, 3, stride=2, padding=1), BatchNorm2d(channels))
        num_tokens = (image_size // 4) ** 2
        self.pos_embed = torch.nn.Parameter(torch.zeros(1, num_tokens, channels))
        blocks = []
        for i in range(depth):
            dilation = min(i // 2 + 1, max_dilation, max(1, num_tokens // k))
            blocks += [Grapher(channels, k=min(k, num_tokens), dilation=dilation), FFN(channels)]
        self.blocks = Sequential(*blocks)
        self.head = Sequential(Linear(channels, channels), BatchNorm1d(channels), GELU(), Linear(channels, num_classes))

    def forward(self, images: Tensor) -> Tensor:
        expected = (self.in_channels, self.image_size, self.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"ViG expects images of shape [B, {', '.join(map(str, expected))}], got {list(images.shape)}")
        tokens = self.stem(images).flatten(2).transpose(1, 2) + self.pos_embed
        tokens = self.blocks(tokens)
        return self.head(tokens.mean(dim=1))
