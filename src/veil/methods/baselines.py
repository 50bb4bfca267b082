"""Baselines the papers compare against: a no-privacy autoencoder, a noisy encoder, PCA, a random projection and
Laplace noise on the input (eps-LDP, `dp-input`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from veil.config import param
from veil.datasets.base import Split, TaskSpec
from veil.methods.base import (
    Batch,
    BatchSampler,
    ClosedFormConfig,
    LDPRelease,
    Method,
    MethodConfig,
    PrivacyKnob,
    TrainContext,
    step,
)
from veil.methods.mechanisms import LaplaceMechanism, l1_sensitivity
from veil.methods.nets import make_optimizer, mlp
from veil.methods.registry import register_method
from veil.randomness import gaussian_like


@dataclass(frozen=True)
class AutoencoderConfig(MethodConfig):
    """A plain reconstruction autoencoder (no privacy term)."""

    encoder_hidden: tuple[int, ...] = param((64,), "hidden widths of the encoder MLP; the decoder mirrors them", ge=1)
    lr: float = param(1e-3, "Adam learning rate", gt=0)


@register_method
class Autoencoder(Method):
    name = "autoencoder"
    Config = AutoencoderConfig
    description = "no-privacy baseline: MLP autoencoder trained on reconstruction MSE; z is its code"
    paper = "baseline in the EIGAN and GPP papers (seeds 000, 001)"
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

    def train_step(self, batch: Batch, sampler: BatchSampler, ctx: TrainContext) -> dict[str, float]:
        loss = F.mse_loss(self.decoder(self.code(batch.x)), batch.x)
        step(loss, self.opt, ctx, list(self.parameters_of("encoder", "decoder")))
        return {"loss/reconstruction": loss.item()}


@dataclass(frozen=True)
class NoisyEncoderConfig(AutoencoderConfig):
    """The autoencoder with Gaussian noise on z during training and at release."""

    noise: float = param(0.5, "standard deviation of the Gaussian noise added to z", ge=0)


@register_method
class NoisyEncoder(Autoencoder):
    name = "noisy-encoder"
    Config = NoisyEncoderConfig
    description = "autoencoder whose code gets N(0, noise^2) noise in training and at release"
    paper = "baseline in the GPP paper (seed 001), Sec. VI"
    privacy_knob = PrivacyKnob("noise", 0.01, 100.0, "log", "high")
    config: NoisyEncoderConfig

    def code(self, x: torch.Tensor) -> torch.Tensor:
        z = self.encoder(x)
        return z + self.config.noise * torch.randn_like(z)

    def release(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
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


@dataclass(frozen=True)
class PCAConfig(ClosedFormConfig):
    """Principal components of the training features."""

    variance: float | None = param(
        None,
        "if set, keep the fewest components reaching this explained-variance "
        "fraction (EIGAN's 0.99) instead of d_z; z is zero-padded to d_z",
        gt=0,
        le=1,
    )


@register_method
class PCA(LinearBaseline):
    name = "pca"
    Config = PCAConfig
    description = "top principal components of X (no training, no privacy)"
    paper = "baseline in the EIGAN paper (seed 000; 99% variance)"
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


@dataclass(frozen=True)
class RandomProjectionConfig(ClosedFormConfig):
    """A Gaussian random projection."""


@register_method
class RandomProjection(LinearBaseline):
    name = "random-projection"
    Config = RandomProjectionConfig
    description = "z = (x - mean) @ W with W ~ N(0, 1/d_z), seeded (no training)"
    paper = "baseline in the GPP paper (seed 001)"

    def fit_closed_form(self, train: Split) -> None:
        gen = torch.Generator().manual_seed(self.config.seed)
        w = torch.randn(self.task.d_in, self.config.d_z, generator=gen) / np.sqrt(self.config.d_z)
        self.encoder.set(train.x.mean(axis=0), w)


@dataclass(frozen=True)
class DPInputConfig(ClosedFormConfig):
    """eps-LDP Laplace noise on the clipped input (EIGAN's DP baseline); nothing is fitted."""

    d_z: int = param(8, "unused: this method releases the noisy input itself, so z has width d_in", ge=1)
    eps: float = param(
        300.0,
        "LDP budget epsilon per record: Laplace scale b = 2*clip*d_in/eps on every coordinate; inf = no noise. "
        "The paper tunes eps until the adversary matches EIGAN's; 300 hides sex on Adult (d_in 102, b = 2.04: "
        "fresh-probe privacy gap 0.02, 0.07 at eps 500, 0.19 at 1000), a weak formal guarantee that hides little "
        "on narrow inputs, where b is smaller",
        gt=0,
        allow_inf=True,
    )
    clip: float = param(
        3.0,
        "c: every input coordinate is clamped to [-c, c] so the L1 sensitivity 2*c*d_in is finite. Veil "
        "standardises numeric features and one-hot codes are 0/1, so 3 keeps ~99.7% of a standard normal "
        "coordinate unchanged while a larger c inflates the noise",
        gt=0,
        lt=math.inf,
    )


class Clamp(nn.Module):
    """x clamped to [-c, c] coordinate-wise (data-independent, so the sensitivity bound holds for any input)."""

    def __init__(self, c: float) -> None:
        super().__init__()
        self.c = float(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(-self.c, self.c)


@register_method
class DPInput(Method):
    name = "dp-input"
    releases_input_format = True
    Config = DPInputConfig
    description = (
        "eps-LDP Laplace mechanism on the input: z = clamp(x, -c, c) + Laplace(0, 2*c*d_in/eps) (no training); "
        "z has width d_in"
    )
    paper = "DP baseline in the EIGAN paper (seed 000, Sec. 3 'Baselines', Fig. 3, Table 3)"
    privacy_knob = PrivacyKnob("eps", 1.0, 1e5, "log", "low")
    config: DPInputConfig

    def build(self) -> None:
        c = self.config
        self.encoder = Clamp(c.clip)
        self.mechanism = LaplaceMechanism(c.eps, l1_sensitivity(c.clip, self.task.d_in))

    @classmethod
    def release_width_for(cls, config: MethodConfig, task: TaskSpec | None) -> int | None:
        """The released z is the noisy input: width d_in."""
        return None if task is None else task.d_in

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, str]:
        c = cast(DPInputConfig, config)
        return {
            "mechanism": f"x clamped to [-{c.clip}, {c.clip}] per coordinate and Laplace scale 2*c*d_in/eps: "
            "the paper names only 'the Laplace mechanism (Yang et al., 2018)', with no clipping or sensitivity",
        }

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder}

    def fit_closed_form(self, train: Split) -> None:
        """Nothing to fit: the mechanism reads no training statistic."""

    def release(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return self.mechanism(self.encoder(x), generator)

    def ldp_release(self) -> LDPRelease:
        return LDPRelease(self.mechanism, self.encoder, self.config.clip, self.task.d_in)
