"""The one probe trainer and the helpers the audits share."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from veil.audit.train import Standardizer, sklearn_proba, torch_threads, train_classifier
from veil.errors import ConfigError

SETTINGS = {"hidden": (16,), "epochs": 3, "lr": 1e-2, "batch_size": 32}


def data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return (rng.standard_normal((n, 4)) + 2.0 * np.eye(3, 4)[y]).astype(np.float32), y


def test_seeded_reproducible_and_leaves_global_rng_alone() -> None:
    z, y = data(300, 0)
    before = torch.get_rng_state().clone()
    a = train_classifier(z, y, 3, seed=5, **SETTINGS).predict_proba(z)
    b = train_classifier(z, y, 3, seed=5, **SETTINGS).predict_proba(z)
    c = train_classifier(z, y, 3, seed=6, **SETTINGS).predict_proba(z)
    assert torch.equal(before, torch.get_rng_state())
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.shape == (300, 3) and a.dtype == np.float32
    np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-5)
    assert (a.argmax(1) == y).mean() > 0.6


def test_standardize_is_fitted_on_train_and_applied_to_what_it_predicts() -> None:
    z, y = data(300, 1)
    shift, scale = np.array([5.0, -3.0, 0.0, 1.0], np.float32), np.float32(10.0)
    plain = train_classifier(z, y, 3, seed=2, standardize=True, **SETTINGS)
    moved = train_classifier(z * scale + shift, y, 3, seed=2, standardize=True, **SETTINGS)
    np.testing.assert_allclose(plain.predict_proba(z), moved.predict_proba(z * scale + shift), atol=1e-4)
    assert moved.scaler is not None and plain.scaler is not None
    assert train_classifier(z, y, 3, seed=2, **SETTINGS).scaler is None


def test_drop_last_changes_the_number_of_steps_only_when_rows_do_not_divide() -> None:
    z, y = data(96, 2)  # 3 full batches of 32
    a = train_classifier(z, y, 3, seed=1, **SETTINGS).predict_proba(z)
    b = train_classifier(z, y, 3, seed=1, drop_last=False, **SETTINGS).predict_proba(z)
    np.testing.assert_array_equal(a, b)
    z, y = data(100, 2)
    a = train_classifier(z, y, 3, seed=1, **SETTINGS).predict_proba(z)
    b = train_classifier(z, y, 3, seed=1, drop_last=False, **SETTINGS).predict_proba(z)
    assert not np.array_equal(a, b)


def test_log_proba_matches_proba() -> None:
    z, y = data(100, 3)
    clf = train_classifier(z, y, 3, seed=0, **SETTINGS)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(z)), clf.predict_proba(z), rtol=1e-5, atol=1e-6)
    assert clf.predict_log_proba(z).dtype == np.float64


def test_standardizer_keeps_dtype_and_leaves_constant_columns_unscaled() -> None:
    a = np.array([[1.0, 2.0], [3.0, 2.0], [5.0, 2.0]], np.float32)
    s = Standardizer.fit(a)
    out = s(a)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[:, 0], [-1.2247449, 0.0, 1.2247449], rtol=1e-6)
    np.testing.assert_array_equal(out[:, 1], 0.0)
    np.testing.assert_array_equal(Standardizer.fit_transform(a), out)


def test_sklearn_proba_pads_classes_absent_from_training() -> None:
    from sklearn.linear_model import LogisticRegression

    z, y = data(200, 4)
    keep = y != 1
    model = LogisticRegression(max_iter=500).fit(z[keep], y[keep])
    proba = sklearn_proba(model, z, 3)
    assert proba.shape == (200, 3)
    np.testing.assert_array_equal(proba[:, 1], 0.0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_torch_threads_restores_and_refuses_bad_counts() -> None:
    old = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == old
    with pytest.raises(ConfigError):
        with torch_threads(0):
            pass
