"""D-GPP's config and card (the method: `veil.methods.d_gpp`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from veil.config import param
from veil.methods.configs.deviations import (
    WHY_UNIFORM,
    fraction_deviation,
    privacy_loss_deviation,
    release_deviation,
)
from veil.methods.configs.method_card import MethodCard, MethodConfig, PaperValue, PrivacyKnob


@dataclass(frozen=True)
class DGPPConfig(MethodConfig):
    """GPP's fields with per-client beta_m / lambda_m, plus the federation (Alg. 2)."""

    K: int = param(5, "number of clients t (the paper's HAPT run: 5)", ge=1)
    beta: tuple[float, ...] = param(
        (1.0,), "beta_m, weight of the utility CE: one value for every client or one per client", ge=0
    )
    lambda_kl: tuple[float, ...] = param((0.01,), "lambda_m, weight of the KL term: one value or one per client", ge=0)
    k: int = param(2, "utility-classifier steps at the aggregator and adversary steps at each client per round", ge=0)
    lr: float = param(1e-4, "Adam learning rate alpha of every network", gt=0)
    encoder_hidden: tuple[int, ...] = param((512, 256), "hidden widths of each client's encoder MLP", ge=1)
    head_hidden: tuple[int, ...] = param((128,), "hidden widths of each utility classifier and adversary", ge=1)
    privacy_loss: str = param(
        "uniform",
        "encoder's privacy term: the paper's -sum CE(s) ('neg-ce') or CE against uniform ('uniform')",
        choices=("neg-ce", "uniform"),
    )
    release: str = param(
        "sample", "released z: a draw mu + sigma*eps (the paper) or the mean mu", choices=("sample", "mean")
    )
    warmup_epochs: int = param(
        0,
        "local passes each client trains its encoder against its own adversaries (privacy and KL terms; no psi yet) "
        "before its first upload; 0 = Alg. 2 (measured: it does not lower round 1's leakage, docs/threat-model.md)",
        ge=0,
    )
    fraction: float = param(1.0, "fraction of clients sampled (seeded) to take part in each round", gt=0, le=1)
    node_metrics: bool = param(
        False, "each client logs its own losses (computed from its s) as node_local/* metrics; never sent"
    )


class DGPPCard(MethodCard):
    name = "d-gpp"
    federated = True
    Config = DGPPConfig
    description = (
        "distributed GPP: private encoder and adversary per client, clients send only (z, u), the "
        "aggregator trains the shared utility classifiers on the union; per-client beta_m, lambda_m"
    )
    paper = "GPP paper (seed 001), Alg. 2"
    paper_values = {"privacy_loss": PaperValue("neg-ce", WHY_UNIFORM)}
    privacy_knob = PrivacyKnob("beta", 1e-3, 30.0, "log", "low")  # one beta_m for every client

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, str]:
        c = cast(DGPPConfig, config)
        return {
            **release_deviation(c.release),
            **privacy_loss_deviation(c.privacy_loss),
            **fraction_deviation(c.fraction, "clients", "Alg. 2 uses all"),
        }
