"""Adversary-capacity sweep: per-probe scores, the worst case over probes, seed mean and std."""

from __future__ import annotations

import numpy as np
import pytest

from veil.audit.capacity import PROBES, CapacityConfig, capacity_audit
from veil.config import build
from veil.datasets import load_dataset
from veil.errors import ConfigError

FAST = CapacityConfig(
    probes=("logistic", "mlp-32", "mlp-256x4", "random-forest", "hist-gradient-boosting"), repeats=2, epochs=5, trees=20
)


@pytest.fixture(scope="module")
def ds():
    return load_dataset("gaussian-correlated", {"n": 600, "rho": 0.5, "seed": 0}, use_cache=False)


def test_worst_case_dominates_every_probe(ds) -> None:
    report = capacity_audit(ds.train.x, ds.train, ds.test.x, ds.test, ds.num_classes, FAST)
    m = report.metrics()
    adv = report.by_role("adversary")
    assert {s.probe for s in adv} == set(FAST.probes)
    for s in adv:
        assert m["adversary_auc_max"] >= s.auc - 1e-12
        assert all(m["adversary_auc_max"] >= a for a in s.aucs)
        assert all(m["adversary_acc_max"] >= a for a in s.accuracies)
        assert m[f"capacity/adversary_auc/s/{s.probe}"] == s.auc
        assert len(s.aucs) == (1 if s.probe in ("logistic", "hist-gradient-boosting") else FAST.repeats)
    worst = report.worst()
    assert m["adversary_auc_mean"] == max(s.auc for s in adv) == worst.auc
    assert m["adversary_auc_std"] == pytest.approx(np.std(worst.aucs))
    assert m["adversary_auc_mean"] <= m["adversary_auc_max"]
    # Raw features leak s (rho = 0.5 plus its own directions) and predict u.
    assert m["adversary_auc_max"] > 0.8 and m["utility_auc_max"] > 0.8
    assert m["privacy_gap_max"] == pytest.approx(max(g for s in adv for g in s.gaps), abs=1e-12)
    for s in adv:  # s is binary: each seed's gap is |AUC - 0.5|
        assert s.gaps == pytest.approx(tuple(abs(a - 0.5) for a in s.aucs), abs=1e-12)
    assert report.to_dict()["worst"] == {"label": worst.label, "probe": worst.probe}
    assert "| s | adversary |" in report.to_markdown()


def test_pure_noise_release_is_near_chance_for_every_probe(ds) -> None:
    rng = np.random.default_rng(0)
    z_tr, z_te = rng.standard_normal((len(ds.train), 3)), rng.standard_normal((len(ds.test), 3))
    cfg = CapacityConfig(probes=("logistic", "random-forest"), repeats=2, trees=20)
    m = capacity_audit(z_tr, ds.train, z_te, ds.test, ds.num_classes, cfg).metrics()
    # 150 test rows: AUC s.e. ~0.047 under the null; the max over 3 scores stays below 0.5 + 3 s.e.
    assert m["adversary_auc_max"] < 0.65


def test_unknown_probe_and_bad_repeats_are_refused() -> None:
    with pytest.raises(ConfigError):
        build(CapacityConfig, {"probes": ("logistic", "svm")})
    with pytest.raises(ConfigError):
        build(CapacityConfig, {"repeats": 0})
    assert set(build(CapacityConfig, {}).probes) == set(PROBES)


def test_the_capacity_audit_trains_as_the_runs_audit_does(ds) -> None:
    """The capacity sweep, the certificate and calibration build their MLP probes from one place
    (`CapacityConfig.from_audit`): the audit's batch size, epochs, lr, seed and device, which the sweep records."""
    from veil.audit.probes import AuditReport
    from veil.audit.settings import AuditConfig
    from veil.audit.step import AuditOutcome, extra_audits

    cfg = build(AuditConfig, {"batch_size": 64, "epochs": 2, "lr": 3e-3, "seed": 7, "capacity": True})
    assert CapacityConfig.from_audit(cfg) == CapacityConfig(batch_size=64, epochs=2, lr=3e-3, seed=7, device="auto")
    z_tr, z_te = ds.train.x[:, :4], ds.test.x[:, :4]
    out = AuditOutcome(AuditReport([]), {}, z_tr, z_te)
    extra_audits(cfg, ds, z_tr, z_te, False, out)
    recorded = out.artifacts["audit/capacity.json"]["config"]
    assert (recorded["batch_size"], recorded["epochs"], recorded["lr"], recorded["seed"]) == (64, 2, 3e-3, 7)
