"""The foundation's quality claims, with the fresh-probe audit as the judge (never the training adversary)."""

import pytest

from veil.audit import AuditConfig, audit
from veil.datasets import load_dataset
from veil.methods import create_method

AUDIT = AuditConfig(epochs=20)
# GPP settings for the small synthetic runs: the paper's objective with a wider lr and k=5 so the
# minimax game settles in 15 epochs on 2,250 training rows (measured at release_seed 0: adversary AUC
# 0.61 / 0.78 / 0.78).
GPP_FAST = {
    "epochs": 15,
    "d_z": 8,
    "lr": 1e-3,
    "k": 5,
    "encoder_hidden": (64, 64),
    "head_hidden": (32,),
    "privacy_loss": "neg-ce",  # the paper's objective (the default is now 'uniform')
    "release_seed": 0,  # a reproducible released draw pins the measured AUCs
}
TREND_TOL = 0.03  # adversarial training is noisy: a later beta may sit this much below an earlier one


def fit_and_audit(method: str, params: dict, ds) -> dict:
    m = create_method(method, params, ds.task())
    m.fit(ds.train)
    return audit(m.encode(ds.train.x), ds.train, m.encode(ds.test.x), ds.test, ds.num_classes, AUDIT).metrics()


@pytest.fixture(scope="module")
def quadrant():
    return load_dataset("gaussian-quadrant", {"n": 2000})


# The paper's quadrant set-up uses logistic-regression allies/adversaries (head_hidden=()). With eq. 4's
# -CE term the game oscillates (fresh adversary 0.55-0.89 over seeds, measured); the bounded 'uniform'
# privacy term, a named option recorded as a deviation, settles at the majority rate on every seed.
EIGAN_QUADRANT = {"epochs": 40, "d_z": 2, "head_hidden": (), "privacy_loss": "uniform"}


def test_eigan_hides_the_adversary_on_quadrant(quadrant):
    r = fit_and_audit("eigan", EIGAN_QUADRANT, quadrant)
    assert r["adversary_acc"] <= 0.6, r
    assert r["utility_acc"] >= 0.9, r


def test_autoencoder_leaves_the_adversary_on_quadrant(quadrant):
    r = fit_and_audit("autoencoder", {"epochs": 20, "d_z": 2}, quadrant)
    assert r["adversary_acc"] >= 0.9, r


@pytest.fixture(scope="module")
def correlated():
    return load_dataset("gaussian-correlated", {"n": 3000, "rho": 0.5})


def test_gpp_leakage_rises_with_beta_and_stays_below_autoencoder(correlated):
    ae = fit_and_audit("autoencoder", {"epochs": 15, "d_z": 8}, correlated)
    aucs = [fit_and_audit("gpp", {**GPP_FAST, "beta": b}, correlated)["adversary_auc"] for b in (0.1, 1.0, 8.0)]
    assert aucs[1] >= aucs[0] - TREND_TOL and aucs[2] >= aucs[1] - TREND_TOL, aucs
    assert aucs[2] - aucs[0] >= 0.1, aucs
    assert max(aucs) <= ae["adversary_auc"] - 0.1, (aucs, ae)


def test_gpp_hides_independent_s_at_little_utility_cost():
    """At every seed, with the default bounded privacy term: eq. 4's -CE term oscillates on these runs (adversary
    AUC 0.70 at seed 0 on one machine, 0.53 at seeds 1-3), so one seed of it would test the machine's rounding."""
    ds = load_dataset("gaussian-correlated", {"n": 3000, "rho": 0.0})
    ae = fit_and_audit("autoencoder", {"epochs": 15, "d_z": 8}, ds)
    runs = [fit_and_audit("gpp", {**GPP_FAST, "beta": 1.0, "privacy_loss": "uniform", "seed": s}, ds) for s in range(3)]
    seen = [(round(r["adversary_auc"], 3), round(r["utility_auc"], 3)) for r in runs]  # measured: 0.53-0.55, 0.97-0.98
    assert all(r["adversary_auc"] <= 0.6 for r in runs), (seen, ae["utility_auc"])
    assert all(r["utility_auc"] >= ae["utility_auc"] - 0.03 for r in runs), (seen, ae["utility_auc"])
