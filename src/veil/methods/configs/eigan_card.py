"""EIGAN's config and card (the method: `veil.methods.eigan`); D-EIGAN's build on them (`configs.d_eigan_card`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, cast

from veil.config import param
from veil.methods.configs.deviations import WHY_ADAM, WHY_UNIFORM, optimizer_deviation, privacy_loss_deviation
from veil.methods.configs.method_card import MethodCard, MethodConfig, PaperValue, PrivacyKnob

if TYPE_CHECKING:
    from veil.datasets.dataset import TaskSpec

#: EIGAN's and D-EIGAN's `preset: paper`
EIGAN_PAPER_VALUES = {
    "privacy_loss": PaperValue("neg-ce", WHY_UNIFORM),
    "optimizer": PaperValue("sgd", WHY_ADAM),
    "alpha": PaperValue(0.5, "at 0.5 the allies' loss outweighs the bounded privacy term on overlapping classes"),
    "d_z": PaperValue(
        8,
        "a z wider than the allies need keeps an invertible copy of s that the training heads miss and a "
        "fresh probe reads",
        stated=False,
    ),
    "release_noise": PaperValue(
        0.0,
        "near the private end the encoder collapses to a nearly constant z whose last bits still depend on x, and "
        "adversaries that standardise or rank z read s from them: with no options, EIGAN and D-EIGAN met the default "
        "target in 15 of 18 runs with this noise (Adult, applicants.csv, gaussian-correlated n=12000; 3 seeds) and in "
        "2 of 6 without it (docs/eigan-defaults.md, release noise). With alpha set it moves the release along EIGAN's "
        "front: on Adult at alpha 0.5, income accuracy 0.782 instead of 0.829 and privacy gap 0.08 instead of 0.21 "
        "(benchmarks/reproduce, eigan-adult)",
    ),
    "adversary_steps": PaperValue(
        1,
        "with one adversary step per encoder step the encoder hides s from the lagging adversary only: on "
        "applicants.csv at alpha 0.01 the certificate's adversaries read a mean privacy gap of 0.081 over 3 seeds, "
        "0.026 with 5 steps (docs/eigan-defaults.md, EIGAN's adversary schedule)",
    ),
    "head_hidden": PaperValue(
        (32,),
        "MLP heads lag behind the encoder, which then hides s from them only (the paper's quadrant "
        "experiment uses logistic regression)",
        stated=False,
    ),
}


#: EIGAN's and D-EIGAN's privacy knob: a smaller alpha weighs the adversaries more
EIGAN_KNOB = PrivacyKnob("alpha", 0.001, 0.99, "logit", "low")


@dataclass(frozen=True)
class EIGANConfig(MethodConfig):
    """EIGAN's trade-off, widths and learning rates."""

    d_z: int = param(
        0,
        "width of z, the encoder's tanh output l; 0 = one dimension per ally class boundary (sum of classes - 1 "
        "over the allies), the narrowest z that carries them",
        ge=0,
    )
    alpha: float = param(0.3, "weight of the allies vs (1-alpha) of the adversaries in the encoder loss", gt=0, lt=1)
    encoder_hidden: tuple[int, ...] = param(
        (64,), "hidden widths of the encoder MLP (ReLU; tanh output of width d_z)", ge=1
    )
    head_hidden: tuple[int, ...] = param(
        (), "hidden widths of each ally and adversary classifier (empty = logistic regression)", ge=1
    )
    lr_encoder: float = param(1e-3, "learning rate eta_E of the encoder", gt=0)
    lr_ally: float = param(1e-3, "learning rate eta_A of the allies", gt=0)
    lr_adversary: float = param(1e-3, "learning rate eta_V of the adversaries", gt=0)
    adversary_steps: int = param(
        5,
        "updates of every adversary per encoder update, on the same minibatch (Alg. A1: 1); the encoder then "
        "hides s from an adversary that has caught up with it, not one a step behind",
        ge=1,
        le=100,
    )
    privacy_loss: str = param(
        "uniform",
        "encoder's adversary term: eq. 4's -CE(V) ('neg-ce'), or the CE of each "
        "adversary's prediction against uniform ('uniform': bounded, so it cannot be won by "
        "making the adversary confidently wrong)",
        choices=("neg-ce", "uniform"),
    )
    optimizer: str = param(
        "adam", "update rule for every player (Alg. A1 writes the plain gradient step 'sgd')", choices=("adam", "sgd")
    )
    release_noise: float = param(
        0.1,
        "std of Gaussian noise added to every entry of the released z (the tanh output, in [-1, 1]), fresh per "
        "release; 0 = the paper's deterministic release E(x)",
        ge=0,
        le=10,
    )


def z_width(d_z: int, utility: Mapping[str, int]) -> int:
    """`d_z`, or for 0 the number of class boundaries of the utility labels (sum of classes - 1)."""
    return d_z or max(1, sum(k - 1 for k in utility.values()))


class EIGANCard(MethodCard):
    name = "eigan"
    Config = EIGANConfig
    description = "encoder vs n allies and m adversaries, L_E = alpha/n sum CE(A) - (1-alpha)/m sum CE(V)"
    paper = "EIGAN paper (seed 000), Alg. A1"
    paper_values = EIGAN_PAPER_VALUES
    privacy_knob = EIGAN_KNOB

    @classmethod
    def release_width_for(cls, config: MethodConfig, task: TaskSpec | None) -> int | None:
        if config.d_z or task is None:
            return config.d_z or None
        return z_width(config.d_z, task.utility)

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, str]:
        c = cast(EIGANConfig, config)
        return {
            **optimizer_deviation(c.optimizer, "Alg. A1"),
            **privacy_loss_deviation(c.privacy_loss),
        }
