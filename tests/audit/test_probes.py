"""The fresh-probe audit on representations whose leakage is known."""

import numpy as np
import pytest
import torch

from veil.audit import AuditConfig, audit
from veil.audit.mi import MI_ESTIMATORS
from veil.audit.probes import MI_CHOICES, auc_gap, auc_score, probe_metrics
from veil.config import build
from veil.datasets import load_dataset
from veil.datasets.base import Split
from veil.errors import ConfigError

CFG = AuditConfig(epochs=15, hidden=(32,))


def split(n, seed):
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 2, n)
    s = rng.integers(0, 3, n)
    return Split(np.zeros((n, 1), np.float32), {"u": u}, {"s": s})


def test_a_copy_of_the_label_leaks_fully_and_noise_leaks_nothing():
    tr, te = split(1500, 0), split(600, 1)
    z = lambda sp, seed: np.stack(
        [
            sp.utility["u"] + 0.05 * np.random.default_rng(seed).standard_normal(len(sp)),  # noqa: E731
            np.random.default_rng(seed + 9).standard_normal(len(sp)),
        ],
        1,
    )
    m = audit(z(tr, 0), tr, z(te, 1), te, {"u": 2, "s": 3}, CFG).metrics()
    assert m["utility_acc"] > 0.97 and m["utility_auc"] > 0.99
    assert abs(m["adversary_auc"] - 0.5) < 0.06 and m["privacy_gap"] < 0.06
    assert 0.3 < m["majority/s"] < 0.4
    assert set(m) >= {"utility_acc/u", "adversary_acc/s", "adversary_auc/s", "privacy_gap/s"}


def test_worst_case_over_sensitive_labels_is_the_primary_metric():
    tr, te = split(800, 2), split(400, 3)
    tr = Split(tr.x, tr.utility, {"hidden": tr.sensitive["s"], "leaked": tr.utility["u"]})
    te = Split(te.x, te.utility, {"hidden": te.sensitive["s"], "leaked": te.utility["u"]})
    z_tr, z_te = tr.utility["u"][:, None].astype(float), te.utility["u"][:, None].astype(float)
    m = audit(z_tr, tr, z_te, te, {"u": 2, "hidden": 3, "leaked": 2}, CFG).metrics()
    assert m["adversary_auc"] == max(m["adversary_auc/hidden"], m["adversary_auc/leaked"]) > 0.99


def test_multiclass_auc_is_one_vs_rest_macro():
    y = np.array([0, 1, 2, 0, 1, 2])
    perfect = np.eye(3)[y]
    assert auc_score(y, perfect, 3) == 1.0
    assert auc_score(y, np.full((6, 3), 1 / 3), 3) == 0.5


def test_an_inverted_binary_probe_leaks_fully():
    y = np.array([0, 0, 1, 1])
    p1 = np.array([0.9, 0.8, 0.2, 0.1])  # ranks every class-1 row below every class-0 row
    proba = np.column_stack([1 - p1, p1])
    assert auc_score(y, proba, 2) == 0.0
    assert auc_gap(y, proba, 2) == 0.5
    assert auc_gap(y, proba[:, ::-1], 2) == 0.5  # the same probe the right way round
    assert auc_gap(y, np.full((4, 2), 0.5), 2) == 0.0
    # a partly inverted probe (1 of 4 pairs ranked right: AUC 0.25) is as far from chance as its mirror (0.75)
    p1 = np.array([0.9, 0.3, 0.4, 0.2])
    partly = np.column_stack([1 - p1, p1])
    assert auc_score(y, partly, 2) == pytest.approx(0.25, abs=1e-12)
    assert auc_gap(y, partly, 2) == pytest.approx(0.25, abs=1e-12)


def test_multiclass_gap_folds_each_class_so_an_inverted_class_cannot_cancel():
    y = np.array([0, 0, 1, 1, 2, 2])
    proba = np.array(
        [
            [0.8, 0.1, 0.1],
            [0.8, 0.1, 0.1],
            [0.1, 0.0, 0.9],  # class 1 gets the LOWEST P(1) of all rows: its one-vs-rest AUC is 0
            [0.1, 0.0, 0.9],
            [0.1, 0.45, 0.45],  # class 2's P(2) sits between the others: AUC 0.5
            [0.1, 0.45, 0.45],
        ]
    )
    # per class AUC 1.0, 0.0, 0.5: the macro AUC is at chance although classes 0 and 1 are fully exposed
    assert auc_score(y, proba, 3) == 0.5
    assert auc_gap(y, proba, 3) == pytest.approx((0.5 + 0.5 + 0.0) / 3, abs=1e-12)
    m = probe_metrics(y, proba, 3)
    assert (m.accuracy, m.auc, m.gap) == pytest.approx((2 / 6, 0.5, 1 / 3), abs=1e-12)
    # a class absent from y is skipped, as in auc_score: classes 0 and 1 only, AUC 1.0 and 0.0
    keep = y != 2
    assert auc_gap(y[keep], proba[keep], 3) == pytest.approx(0.5, abs=1e-12)
    assert np.isnan(auc_gap(np.zeros(3, int), proba[:3], 3))


# Recorded with the audit as it was BEFORE the probe trainers were unified into
# veil.audit.train.train_classifier (commit 934d9ff); the refactor must reproduce them exactly.
RECORDED_AUDIT = {
    "adversary_acc": 0.9266666666666666,
    "adversary_acc/s": 0.9266666666666666,
    "adversary_auc": 0.9823772702751303,
    "adversary_auc/s": 0.9823772702751303,
    "majority/s": 0.5533333333333333,
    "majority/u": 0.5133333333333333,
    "privacy_gap": 0.48237727027513033,
    "privacy_gap/s": 0.48237727027513033,
    "utility_acc": 0.9133333333333333,
    "utility_acc/u": 0.9133333333333333,
    "utility_auc": 0.9747375911759473,
    "utility_auc/u": 0.9747375911759473,
}


def test_audit_reproduces_the_metrics_recorded_before_the_trainer_refactor():
    ds = load_dataset("gaussian-correlated", {"n": 600, "seed": 3}, use_cache=False)
    m = audit(ds.train.x, ds.train, ds.test.x, ds.test, ds.num_classes, AuditConfig(epochs=5, seed=3)).metrics()
    assert set(m) == set(RECORDED_AUDIT)
    for key, value in RECORDED_AUDIT.items():
        assert m[key] == pytest.approx(value, abs=1e-9, rel=0), key


def test_audit_leaves_torch_global_rng_alone():
    tr, te = split(200, 4), split(100, 5)
    before = torch.get_rng_state().clone()
    audit(
        tr.utility["u"][:, None].astype(float),
        tr,
        te.utility["u"][:, None].astype(float),
        te,
        {"u": 2, "s": 3},
        AuditConfig(epochs=1, hidden=(8,)),
    )
    assert torch.equal(before, torch.get_rng_state())


def test_mi_choices_come_from_the_estimator_registry():
    assert MI_CHOICES == ("none", *MI_ESTIMATORS)
    assert build(AuditConfig, {"mi": "ksg"}).mi == "ksg"
    with pytest.raises(ConfigError) as e:
        build(AuditConfig, {"mi": "bogus"}, where="audit")
    assert e.value.field == "mi" and all(name in str(e.value) for name in MI_CHOICES)
