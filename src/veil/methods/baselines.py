"""Baselines the papers compare against: a no-privacy autoencoder, a noisy encoder, PCA, a random projection and
Laplace noise on the input (eps-LDP, `dp-input`)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from veil.datasets.dataset import Split
from veil.methods.configs.baselines_card import (
    AutoencoderCard,
    AutoencoderConfig,
    DPInputCard,
    DPInputConfig,
    NoisyEncoderCard,
    NoisyEncoderConfig,
    PCACard,
    PCAConfig,
    RandomProjectionCard,
)
from veil.methods.mechanisms import LaplaceMechanism, l1_sensitivity
from veil.methods.method import (
    Batch,
    BatchSampler,
    LDPRelease,
    Method,
    TrainContext,
    step,
)
from veil.methods.nets import make_optimizer, mlp
from veil.methods.table import register_method
from veil.randomness import Noise, gaussian_like


@register_method
class Autoencoder(AutoencoderCard, Method):
    config: AutoencoderConfig

    def build(self) -> None:
        c, t = self.config, self.task
        self.encoder = mlp(t.d_in, c.encoder_hidden, c.d_z)
        self.decoder = mlp(c.d_z, tuple(reversed(c.encoder_hidden)), t.d_in)

    def make_optimizers(self) -> None:
        self.opt = make_optimizer(list(self.encoder.parameters()) + list(self.decoder.parameters()), self.config.lr)

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder, "decoder": self.decoder}

    def code(self, x: torch.Tensor) -> torch.Tensor:
        """The representation used during training (the noisy encoder adds noise here)."""
        return self.encoder(x)

    def train_step(self, batch: Batch, sampler: BatchSampler, ctx: TrainContext) -> dict[str, torch.Tensor]:
        loss = F.mse_loss(self.decoder(self.code(batch.x)), batch.x)
        step(loss, self.opt, ctx, list(self.parameters_of("encoder", "decoder")))
        return {"loss/reconstruction": loss.detach()}


@register_method
class NoisyEncoder(NoisyEncoderCard, Autoencoder):
    config: NoisyEncoderConfig

    def code(self, x: torch.Tensor) -> torch.Tensor:
        z = self.encoder(x)
        return z + self.config.noise * torch.randn_like(z)

    def release(self, x: torch.Tensor, generator: Noise) -> torch.Tensor:
        z = self.encoder(x)
        return z + self.config.noise * gaussian_like(z, generator)


class LinearMap(nn.Module):
    """z = (x - mean) @ W, with mean and W as buffers so they travel in `state()`."""

    mean: torch.Tensor
    weight: torch.Tensor

    def __init__(self, d_in: int, d_z: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(d_in))
        self.register_buffer("weight", torch.zeros(d_in, d_z))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) @ self.weight

    @torch.no_grad()
    def set(self, mean: np.ndarray | torch.Tensor, weight: np.ndarray | torch.Tensor) -> None:
        """Load a fitted mean (d_in) and weight (d_in x d_z), cast to float32."""
        self.mean.copy_(torch.as_tensor(mean, dtype=torch.float32))
        self.weight.copy_(torch.as_tensor(weight, dtype=torch.float32))


class LinearBaseline(Method):
    """A closed-form method whose encoder is one `LinearMap` (x -> d_z), set by `fit_closed_form`."""

    def build(self) -> None:
        self.encoder = LinearMap(self.task.d_in, self.config.d_z)

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder}


@register_method
class PCA(PCACard, LinearBaseline):
    config: PCAConfig

    def build(self) -> None:
        super().build()
        self.kept = 0

    def fit_closed_form(self, train: Split) -> None:
        x = train.x.astype(np.float64)
        mean = x.mean(axis=0)
        _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
        var = s**2 / max(1, len(x) - 1)
        k = min(self.config.d_z, vt.shape[0])
        if self.config.variance is not None:
            frac = np.cumsum(var) / var.sum()
            k = min(k, int(np.searchsorted(frac, self.config.variance - 1e-12) + 1))
        w = np.zeros((self.task.d_in, self.config.d_z))
        w[:, :k] = vt[:k].T
        self.kept = k
        self.encoder.set(mean, w)


@register_method
class RandomProjection(RandomProjectionCard, LinearBaseline):
    def fit_closed_form(self, train: Split) -> None:
        gen = torch.Generator().manual_seed(self.config.seed)
        w = torch.randn(self.task.d_in, self.config.d_z, generator=gen) / np.sqrt(self.config.d_z)
        self.encoder.set(train.x.mean(axis=0), w)


class Clamp(nn.Module):
    """x clamped to [-c, c] coordinate-wise (data-independent, so the sensitivity bound holds for any input)."""

    def __init__(self, c: float) -> None:
        super().__init__()
        self.c = float(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(-self.c, self.c)


@register_method
class DPInput(DPInputCard, Method):
    config: DPInputConfig

    def build(self) -> None:
        c = self.config
        self.encoder = Clamp(c.clip)
        self.mechanism = LaplaceMechanism(c.eps, l1_sensitivity(c.clip, self.task.d_in))

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder}

    def fit_closed_form(self, train: Split) -> None:
        """Nothing to fit: the mechanism reads no training statistic."""

    def release(self, x: torch.Tensor, generator: Noise) -> torch.Tensor:
        return self.mechanism(self.encoder(x), generator)

    def ldp_release(self) -> LDPRelease:
        return LDPRelease(self.mechanism, self.encoder, self.config.clip, self.task.d_in)
