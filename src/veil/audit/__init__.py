"""Audits of released representations: fresh probes (one classifier trainer for all of them), the one audit
step every run goes through (`audit_release`), per-node and live audits of federations, adversary-capacity
sweeps, seed 003's obfuscation audit and MI estimators (by registry)."""

from veil.audit.mi import MI_ESTIMATORS, MIEstimate, estimate_mi, get_estimator, register_estimator
from veil.audit.probes import AuditConfig, AuditReport, LabelScore, audit, audit_many, label_tasks
from veil.audit.release import AuditOutcome, audit_release, check_mi_case
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
