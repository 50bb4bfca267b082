"""Coverage of the certificate's upper end where the true leakage is known (docs/certificates.md).

    python benchmarks/coverage.py                      # every cell, 200 repetitions each (~30 min on 2 cores)
    python benchmarks/coverage.py --reps 40 --fits 4   # a quick look

It records benchmarks/results/coverage.json; `python tools/coverage_doc.py` (or `make docs`) writes its tables into
docs/certificates.md.

A release z of 4 columns is drawn with a sensitive label s whose link to z is known:
  null       z independent of s (true gap 0)
  linear     z | s ~ N(delta * s * e1, I): every invertible linear map of z has Bayes AUC Phi(delta / sqrt 2);
             delta is set for a Bayes gap of 0.05 or 0.15
  product    P(s = 1 | z) = sigmoid(a * z1 * z2 + b): only the non-linear adversaries see it (Bayes gap ~0.15,
             from 400,000 simulated rows)
for minority shares 50% and 10%. Per (kind, share) the certificate's adversaries (the audit's probe and
`AuditConfig.suite`, as `veil.certify.certificate` trains them) are fitted `--fits` times on fresh training rows; each
fit is scored on a pool of 300,000 fresh rows, whose AUC is that adversary's true AUC (null: exactly 0.5), and on a
selection fold of the training rows. Each repetition draws a test split of 500, 1,000, 2,000 or 10,000 rows from the
pool and computes every statistic below on it. Truth: the largest true gap over the suite (what the certificate
claims to bound); the Bayes gap is reported beside it.

Statistics compared (all 95%):
  bootstrap-max    the certificate before this harness: percentile interval (two-sided) of the per-resample maximum
                   of the folded gaps |AUC - 0.5| over the adversaries; its upper end
  max-t            one-sided simultaneous bound from the joint bootstrap: max_j AUC_j + c * se_j, c the 95% quantile
                   of the resampled max_j (AUC*_j - AUC_j) / se_j
  split-test       the adversary with the highest AUC on half of the test rows, its one-sided bound on the other half
  selected         the suite adversary with the highest AUC on the selection fold of the training rows (never the
                   test rows), its one-sided bootstrap bound on every test row
  max-one-sided    the largest of the suite adversaries' one-sided bounds on the test rows (it covers the truly
                   strongest one's gap whenever that one's own bound does), its point that of `selected`
                   (`veil.certify.certificate.judge`: the certificate now)
The first three use the audit's probe and the suite (five adversaries, as the certificate before this harness did),
and their truth is the largest true gap of the five; the last two use the suite, as the certificate does now, and
their truth is the suite's largest. Every adversary is trained on the same 75% of the training
rows (the certificate now holds the other 25% out to choose on).
Slack is upper end - truth; `limit` is the one-sided bound of one adversary at the true AUC (1.645 Hanley-McNeil
sigma at the split's class counts), so slack / limit = 1 is what a single pre-chosen adversary would give."""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binomtest, norm

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "coverage.json"
SIZES = (500, 1000, 2000, 10000)
SHARES = (0.5, 0.1)
KINDS = ("null", "linear-0.05", "linear-0.15", "product")
WIDTH = 4
TRAIN_ROWS = 4000
POOL_ROWS = 300_000
#: bootstrap resamples per test split (the certificate's default is 1,000; 400 keeps the full table under an hour)
BOOT = 400
#: the statistics that choose among the suite only: their truth is the suite's largest true gap, not the audit probe's
SUITE_ONLY = ("selected", "max-one-sided")
Z95 = float(norm.ppf(0.95))


def sigmoid(t: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-t))


def product_params(share: float, gap: float = 0.15, rows: int = 400_000, seed: int = 99) -> tuple[float, float]:
    """(a, b) of P(s=1|z) = sigmoid(a z1 z2 + b) with mean `share` and Bayes gap `gap`, by bisection on simulated
    rows (the Bayes AUC is that of the score z1 z2, monotone in the posterior)."""
    from veil.audit.probes import roc_auc

    rng = np.random.default_rng(seed)
    q = rng.standard_normal(rows) * rng.standard_normal(rows)
    u = rng.random(rows)

    def b_for(a: float) -> float:
        lo, hi = -20.0, 20.0
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sigmoid(a * q + mid).mean() < share else (lo, mid)
        return (lo + hi) / 2

    lo, hi = 0.0, 10.0
    for _ in range(30):
        a = (lo + hi) / 2
        s = u < sigmoid(a * q + b_for(a))
        lo, hi = (a, hi) if roc_auc(s, q) - 0.5 < gap else (lo, a)
    a = (lo + hi) / 2
    return a, b_for(a)


class Release:
    """Draws (z, s) rows of one (kind, share) with its Bayes gap."""

    def __init__(self, kind: str, share: float) -> None:
        self.kind, self.share = kind, share
        self.delta = self.a = self.b = 0.0
        if kind.startswith("linear"):
            self.delta = math.sqrt(2) * float(norm.ppf(0.5 + float(kind.split("-")[1])))
            self.bayes = float(norm.cdf(self.delta / math.sqrt(2))) - 0.5
        elif kind == "product":
            self.a, self.b = product_params(share)
            self.bayes = 0.15
        else:
            self.bayes = 0.0

    def draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        z = rng.standard_normal((n, WIDTH))
        if self.kind == "product":
            s = (rng.random(n) < sigmoid(self.a * z[:, 0] * z[:, 1] + self.b)).astype(np.int64)
        else:
            s = (rng.random(n) < self.share).astype(np.int64)
            z[:, 0] += self.delta * s
        return z.astype(np.float32), s


def adversary_names() -> list[str]:
    """The audit's probe (first: the certificate before this harness judged it too) and the suite."""
    from veil.audit.settings import AuditConfig

    cfg = AuditConfig()
    return ["mlp-" + "-".join(str(h) for h in cfg.hidden)] + list(cfg.suite)


def fit_suite(rel: Release, fit: int) -> dict[str, Any]:
    """The suite fitted on fresh training rows: per adversary, P(s=1) on the selection fold and on the pool, and
    its true AUC (from the pool)."""
    from veil.audit.capacity import CapacityConfig, fit_predict
    from veil.audit.probes import roc_auc
    from veil.audit.settings import AuditConfig

    rng = np.random.default_rng([fit, int(rel.share * 100), KINDS.index(rel.kind)])
    z, s = rel.draw(TRAIN_ROWS, rng)
    pool_z, pool_s = rel.draw(POOL_ROWS, rng)
    cut = int(TRAIN_ROWS * 0.75)
    ccfg = CapacityConfig.from_audit(AuditConfig())
    scores, fold, truth = [], [], []
    for i, name in enumerate(adversary_names()):
        p = fit_predict(name, z[:cut], s[:cut], np.concatenate([z[cut:], pool_z]), 2, ccfg, 1000 * fit + i)[:, 1]
        fold.append(roc_auc(s[cut:] == 1, p[: TRAIN_ROWS - cut]))
        scores.append(p[TRAIN_ROWS - cut :])
        truth.append(0.5 if rel.kind == "null" else roc_auc(pool_s == 1, scores[-1]))
    return {"scores": np.stack(scores), "fold": np.array(fold), "truth": np.array(truth), "s": pool_s}


def hanley_mcneil(auc: float, n1: int, n0: int) -> float:
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    return math.sqrt((auc * (1 - auc) + (n1 - 1) * (q1 - auc * auc) + (n0 - 1) * (q2 - auc * auc)) / (n1 * n0))


def statistics(scores: np.ndarray, fold: np.ndarray, s: np.ndarray, counts: np.ndarray, seed: int) -> dict[str, float]:
    """Every statistic's upper end of the gap on one test split (scores: adversaries x rows)."""
    from veil.certify.intervals import interval, one_sided, weighted_aucs

    pos = s == 1
    one = np.ones((1, len(s)), dtype=np.int32)
    point = np.array([weighted_aucs(sc, pos, one)[0] for sc in scores])
    draws = np.stack([weighted_aucs(sc, pos, counts) for sc in scores])  # adversaries x resamples
    out = {"bootstrap-max": interval(float(np.max(np.abs(point - 0.5))), np.max(np.abs(draws - 0.5), axis=0)).high}
    se = np.nanstd(draws, axis=1)
    c = float(np.nanpercentile(np.nanmax((draws - point[:, None]) / se[:, None], axis=0), 95))
    out["max-t"] = float(np.max(point + c * se)) - 0.5
    half = np.random.default_rng(seed).permutation(len(s)) < len(s) // 2
    if pos[half].any() and (~pos[half]).any() and pos[~half].any() and (~pos[~half]).any():
        pick = int(np.argmax([weighted_aucs(sc[half], pos[half], one[:, half])[0] for sc in scores]))
        rest = ~half
        sub = weighted_aucs(scores[pick][rest], pos[rest], counts[:, : rest.sum()])
        out["split-test"] = float(np.nanpercentile(sub, 95)) - 0.5
    # the certificate chooses among the suite only (the audit's probe, index 0, is not refitted on the fold)
    pick = 1 + int(np.argmax(fold[1:]))
    out["selected"] = one_sided(float(point[pick]) - 0.5, draws[pick] - 0.5).high
    out["max-one-sided"] = judged_bound(fold[1:], point[1:], draws[1:])
    return out


def judged_bound(fold: np.ndarray, point: np.ndarray, draws: np.ndarray) -> float:
    """The certificate's statistic (`veil.certify.certificate.judge`) on the suite's figures."""
    from veil.certify.certificate import judge
    from veil.certify.intervals import one_sided

    gaps = [one_sided(float(p) - 0.5, np.asarray(d) - 0.5) for p, d in zip(point, draws)]
    return judge(list(fold), gaps)[1].high


def run_cell(rel: Release, fits: int, reps: int, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    from veil.certify.intervals import resample_counts

    per_fit = math.ceil(reps / fits)
    rows: dict[int, dict[str, list[float]]] = {n: {} for n in sizes}
    truths: list[float] = []
    truths_suite: list[float] = []
    limits: dict[int, list[float]] = {n: [] for n in sizes}
    counts = {n: resample_counts(n, BOOT, n) for n in sizes}
    for f in range(fits):
        fitted = fit_suite(rel, f)
        truth = float(np.max(fitted["truth"])) - 0.5
        truth_suite = float(np.max(fitted["truth"][1:])) - 0.5
        rng = np.random.default_rng([f, 7])
        for n in sizes:
            for r in range(per_fit):
                idx = rng.choice(POOL_ROWS, size=n, replace=False)
                s = fitted["s"][idx]
                stats = statistics(fitted["scores"][:, idx], fitted["fold"], s, counts[n], 1000 * f + r)
                for k, v in stats.items():
                    rows[n].setdefault(k, []).append(v - (truth_suite if k.startswith(SUITE_ONLY) else truth))
                n1 = int(s.sum())
                limits[n].append(Z95 * hanley_mcneil(0.5 + truth, n1, n - n1))
        truths.append(truth)
        truths_suite.append(truth_suite)
    out = []
    for n in sizes:
        limit = float(np.median(limits[n]))
        for stat, slack in rows[n].items():
            sl = np.array(slack)
            k, m = int((sl >= 0).sum()), len(sl)
            low, high = wilson(k, m)
            out.append(
                {
                    "kind": rel.kind,
                    "share": rel.share,
                    "rows": n,
                    "statistic": stat,
                    "reps": m,
                    "fits": fits,
                    "coverage": k / m,
                    "coverage_low": low,
                    "coverage_high": high,
                    "median_slack": float(np.median(sl)),
                    "limit": limit,
                    "slack_ratio": float(np.median(sl)) / limit,
                    "truth_all": float(np.mean(truths)),
                    "truth_suite": float(np.mean(truths_suite)),
                    "truth_bayes": rel.bayes,
                }
            )
    return out


def wilson(k: int, m: int) -> tuple[float, float]:
    """The 95% Wilson interval of a proportion k / m (scipy's)."""
    ci = binomtest(k, m).proportion_ci(0.95, "wilson")
    return float(ci.low), float(ci.high)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=200, help="repetitions per cell")
    ap.add_argument("--fits", type=int, default=10, help="independent fits of the suite per (kind, share)")
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--shares", nargs="+", type=float, default=list(SHARES))
    ap.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    t0 = time.time()
    records: list[dict[str, Any]] = []
    for kind in args.kinds:
        for share in args.shares:
            records += run_cell(Release(kind, share), args.fits, args.reps, tuple(args.sizes))
            print(f"{kind} {share:.0%}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    doc = {
        "commands": ["python benchmarks/coverage.py " + " ".join(argv if argv is not None else sys.argv[1:])],
        "commit": commit.strip(),
        "machine": f"{platform.machine()}, {platform.python_version()}, load {load}",
        "seconds": [round(time.time() - t0)],
        "boot": BOOT,
        "train_rows": TRAIN_ROWS,
        "records": records,
    }
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"recorded {args.results}; run `make docs` (python tools/coverage_doc.py) for docs/certificates.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
