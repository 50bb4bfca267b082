"""Probe families by name: the adversaries the capacity sweep and the certificate train on a release, from a
linear model to deep MLPs and tree ensembles. Each is a function fit on (z_train, y_train) that returns class
probabilities on z_test. `register_probe` adds one, from Veil or from a plugin (entry-point group `veil.probes`,
docs/extending.md); `AuditConfig.suite` and `CapacityConfig.probes` then accept its name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from veil.audit.train import sklearn_proba, train_classifier
from veil.registry import Registry

__all__ = ["ProbeBudget", "ProbeFamily", "PROBE_FAMILIES", "get_probe", "probe_names", "register_probe"]


@dataclass(frozen=True)
class ProbeBudget:
    """What the audit grants each probe: MLPs read epochs, lr and batch_size; tree ensembles read trees."""

    epochs: int = 30
    lr: float = 1e-3
    batch_size: int = 128
    trees: int = 100
    device: str = "cpu"  # where MLPs train (`veil.audit.train.probe_device`)


class FitPredict(Protocol):
    def __call__(
        self,
        z_train: np.ndarray,
        y_train: np.ndarray,
        z_test: np.ndarray,
        n_classes: int,
        *,
        seed: int,
        budget: ProbeBudget,
    ) -> np.ndarray: ...


@dataclass(frozen=True)
class ProbeFamily:
    """A registered probe family: its name, how to fit it, a one-line summary, and whether its fit depends on the
    seed (a seedless family is trained once, not once per repeat)."""

    name: str
    fit_predict: FitPredict
    summary: str
    seeded: bool = True


#: registered probe families by name, weakest to strongest among Veil's own
PROBE_FAMILIES: Registry[ProbeFamily] = Registry("probe family")


def register_probe(name: str, summary: str, *, seeded: bool = True) -> Callable[[FitPredict], FitPredict]:
    """Function decorator adding a `FitPredict` to `PROBE_FAMILIES` under `name`. The function returns an
    (len(z_test), n_classes) array of class probabilities (rows summing to 1)."""

    return PROBE_FAMILIES.decorator(name, lambda fn: ProbeFamily(name, fn, summary, seeded))


def probe_names() -> tuple[str, ...]:
    """Every registered probe family's name (plugins included)."""
    return PROBE_FAMILIES.names()


def get_probe(name: str) -> ProbeFamily:
    """The probe family registered as `name` (plugins included), or UnknownNameError listing the valid names."""
    return PROBE_FAMILIES.lookup(name)


def _mlp(name: str, hidden: tuple[int, ...], summary: str) -> None:
    def fit(
        z_train: np.ndarray, y_train: np.ndarray, z_test: np.ndarray, n_classes: int, *, seed: int, budget: ProbeBudget
    ) -> np.ndarray:
        clf = train_classifier(
            z_train,
            y_train,
            n_classes,
            hidden=hidden,
            epochs=budget.epochs,
            lr=budget.lr,
            batch_size=budget.batch_size,
            seed=seed,
            device=budget.device,
        )
        return clf.predict_proba(z_test)

    register_probe(name, summary)(fit)


@register_probe("logistic", "multinomial logistic regression (scikit-learn)", seeded=False)
def _logistic(
    z_train: np.ndarray, y_train: np.ndarray, z_test: np.ndarray, n_classes: int, *, seed: int, budget: ProbeBudget
) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    return _sklearn(LogisticRegression(max_iter=2000, random_state=seed), z_train, y_train, z_test, n_classes)


_mlp("mlp-32", (32,), "MLP, one hidden layer of 32")
_mlp("mlp-256-128", (256, 128), "MLP 256-128 (GPP's probe)")
_mlp("mlp-512-256-128", (512, 256, 128), "MLP 512-256-128")
_mlp("mlp-256x4", (256, 256, 256, 256), "MLP, four hidden layers of 256")


@register_probe("random-forest", "random forest of `trees` trees (scikit-learn)")
def _random_forest(
    z_train: np.ndarray, y_train: np.ndarray, z_test: np.ndarray, n_classes: int, *, seed: int, budget: ProbeBudget
) -> np.ndarray:
    from sklearn.ensemble import RandomForestClassifier

    model = RandomForestClassifier(n_estimators=budget.trees, random_state=seed, n_jobs=1)
    return _sklearn(model, z_train, y_train, z_test, n_classes)


@register_probe(
    "hist-gradient-boosting", "histogram gradient boosting, `trees` iterations (scikit-learn)", seeded=False
)
def _boosting(
    z_train: np.ndarray, y_train: np.ndarray, z_test: np.ndarray, n_classes: int, *, seed: int, budget: ProbeBudget
) -> np.ndarray:
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(max_iter=budget.trees, random_state=seed, early_stopping=False)
    return _sklearn(model, z_train, y_train, z_test, n_classes)


def _sklearn(model: Any, z_train: np.ndarray, y_train: np.ndarray, z_test: np.ndarray, n_classes: int) -> np.ndarray:
    model.fit(z_train, y_train)
    return sklearn_proba(model, z_test, n_classes)
