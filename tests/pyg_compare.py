"""One comparison for the layer tests under tests/nn: a unigraph module and PyG's, given the
same weights, compute the same outputs, input gradients and parameter gradients (float64)."""
from __future__ import annotations

import torch

TOL = dict(rtol=1e-9, atol=1e-10)


def random_edges(num_nodes: int, num_edges: int, seed: int = 0, num_dst: int | None = None) -> torch.Tensor:
    """``[2, E]`` random edges (duplicates and self-loops possible), in random order."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes if num_dst is None else num_dst, (num_edges,), generator=gen)
    return torch.stack([src, dst])


def loaded(theirs: torch.nn.Module, ours: torch.nn.Module) -> torch.nn.Module:
    """``ours`` with ``theirs``' state_dict (strict: the same names and shapes), both float64."""
    theirs.double()
    ours.double()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return ours


def _leaves(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().clone().requires_grad_()
    if isinstance(value, (tuple, list)):
        return type(value)(_leaves(v) for v in value)
    return value


def _grads(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value.grad] if value.requires_grad else []
    if isinstance(value, (tuple, list)):
        return [g for v in value for g in _grads(v)]
    return []


def assert_same(theirs: torch.nn.Module, ours: torch.nn.Module, *args, ours_args=None, **kwargs):
    """Run both on fresh copies of ``args`` (``ours_args`` for ours when its call differs), compare
    the outputs, the gradients of every floating-point input and of every parameter (by name)."""
    a_theirs, a_ours = _leaves(args), _leaves(args if ours_args is None else ours_args)
    expected, out = theirs(*a_theirs, **kwargs), ours(*a_ours, **kwargs)
    torch.testing.assert_close(out, expected, **TOL)
    weight = torch.randn_like(expected)
    (expected * weight).sum().backward()
    (out * weight).sum().backward()
    for mine, reference in zip(_grads(a_ours), _grads(a_theirs)):
        torch.testing.assert_close(mine, reference, **TOL)
    reference = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        if reference[name].grad is None:
            assert p.grad is None or not p.grad.any(), name
        else:
            torch.testing.assert_close(p.grad, reference[name].grad, **TOL, msg=name)
    return out


def assert_static_is_each_copy(conv: torch.nn.Module, x: torch.Tensor, *args, edge_attr=None) -> torch.Tensor:
    """``conv`` on a static graph (``x`` of shape ``[B, N, F]``, ``args`` the graph and the rest)
    equals ``B`` separate calls, each feature set alone, in outputs and input gradients (float64);
    ``edge_attr`` (``[E, D]``) goes to every call."""
    extra = () if edge_attr is None else (edge_attr,)
    x_all, x_each = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    out = conv(x_all, *args, *extra)
    assert out.shape[:2] == x.shape[:2]
    expected = torch.stack([conv(x_each[b], *args, *extra) for b in range(x.shape[0])])
    torch.testing.assert_close(out, expected, **TOL)
    weight = torch.randn_like(out)  # input gradients only: the parameters' stay untouched
    grad_all, = torch.autograd.grad((out * weight).sum(), x_all)
    grad_each, = torch.autograd.grad((expected * weight).sum(), x_each)
    torch.testing.assert_close(grad_all, grad_each, **TOL)
    return out.detach()


def assert_same_as_peer(ours, theirs, x: torch.Tensor, params, tol=None) -> None:
    """``ours(x)`` and ``theirs(x)`` (callables over fresh copies of ``x``) give the same output and,
    for one random output gradient, the same gradient of ``x`` and of each ``(ours, theirs)``
    parameter pair (a callable ``theirs`` maps the peer's gradient to our layout)."""
    tol = tol or dict(rtol=1e-7, atol=1e-9)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    out, expected = ours(x_ours), theirs(x_theirs)
    torch.testing.assert_close(out, expected, **tol)
    grad = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1))
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x_ours.grad, x_theirs.grad, **tol)
    for mine, peer in params:
        torch.testing.assert_close(mine.grad, peer() if callable(peer) else peer.grad, **tol)
