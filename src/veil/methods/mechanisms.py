"""Local differential-privacy mechanisms applied to a bounded representation (LDP-FRL, seed 002).

The Laplace mechanism M_eps(v) = v + Laplace(0, b)^d with b = Delta / eps is eps-LDP when Delta is
the L1 sensitivity of v, i.e. the largest ||v - v'||_1 over any two inputs. For v bounded to
[-c, c]^d_z that is Delta = 2 * c * d_z (`l1_sensitivity`). eps = inf means no noise (b = 0).
Kept free of any network so the centralised and the federated code share one calibrated mechanism."""

from __future__ import annotations

import math

import torch

from veil.randomness import Noise, exponential_like

__all__ = ["LaplaceMechanism", "l1_sensitivity"]


def l1_sensitivity(bound: float, d_z: int) -> float:
    """L1 sensitivity of a vector with every coordinate in [-bound, bound]: 2 * bound * d_z."""
    if not (bound > 0 and math.isfinite(bound)):
        raise ValueError(f"bound must be a positive finite number, got {bound!r}")
    if d_z < 1:
        raise ValueError(f"d_z must be >= 1, got {d_z!r}")
    return 2.0 * float(bound) * int(d_z)


class LaplaceMechanism:
    """eps-LDP Laplace mechanism: z = v + Laplace(0, sensitivity / eps), independently per coordinate."""

    def __init__(self, eps: float, sensitivity: float) -> None:
        eps, sensitivity = float(eps), float(sensitivity)
        if math.isnan(eps) or eps <= 0:
            raise ValueError(f"eps must be > 0 (float('inf') for no noise), got {eps!r}")
        if math.isnan(sensitivity) or sensitivity <= 0 or math.isinf(sensitivity):
            raise ValueError(f"sensitivity must be a positive finite number, got {sensitivity!r}")
        self.eps = eps
        self.sensitivity = sensitivity

    @property
    def scale(self) -> float:
        """Laplace scale b = Delta / eps (0 when eps is infinite)."""
        return 0.0 if math.isinf(self.eps) else self.sensitivity / self.eps

    def noise(self, like: torch.Tensor, generator: Noise | None = None) -> torch.Tensor:
        """Laplace(0, b) noise shaped like `like`: b * (E1 - E2) with E1, E2 ~ Exp(1) independent."""
        if self.scale == 0.0:
            return torch.zeros_like(like)
        e1 = exponential_like(like, generator)
        e2 = exponential_like(like, generator)
        return self.scale * (e1 - e2)

    def __call__(self, v: torch.Tensor, generator: Noise | None = None) -> torch.Tensor:
        """Release z = v + noise; gradients flow to v (the noise does not depend on it)."""
        return v + self.noise(v.detach(), generator)

    def log_density(self, z: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """log p(z | v) summed over the last dimension (requires a finite eps)."""
        b = self.scale
        if b == 0.0:
            raise ValueError("the density of the eps = inf mechanism is a point mass; no log-density")
        d = z.shape[-1]
        return -(z - v).abs().sum(dim=-1) / b - d * math.log(2 * b)

    def log_density_ratio(self, z: torch.Tensor, v1: torch.Tensor, v2: torch.Tensor) -> torch.Tensor:
        """log p(z | v1) - log p(z | v2); eps-LDP means |ratio| <= eps whenever ||v1 - v2||_1 <= Delta."""
        b = self.scale
        if b == 0.0:
            raise ValueError("the eps = inf mechanism has no bounded density ratio")
        return ((z - v2).abs().sum(dim=-1) - (z - v1).abs().sum(dim=-1)) / b

    def __repr__(self) -> str:
        return f"LaplaceMechanism(eps={self.eps}, sensitivity={self.sensitivity}, scale={self.scale})"
