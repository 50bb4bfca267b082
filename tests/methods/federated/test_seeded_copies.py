"""`seeded_copies` (one module re-initialised per seed) builds exactly the stack that building one module per
seed does, for every network a federated method stacks, and falls back to building them where re-initialising
would draw something else; torch's global generator is left as it was."""

from __future__ import annotations

from functools import partial
from typing import Callable

import pytest
import torch
from torch import nn

from veil.datasets import load_dataset
from veil.methods import create_method
from veil.methods.federated.ensemble import Stack, seeded_copies, seeded_modules
from veil.methods.nets import mlp

SEEDS = [7, 123, 2**31 - 1, 0, 99]


class DrawsInInit(nn.Module):
    """Draws in its constructor beyond its layers' reset_parameters: re-initialising it would not match."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("offset", torch.randn(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.offset


def d_gpp_encoder() -> Callable[[], nn.Module]:
    ds = load_dataset("gaussian-correlated", {"n": 200}, use_cache=False)
    return create_method("d-gpp", {"K": 2}, ds.task()).new_encoder


@pytest.mark.parametrize(
    "factory",
    [partial(mlp, 8, (32, 16), 3, out="tanh"), partial(mlp, 4, (), 2), DrawsInInit, d_gpp_encoder()],
    ids=["mlp-tanh", "logistic", "draws-in-init", "d-gpp-encoder"],
)
def test_the_same_stack_as_one_module_per_seed(factory) -> None:
    before = torch.get_rng_state()
    fast = seeded_copies(factory, SEEDS)
    assert torch.equal(torch.get_rng_state(), before)
    slow = Stack(seeded_modules(factory, SEEDS))
    assert list(fast.params) == list(slow.params) and list(fast.buffers) == list(slow.buffers)
    for name in slow.params:
        assert torch.equal(fast.params[name], slow.params[name]), name
        assert fast.params[name].requires_grad
    for name in slow.buffers:
        assert torch.equal(fast.buffers[name], slow.buffers[name]), name
    # distinct seeds give distinct copies (the re-initialisation really reseeds)
    first = fast.tensors()[0]
    assert not torch.equal(first[0], first[1])
