"""One conformance test over every registered probe family (as Optuna tests all its samplers): class
probabilities of the right shape that sum to 1, a clearly separable label found, and a family that says its fit
does not depend on the seed gives the same answer for two seeds."""

from __future__ import annotations

import numpy as np
import pytest

from veil.audit.families import PROBE_FAMILIES, ProbeBudget, get_probe, register_probe
from veil.audit.probes import roc_auc
from veil.errors import UnknownNameError

BUDGET = ProbeBudget(epochs=20, lr=1e-2, batch_size=64, trees=20)


def blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Three classes, class c centred at 3 * c on the first column: separable by every family."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    z = rng.normal(size=(n, 4))
    z[:, 0] += 3.0 * y
    return z.astype(np.float32), y


@pytest.mark.parametrize("name", sorted(PROBE_FAMILIES))
def test_every_probe_family_conforms(name):
    z_tr, y_tr = blobs(300, 0)
    z_te, y_te = blobs(200, 1)
    family = get_probe(name)
    proba = family.fit_predict(z_tr, y_tr, z_te, 3, seed=0, budget=BUDGET)
    assert proba.shape == (200, 3) and np.allclose(proba.sum(axis=1), 1.0, atol=1e-5), name
    # class 0 against the rest: far apart (3 standard deviations), so every family scores near 1
    assert roc_auc(y_te == 0, proba[:, 0]) > 0.95, name
    if not family.seeded:
        again = family.fit_predict(z_tr, y_tr, z_te, 3, seed=7, budget=BUDGET)
        assert np.allclose(proba, again), f"{name} says its fit does not depend on the seed"


def test_a_name_is_registered_once_and_unknown_names_are_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="registered twice"):
        register_probe("logistic", "again")(PROBE_FAMILIES["logistic"].fit_predict)
    with pytest.raises(UnknownNameError, match="did you mean 'logistic'") as e:
        get_probe("logistc")
    assert "hist-gradient-boosting" in str(e.value)
