"""StackedOptimizer's in-place path (every copy active) does the masked path's arithmetic bit for bit, and
`whole` tells a round that trains every copy in order (so D-GPP skips its take/put copies)."""

from __future__ import annotations

import pytest
import torch

from veil.methods.ensemble_ops import whole
from veil.methods.federated.ensemble import Stack, StackedOptimizer


@pytest.mark.parametrize("kind", ["adam", "sgd"])
@pytest.mark.parametrize("per_copy_lr", [False, True])
def test_all_active_step_equals_the_masked_step(kind, per_copy_lr):
    gen = torch.Generator().manual_seed(0)
    start = [torch.randn(3, 4, 5, generator=gen), torch.randn(3, 5, generator=gen)]
    grads = [[torch.randn_like(p) for p in start] for _ in range(6)]
    lr = torch.tensor([1e-3, 3e-2, 1e-1], dtype=torch.float64) if per_copy_lr else 1e-2
    fast = [p.clone() for p in start]
    masked = [p.clone() for p in start]
    opt_fast, opt_masked = StackedOptimizer(fast, lr, kind), StackedOptimizer(masked, lr, kind)
    idle_last = torch.tensor([True, True, False])
    for g in grads:
        opt_fast.step(g, torch.ones(3, dtype=torch.bool))  # the in-place path
        opt_masked.step(g, idle_last)  # copies 0 and 1 through torch.where
    for f, m, s in zip(fast, masked, start):
        assert torch.equal(f[:2], m[:2])  # bit for bit
        assert torch.equal(m[2], s[2])  # the idle copy did not move
        assert not torch.equal(f[2], s[2])


def test_whole_is_every_copy_in_order():
    stack = Stack([torch.nn.Linear(2, 2) for _ in range(3)])
    assert whole(stack, torch.tensor([0, 1, 2]))
    assert not whole(stack, torch.tensor([0, 2, 1]))
    assert not whole(stack, torch.tensor([0, 1]))
