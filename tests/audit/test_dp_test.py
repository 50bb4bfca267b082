"""The empirical epsilon test: a correctly scaled Laplace mechanism passes it (its lower bound stays below eps),
one whose scale is too small for its claimed eps fails it, on the mechanism's extreme pair and on data rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from veil.audit.dp_test import clopper_pearson, epsilon_tests, furthest_pair
from veil.methods.mechanisms import LaplaceMechanism


class Scaled:
    """A Laplace mechanism claiming `eps` whose noise is `factor` times the calibrated one (1: correct)."""

    def __init__(self, eps: float, sensitivity: float, factor: float) -> None:
        self.inner, self.factor, self.eps = LaplaceMechanism(eps, sensitivity), factor, eps

    def __call__(self, v: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return v + self.factor * self.inner.noise(v.detach(), gen)


ROWS = np.random.default_rng(0).normal(size=(300, 3)).astype(np.float32)


@pytest.mark.parametrize(("eps", "d"), [(4.0, 2), (1.0, 3), (0.5, 2)])
def test_a_correct_scale_passes_and_is_tight(eps: float, d: int) -> None:
    tests = epsilon_tests(Scaled(eps, 2.0 * d, 1.0), lambda x: x[:, :d].clamp(-1, 1), 1.0, d, ROWS, seed=1)
    assert [t.pair for t in tests] == ["extreme", "data"]
    extreme = tests[0]
    assert extreme.l1 == pytest.approx(2.0 * d) and extreme.consistent
    assert 0.85 * eps <= extreme.lower_bound <= eps  # measured 0.95-0.99 of eps


@pytest.mark.parametrize(("eps", "d"), [(4.0, 2), (1.0, 3), (0.5, 2)])
def test_half_the_scale_fails(eps: float, d: int) -> None:
    """Noise at half the calibrated scale is a 2*eps mechanism: the bound exceeds eps (measured 1.8-1.95 eps)."""
    tests = epsilon_tests(Scaled(eps, 2.0 * d, 0.5), lambda x: x[:, :d].clamp(-1, 1), 1.0, d, ROWS, seed=1)
    assert not tests[0].consistent and tests[0].lower_bound > 1.5 * eps


def test_the_ldp_frl_release_path_passes() -> None:
    """The method's own mechanism, through its trained-shape extractor, on data rows."""
    from veil.datasets.dataset import TaskSpec
    from veil.methods.builtin import create_method

    m = create_method("ldp-frl", {"eps": 2.0, "d_z": 2}, TaskSpec(3, {"u": 2}, {"s": 2}))
    ldp = m.ldp_release()
    assert ldp is not None and ldp.mechanism.scale == pytest.approx(2 * 1.0 * 2 / 2.0)
    tests = epsilon_tests(ldp.mechanism, ldp.bounded, ldp.bound, ldp.width, ROWS)
    assert all(t.consistent for t in tests) and tests[0].lower_bound > 1.7


def test_clopper_pearson_and_furthest_pair() -> None:
    lo, hi = clopper_pearson(50, 100, 0.025)
    assert lo == pytest.approx(0.398, abs=2e-3) and hi == pytest.approx(0.602, abs=2e-3)
    assert clopper_pearson(0, 10, 0.05)[0] == 0.0 and clopper_pearson(10, 10, 0.05)[1] == 1.0
    v = np.array([[0.0, 0.0], [1.0, -1.0], [-1.0, 1.0], [0.5, 0.5]])
    i, j, l1 = furthest_pair(v)
    assert {i, j} == {1, 2} and l1 == 4.0
