"""tilted-blobs: u and s are two bits that agree with probability (1 + rho) / 2, each shifting the mean of its
own feature, with a third feature carrying their sum and the rest noise."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veil.config import param
from veil.datasets.dataset import Dataset, make_dataset
from veil.datasets.entries import register_dataset


@dataclass(frozen=True)
class TiltedBlobsParams:
    """Size, correlation and seed of the tilted blobs."""

    n: int = param(2000, "number of rows (train + test)", ge=8)
    rho: float = param(0.3, "correlation of the two bits (P(u == s) = (1 + rho) / 2)", ge=0, le=1)
    dim: int = param(6, "feature count (at least 3: u, s, their sum; the rest N(0, 1) noise)", ge=3)
    test_fraction: float = param(0.25, "fraction of rows held out for the audit", gt=0, lt=1)
    seed: int = param(0, "seed of the generator and the train/test split", ge=0)


@register_dataset(
    "tilted-blobs", TiltedBlobsParams, "u and s bits (correlated by rho) shifting their own features (example plugin)"
)
def tilted_blobs(p: TiltedBlobsParams) -> Dataset:
    rng = np.random.default_rng(p.seed)
    u = rng.integers(0, 2, p.n)
    s = np.where(rng.random(p.n) < (1 + p.rho) / 2, u, 1 - u)
    x = rng.standard_normal((p.n, p.dim))
    x[:, 0] += 2.0 * u
    x[:, 1] += 2.0 * s
    x[:, 2] += u + s
    return make_dataset("tilted-blobs", x, {"u": u}, {"s": s}, test_fraction=p.test_fraction, seed=p.seed)
