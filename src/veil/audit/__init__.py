"""Audits of released representations: fresh probes, adversary-capacity sweeps, MI estimates."""
from veil.audit.probes import AuditConfig, AuditReport, LabelScore, audit

__all__ = ["AuditConfig", "AuditReport", "LabelScore", "audit"]
