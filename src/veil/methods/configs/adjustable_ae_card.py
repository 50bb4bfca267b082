"""The adjustable privacy autoencoder's config and card (the method: `veil.methods.adjustable_ae`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from veil.config import param
from veil.methods.configs.method_card import MethodCard, MethodConfig, PrivacyKnob

if TYPE_CHECKING:
    from veil.datasets.dataset import TaskSpec


@dataclass(frozen=True)
class AdjustableAEConfig(MethodConfig):
    """Widths from Table 2 (Adult), Adam lr 1e-3 and batch 64 (Sec. 4.1), release knobs from Sec. 4.2."""

    d_z: int = param(
        8, "unused: this method releases x', the obfuscated record in the input's format, so z has width d_in", ge=1
    )
    encoder_hidden: tuple[int, ...] = param((128, 128), "hidden widths of the encoder E (Table 2: 128-128)", ge=1)
    code_width: int = param(64, "width of the code v = E(x) (Table 2: 64)", ge=1)
    classifier_hidden: tuple[int, ...] = param((32, 8), "hidden widths of each utility head of C (Table 2: 32-8)", ge=1)
    r_hidden: tuple[int, ...] = param((64,), "hidden widths of R (Table 2: 64)", ge=1)
    r_width: int | None = param(
        None, "width of w_p = R(v); default code_width minus the utility classes (Table 2: 64 - 2 = 62)", ge=1
    )
    decoder_hidden: tuple[int, ...] = param((128, 128), "hidden widths of the decoder D (Table 2: 128-128)", ge=1)
    decoder_out: str = param(
        "sigmoid",
        "decoder output on the [0,1]-normalised features: sigmoid (Table 2) or linear",
        choices=("sigmoid", "linear"),
    )
    lr: float = param(1e-3, "Adam learning rate of every network (Sec. 4.1: 0.001)", gt=0)
    noise: float = param(
        60.0,
        "release knob f: Gaussian noise on w_p with variance noise * nu, nu = mean of R's "
        "outputs per record (Sec. 4.2 headline: 60; swept 0..200)",
        ge=0,
        lt=float("inf"),
    )
    lam: float = param(
        -3000.0,
        "release knob g: value standing in for log 0 in the hard utility output (Sec. 4.2: -3000; swept -5000..-1000)",
        lt=0,
        gt=float("-inf"),
    )
    apply_g: bool = param(True, "apply g at release (false = the paper's 'g not applied' ablation)")


class AdjustableAECard(MethodCard):
    name = "adjustable-ae"
    releases_input_format = True
    Config = AdjustableAEConfig
    description = (
        "autoencoder E->(C: utility log-probs, R: rest)->D releasing x' in the input format; "
        "release knobs noise (f) and lam (g) set privacy without retraining; z has width d_in"
    )
    paper = "adjustable privacy autoencoder paper (seed 003), Alg. 1, Table 2, Sec. 4.2"
    privacy_knob = PrivacyKnob("noise", 0.5, 5000.0, "log", "high")  # a release knob: calibration trains once

    @classmethod
    def release_width_for(cls, config: MethodConfig, task: TaskSpec | None) -> int | None:
        """The released z is x' in the input format: width d_in."""
        return None if task is None else task.d_in

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, str]:
        c = cast(AdjustableAEConfig, config)
        out: dict[str, str] = {}
        if c.apply_g:
            out["g_label"] = (
                "encode(x) applies g with the classifier's predicted utility label argmax C(v); "
                "the paper uses the true label (release_with_labels)"
            )
        else:
            out["g"] = (
                "g not applied at release: the classifier's soft log-probabilities are decoded (the paper's ablation)"
            )
        if c.decoder_out == "linear":
            out["decoder_out"] = "linear decoder output instead of Table 2's sigmoid"
        return out
