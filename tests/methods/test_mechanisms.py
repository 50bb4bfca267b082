"""Calibration of the eps-LDP Laplace mechanism (seed 002, METHODS.md sec. 3 'a test must check the calibration')."""

from __future__ import annotations

import math

import pytest
import torch

from veil.methods.mechanisms import LaplaceMechanism, l1_sensitivity

CASES = [(eps, d_z, c) for eps in (0.1, 0.5, 2.0, 8.0, 100.0) for d_z in (1, 2, 4, 16) for c in (1.0, 0.3)]


@pytest.mark.parametrize("eps,d_z,c", CASES)
def test_scale_is_sensitivity_over_eps(eps: float, d_z: int, c: float) -> None:
    mech = LaplaceMechanism(eps, l1_sensitivity(c, d_z))
    assert mech.sensitivity == 2 * c * d_z
    assert mech.scale == (2 * c * d_z) / eps


@pytest.mark.parametrize("eps,d_z,c", CASES)
def test_log_density_ratio_never_exceeds_eps(eps: float, d_z: int, c: float) -> None:
    """Two inputs at the maximal L1 distance (every coordinate at +c vs -c): at many outputs z the
    log-density ratio stays within eps, and is attained (= eps) where z lies beyond the box."""
    mech = LaplaceMechanism(eps, l1_sensitivity(c, d_z))
    gen = torch.Generator().manual_seed(0)
    v1 = torch.full((d_z,), c, dtype=torch.float64)
    v2 = -v1
    z = torch.randn(20000, d_z, generator=gen, dtype=torch.float64) * (3 * c + 2 * mech.scale)
    ratio = mech.log_density_ratio(z, v1, v2)
    assert ratio.abs().max().item() <= eps + 1e-9
    # Tight: for z beyond +c in every coordinate the ratio is exactly eps.
    far = torch.full((1, d_z), c + 5.0, dtype=torch.float64)
    assert mech.log_density_ratio(far, v1, v2).item() == pytest.approx(eps, rel=1e-12)
    # Random pairs inside the box [-c, c]^d_z also satisfy the bound.
    a = (torch.rand(500, d_z, generator=gen, dtype=torch.float64) * 2 - 1) * c
    b = (torch.rand(500, d_z, generator=gen, dtype=torch.float64) * 2 - 1) * c
    assert mech.log_density_ratio(z[:500], a, b).abs().max().item() <= eps + 1e-9
    # The log-density itself is consistent with the ratio.
    diff = mech.log_density(z[:100], v1) - mech.log_density(z[:100], v2)
    torch.testing.assert_close(diff, ratio[:100])


@pytest.mark.parametrize("eps,d_z", [(0.5, 2), (4.0, 4), (100.0, 1)])
def test_sampled_noise_has_the_calibrated_scale(eps: float, d_z: int) -> None:
    """E|Laplace(0, b)| = b and Var = 2 b^2; with 200k draws the estimates are within ~0.5% (s.e.),
    so a 3% tolerance is loose; the mean is 0 within 3 standard errors."""
    mech = LaplaceMechanism(eps, l1_sensitivity(1.0, d_z))
    gen = torch.Generator().manual_seed(1)
    v = torch.zeros(200_000 // d_z, d_z, dtype=torch.float64)
    noise = mech(v, generator=gen) - v
    b = mech.scale
    assert noise.abs().mean().item() == pytest.approx(b, rel=0.03)
    assert noise.std().item() == pytest.approx(math.sqrt(2) * b, rel=0.03)
    assert abs(noise.mean().item()) < 3 * math.sqrt(2) * b / math.sqrt(noise.numel())


def test_infinite_eps_adds_no_noise_and_bad_eps_is_refused() -> None:
    mech = LaplaceMechanism(float("inf"), 4.0)
    v = torch.randn(10, 2)
    assert mech.scale == 0.0
    assert torch.equal(mech(v), v)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            LaplaceMechanism(bad, 4.0)
    with pytest.raises(ValueError):
        LaplaceMechanism(1.0, float("inf"))
    with pytest.raises(ValueError):
        l1_sensitivity(float("inf"), 2)


def test_gradients_flow_through_the_mechanism() -> None:
    v = torch.zeros(4, 2, requires_grad=True)
    LaplaceMechanism(1.0, 4.0)(v).sum().backward()
    assert torch.equal(v.grad, torch.ones(4, 2))
