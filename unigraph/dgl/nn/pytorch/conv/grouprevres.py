r"""DGL's ``GroupRevRes``: grouped reversible residual connections for deep GNNs (RevGNN,
https://arxiv.org/abs/2106.07476).

The input is split along its last dimension into :math:`C` groups :math:`X_1, \dots, X_C`, and
copy :math:`i` of the wrapped module, :math:`f_i`, reads the previous group's output:

.. math::
    X_0' = \sum_{i=2}^{C} X_i, \qquad X_i' = X_i + f_i(g, X_{i-1}', U_i), \qquad
    X' = X_1' \,\Vert\, \cdots \,\Vert\, X_C'

(:math:`U_i`: group :math:`i` of each extra argument, split the same way). It inverts exactly:
:math:`X_i = X_i' - f_i(g, X_{i-1}', U_i)` from :math:`i = C` down, with :math:`X_0'` from the
recovered groups.

Memory, as DGL means it: the forward keeps none of the modules' activations (it runs without
autograd); backward recomputes them. A chain of GroupRevRes layers keeps none of its intermediate
outputs either: a layer fed directly by another one lets go of that input (the earlier layer holds
it only weakly from then on) and, in backward, rebuilds it from its own output with the inverse
and hands it down. So a stack of L layers holds the activations of one layer, not L. A layer's
output that nothing rebuilds (the stack's last, or one read by anything else) stays held.

Unlike DGL, no tensor's storage is freed behind its owner's back (DGL empties the input's storage
in forward and the output's in backward, and refuses ``torch.autograd.grad``), and the random
number generator state is replayed per group, so modules with dropout invert and recompute with
the masks of the forward (DGL draws new masks, which breaks the inversion in training). The
inversion rounds like any subtraction: gradients equal DGL's to rounding. Modules with side
effects in forward (BatchNorm's running statistics in training) see three calls per step
(forward, inversion, recomputation), as in DGL. Parameters as DGL's: ``gnn_modules.{i}``, the
module and ``groups - 1`` deep copies of it (same initial weights).
"""
from __future__ import annotations

import weakref
from copy import deepcopy

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError


class GroupRevRes(nn.Module):
    """Args (DGL's): ``gnn_module`` (called as ``gnn_module(g, h, *extra)``, returning a tensor
    shaped as ``h``), ``groups`` (at least 2; it must divide the feature width).

    Shapes: ``x`` ``[N, ..., F]`` -> ``[N, ..., F]``; each copy sees ``[N, ..., F / groups]``.
    Extra arguments ``*args`` are tensors, split into ``groups`` chunks along their last dimension.
    """

    def __init__(self, gnn_module: nn.Module, groups: int = 2):
        super().__init__()
        if not isinstance(groups, int) or groups < 2:
            raise ValueError(f"GroupRevRes: groups must be an int >= 2 (group i reads group i-1's output), got "
                             f"{groups!r}")
        self.gnn_modules = nn.ModuleList([gnn_module] + [deepcopy(gnn_module) for _ in range(groups - 1)])
        self.groups = groups

    def forward(self, g, x: Tensor, *args: Tensor) -> Tensor:
        self._check(x, args)
        params = tuple(p for p in self.parameters() if p.requires_grad)
        tracked = x.requires_grad or any(a.requires_grad for a in args) or bool(params)
        if not (torch.is_grad_enabled() and tracked):
            return self._forward(g, x, args)[0]
        return _Reversible.apply(self, g, len(args), x, *args, *params)

    def _forward(self, g, x: Tensor, args, replay: list | None = None):
        """The output and (without ``replay``) the RNG state before each group's call."""
        xs, parts = x.chunk(self.groups, -1), self._split(args)
        y, ys, states = sum(xs[1:]), [], []
        for i, module in enumerate(self.gnn_modules):
            if replay is None:
                states.append(_rng_state(x.device))
            else:
                _set_rng_state(replay[i], x.device)
            update = module(g, y, *parts[i])
            if not isinstance(update, Tensor) or update.shape != xs[i].shape:
                got = list(update.shape) if isinstance(update, Tensor) else type(update).__name__
                raise DGLError(f"GroupRevRes: gnn_modules[{i}] must return a tensor of its input's shape "
                               f"{list(xs[i].shape)}, got {got}")
            y = xs[i] + update
            ys.append(y)
        return torch.cat(ys, -1), states

    def _inverse(self, g, y: Tensor, args, replay: list) -> Tensor:
        """The input that gave output ``y`` (the groups recovered from the last one down)."""
        ys, parts = y.chunk(self.groups, -1), self._split(args)
        xs: list = [None] * self.groups
        for i in reversed(range(self.groups)):
            y_in = ys[i - 1] if i > 0 else sum(xs[1:])
            _set_rng_state(replay[i], y.device)
            xs[i] = ys[i] - self.gnn_modules[i](g, y_in, *parts[i])
        return torch.cat(xs, -1)

    def _split(self, args) -> list[tuple]:
        if not args:
            return [()] * self.groups
        return list(zip(*(a.chunk(self.groups, -1) for a in args)))

    def _check(self, x, args) -> None:
        if not isinstance(x, Tensor) or x.dim() == 0 or x.shape[-1] % self.groups:
            shape = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise DGLError(f"GroupRevRes: x must be a tensor whose last dimension divides into groups={self.groups} "
                           f"equal parts, got {shape}")
        for i, a in enumerate(args):
            if not isinstance(a, Tensor) or a.dim() == 0 or len(a.chunk(self.groups, -1)) != self.groups:
                shape = list(a.shape) if isinstance(a, Tensor) else type(a).__name__
                raise DGLError(f"GroupRevRes: extra argument {i} must be a tensor whose last dimension splits into "
                               f"groups={self.groups} chunks (one per copy of the module), got {shape}")


class _Held:
    """A tensor one backward pass needs: held strongly, or (``release``) only while something
    else keeps it, until a later layer's backward ``restore``\\ s a rebuilt copy. In-place changes
    after it was held are refused when it is read, as autograd refuses them for saved tensors."""

    def __init__(self, tensor: Tensor):
        self.strong, self.weak, self.restored = tensor.detach(), None, False
        self.version = tensor._version

    def release(self, owner: Tensor) -> None:
        self.strong, self.weak = None, weakref.ref(owner)

    def restore(self, tensor: Tensor) -> None:
        self.strong, self.restored, self.version = tensor, True, tensor._version

    def get(self) -> Tensor | None:
        tensor = self.strong if self.strong is not None else (self.weak() if self.weak is not None else None)
        if tensor is not None and tensor._version != self.version:
            raise RuntimeError("GroupRevRes: a tensor its backward needs (its input or output) was modified in "
                               "place after the forward pass")
        return None if tensor is None else tensor.detach()

    def drop_restored(self) -> None:
        if self.restored:
            self.strong, self.restored = None, False


class _Reversible(torch.autograd.Function):
    """GroupRevRes's autograd node: forward without autograd, backward by recomputation (see the
    module docstring for what it holds)."""

    @staticmethod
    def forward(ctx, layer: GroupRevRes, g, num_args: int, x: Tensor, *args_and_params: Tensor) -> Tensor:
        args, params = args_and_params[:num_args], args_and_params[num_args:]
        with torch.no_grad():
            out, ctx.rng = layer._forward(g, x, args)
        ctx.layer, ctx.graph, ctx.params = layer, g, params
        ctx.param_versions = [p._version for p in params]
        ctx.needs = (x.requires_grad,) + tuple(a.requires_grad for a in args)
        earlier = x.grad_fn if type(x.grad_fn) is _Reversible._backward_cls else None
        if earlier is not None:  # x: another GroupRevRes's output, rebuilt from ours in backward
            ctx.input = earlier.output
            ctx.input.release(x)
            ctx.save_for_backward(*args)
        else:
            ctx.input = None
            ctx.save_for_backward(x, *args)
        ctx.output = _Held(out)
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        layer, g = ctx.layer, ctx.graph
        if [p._version for p in ctx.params] != ctx.param_versions:
            raise RuntimeError("GroupRevRes: its parameters were modified in place (an optimizer step?) between "
                               "the forward and the backward pass")
        x, args = _Reversible._input(ctx)
        with torch.enable_grad(), torch.random.fork_rng(devices=_cuda(x.device)):
            x = x.detach().requires_grad_(ctx.needs[0])
            args = tuple(a.detach().requires_grad_(need) for a, need in zip(args, ctx.needs[1:]))
            out = layer._forward(g, x, args, replay=ctx.rng)[0]
        ctx.output.drop_restored()  # only the earlier layers' rebuilt tensors are needed from here on
        wanted = [t for t in (x,) + args if t.requires_grad] + list(ctx.params)
        grads = iter(torch.autograd.grad(out, wanted, grad_out, allow_unused=True))
        inputs = [next(grads) if t.requires_grad else None for t in (x,) + args]
        return (None, None, None, *inputs, *grads)

    @staticmethod
    def _input(ctx) -> tuple[Tensor, tuple]:
        """This layer's input: saved, alive elsewhere, or rebuilt by the inverse from its output
        (then handed to the earlier layer, whose output it is)."""
        saved = ctx.saved_tensors
        if ctx.input is None:
            return saved[0], saved[1:]
        x = ctx.input.get()
        if x is None:
            y = ctx.output.get()
            if y is None:
                raise RuntimeError("GroupRevRes: cannot rebuild this layer's input: its output was released and no "
                                   "later GroupRevRes rebuilt it (the later layer's output was not part of the loss)")
            with torch.no_grad(), torch.random.fork_rng(devices=_cuda(y.device)):
                x = ctx.layer._inverse(ctx.graph, y, saved, ctx.rng)
            ctx.input.restore(x)
        return x, saved


def _cuda(device: torch.device) -> list:
    return [device] if device.type == "cuda" else []


def _rng_state(device: torch.device) -> tuple:
    return torch.get_rng_state(), (torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def _set_rng_state(state: tuple, device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)
