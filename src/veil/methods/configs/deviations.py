"""Deviation texts that several methods record, written once.

A method's `deviations(config)` names the choices that depart from its paper; a run records each as the
param `method.deviation.<key>`. Runs are compared and grouped by these texts, so a choice shared by
several methods (the uniform privacy loss, the mean release, Adam, partial participation) must read the
same everywhere. Each helper returns the entry a method adds for one config field: {key: text} when the
choice departs from the paper, {} when it follows it. Texts only one method uses stay in that method."""

from __future__ import annotations

UNIFORM_PRIVACY_LOSS = "encoder pushes adversaries to uniform predictions instead of maximising their CE"
MEAN_RELEASE = "releases the mean mu instead of the paper's stochastic draw mu + sigma*eps"
REPRODUCIBLE_RELEASE = (
    "release noise drawn from the recorded release_seed: anyone who reads the run's params can regenerate "
    "and subtract it, which voids the privacy guarantee of a stochastic release"
)

#: why the default privacy term is the bounded 'uniform' one (paper_values of eigan, d-eigan, gpp, d-gpp)
WHY_UNIFORM = (
    "the paper's -CE term is won by making the adversary confidently wrong, so the game oscillates and a "
    "fresh adversary still reads s (measured in docs/defaults.md)"
)
#: why the default optimizer is Adam where the paper writes a plain gradient step
WHY_ADAM = "the paper names no learning rate for its plain gradient step; Adam trains at Veil's rates"


def privacy_loss_deviation(privacy_loss: str) -> dict[str, str]:
    """'uniform': the encoder's adversary term is CE against uniform instead of the paper's -CE."""
    return {"privacy_loss": UNIFORM_PRIVACY_LOSS} if privacy_loss == "uniform" else {}


def release_deviation(release: str) -> dict[str, str]:
    """'mean': a Gaussian encoder releases mu instead of a draw mu + sigma * eps."""
    return {"release": MEAN_RELEASE} if release == "mean" else {}


def optimizer_deviation(optimizer: str, algorithm: str) -> dict[str, str]:
    """'adam' where `algorithm` (e.g. "Alg. A1") writes a plain gradient step."""
    if optimizer != "adam":
        return {}
    return {"optimizer": f"adam instead of {algorithm}'s plain gradient step (set optimizer=sgd for the letter)"}


def fraction_deviation(fraction: float, participants: str, paper: str) -> dict[str, str]:
    """A `fraction` < 1 of the `participants` ("nodes", "clients") per round, where the paper (`paper`: what
    it does instead, e.g. "the paper uses all") takes every one."""
    if fraction >= 1:
        return {}
    return {"fraction": f"{fraction} of the {participants} take part in each round ({paper})"}


def release_seed_deviation(release_seed: int | None) -> dict[str, str]:
    """A set release_seed: every method's release noise is reproducible from the run's params."""
    return {"release_seed": REPRODUCIBLE_RELEASE} if release_seed is not None else {}
