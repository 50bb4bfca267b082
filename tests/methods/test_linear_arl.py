"""Closed-form linear ARL (Sadeghi, Yu & Boddeti 2019, linear case)."""

from __future__ import annotations

import numpy as np
import pytest

from veil.audit.probes import audit
from veil.audit.settings import AuditConfig
from veil.datasets import load_dataset
from veil.datasets.dataset import Split, TaskSpec
from veil.errors import ConfigError
from veil.methods import create_method, method_config

SMALL_AUDIT = AuditConfig(hidden=(32,), epochs=10)


def tiny() -> tuple[Split, TaskSpec]:
    """x0 = u (+-1), x1 = s (+-1), x2 = u + s, all four (u, s) combinations twice: balanced, independent."""
    us = np.array([(u, s) for u in (0, 1) for s in (0, 1)] * 2)
    u, s = us[:, 0], us[:, 1]
    pu, ps = 2.0 * u - 1, 2.0 * s - 1
    x = np.stack([pu, ps, pu + ps], axis=1).astype(np.float32)
    return Split(x, {"u": u}, {"s": s}), TaskSpec(3, {"u": 2}, {"s": 2})


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.9])
def test_hand_checkable_case(lam: float) -> None:
    """The centred data span {x0, x1} (x2 = x0 + x1). In that span, with orthonormal basis
    e_u = x0/||x0||, e_s = x1/||x1||, B = diag(-(1-lam)*||Yc||^2, lam*||Sc||^2) (Yc, Sc centred one-hot,
    ||Yc||_F^2 = n/2 = 4): one negative eigenvalue, along u. So z0 = +-x0 / std(x0) = +-(2u - 1)
    and z1 = 0, whatever the weights on the redundant x2 column."""
    train, task = tiny()
    m = create_method("linear-arl", {"lambda_arl": lam, "d_z": 2}, task)
    m.fit(train)
    assert m.kept == 1
    np.testing.assert_allclose(np.sort(m.eigenvalues)[[0, -1]], [-(1 - lam) * 4, lam * 4], atol=1e-9)
    z = m.encode(train.x)
    np.testing.assert_allclose(np.abs(z[:, 0]), 1.0, atol=1e-5)
    signed = z[:, 0] * (2 * train.utility["u"] - 1)  # z0 = +-(2u - 1) with one sign for every row
    np.testing.assert_allclose(signed, signed[0], atol=1e-5)
    np.testing.assert_allclose(z[:, 1], 0.0, atol=1e-6)


def test_lambda_one_keeps_nothing_and_negative_only_false_keeps_d_z() -> None:
    train, task = tiny()
    m = create_method("linear-arl", {"lambda_arl": 1.0, "d_z": 2}, task)
    m.fit(train)
    assert m.kept == 0 and np.all(m.encode(train.x) == 0)
    m = create_method("linear-arl", {"lambda_arl": 1.0, "d_z": 2, "negative_only": False}, task)
    m.fit(train)
    assert m.kept == 2
    from veil.methods.linear_arl import LinearARL

    assert "negative_only" in LinearARL.deviations(m.config)


def test_lambda_near_one_hides_s_and_keeps_u() -> None:
    """gaussian-correlated with rho = 0: u and s live in different directions. With lambda = 0.95 the
    fresh adversary is near chance (measured 0.49; bound 0.57) while utility stays high (measured
    0.93; bound 0.85); PCA of the same width leaks s (measured 0.84; we require >= 0.7)."""
    ds = load_dataset("gaussian-correlated", {"n": 2000, "rho": 0.0, "seed": 0}, use_cache=False)
    out = {}
    for name, values in (("linear-arl", {"lambda_arl": 0.95, "d_z": 4}), ("pca", {"d_z": 4})):
        m = create_method(name, values, ds.task())
        m.fit(ds.train)
        out[name] = audit(
            m.encode(ds.train.x), ds.train, m.encode(ds.test.x), ds.test, ds.num_classes, SMALL_AUDIT
        ).metrics()
    assert out["linear-arl"]["adversary_acc"] <= 0.57, out
    assert out["linear-arl"]["utility_acc"] >= 0.85, out
    assert out["pca"]["adversary_acc"] >= 0.7, out


@pytest.mark.parametrize("lam", [-0.1, 1.5, "nan"])
def test_lambda_outside_unit_interval_is_refused(lam) -> None:
    with pytest.raises(ConfigError):
        method_config("linear-arl", {"lambda_arl": lam})
