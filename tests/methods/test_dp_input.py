"""dp-input, EIGAN's DP baseline (seed 000): z = clamp(x, -c, c) + Laplace(0, 2*c*d_in/eps), calibrated by the
shared `LaplaceMechanism`, reproducible at a release_seed, and hiding the sensitive label at a small eps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veil.audit import AuditConfig, audit
from veil.datasets import load_dataset
from veil.errors import ConfigError
from veil.methods import create_method, method_config
from veil.pipeline.execute import RunSpec, execute

PROBE = AuditConfig(hidden=(16,), epochs=30, lr=1e-2, batch_size=128, standardize=True, seed=0)


@pytest.fixture(scope="module")
def ds():
    return load_dataset("gaussian-correlated", {"n": 400, "rho": 0.0, "seed": 0}, use_cache=False)


def fitted(ds, **values):
    m = create_method("dp-input", values, ds.task())
    assert m.fit(ds.train) == [] and not m.iterative  # closed form: nothing trains
    return m


@pytest.mark.parametrize("eps,clip", [(0.5, 3.0), (4.0, 1.0), (300.0, 3.0)])
def test_noise_has_the_calibrated_scale(ds, eps: float, clip: float) -> None:
    """E|Laplace(0, b)| = b, b = 2*c*d_in/eps: over a seeded release of 30,000 distinct rows (300,000 draws, s.e.
    of the mean ~0.18% of b; the noise is keyed by the row, so the rows must differ) the mean |z - clamp(x)| is
    within 2% of b."""
    m = fitted(ds, eps=eps, clip=clip, release_seed=7)
    b = 2 * clip * ds.d_in / eps
    assert m.mechanism.scale == pytest.approx(b, rel=1e-12)
    x = np.random.default_rng(0).normal(size=(30_000, ds.d_in)).astype(np.float32)
    noise = m.encode(x) - np.clip(x, -clip, clip)
    assert abs(np.abs(noise).mean() / b - 1) < 0.02
    assert abs(noise.mean()) < 4 * math.sqrt(2) * b / math.sqrt(noise.size)  # centred: within 4 s.e.


def test_eps_inf_releases_the_clamped_input_exactly(ds) -> None:
    m = fitted(ds, eps="inf", clip=1.0)
    np.testing.assert_array_equal(m.encode(ds.test.x), np.clip(ds.test.x, -1.0, 1.0).astype(np.float32))
    assert np.abs(ds.test.x).max() > 1.0  # so the clamp did something


def test_clipping_bounds_every_coordinate_before_the_noise() -> None:
    """An input far outside [-c, c] is released as one at the box's edge would be: z - edge is Laplace(0, b)
    noise (b = 2 * 0.5 * d_in / 2 = 5), within 100 of it everywhere (exp(-20) ~ 2e-9 per entry to exceed that),
    never near the 1e6 of the input. (The noise is keyed by the row, so the two rows' draws differ.)"""
    task = load_dataset("gaussian-correlated", {"n": 40, "seed": 0}, use_cache=False).task()

    def release(x: np.ndarray) -> np.ndarray:  # at release_seed 3: the same noise every run
        return create_method("dp-input", {"eps": 2.0, "clip": 0.5, "release_seed": 3}, task).encode(x)

    x = np.full((5, task.d_in), 1e6, np.float32)
    x[1] = -1e6
    edge = np.sign(x) * 0.5
    assert np.abs(release(x) - edge).max() < 100 and np.abs(release(edge) - edge).max() < 100
    assert np.abs(release(x) - edge).max() > 0  # and it is noisy


def test_release_is_reproducible_at_a_release_seed_and_the_width_is_d_in(ds) -> None:
    a, b = fitted(ds, eps=1.0, release_seed=5, d_z=3), fitted(ds, eps=1.0, release_seed=5, d_z=3)
    za = a.encode(ds.test.x)
    assert za.shape == (len(ds.test), ds.d_in) and za.dtype == np.float32  # d_z is ignored
    np.testing.assert_array_equal(za, b.encode(ds.test.x))
    assert not np.array_equal(fitted(ds, eps=1.0, release_seed=6).encode(ds.test.x), za)


def test_small_eps_hides_the_sensitive_label_and_eps_inf_does_not(ds) -> None:
    """Fresh probes at release seeds 0, 1, 2 (measured privacy gap: eps=1 0.048, 0.034, 0.026; eps=inf 0.488
    at every seed, since the input carries s): eps=1 stays within 0.1 of chance, eps=inf leaks at least 0.4."""
    for seed in (0, 1, 2):
        gaps = {}
        for eps in (1.0, "inf"):
            m = fitted(ds, eps=eps, release_seed=seed)
            report = audit(m.encode(ds.train.x), ds.train, m.encode(ds.test.x), ds.test, ds.num_classes, PROBE)
            gaps[eps] = report.metrics()["privacy_gap"]
        assert gaps[1.0] <= 0.1 and gaps["inf"] >= 0.4, (seed, gaps)


def test_bad_values_are_refused_naming_the_field() -> None:
    for values, field in (({"eps": 0}, "eps"), ({"eps": -1}, "eps"), ({"clip": "inf"}, "clip"), ({"clip": 0}, "clip")):
        with pytest.raises(ConfigError, match=field):
            method_config("dp-input", values)
    assert method_config("dp-input", {"eps": "inf"}).eps == float("inf")


def test_a_run_through_the_pipeline_records_the_mechanism(in_tmp) -> None:
    """`veil run -m dp-input -d gaussian-correlated` in-process: the deviation lands in the params and the
    release, in x's format, also gets seed 003's weak/strong-adversary audit."""
    spec = RunSpec(
        method="dp-input",
        dataset="gaussian-correlated",
        dataset_params={"n": 200},
        params={"eps": 2.0, "release_seed": 0},
        audit={"epochs": 5, "hidden": [16]},
        executor="inline",
    )
    result = execute(spec)
    assert "2*c*d_in/eps" in result.params["method.deviation.mechanism"]
    assert result.params["method.eps"] == 2.0
    assert {"privacy_gap", "utility_auc", "weak_adversary_auc", "strong_adversary_auc"} <= set(result.metrics)
