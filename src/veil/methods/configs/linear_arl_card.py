"""Linear ARL's config and card (the method: `veil.methods.linear_arl`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from veil.config import param
from veil.methods.configs.method_card import ClosedFormConfig, MethodCard, MethodConfig, PrivacyKnob


@dataclass(frozen=True)
class LinearARLConfig(ClosedFormConfig):
    """The trade-off lambda and how many eigen-directions are kept."""

    lambda_arl: float = param(
        0.5, "weight of hiding S vs (1 - lambda) of predicting Y (0 = utility only, 1 = invariance only)", ge=0, le=1
    )
    negative_only: bool = param(
        True,
        "keep only eigenvectors with negative eigenvalue (the paper's global "
        "optimum); false = always keep d_z of them, smallest first",
    )


class LinearARLCard(MethodCard):
    name = "linear-arl"
    Config = LinearARLConfig
    description = (
        "closed-form linear ARL: z spans the eigenvectors of lambda*SS^T - (1-lambda)*YY^T with negative eigenvalue"
    )
    paper = "Sadeghi, Yu & Boddeti, ICCV 2019 (linear case); baseline in the EIGAN paper (seed 000)"
    privacy_knob = PrivacyKnob("lambda_arl", 0.01, 0.99, "logit", "high")

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, str]:
        if not cast(LinearARLConfig, config).negative_only:
            return {
                "negative_only": "keeps d_z eigenvectors even where the eigenvalue is >= 0 "
                "(the paper's optimum keeps only the negative ones)"
            }
        return {}
