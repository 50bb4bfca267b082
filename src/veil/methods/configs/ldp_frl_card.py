"""LDP-FRL's config and card (the method: `veil.methods.ldp_frl`); LDP-FedAvg's build on them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from veil.config import param
from veil.methods.configs.deviations import (
    WHY_ADAM,
    optimizer_deviation,
)
from veil.methods.configs.method_card import MethodCard, MethodConfig, PaperValue, PrivacyKnob

#: LDP-FRL's and LDP-FedAvg's `preset: paper`
LDP_PAPER_VALUES = {
    "optimizer": PaperValue("sgd", WHY_ADAM),
    "bound": PaperValue(
        "tanh",
        "c*tanh(v) rarely reaches c, so the Laplace noise of scale 2*c*d_z/eps drowns more of the signal "
        "than with a hard clamp at the same eps",
        stated=False,
    ),
}


@dataclass(frozen=True)
class LDPFRLConfig(MethodConfig):
    """LDP-FRL's privacy budget, trade-off, bound and widths (Table 1: 100-unit hidden layers, d_z = 2)."""

    d_z: int = param(2, "width of v and z (the paper uses 2, and 4 in Table 3)", ge=1)
    eps: float = param(
        4.0,
        "LDP budget epsilon of the Laplace mechanism (paper sweeps 2,4,6,8,100,1000); inf = no noise",
        gt=0,
        allow_inf=True,
    )
    beta: float = param(1.0, "weight of the side decoders' reconstruction MSE (paper sweeps 1e-3..10)", ge=0)
    bound: str = param(
        "clip",
        "how v is bounded to [-c, c] so the sensitivity is finite: c*tanh or a hard clamp",
        choices=("tanh", "clip"),
    )
    clip: float = param(
        1.0, "c, the bound on every coordinate of v (L1 sensitivity Delta = 2*c*d_z)", gt=0, lt=math.inf
    )
    encoder_hidden: tuple[int, ...] = param((100,), "hidden widths of the feature extractor (Table 1: 100)", ge=1)
    utility_hidden: tuple[int, ...] = param((100,), "hidden widths of each utility decoder (Table 1: 100)", ge=1)
    side_hidden: tuple[int, ...] = param((100,), "hidden widths of each side decoder (Table 1: 100)", ge=1)
    lr: float = param(1e-3, "learning rate eta of every network (not given in the paper)", gt=0)
    optimizer: str = param("adam", "update rule (Alg. 1 writes the plain gradient step 'sgd')", choices=("adam", "sgd"))


class LDPFRLCard(MethodCard):
    name = "ldp-frl"
    Config = LDPFRLConfig
    description = "bounded extractor + eps-LDP Laplace on z; loss CE(y) + beta * MSE of (z, s) -> x side decoders"
    paper = "LDP-FRL paper (seed 002), Alg. 1, eq. 15, Table 1"
    paper_values = LDP_PAPER_VALUES
    privacy_knob = PrivacyKnob("eps", 0.1, 1000.0, "log", "low")
    eps_ldp = True

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, str]:
        c = cast(LDPFRLConfig, config)
        return {
            "bound": f"v bounded to [-c, c] by {c.bound} (c={c.clip}) so the Laplace scale "
            "Delta/eps is calibrated; the paper's extractor output is unbounded and names no scale",
            "training": "centralised (one client); the paper averages K=20 clients with FedAvg",
            **optimizer_deviation(c.optimizer, "Alg. 1"),
        }
