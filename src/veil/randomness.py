"""Seeds, and where the noise of a release comes from.

Training randomness (initialisation, minibatch order, the reparameterisation or Laplace noise inside `fit`)
is derived from the method's `seed`, so a run trains reproducibly (D-GPP, whose aggregator trains on the
clients' released z, only with a release_seed). A release's noise must not be: `seed` is
in every run's params, so noise derived from it can be regenerated and subtracted, undoing the release.
Every stochastic release therefore draws from its own generator, seeded from OS entropy at release time and
never recorded. Only an explicit `release_seed` makes releases reproducible, which voids their privacy."""

from __future__ import annotations

import secrets

import numpy as np
import torch

METHOD_STREAM = 0  # (release_seed, METHOD_STREAM, call): the n-th `encode` call of a method
NODE_STREAM = 1  # (release_seed, NODE_STREAM, node id): what a federated node sends out of itself
NODE_RELEASE_STREAM = 2  # (release_seed, NODE_RELEASE_STREAM, node id, n): a node's n-th release of its own rows


def derive_seed(*parts: int) -> int:
    """A 31-bit seed derived from integers (same parts, same seed, in every process)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1, np.uint32)[0] >> 1)


def release_generator(release_seed: int | None, *stream: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator of one release's noise: seeded from 63 bits of OS entropy, or, only when `release_seed`
    is set, from (release_seed, *stream) so that distinct streams still draw independent noise."""
    seed = secrets.randbits(63) if release_seed is None else derive_seed(release_seed, *stream)
    return torch.Generator(device=device).manual_seed(seed)


def gaussian_like(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Standard normal noise shaped like `t` (same device and dtype), drawn from `generator`."""
    return torch.randn(t.shape, generator=generator, device=t.device, dtype=t.dtype)
