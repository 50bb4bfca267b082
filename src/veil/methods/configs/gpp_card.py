"""GPP's config and card (the method: `veil.methods.gpp`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from veil.config import param
from veil.methods.configs.deviations import WHY_UNIFORM, privacy_loss_deviation, release_deviation
from veil.methods.configs.method_card import MethodCard, MethodConfig, PaperValue, PrivacyKnob


@dataclass(frozen=True)
class GPPConfig(MethodConfig):
    """GPP's trade-off and the paper's settings (Adam, lr 1e-4, batch 64, lambda 0.01, k 2, MLP 512-256); the
    default privacy term is the bounded 'uniform' one (`preset: paper` restores eq. 39's -CE)."""

    beta: float = param(
        1.0, "weight of the utility cross-entropy against the adversaries' (higher favours utility)", ge=0
    )
    lambda_kl: float = param(0.01, "weight of the KL term pulling N(mu, sigma^2) towards N(0, I)", ge=0)
    k: int = param(2, "classifier and adversary steps per encoder step (0 = no adversarial signal)", ge=0)
    lr: float = param(1e-4, "Adam learning rate of every network", gt=0)
    encoder_hidden: tuple[int, ...] = param((512, 256), "hidden widths of the encoder MLP", ge=1)
    head_hidden: tuple[int, ...] = param((128,), "hidden widths of each utility classifier and adversary", ge=1)
    privacy_loss: str = param(
        "uniform",
        "encoder's privacy term: the paper's -sum CE(s) ('neg-ce'), or the CE of "
        "each adversary's prediction against uniform ('uniform', which cannot be won by "
        "making the adversary confidently wrong)",
        choices=("neg-ce", "uniform"),
    )
    release: str = param(
        "sample",
        "released z: a draw mu + sigma*eps (the paper's stochastic map) or the mean mu",
        choices=("sample", "mean"),
    )


class GPPCard(MethodCard):
    name = "gpp"
    Config = GPPConfig
    description = "Gaussian encoder, beta*CE(u) - CE(s) + lambda*KL, k classifier steps per encoder step"
    paper = "GPP paper (seed 001), Alg. 1, eq. 39"
    paper_values = {"privacy_loss": PaperValue("neg-ce", WHY_UNIFORM)}
    privacy_knob = PrivacyKnob("beta", 1e-3, 30.0, "log", "low")

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, str]:
        c = cast(GPPConfig, config)
        return {**release_deviation(c.release), **privacy_loss_deviation(c.privacy_loss)}
