"""The fresh-probe audit on representations whose leakage is known."""
import numpy as np

from veil.audit import AuditConfig, audit
from veil.audit.probes import auc_score
from veil.datasets.base import Split

CFG = AuditConfig(epochs=15, hidden=(32,))


def split(n, seed):
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 2, n)
    s = rng.integers(0, 3, n)
    return Split(np.zeros((n, 1), np.float32), {"u": u}, {"s": s})


def test_a_copy_of_the_label_leaks_fully_and_noise_leaks_nothing():
    tr, te = split(1500, 0), split(600, 1)
    z = lambda sp, seed: np.stack([sp.utility["u"] + 0.05 * np.random.default_rng(seed).standard_normal(len(sp)),  # noqa: E731
                                   np.random.default_rng(seed + 9).standard_normal(len(sp))], 1)
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
