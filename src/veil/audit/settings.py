"""The audit's settings (`AuditConfig`), torch-free: a spec's `audit:` keys are routed and checked without loading
the probes. The values `mi` and `suite` accept come from the estimator and probe-family registries, read only when
a value is checked, without importing them (`registered`); the built-in estimators' summaries, which the `mi`
field's doc lists, are in `veil.audit.vocabulary` (plugins' estimators are valid values, listed by `mi_choices`, but
not in that doc)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Iterable

from veil.audit.vocabulary import CERTIFICATE_SUITE, MI_SUMMARIES, PROBE_DEVICES, PROBE_FAMILY_NAMES
from veil.config import MAX_EPOCHS, param
from veil.plugins import load_plugins


def registered(module: str, table: str, built_in: Iterable[str]) -> tuple[str, ...]:
    """The names registered in `module.table` (plugins loaded first) when that module is loaded, else the
    built-in names: nothing else can have registered there before it was imported (a plugin imports it to register),
    so reading the names never imports the registry's torch code."""
    load_plugins()
    loaded = sys.modules.get(module)
    return tuple(getattr(loaded, table)) if loaded is not None else tuple(built_in)


def mi_choices() -> tuple[str, ...]:
    """The values `AuditConfig.mi` accepts: "none" or a registered MI estimator (plugins included)."""
    return ("none", *registered("veil.audit.mi", "MI_ESTIMATORS", MI_SUMMARIES))


def suite_choices() -> tuple[str, ...]:
    """The values `AuditConfig.suite` accepts: every registered probe family (plugins included)."""
    return registered("veil.audit.families", "PROBE_FAMILIES", PROBE_FAMILY_NAMES)


#: the default of `AuditConfig.max_rows`: a probe's training costs time linear in its rows, and past this many a
#: probe of a low-dimensional release reads the same test AUC within its standard error (docs/run.md, "The audit")
PROBE_MAX_ROWS = 100_000


@dataclass(frozen=True)
class AuditConfig:
    """How the fresh probes are built and trained."""

    hidden: tuple[int, ...] = param((256, 128), "hidden widths of each probe MLP (GPP's 3-layer 256-128)", ge=1)
    epochs: int = param(30, "training epochs of each probe (GPP: 30)", ge=1, le=MAX_EPOCHS)
    lr: float = param(
        1e-3, "Adam learning rate of the probes (GPP: 1e-4; 1e-3 converges in 30 epochs on small data)", gt=0
    )
    batch_size: int = param(128, "probe minibatch size", ge=1)
    max_rows: int = param(
        PROBE_MAX_ROWS,
        "most training rows each fresh probe trains on: a seeded random sample of a larger train split (0 = all); "
        "every test row is still scored",
        ge=0,
    )
    standardize: bool = param(True, "z-score each column of z with train statistics before probing (invertible)")
    seed: int = param(0, "seed of probe initialisation and minibatch order", ge=0)
    mi: str = param(
        "none",
        "also estimate I(Z;label) in nats for every label with this estimator ("
        + "; ".join(f"{name}: {summary}" for name, summary in MI_SUMMARIES.items())
        + ")",
        choices=mi_choices,
    )
    capacity: bool = param(
        False,
        "also run the adversary-capacity sweep (logistic, MLPs of growing size, random "
        "forest, boosting; 3 seeds) and report its worst case as adversary_auc_max",
    )
    suite: tuple[str, ...] = param(
        CERTIFICATE_SUITE,
        "the certificate's adversaries on every sensitive label, besides the probe above (one seed each)",
        choices=suite_choices,
    )
    bootstrap: int = param(1000, "bootstrap resamples of the test rows behind every certificate interval", ge=100)
    device: str = param(
        "auto",
        "where the MLP probes train: auto (a CUDA GPU when the run's process sees one, else the CPU), cpu, or cuda; "
        "the device used is the run's tag veil.audit_device",
        choices=PROBE_DEVICES,
    )

    def probe_settings(self) -> dict[str, Any]:
        """The `train_classifier` keywords these settings fix (all but seed and standardisation)."""
        return {
            "hidden": self.hidden,
            "epochs": self.epochs,
            "lr": self.lr,
            "batch_size": self.batch_size,
            "device": self.device,
        }


def check_mi_case(cfg: AuditConfig, release_width: int) -> None:
    """Refuse, before training, an MI estimator asked for a release it cannot handle."""
    if cfg.mi != "none":
        from veil.audit.mi import check_release_width

        check_release_width(cfg.mi, release_width)
