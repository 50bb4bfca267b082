"""The fresh-probe audit on representations whose leakage is known."""

import numpy as np
import pytest
import torch

from veil.audit import AuditConfig, audit
from veil.audit.mi import MI_ESTIMATORS
from veil.audit.probes import auc_gap, auc_score, log_loss, probe_metrics, probe_metrics_many
from veil.audit.settings import mi_choices
from veil.config import build
from veil.datasets import load_dataset
from veil.datasets.dataset import Split
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
    # the log-loss came later (test_log_loss_metrics_match_sklearn pins it)
    assert set(m) == set(RECORDED_AUDIT) | {"logloss/u", "logloss/s", "utility_logloss", "adversary_logloss"}
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
    assert mi_choices() == ("none", *MI_ESTIMATORS)
    assert build(AuditConfig, {"mi": "ksg"}).mi == "ksg"
    with pytest.raises(ConfigError) as e:
        build(AuditConfig, {"mi": "bogus"}, where="audit")
    assert e.value.field == "mi" and all(name in str(e.value) for name in mi_choices())


def test_log_loss_equals_sklearn_with_clipping() -> None:
    """Against sklearn.metrics.log_loss on the same float64 probabilities, within 1e-9: random rows, rows with
    exact 0 and 1 (clipped to [eps, 1 - eps], eps of the dtype), and a label absent from y."""
    from sklearn.metrics import log_loss as sk_log_loss

    rng = np.random.default_rng(0)
    for n_classes in (2, 3, 5):
        y = rng.integers(0, n_classes, 400)
        proba = rng.dirichlet(np.ones(n_classes) * 0.3, 400)
        proba[:20] = np.eye(n_classes)[(y[:20] + 1) % n_classes]  # confidently wrong: p(y) = 0
        proba[20:40] = np.eye(n_classes)[y[20:40]]  # confidently right: p(y) = 1
        want = sk_log_loss(y, proba, labels=list(range(n_classes)))
        assert log_loss(y, proba) == pytest.approx(want, abs=1e-9, rel=0)
        keep = y != 0
        want = sk_log_loss(y[keep], proba[keep], labels=list(range(n_classes)))
        assert log_loss(y[keep], proba[keep]) == pytest.approx(want, abs=1e-9, rel=0)
    assert np.isnan(log_loss(np.zeros(0, int), np.zeros((0, 2))))


def test_log_loss_metrics_match_sklearn():
    """Every probe's logloss/<label> is sklearn's log_loss of its own test probabilities (float32, as the probe
    gives them; sklearn sums those in float32, hence 1e-6), utility_logloss the mean over utility labels,
    adversary_logloss the MIN over sensitive labels; the report's table shows it."""
    from sklearn.metrics import log_loss as sk_log_loss

    from veil.audit.probes import label_tasks, prepare
    from veil.audit.train import train_classifier

    ds = load_dataset("gaussian-correlated", {"n": 600, "seed": 3}, use_cache=False)
    x_tr, x_te = ds.train.x, ds.test.x
    classes = {**ds.num_classes, "s2": 2}
    train = Split(x_tr, ds.train.utility, {**ds.train.sensitive, "s2": (x_tr[:, 0] > 0).astype(int)})
    test = Split(x_te, ds.test.utility, {**ds.test.sensitive, "s2": (x_te[:, 0] > 0).astype(int)})
    cfg = AuditConfig(epochs=5, seed=3)
    report = audit(x_tr, train, x_te, test, classes, cfg)
    m = report.metrics()
    z_tr, z_te = prepare(x_tr, x_te, cfg.standardize)
    for t in label_tasks(train, test, classes):
        probe = train_classifier(z_tr, t.y_train, t.n_classes, seed=cfg.seed + t.offset, **cfg.probe_settings())
        proba = probe.predict_proba(z_te)
        assert proba.dtype == np.float32
        want = sk_log_loss(t.y_test, proba, labels=list(range(t.n_classes)))
        assert m[f"logloss/{t.name}"] == pytest.approx(want, abs=1e-6, rel=0), t.name
        assert m[f"logloss/{t.name}"] == pytest.approx(log_loss(t.y_test, proba.astype(np.float64)), abs=1e-6)
    assert m["utility_logloss"] == m["logloss/u"]
    assert m["adversary_logloss"] == min(m["logloss/s"], m["logloss/s2"]) < max(m["logloss/s"], m["logloss/s2"])
    table = report.to_markdown().splitlines()
    assert table[0].endswith("| log-loss |") and table[2].endswith(f"| {m['logloss/u']:.4f} |")


def test_a_large_train_split_is_probed_on_a_seeded_sample_of_max_rows():
    """Past `audit.max_rows` the probes train on exactly the seeded sample `probe_rows` names (the same scores as
    auditing that sample with no cap), every test row is scored, and the report says so; at or under it, nothing
    changes."""
    import dataclasses

    from veil.audit.probes import probe_rows

    tr, te = split(2400, 4), split(600, 5)
    rng = np.random.default_rng(6)
    z_tr = np.stack([tr.utility["u"] + rng.standard_normal(len(tr)), rng.standard_normal(len(tr))], 1)
    z_te = np.stack([te.utility["u"] + rng.standard_normal(len(te)), rng.standard_normal(len(te))], 1)
    capped = dataclasses.replace(CFG, max_rows=1000)
    keep = probe_rows(len(tr), capped)
    assert keep is not None and len(keep) == 1000 and len(np.unique(keep)) == 1000
    got = audit(z_tr, tr, z_te, te, {"u": 2, "s": 3}, capped)
    want = audit(z_tr[keep], tr.take(keep), z_te, te, {"u": 2, "s": 3}, dataclasses.replace(CFG, max_rows=0))
    assert got.metrics() == want.metrics()
    assert got.warnings == [
        "the fresh probes trained on a random 1,000 of the 2,400 training rows (audit.max_rows); "
        "every test row is scored"
    ]
    assert probe_rows(len(tr), dataclasses.replace(CFG, max_rows=2400)) is None
    assert probe_rows(len(tr), dataclasses.replace(CFG, max_rows=0)) is None
    assert not audit(z_tr, tr, z_te, te, {"u": 2, "s": 3}, CFG).warnings  # 2,400 rows: under the default cap


@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_many_members_score_as_each_one_alone(n_classes: int) -> None:
    """`probe_metrics_many` equals `probe_metrics` member by member (within 1e-12) over 60 members of 0-40 rows:
    tied scores (probabilities rounded to 0.1), members holding one class, classes missing, an empty member."""
    rng = np.random.default_rng(n_classes)
    ys, probas = [], []
    for i in range(60):
        n = 0 if i == 7 else int(rng.integers(1, 41))
        present = rng.choice(n_classes, size=int(rng.integers(1, n_classes + 1)), replace=False)
        ys.append(rng.choice(present, n))
        p = rng.dirichlet(np.ones(n_classes), n).astype(np.float32)
        probas.append(np.round(p, 1) if i % 2 else p)
    many = probe_metrics_many(ys, probas, n_classes)
    assert len(many) == 60
    for y, p, got in zip(ys, probas, many):
        if len(y) == 0:
            assert all(np.isnan(v) for v in got)
            continue
        want = probe_metrics(y, p, n_classes)
        for a, b in zip(got, want):
            assert (np.isnan(a) and np.isnan(b)) or abs(a - b) < 1e-12, (got, want)
    assert sum(not np.isnan(m.auc) for m in many) >= 30  # most members have an AUC to compare
