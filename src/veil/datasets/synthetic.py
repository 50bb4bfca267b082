"""The synthetic data the papers use: EIGAN's Gaussian mixtures (seed 000, App. C and Sec. 3.2)
and GPP's utility/sensitive pair with controlled correlation rho (seed 001, Sec. VI-F)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from veil.config import param
from veil.datasets.dataset import Dataset, make_dataset
from veil.datasets.entries import register_dataset


@dataclass(frozen=True)
class MixtureParams:
    """Parameters shared by EIGAN's Gaussian-mixture datasets."""

    n: int = param(4000, "number of rows (train + test)", ge=8)
    dim: int = param(
        0, "total feature count; extra columns beyond the mixture's own are pure N(0,1) noise (0 = none)", ge=0
    )
    sigma: float = param(0.3, "standard deviation of each Gaussian component", gt=0)
    test_fraction: float = param(0.25, "fraction of rows held out for the audit", gt=0, lt=1)
    seed: int = param(0, "seed of the generator and the train/test split", ge=0)


def _pad(x: np.ndarray, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Append N(0,1) noise columns so x has `dim` columns (no-op when dim <= x.shape[1])."""
    extra = dim - x.shape[1]
    return x if extra <= 0 else np.hstack([x, rng.standard_normal((len(x), extra))])


def _corners(p: MixtureParams, d: int, scale: float = 2.0, offset: float = -0.5):
    """Rows drawn from Gaussians at the 2^d corners of a cube; returns (x, corner bits per row)."""
    rng = np.random.default_rng(p.seed)
    corners = np.array(list(itertools.product([0, 1], repeat=d)))
    bits = corners[rng.integers(0, len(corners), p.n)]
    x = offset + scale * bits + p.sigma * rng.standard_normal((p.n, d))
    return _pad(x, p.dim, rng), bits


@register_dataset(
    "gaussian-quadrant",
    MixtureParams,
    "4 Gaussians in 2-D (EIGAN App. C, Fig. 10): ally = left/right, adversary = top/bottom; linear",
)
def gaussian_quadrant(p: MixtureParams) -> Dataset:
    # Means (-0.5,-0.5), (-0.5,1.5), (1.5,-0.5), (1.5,1.5): the paper's square of side 2.
    x, bits = _corners(p, 2)
    return make_dataset(
        "gaussian-quadrant",
        x,
        {"ally": bits[:, 0]},
        {"adversary": bits[:, 1]},
        test_fraction=p.test_fraction,
        seed=p.seed,
    )


@register_dataset(
    "gaussian-circles",
    MixtureParams,
    "inner disc vs outer ring in 2-D (EIGAN App. C, Fig. 11): ally = ring (non-linear), adversary = upper/lower half",
)
def gaussian_circles(p: MixtureParams) -> Dataset:
    rng = np.random.default_rng(p.seed)
    ring = rng.integers(0, 2, p.n)
    angle = rng.uniform(0, 2 * np.pi, p.n)
    radius = 1.0 + 1.5 * ring + p.sigma * rng.standard_normal(p.n)
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    upper = (np.sin(angle) > 0).astype(np.int64)
    return make_dataset(
        "gaussian-circles",
        _pad(x, p.dim, rng),
        {"ally": ring},
        {"adversary": upper},
        test_fraction=p.test_fraction,
        seed=p.seed,
    )


@register_dataset(
    "gaussian-octant",
    MixtureParams,
    "8 Gaussians at the corners of a cube (EIGAN App. C, Fig. 12): 1 ally (x axis), 2 adversaries (y, z axes)",
)
def gaussian_octant(p: MixtureParams) -> Dataset:
    x, bits = _corners(p, 3)
    return make_dataset(
        "gaussian-octant",
        x,
        {"ally": bits[:, 0]},
        {"adversary_1": bits[:, 1], "adversary_2": bits[:, 2]},
        test_fraction=p.test_fraction,
        seed=p.seed,
    )


@register_dataset(
    "gaussian-two-allies",
    MixtureParams,
    "8 Gaussians at the corners of a cube (EIGAN Fig. 2): 2 allies (the horizontal axes), 1 adversary (vertical)",
)
def gaussian_two_allies(p: MixtureParams) -> Dataset:
    x, bits = _corners(p, 3)
    return make_dataset(
        "gaussian-two-allies",
        x,
        {"ally_1": bits[:, 0], "ally_2": bits[:, 1]},
        {"adversary": bits[:, 2]},
        test_fraction=p.test_fraction,
        seed=p.seed,
    )


@dataclass(frozen=True)
class NodesParams:
    """EIGAN's non-IID node data: four unit-square Gaussians with variance 0.1*k at node k."""

    n: int = param(4000, "number of rows over all nodes (train + test)", ge=8)
    nodes: int = param(4, "number of nodes K; node k (1..K) draws with variance variance_step * k", ge=1)
    variance_step: float = param(0.1, "variance added per node index (the paper's 0.1)", gt=0)
    dim: int = param(0, "total feature count; extra columns are pure N(0,1) noise (0 = none)", ge=0)
    test_fraction: float = param(0.25, "fraction of rows held out for the audit", gt=0, lt=1)
    seed: int = param(0, "seed of the generator and the train/test split", ge=0)


@register_dataset(
    "gaussian-nodes",
    NodesParams,
    "EIGAN Sec. 3.2 / Fig. 7: Gaussians at (1,1),(1,2),(2,1),(2,2), variance 0.1k at node k; column 'node'",
)
def gaussian_nodes(p: NodesParams) -> Dataset:
    rng = np.random.default_rng(p.seed)
    node = np.arange(p.n) % p.nodes  # 0-based; the paper's k = node + 1
    bits = rng.integers(0, 2, (p.n, 2))
    std = np.sqrt(p.variance_step * (node + 1))[:, None]
    x = 1.0 + bits + std * rng.standard_normal((p.n, 2))
    return make_dataset(
        "gaussian-nodes",
        _pad(x, p.dim, rng),
        {"ally": bits[:, 0]},
        {"adversary": bits[:, 1]},
        extra={"node": node},
        test_fraction=p.test_fraction,
        seed=p.seed,
    )


@dataclass(frozen=True)
class CorrelatedParams:
    """GPP's synthetic utility/sensitive pair with controlled correlation."""

    n: int = param(4000, "number of rows (train + test)", ge=8)
    rho: float = param(
        0.5, "correlation between the binary utility u and sensitive s (0 independent, 1 equal)", ge=0, le=1
    )
    # le: the features are rotated by the QR of a dim x dim matrix, which grows as dim^3 (seconds at 4096, minutes
    # past 10,000)
    dim: int = param(10, "number of features (>= 4: two carry u, two carry s, the rest noise)", ge=4, le=4096)
    separation: float = param(2.0, "distance between class means along each signal direction, in noise std units", gt=0)
    test_fraction: float = param(0.25, "fraction of rows held out for the audit", gt=0, lt=1)
    seed: int = param(0, "seed of the generator and the train/test split", ge=0)


@register_dataset(
    "gaussian-correlated",
    CorrelatedParams,
    "GPP Sec. VI-F: binary u and s with corr(u, s) = rho, each carried by 2 directions of a rotated Gaussian",
)
def gaussian_correlated(p: CorrelatedParams) -> Dataset:
    rng = np.random.default_rng(p.seed)
    u = rng.integers(0, 2, p.n)
    # s copies u with probability rho and is an independent fair coin otherwise, so corr(u, s) = rho exactly.
    s = np.where(rng.random(p.n) < p.rho, u, rng.integers(0, 2, p.n))
    x = rng.standard_normal((p.n, p.dim))
    x[:, 0:2] += (p.separation / 2) * (2 * u[:, None] - 1)
    x[:, 2:4] += (p.separation / 2) * (2 * s[:, None] - 1)
    # A fixed random rotation mixes the signal into every column, as real features would.
    q, _ = np.linalg.qr(np.random.default_rng(12345 + p.dim).standard_normal((p.dim, p.dim)))
    return make_dataset("gaussian-correlated", x @ q, {"u": u}, {"s": s}, test_fraction=p.test_fraction, seed=p.seed)
