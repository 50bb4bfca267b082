"""The audit step of every run: release z for the train and test rows, score it with fresh probes, and add
the audits the run asks for (MI estimates, the adversary-capacity sweep, seed 003's obfuscation audit for
records released in the input's format, and for a federation the per-node audit). It returns metrics, the
artifacts to record and the tag `veil.release_reproducible` (a set `release_seed` also puts a warning at the
top of the report); it logs nothing itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from veil.audit.probes import AuditReport, audit, audit_many, label_tasks
from veil.audit.settings import AuditConfig
from veil.audit.train import probe_device
from veil.datasets.dataset import Dataset
from veil.methods.configs.deviations import REPRODUCIBLE_RELEASE
from veil.methods.federated.simulation import FederationPlan
from veil.methods.method import Method


@dataclass
class AuditOutcome:
    """What the audit step found: the fresh-probe report, every metric, and the files to record."""

    report: AuditReport
    metrics: dict[str, float]
    z_train: np.ndarray
    z_test: np.ndarray
    artifacts: dict[str, Any] = field(default_factory=dict)
    """Artifact path -> JSON-able object (or str for text files)."""
    tags: dict[str, str] = field(default_factory=dict)
    per_node: list[dict[str, Any]] = field(default_factory=list)
    data: Dataset | None = None
    """The rows z_train / z_test cover when they are not the whole dataset's (a D-GPP client that released
    nothing); None: every row."""

    def covered(self, ds: Dataset) -> Dataset:
        """The dataset whose rows the released z cover."""
        return self.data if self.data is not None else ds


def extra_audits(
    cfg: AuditConfig,
    ds: Dataset,
    z_train: np.ndarray,
    z_test: np.ndarray,
    releases_input_format: bool,
    out: AuditOutcome,
) -> None:
    """The stronger audits a run asks for, added to `out`: MI estimates, the adversary-capacity sweep, and
    seed 003's weak/strong adversaries and utility provider for methods that release records in x's format."""
    if cfg.mi != "none":
        from veil.audit.mi import estimate_mi

        estimates = {}
        for _, name, _, y_tr, y_te, offset in label_tasks(ds.train, ds.test, ds.num_classes):
            est = estimate_mi(z_train, y_tr, z_test, y_te, cfg.mi, seed=cfg.seed + offset)
            out.metrics[f"mi/{cfg.mi}/{name}"] = est.value
            estimates[name] = est.as_dict()
        out.artifacts["audit/mi.json"] = estimates  # names the estimator behind every figure
        out.tags["veil.mi_estimator"] = cfg.mi
    if cfg.capacity:
        from veil.audit.capacity import CapacityConfig, capacity_audit

        cap = capacity_audit(z_train, ds.train, z_test, ds.test, ds.num_classes, CapacityConfig.from_audit(cfg))
        out.metrics.update(cap.metrics())
        out.artifacts["audit/capacity.json"] = cap.to_dict()
    if releases_input_format:
        from veil.audit.obfuscation import obfuscation_audit

        obf = obfuscation_audit(ds.train.x, z_train, ds.train, ds.test.x, z_test, ds.test, ds.num_classes, cfg)
        out.metrics.update(obf.metrics())
        out.artifacts["audit/obfuscation.json"] = obf.to_dict()


def tag_release(method: Method, out: AuditOutcome, cfg: AuditConfig) -> None:
    """The release's tags on `out`: the device the probes trained on (`veil.audit_device`) and whether the release
    noise is reproducible from the run's params (`veil.release_reproducible`, with a warning in the report when
    it is)."""
    out.tags["veil.audit_device"] = str(probe_device(cfg.device))
    release_seed = method.config.release_seed
    out.tags["veil.release_reproducible"] = "true" if release_seed is not None else "false"
    if release_seed is not None:
        out.report.warnings.append(f"release_seed={release_seed} is set: {REPRODUCIBLE_RELEASE}")


def audit_release(
    method: Method, ds: Dataset, cfg: AuditConfig, *, federation: FederationPlan | None = None
) -> AuditOutcome:
    """Release, audit and (for a federation) audit each node: the one audit every run goes through."""
    if federation is None:
        z_train, z_test = method.encode(ds.train.x), method.encode(ds.test.x)
        report = audit(z_train, ds.train, z_test, ds.test, ds.num_classes, cfg)
        per_node: list[dict[str, Any]] = []
    else:
        from veil.audit.nodes import audit_final, released_data

        report, per_node, z_train, z_test = audit_final(federation, ds, method, cfg)  # type: ignore[arg-type]
        report.warnings.extend(federation.warnings)
    out = AuditOutcome(report, report.metrics(), z_train, z_test, per_node=per_node)
    if federation is not None:
        covered = released_data(ds, method)  # type: ignore[arg-type]
        out.data = None if covered is ds else covered
    tag_release(method, out, cfg)
    extra_audits(cfg, out.covered(ds), z_train, z_test, method.releases_input_format, out)
    if per_node:
        from veil.audit.nodes import per_node_csv, per_node_summary

        out.metrics.update(per_node_summary(per_node))
        out.artifacts["audit/per_node.csv"] = per_node_csv(per_node)
        out.artifacts["audit/per_node.json"] = per_node
    return out


def stacked_audit(
    released: Sequence[tuple[np.ndarray, np.ndarray]], ds: Dataset, cfg: AuditConfig
) -> list[AuditReport]:
    """The fresh-probe audit of several releases (z_train, z_test) of `ds`, every probe trained as one stacked model
    (`audit_many`)."""
    n = len(released)
    return audit_many(
        [a for a, _ in released], [ds.train] * n, [b for _, b in released], [ds.test] * n, ds.num_classes, cfg
    )


def audit_releases(methods: Sequence[Method], ds: Dataset, cfgs: Sequence[AuditConfig]) -> list[AuditOutcome]:
    """`[audit_release(m, ds, c) ...]` for centralized methods trained together (a population), with every
    member's fresh probes trained as stacked models (`audit_many`) when the members share one audit config."""
    if len(methods) != len(cfgs):
        raise ValueError(f"audit_releases: {len(methods)} methods and {len(cfgs)} audit configs")
    if len(methods) < 2 or any(c != cfgs[0] for c in cfgs):
        return [audit_release(m, ds, c) for m, c in zip(methods, cfgs)]
    released = [(m.encode(ds.train.x), m.encode(ds.test.x)) for m in methods]
    reports = stacked_audit(released, ds, cfgs[0])
    outs = []
    for m, (z_train, z_test), report in zip(methods, released, reports):
        out = AuditOutcome(report, report.metrics(), z_train, z_test)
        tag_release(m, out, cfgs[0])
        extra_audits(cfgs[0], ds, z_train, z_test, m.releases_input_format, out)
        outs.append(out)
    return outs
