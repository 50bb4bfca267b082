"""Audits of released representations: fresh probes (one classifier trainer for all of them), the one audit
step every run goes through (`audit_release`), per-node and live audits of federations, adversary-capacity
sweeps, seed 003's obfuscation audit and MI estimators (by registry).

The names below are imported from their submodule when first asked for (PEP 562), so that the light submodules
are read without loading torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.lazy import lazy_exports

if TYPE_CHECKING:
    from veil.audit.mi import MI_ESTIMATORS, MIEstimate, estimate_mi, get_estimator, register_estimator
    from veil.audit.probes import AuditReport, LabelScore, audit, audit_many, label_tasks
    from veil.audit.settings import AuditConfig, check_mi_case
    from veil.audit.step import AuditOutcome, audit_release
    from veil.audit.train import Classifier, train_classifier, train_classifiers_stacked

__all__ = [
    "MI_ESTIMATORS",
    "AuditConfig",
    "AuditOutcome",
    "AuditReport",
    "Classifier",
    "LabelScore",
    "MIEstimate",
    "audit",
    "audit_many",
    "audit_release",
    "check_mi_case",
    "estimate_mi",
    "get_estimator",
    "label_tasks",
    "register_estimator",
    "train_classifier",
    "train_classifiers_stacked",
]

_SUBMODULE = {
    "MI_ESTIMATORS": "mi",
    "MIEstimate": "mi",
    "estimate_mi": "mi",
    "get_estimator": "mi",
    "register_estimator": "mi",
    "AuditConfig": "settings",
    "AuditReport": "probes",
    "LabelScore": "probes",
    "audit": "probes",
    "audit_many": "probes",
    "label_tasks": "probes",
    "AuditOutcome": "step",
    "audit_release": "step",
    "check_mi_case": "settings",
    "Classifier": "train",
    "train_classifier": "train",
    "train_classifiers_stacked": "train",
}
"""Each name of `__all__` -> the submodule that defines it."""

__getattr__ = lazy_exports(__name__, _SUBMODULE)
