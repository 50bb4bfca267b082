"""Bootstrap intervals over test rows for the audit's AUC figures, computed for every resample at once.

A resample is a vector of row counts (rows drawn with replacement); the AUC of a resample is the weighted
Mann-Whitney statistic, ties counting half, which equals `veil.audit.probes.roc_auc` on the rows it draws. One
sort of the scores serves every resample, so 1,000 resamples of 15,000 rows cost a few hundred milliseconds
instead of 1,000 rank computations. The same resamples are used for every probe and label of a certificate, so a
statistic over several of them (the worst gap of the adversary suite) gets its interval from the joint draws."""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Iterator, Sequence, Union

import numpy as np

#: resamples processed at once (memory: CHUNK x rows x 8 bytes per array)
CHUNK = 250
#: resamples whose AUCs are computed together hold about this many (resample, row) cells: the arrays of one such
#: group are read several times over, and kept small they stay in the CPU's cache
COMPUTE_CELLS = 131_072
#: at most this many (resample, row) cells in one block (a million test rows: 20 resamples a block), so the bootstrap
#: holds a few float64 arrays of this size at once however many resamples or rows there are
BLOCK_CELLS = 20_000_000


@dataclass(frozen=True)
class Interval:
    """A point estimate with its (two-sided) bootstrap interval."""

    point: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"value": self.point, "low": self.low, "high": self.high}

    def text(self, digits: int = 3) -> str:
        return f"{self.point:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def resample_counts(n: int, draws: int, seed: int) -> np.ndarray:
    """(draws, n) int32 counts: how often each of n rows is drawn in each of `draws` bootstrap resamples (all of
    `Resamples(n, draws, seed)` at once: only for splits small enough to hold them)."""
    return np.concatenate(list(Resamples(n, draws, seed).generate()))


@dataclass(frozen=True)
class Resamples:
    """`draws` bootstrap resamples of `n` rows from `seed`, the same blocks every time they are read: every
    statistic read on one `Resamples` is paired on the same resamples. Up to `cells` counts in all they are drawn
    once and held (a certificate or a calibration reads them for every adversary and label); beyond that they are
    generated again at each read, a block at a time, so that no more than `cells` counts are held at once."""

    n: int
    draws: int
    seed: int
    cells: int = BLOCK_CELLS

    def __len__(self) -> int:
        return self.draws

    @property
    def block(self) -> int:
        """Resamples per block: CHUNK, fewer where CHUNK x n would exceed `cells`."""
        return max(1, min(CHUNK, self.cells // max(self.n, 1)))

    @functools.cached_property
    def held(self) -> np.ndarray:
        """Every resample's counts at once, drawn on first use (only read where they fit in `cells`)."""
        return np.concatenate(list(self.generate()))

    def blocks(self) -> Iterator[np.ndarray]:
        """(b, n) int32 counts per block, in order."""
        if self.n * self.draws <= self.cells:
            for start in range(0, self.draws, CHUNK):
                yield self.held[start : start + CHUNK]
            return
        yield from self.generate()

    def generate(self) -> Iterator[np.ndarray]:
        """The blocks drawn afresh from `seed`."""
        rng = np.random.default_rng(self.seed)
        for start in range(0, self.draws, self.block):
            b = min(self.block, self.draws - start)
            idx = rng.integers(0, self.n, size=(b, self.n))
            idx += np.arange(b)[:, None] * self.n
            yield np.bincount(idx.ravel(), minlength=b * self.n).reshape(b, self.n).astype(np.int32)


#: row weights of resamples: an array of counts (draws x rows), or resamples generated as they are read
Counts = Union[np.ndarray, Resamples]


def count_blocks(counts: Counts) -> Iterator[np.ndarray]:
    """`counts` a block of resamples at a time."""
    if isinstance(counts, Resamples):
        yield from counts.blocks()
        return
    for start in range(0, len(counts), CHUNK):
        yield counts[start : start + CHUNK]


def weighted_aucs(score: np.ndarray, positive: np.ndarray, counts: Counts) -> np.ndarray:
    """ROC-AUC of `score` for boolean labels `positive` under each resample of `counts` (weights per row): (draws,)
    values, NaN for a resample without a positive or a negative row."""
    order = np.argsort(score, kind="mergesort")
    s, pos = score[order], positive[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])  # tie groups of the sorted scores
    step = max(1, COMPUTE_CELLS // max(len(score), 1))
    out = []
    for block in count_blocks(counts):
        for start in range(0, len(block), step):
            w = block[start : start + step][:, order].astype(np.float64)
            neg = np.add.reduceat(np.where(pos, 0.0, w), starts, axis=1)
            posw = np.add.reduceat(np.where(pos, w, 0.0), starts, axis=1)
            below = np.cumsum(neg, axis=1) - neg
            num = (posw * (below + 0.5 * neg)).sum(axis=1)
            den = posw.sum(axis=1) * neg.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                out.append(np.where(den > 0, num / den, np.nan))
    return np.concatenate(out) if out else np.empty(0)


def class_auc_draws(y: np.ndarray, proba: np.ndarray, n_classes: int, counts: Counts | None) -> list[np.ndarray]:
    """Per class (as `veil.audit.probes.class_aucs`: P(class 1) for binary, one-vs-rest per class present in y for
    multi-class) the AUC on the rows themselves (counts None: arrays of one value) or under each resample."""
    present = np.unique(y)
    if len(present) < 2:
        return []
    w = np.ones((1, len(y)), dtype=np.int32) if counts is None else counts
    if n_classes == 2:
        return [weighted_aucs(proba[:, 1], y == 1, w)]
    return [weighted_aucs(proba[:, c], y == c, w) for c in range(n_classes) if c in present]


def gap_draws(aucs: Sequence[np.ndarray]) -> np.ndarray:
    """The privacy gap (mean over classes of |AUC_c - 0.5|, as `veil.audit.probes.folded_gap`) per draw."""
    if not aucs:
        return np.array([np.nan])
    with warnings.catch_warnings():  # a draw whose classes all lack an AUC is NaN, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(np.abs(np.stack(aucs) - 0.5), axis=0)


def signed_gap_draws(aucs: Sequence[np.ndarray]) -> np.ndarray:
    """The one-sided gap (mean over classes of AUC_c - 0.5: an adversary below chance failed, it does not leak)
    per draw: the certificate's statistic."""
    if not aucs:
        return np.array([np.nan])
    with warnings.catch_warnings():  # a draw whose classes all lack an AUC is NaN, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(np.stack(aucs) - 0.5, axis=0)


def auc_draws(aucs: Sequence[np.ndarray]) -> np.ndarray:
    """The ROC-AUC (mean over classes, as `veil.audit.probes.auc_score`) per draw."""
    if not aucs:
        return np.array([np.nan])
    with warnings.catch_warnings():  # a draw whose classes all lack an AUC is NaN, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(np.stack(aucs), axis=0)


def interval(point: float, draws: np.ndarray, confidence: float = 0.95) -> Interval:
    """`point` with the percentile interval of `draws` at `confidence` (two-sided; NaN draws ignored)."""
    finite = draws[np.isfinite(draws)]
    if not len(finite) or not np.isfinite(point):
        return Interval(float(point), float("nan"), float("nan"))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return Interval(float(point), float(low), float(high))


def one_sided(point: float, draws: np.ndarray, confidence: float = 0.95) -> Interval:
    """`point` with one-sided bounds from the percentiles of `draws`: `high` is a `confidence` upper bound and `low` a
    `confidence` lower bound (together a 2 * confidence - 1 two-sided interval; NaN draws ignored)."""
    return interval(point, draws, 2 * confidence - 1)


@dataclass(frozen=True)
class Resolution:
    """What a split of this size can show for one sensitive label, found for a release independent of it: the
    typical upper end of the certificate's bound when `scorers` adversaries attack it (the largest of their one-sided
    95% bounds; `floor`: no smaller gap bound can be certified; `auc_floor`: the same on the AUC)."""

    label: str
    rows: int
    floor: float
    auc_floor: float
    scorers: int = 1


#: pairwise correlation of the simulated adversaries' scores: probes fitted on the same release agree in part
SCORER_CORRELATION = 0.5


def null_resolution(
    label: str,
    class_shares: np.ndarray,
    rows: int,
    *,
    scorers: int = 1,
    draws: int = 200,
    repeats: int = 21,
    seed: int = 0,
) -> Resolution:
    """`Resolution` of a label with class proportions `class_shares` on `rows` rows, by simulation: `scorers`
    random scorers with correlated scores (a release independent of the label, attacked by several adversaries),
    the bootstrap as the certificate runs it, the median over `repeats` simulated splits. Splits larger than
    `SIMULATED_ROWS` are simulated at that size and scaled by sqrt(size ratio), as every figure here shrinks with
    1/sqrt(rows). Reads only the sizes, never test labels."""
    shares = tuple(round(float(x), 3) for x in np.asarray(class_shares, dtype=np.float64) / np.sum(class_shares))
    sim = min(int(rows), SIMULATED_ROWS)
    floor, auc_floor = _simulate(shares, sim, scorers, draws, repeats, seed)
    scale = float(np.sqrt(sim / rows))
    return Resolution(label, int(rows), floor * scale, 0.5 + (auc_floor - 0.5) * scale, scorers)


#: the largest split `null_resolution` simulates; larger ones are scaled from it
SIMULATED_ROWS = 3000


@functools.lru_cache(maxsize=256)
def _simulate(
    shares: tuple[float, ...], rows: int, scorers: int, draws: int, repeats: int, seed: int
) -> tuple[float, float]:
    """(median of the largest one-sided upper end of `scorers` adversaries' gaps, of their AUCs) over `repeats`
    splits."""
    k = len(shares)
    counts = np.maximum(np.round(np.asarray(shares) * rows).astype(int), 1)
    y = np.repeat(np.arange(k), counts)
    rng = np.random.default_rng(seed)
    uppers = []
    a, b = np.sqrt(SCORER_CORRELATION), np.sqrt(1 - SCORER_CORRELATION)
    for r in range(repeats):
        counts_r = resample_counts(len(y), draws, seed + 1 + r)
        common = rng.standard_normal((len(y), k))
        highs, signs = [], []
        for _ in range(scorers):
            logits = a * common + b * rng.standard_normal((len(y), k))
            proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            point = class_auc_draws(y, proba, k, None)
            signed = float(signed_gap_draws(point)[0])
            signs.append(signed)
            highs.append(one_sided(signed, signed_gap_draws(class_auc_draws(y, proba, k, counts_r))).high)
        # less the split's mean point, whose expectation is 0: the noise the adversaries share would otherwise move
        # the median, while what the maximum adds above their mean is kept
        uppers.append(max(highs) - float(np.mean(signs)))
    return float(np.median(uppers)), 0.5 + float(np.median(uppers))
