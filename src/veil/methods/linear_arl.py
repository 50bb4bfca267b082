"""Closed-form linear adversarial representation learning (Sadeghi, Yu & Boddeti, "On the Global
Optima of Kernelized Adversarial Representation Learning", ICCV 2019, linear case); the linear ARL
baseline of EIGAN on Adult (seed 000).

Encoder z = W^T (x - mean), target and adversary are linear least-squares regressors on z for the
one-hot utility labels Y and sensitive labels S. The game
    min_W  (1 - lambda) * MSE_target(W) - lambda * MSE_adversary(W)
depends on W only through the projection P onto the column space of Z = Xc W, and equals
tr(G^T B G) + const with
    B = L^T (lambda * Sc Sc^T - (1 - lambda) * Yc Yc^T) L,
where L is an orthonormal basis of the column space of the centred data Xc = L Sigma V^T and
P = L G G^T L^T, G^T G = I. Its global minimiser G is the eigenvectors of B with NEGATIVE
eigenvalues (taking more can only raise the objective), and W = V Sigma^-1 G so that Xc W = L G.
lambda near 0 keeps what predicts Y; lambda near 1 removes what predicts S.

Veil: z is released with unit-variance training columns (W scaled by sqrt(n): same subspace, same
optimum); at most d_z eigenvectors are kept, the most negative first; the rest of z is zero.
Several utility / sensitive labels are stacked as one-hot blocks of Y / S."""

from __future__ import annotations

import numpy as np

from veil.datasets.dataset import Split
from veil.methods.baselines import LinearBaseline
from veil.methods.configs.linear_arl_card import LinearARLCard, LinearARLConfig
from veil.methods.table import register_method


def one_hot_block(labels: dict[str, np.ndarray], classes: dict[str, int]) -> np.ndarray:
    """Centred one-hot encodings of several labels side by side (n x sum of classes)."""
    cols = []
    for name, y in labels.items():
        k = int(classes[name])
        oh = np.zeros((len(y), k))
        oh[np.arange(len(y)), np.asarray(y, dtype=np.int64)] = 1.0
        cols.append(oh - oh.mean(axis=0))
    return np.hstack(cols)


def linear_arl_solution(
    x: np.ndarray, y: np.ndarray, s: np.ndarray, lam: float, d_z: int, negative_only: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, weights (d_in x d_z, zero-padded) and the eigenvalues of B, for centred targets y and s."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    mean = x.mean(axis=0)
    xc = x - mean
    u, sig, vt = np.linalg.svd(xc, full_matrices=False)
    tol = (sig.max() if sig.size else 0.0) * max(xc.shape) * np.finfo(np.float64).eps
    r = int((sig > tol).sum())
    L, V, sig = u[:, :r], vt[:r].T, sig[:r]
    ly, ls = L.T @ y, L.T @ s
    b = lam * (ls @ ls.T) - (1.0 - lam) * (ly @ ly.T)
    b = 0.5 * (b + b.T)
    evals, evecs = np.linalg.eigh(b)  # ascending: most negative first
    k = min(d_z, r)
    if negative_only:
        scale = max(float(np.abs(evals).max()) if evals.size else 0.0, 1e-300)
        k = min(k, int((evals < -1e-9 * scale).sum()))
    g = evecs[:, :k]
    # Deterministic sign: the largest-magnitude entry of each eigenvector is positive.
    if k:
        idx = np.abs(g).argmax(axis=0)
        g = g * np.sign(g[idx, np.arange(k)])
    w = np.zeros((x.shape[1], d_z))
    w[:, :k] = (V / sig) @ g * np.sqrt(n)
    return mean, w, evals


@register_method
class LinearARL(LinearARLCard, LinearBaseline):
    config: LinearARLConfig

    def build(self) -> None:
        super().build()
        self.kept = 0
        self.eigenvalues = np.zeros(0)

    def fit_closed_form(self, train: Split) -> None:
        c, t = self.config, self.task
        y = one_hot_block(dict(train.utility), dict(t.utility))
        s = one_hot_block(dict(train.sensitive), dict(t.sensitive))
        mean, w, evals = linear_arl_solution(train.x, y, s, c.lambda_arl, c.d_z, c.negative_only)
        self.eigenvalues = evals
        self.kept = int(np.count_nonzero(np.abs(w).sum(axis=0)))
        self.encoder.set(mean, w)
