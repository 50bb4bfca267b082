"""How tight can an honest bound on the strongest of k adversaries be on a null release? (docs/certificates.md,
"Why no honest bound is much tighter on a null release")

Simulated adversaries' test gaps, Gaussian with a common sigma and pairwise correlation rho, with the same
correlation in their bootstrap draws. Per rho it prints:
- the share of nulls in which every adversary's figure is under t - z95 sigma, where t is `ratio` one-adversary
  bounds. A bound valid whatever the other adversaries' gaps can fall below t on a null release only then;
- the most a bound valid where true gaps are never below 0 can do: the share of nulls that the most powerful 5%
  test against "one adversary at t, the others at 0" rejects (Neyman-Pearson: a large log-sum-exp of the
  likelihood ratios);
- the median upper end, in one-adversary bounds (z95 sigma), of the largest one-sided bound (the certificate's)
  and of a bound inverted under "true gaps are never below 0" (`floored_bound`).

    python studies/null_slack.py
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import norm

Z95 = float(norm.ppf(0.95))


def floored_bound(point: np.ndarray, draws: np.ndarray, alpha: float = 0.05, iters: int = 30) -> float:
    """A 1 - alpha upper bound on max_i theta_i given every theta_i >= 0, by test inversion.

    H0(t): max theta >= t is rejected when every adversary's figure is under t - c sigma_i. c(t) makes the
    rejection rate alpha at the least favourable configuration: one adversary at t, the others at 0. The rate is
    read from the joint bootstrap draws (k x B) around `point` (k)."""
    e = draws - point[:, None]
    sd = e.std(axis=1)

    def rate(c: float, t: float) -> float:
        below = np.all(e < t - c * sd[:, None], axis=0)
        return float(np.max(np.mean((e < -c * sd[:, None]) & below[None, :], axis=1)))

    def crit(t: float) -> float:
        lo, hi = 0.0, 6.0
        for _ in range(iters):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if rate(mid, t) <= alpha else (mid, hi)
        return hi

    def covers(t: float) -> bool:
        return float(np.max(point + crit(t) * sd)) >= t

    lo, hi = 0.0, float(np.max(point + 6 * sd))
    if not covers(lo):
        return 0.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if covers(mid) else (lo, mid)
    return lo


def most_powerful_share(null: np.ndarray, chol: np.ndarray, t: float) -> float:
    """The share of `null` figures (k x n, sigma units) that the most powerful 5% test of "adversary 0 at t, the
    others at 0" rejects. Its statistic is symmetric in the adversaries, so the same test holds for each one's
    case."""
    inv = np.linalg.inv(chol @ chol.T)

    def stat(x: np.ndarray) -> np.ndarray:
        return np.logaddexp.reduce(t * (inv @ x), axis=0)

    shifted = null.copy()
    shifted[0] += t
    return float((stat(null) < np.quantile(stat(shifted), 0.05)).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, default=4, help="adversaries (the certificate's suite: 4)")
    ap.add_argument("--rhos", type=float, nargs="+", default=[0.0, 0.4, 0.5])
    ap.add_argument("--ratio", type=float, default=1.3, help="the slack asked for, in one-adversary bounds")
    ap.add_argument("--nulls", type=int, default=200, help="simulated null releases per rho")
    ap.add_argument("--boot", type=int, default=400, help="bootstrap draws per release (the harness's)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    k, thr = args.k, (args.ratio - 1) * Z95
    for rho in args.rhos:
        chol = np.linalg.cholesky(np.full((k, k), rho) + np.eye(k) * (1 - rho))
        null = chol @ rng.standard_normal((k, 400_000))
        all_under = float((np.max(null, axis=0) < thr).mean())
        np_share = most_powerful_share(null, chol, args.ratio * Z95)
        floored, largest = [], []
        for _ in range(args.nulls):
            point = chol @ rng.standard_normal(k)
            draws = point[:, None] + chol @ rng.standard_normal((k, args.boot))
            floored.append(floored_bound(point, draws))
            largest.append(float(np.max(np.percentile(draws, 95, axis=1))))
        print(
            f"rho {rho}: every figure under {thr:.2f} sigma in {all_under:.3f} of nulls; most powerful test with the "
            f"others at 0: {np_share:.3f}; median upper end / one adversary's bound: largest one-sided "
            f"{np.median(largest) / Z95:.2f}x, floored {np.median(floored) / Z95:.2f}x"
        )


if __name__ == "__main__":
    main()
