"""The baselines' configs and cards (the methods: `veil.methods.baselines`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from veil.config import param
from veil.methods.configs.method_card import ClosedFormConfig, MethodCard, MethodConfig, PrivacyKnob

if TYPE_CHECKING:
    from veil.datasets.dataset import TaskSpec


@dataclass(frozen=True)
class AutoencoderConfig(MethodConfig):
    """A plain reconstruction autoencoder (no privacy term)."""

    encoder_hidden: tuple[int, ...] = param((64,), "hidden widths of the encoder MLP; the decoder mirrors them", ge=1)
    lr: float = param(1e-3, "Adam learning rate", gt=0)


@dataclass(frozen=True)
class NoisyEncoderConfig(AutoencoderConfig):
    """The autoencoder with Gaussian noise on z during training and at release."""

    noise: float = param(0.5, "standard deviation of the Gaussian noise added to z", ge=0)


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


@dataclass(frozen=True)
class RandomProjectionConfig(ClosedFormConfig):
    """A Gaussian random projection."""


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


class AutoencoderCard(MethodCard):
    name = "autoencoder"
    Config = AutoencoderConfig
    description = "no-privacy baseline: MLP autoencoder trained on reconstruction MSE; z is its code"
    paper = "baseline in the EIGAN and GPP papers (seeds 000, 001)"


class NoisyEncoderCard(AutoencoderCard):
    name = "noisy-encoder"
    Config = NoisyEncoderConfig
    description = "autoencoder whose code gets N(0, noise^2) noise in training and at release"
    paper = "baseline in the GPP paper (seed 001), Sec. VI"
    privacy_knob = PrivacyKnob("noise", 0.01, 100.0, "log", "high")


class PCACard(MethodCard):
    name = "pca"
    Config = PCAConfig
    description = "top principal components of X (no training, no privacy)"
    paper = "baseline in the EIGAN paper (seed 000; 99% variance)"


class RandomProjectionCard(MethodCard):
    name = "random-projection"
    Config = RandomProjectionConfig
    description = "z = (x - mean) @ W with W ~ N(0, 1/d_z), seeded (no training)"
    paper = "baseline in the GPP paper (seed 001)"


class DPInputCard(MethodCard):
    name = "dp-input"
    releases_input_format = True
    Config = DPInputConfig
    description = (
        "eps-LDP Laplace mechanism on the input: z = clamp(x, -c, c) + Laplace(0, 2*c*d_in/eps) (no training); "
        "z has width d_in"
    )
    paper = "DP baseline in the EIGAN paper (seed 000, Sec. 3 'Baselines', Fig. 3, Table 3)"
    privacy_knob = PrivacyKnob("eps", 1.0, 1e5, "log", "low")
    eps_ldp = True

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
