"""An empirical lower bound on the epsilon of an eps-LDP release, from a distinguishing test on a pair of inputs.

eps-LDP promises P[M(a) in E] <= e^eps P[M(b) in E] for every pair of inputs a, b and every event E. Releasing a
and b many times each and counting how often an event E happens gives, with Clopper-Pearson bounds on both
frequencies, eps_lb = ln(lower P[M(a) in E] / upper P[M(b) in E]): with 95% confidence the mechanism's true
epsilon is at least eps_lb. A correctly calibrated mechanism yields eps_lb <= eps; one whose noise is too small for
its claimed eps (a wrong sensitivity or scale) yields eps_lb > eps once enough releases are drawn, and fails.

The events are chosen on one half of the draws and counted on the other, so the bound stays valid: orthants
{z : s_i (z_i - t_i) >= 0 for every i} at thresholds t between and beyond the two inputs' images (for the Laplace
mechanism the orthant beyond a's image reaches the whole ratio e^(||v_a - v_b||_1 / b)), and half-spaces of the
projection on the direction from b's image to a's."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
import torch
from scipy.stats import beta as beta_dist

#: releases drawn per input of the pair (half choose the event, half count it)
SAMPLES = 200_000
#: thresholds of the orthant events, as fractions of the way from the midpoint to a's image (1 = at a's image)
ORTHANT_STEPS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
#: quantiles of b's projection used as half-space thresholds
HALFSPACE_QUANTILES = (0.9, 0.99, 0.999, 0.9999)


@dataclass(frozen=True)
class EpsilonTest:
    """One pair's distinguishing test: the empirical lower bound on epsilon and what it was measured on."""

    pair: str
    """'extreme' (the bounded map's corners, L1 distance = the sensitivity) or 'data' (two test rows)"""
    l1: float
    """L1 distance between the pair's images v_a, v_b"""
    claimed: float
    """the mechanism's epsilon"""
    lower_bound: float
    """epsilon is at least this with `confidence` (0 when no event separates the pair)"""
    event: str
    samples: int
    confidence: float

    @property
    def consistent(self) -> bool:
        """No violation found: the lower bound does not exceed the claimed epsilon."""
        return self.lower_bound <= self.claimed + 1e-9

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "consistent": self.consistent}


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided (1 - alpha) Clopper-Pearson bounds (lower, upper) on a binomial proportion k/n."""
    low = 0.0 if k == 0 else float(beta_dist.ppf(alpha, k, n - k + 1))
    high = 1.0 if k == n else float(beta_dist.ppf(1 - alpha, k + 1, n - k))
    return low, high


def _events(za: np.ndarray, zb: np.ndarray) -> list[tuple[str, Callable[[np.ndarray], np.ndarray]]]:
    """Candidate events (named) built from the selection half of the draws."""
    ma, mb = np.median(za, axis=0), np.median(zb, axis=0)
    sign = np.where(ma >= mb, 1.0, -1.0)
    mid, half = (ma + mb) / 2, np.abs(ma - mb) / 2
    out: list[tuple[str, Callable[[np.ndarray], np.ndarray]]] = []

    def orthant(t: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        return lambda z: np.all(sign * (z - t) >= 0, axis=1)

    def halfspace(direction: np.ndarray, thr: float) -> Callable[[np.ndarray], np.ndarray]:
        return lambda z: z @ direction > thr

    for step in ORTHANT_STEPS:
        out.append((f"orthant at {step:g} of the way to a's image", orthant(mid + sign * step * half)))
    direction = ma - mb
    if float(np.linalg.norm(direction)) > 0:
        proj_b = zb @ direction
        for q in HALFSPACE_QUANTILES:
            out.append((f"projection above b's {q:g} quantile", halfspace(direction, float(np.quantile(proj_b, q)))))
    return out


def _bound(ka: int, kb: int, n: int, alpha: float) -> float:
    low_a, _ = clopper_pearson(ka, n, alpha)
    _, high_b = clopper_pearson(kb, n, alpha)
    return math.log(low_a / high_b) if low_a > 0 else 0.0


def epsilon_lower_bound(
    release_a: Callable[[int, torch.Generator], torch.Tensor],
    release_b: Callable[[int, torch.Generator], torch.Tensor],
    *,
    samples: int = SAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, str]:
    """(lower bound on epsilon, the event behind it) from `samples` releases of each input: release_x(n, gen)
    returns n releases (rows) of input x with noise from `gen`. Both orders of the pair are tried; each of the two
    Clopper-Pearson bounds of an order is at level 1 - (1 - confidence) / 4, so the reported maximum over both
    orders holds at `confidence`."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        za = release_a(samples, gen).double().numpy()
        zb = release_b(samples, gen).double().numpy()
    half = samples // 2
    alpha = (1 - confidence) / 4
    best, best_event = 0.0, "none"
    for name, (a, b) in {"a": (za, zb), "b": (zb, za)}.items():
        events = _events(a[:half], b[:half])
        scored = []
        for label, event in events:
            ka, kb = int(event(a[:half]).sum()), int(event(b[:half]).sum())
            scored.append((_bound(ka, kb, half, alpha), label, event))
        _, label, event = max(scored, key=lambda t: t[0])
        ka, kb = int(event(a[half:]).sum()), int(event(b[half:]).sum())
        lb = _bound(ka, kb, samples - half, alpha)
        if lb > best:
            best, best_event = lb, f"{label} (input {name} first; {ka} vs {kb} of {samples - half} releases)"
    return best, best_event


def epsilon_tests(
    mechanism: Any,
    bounded: Callable[[torch.Tensor], torch.Tensor],
    bound: float,
    width: int,
    x_test: np.ndarray,
    *,
    samples: int = SAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> list[EpsilonTest]:
    """The certificate's epsilon tests of an eps-LDP release z = M(v(x)): the mechanism on the two opposite corners
    of v's range (L1 distance 2 c d, the sensitivity it is calibrated to: a mechanism with too small a scale fails
    here), and the whole release path on the two test rows whose images lie furthest apart in L1."""
    eps = float(mechanism.eps)
    if not math.isfinite(eps):
        return []
    corner = torch.full((1, width), float(bound))

    def at(v: torch.Tensor) -> Callable[[int, torch.Generator], torch.Tensor]:
        return lambda n, gen: mechanism(v.expand(n, -1), gen)

    out = [
        EpsilonTest(
            "extreme",
            2 * bound * width,
            eps,
            *epsilon_lower_bound(at(corner), at(-corner), samples=samples, seed=seed, confidence=confidence),
            samples,
            confidence,
        )  # noqa: E501
    ]
    rows = x_test[: min(len(x_test), 4000)]
    if len(rows) >= 2:
        with torch.no_grad():
            v = bounded(torch.from_numpy(np.array(rows, dtype=np.float32)))
        i, j, l1 = furthest_pair(v.numpy())
        va, vb = v[i : i + 1], v[j : j + 1]
        lb, event = epsilon_lower_bound(at(va), at(vb), samples=samples, seed=seed + 1, confidence=confidence)
        out.append(EpsilonTest("data", l1, eps, lb, event, samples, confidence))
    return out


def furthest_pair(v: np.ndarray) -> tuple[int, int, float]:
    """Two rows of v whose L1 distance is (nearly) the largest: max over sign vectors s of (max s.v - min s.v),
    exact for up to 12 columns (every sign vector), over 512 random sign vectors beyond."""
    d = v.shape[1]
    if d <= 12:
        signs = np.array([[1 if (k >> i) & 1 else -1 for i in range(d)] for k in range(2 ** (d - 1))], dtype=np.float64)
    else:
        signs = np.random.default_rng(0).choice([-1.0, 1.0], size=(512, d))
    proj = v.astype(np.float64) @ signs.T
    spread = proj.max(axis=0) - proj.min(axis=0)
    k = int(spread.argmax())
    i, j = int(proj[:, k].argmax()), int(proj[:, k].argmin())
    return i, j, float(np.abs(v[i] - v[j]).sum())
