"""A `Stack` runs its copies as batched matmuls where it can (an MLP chain, a module's `stacked_forward`): each
copy's output and gradients equal that copy's own module, as vmap over the module computes them."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from veil.methods.federated.ensemble import Stack
from veil.methods.gpp import GaussianEncoder
from veil.methods.nets import mlp


def outputs(out: torch.Tensor | tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize(
    "build",
    [lambda: mlp(6, (16, 8), 3), lambda: GaussianEncoder(6, (16, 8), 4), lambda: GaussianEncoder(6, (12,), 2)],
    ids=["mlp", "gaussian-encoder", "gaussian-encoder-one-layer"],
)
def test_each_copy_of_a_stack_computes_what_its_module_does(build) -> None:
    torch.manual_seed(0)
    modules: list[nn.Module] = [build() for _ in range(3)]
    stack = Stack(modules)
    x = torch.randn(3, 5, 6)
    got = outputs(stack(x))
    loss = sum(o.square().sum() for o in got)
    grads = torch.autograd.grad(loss, stack.tensors())
    for c, module in enumerate(modules):
        want = outputs(module(x[c]))
        for g, w in zip(got, want):
            torch.testing.assert_close(g[c], w, atol=1e-6, rtol=1e-6)
        mine = torch.autograd.grad(sum(o.square().sum() for o in want), list(module.parameters()))
        for stacked, alone in zip(grads, mine):
            torch.testing.assert_close(stacked[c], alone, atol=1e-5, rtol=1e-5)
