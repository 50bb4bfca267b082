"""Bootstrap intervals: the vectorised weighted AUC equals the AUC of the rows each resample draws, intervals cover
the truth at about their stated rate, and the null resolution shrinks with test rows as 1/sqrt(rows)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.audit.probes import auc_gap, auc_score, roc_auc
from veil.certify.intervals import (
    Resamples,
    auc_draws,
    class_auc_draws,
    gap_draws,
    interval,
    null_resolution,
    resample_counts,
    weighted_aucs,
)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(4, 60),
    seed=st.integers(0, 10_000),
    levels=st.integers(2, 6),
)
def test_weighted_auc_equals_the_auc_of_the_drawn_rows(n: int, seed: int, levels: int) -> None:
    """With ties (scores on a few levels) and every weighting a resample can give."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    y[:2] = [0, 1]
    score = rng.integers(0, levels, n).astype(float)
    counts = resample_counts(n, 6, seed)
    got = weighted_aucs(score, y == 1, counts)
    for b in range(len(counts)):
        rows = np.repeat(np.arange(n), counts[b])
        pos = y[rows] == 1
        want = roc_auc(pos, score[rows]) if 0 < pos.sum() < len(rows) else np.nan
        assert got[b] == pytest.approx(want, abs=1e-12, nan_ok=True)


def test_point_draws_match_the_audits_auc_and_gap_for_multiclass_labels() -> None:
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 500)
    proba = rng.dirichlet(np.ones(4), 500) + np.eye(4)[y] * 0.3
    proba /= proba.sum(1, keepdims=True)
    aucs = class_auc_draws(y, proba, 4, None)
    assert auc_draws(aucs)[0] == pytest.approx(auc_score(y, proba, 4), abs=1e-12)
    assert gap_draws(aucs)[0] == pytest.approx(auc_gap(y, proba, 4), abs=1e-12)


def test_resample_counts_draw_n_rows_each() -> None:
    c = resample_counts(37, 300, 5)
    assert c.shape == (300, 37) and (c.sum(axis=1) == 37).all()
    assert c.mean() == pytest.approx(1.0, abs=0.05)


def test_resamples_streamed_in_small_blocks_hold_little_and_keep_their_pairing() -> None:
    """A million-row split's resamples never live at once: blocks hold at most `cells` counts (here 50,000 rows x 4
    resamples, against 250 x 50,000 in full), every block draws n rows per resample, and reading them twice gives
    the same draws (so every adversary and the baseline are paired on them). On small splits the blocks are exactly
    `resample_counts`."""
    import tracemalloc

    n, draws = 50_000, 40
    r = Resamples(n, draws, seed=3, cells=200_000)
    assert r.block == 4
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, n)
    score = rng.normal(size=n) + 0.5 * y
    tracemalloc.start()
    a = weighted_aucs(score, y == 1, r)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(a) == draws and np.array_equal(a, weighted_aucs(score, y == 1, r))
    # at most 16 float64 arrays of one block (measured about 9), not the 100 MB of 250 x 50,000 float64 counts
    assert peak < 16 * 8 * 200_000, peak
    assert all(block.shape[0] <= 4 and (block.sum(axis=1) == n).all() for block in r.blocks())
    assert float(np.std(a)) == pytest.approx(np.sqrt((n + 1) / (12 * (n / 2) ** 2)), rel=0.35)
    small = Resamples(300, 600, seed=8)
    assert np.array_equal(np.concatenate(list(small.blocks())), resample_counts(300, 600, 8))
    assert next(small.blocks()).base is small.held  # drawn once and held: every adversary reads the same array


def test_interval_covers_the_true_auc_about_95_percent_of_the_time() -> None:
    """100 test sets of 400 rows from a score with true AUC 0.7: the percentile interval covers 0.7 in 88-99 of
    them (binomial 95% range around 95; measured 94)."""
    from scipy.stats import norm

    shift = norm.ppf(0.7) * np.sqrt(2)  # two unit normals: AUC = Phi(shift / sqrt 2) = 0.7
    covered = 0
    for rep in range(100):
        rng = np.random.default_rng(1000 + rep)
        y = rng.integers(0, 2, 400)
        score = rng.normal(size=400) + shift * y
        draws = weighted_aucs(score, y == 1, resample_counts(400, 400, rep))
        iv = interval(roc_auc(y == 1, score), draws)
        covered += iv.low <= 0.7 <= iv.high
    assert 88 <= covered <= 99, covered


def test_null_resolution_is_the_suites_largest_one_sided_bound_and_shrinks_as_one_over_sqrt_rows() -> None:
    """For one adversary the floor is its one-sided 95% bound on an independent release: 1.645 Mann-Whitney sigma,
    sqrt((n1 + n0 + 1) / (12 n1 n0)) (0.0425 at 500 balanced rows, 0.0212 at 2,000, 0.050 at 1,000 rows with a 10%
    minority; measured 0.042, 0.021, 0.047). Four correlated adversaries, the largest of their bounds: measured 0.042
    at 1,000 balanced rows (1.4x one), 0.072 at 1,000 rows with a 10% minority. `noise`, the largest point gap of
    several folded ones, grows with them too. It reads sizes only, and is the same every call."""
    half = np.array([0.5, 0.5])
    small, big = null_resolution("s", half, 500), null_resolution("s", half, 2000)
    assert small.floor == pytest.approx(0.0425, rel=0.1) and big.floor == pytest.approx(0.0212, rel=0.1)
    assert null_resolution("s", np.array([0.9, 0.1]), 1000).floor == pytest.approx(0.050, rel=0.1)
    assert small.auc_floor == pytest.approx(0.5 + small.floor)
    four = null_resolution("s", half, 2000, scorers=4)
    assert 1.2 * big.floor <= four.floor <= 1.6 * big.floor
    # beyond 3,000 rows the simulation is scaled by sqrt(3000 / rows)
    assert null_resolution("s", half, 12000).floor == pytest.approx(null_resolution("s", half, 3000).floor / 2)
    assert null_resolution("s", half, 1000) == null_resolution("s", half, 1000)
