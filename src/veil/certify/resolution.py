"""Whether a test split can certify a target at all: the certificate's floor on these rows (what its upper bound
typically reads for a release that leaks nothing, `veil.certify.intervals.null_resolution`), and the refusal, before
anything trains, of a gap or AUC bound below it. Reads the class shares of the training rows and the test split's
size, never a test label."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from veil.audit.settings import AuditConfig
from veil.certify.intervals import Resolution, null_resolution
from veil.certify.knob_search import ASSURANCE, VALIDATION_SHARE
from veil.certify.target import Target
from veil.datasets.dataset import Dataset
from veil.errors import UncertifiableTarget


def resolution(ds_side: Any, num_classes: Any, rows: int, scorers: int, seed: int) -> list[Resolution]:
    """The null resolution of every sensitive label on `rows` rows, attacked by `scorers` adversaries (class
    shares from `ds_side`, a split of training rows: no test label is read)."""
    out = []
    for name, y in ds_side.sensitive.items():
        shares = np.bincount(np.asarray(y), minlength=int(num_classes[name])).astype(float)
        out.append(null_resolution(name, shares[shares > 0], rows, scorers=scorers, seed=seed))
    return out


def certificate_floor(ds: Dataset, cfg: AuditConfig, metric: str, seed: int) -> tuple[float, str]:
    """The typical upper end the certificate reaches on the test split for a release independent of every sensitive
    label (the largest of the suite's one-sided 95% bounds; the worst label), and that label."""
    res = resolution(ds.train, ds.num_classes, len(ds.test), len(cfg.suite), seed)
    worst = max(res, key=lambda r: r.floor if metric == "privacy_gap" else r.auc_floor)
    return (worst.floor if metric == "privacy_gap" else worst.auc_floor), worst.label


#: the certificate's one-sided 95% bound: its upper end lies this many standard deviations above its point
Z_CERTIFICATE = 1.6449


def z_of(assurance: float) -> float:
    """The standard normal quantile at `assurance` (0.9 -> 1.2816)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(assurance)


def margin_of(
    spread: float, upper: float, validation_rows: int, test_rows: int, assurance: float, error: float | None = None
) -> float:
    """How far above a candidate's validation estimate the certificate's upper end may land, with probability
    `assurance`: what its one-sided bound adds on the test rows (`upper`: the suite's largest bound above the worst
    point, read on validation, shrunk to the test split's size; at least Z_CERTIFICATE test standard deviations),
    plus z(assurance) standard deviations of the difference between the validation estimate and the certificate's
    point. `spread` is the candidate's own bootstrap standard deviation on `validation_rows` rows; the test split's
    is that scaled by sqrt(validation rows / test rows). `error` is the standard deviation of the estimate itself
    where it is not `spread`: cross-fitted over folds, it pools every fold's rows and adds how much the fold models
    differ."""
    scale = math.sqrt(validation_rows / max(test_rows, 1))
    test_spread = spread * scale
    above = max(Z_CERTIFICATE * test_spread, upper * scale)
    return above + z_of(assurance) * math.hypot(spread if error is None else error, test_spread)


def null_margin(
    ds: Dataset, validation_rows: int, cfg: AuditConfig, assurance: float, seed: int, folds: int = 1
) -> float:
    """`margin_of` for a release independent of every sensitive label, scored on `validation_rows` of the training
    rows per fold (Mann-Whitney spread of the worst label at their class shares; the suite's largest bound from
    `certificate_floor`; `folds` such splits pooled): the room an absolute gap bound must leave before any
    candidate can be feasible."""
    worst = 0.0
    for y in ds.train.sensitive.values():
        shares = np.bincount(np.asarray(y)) / len(y)
        minority = max(float(shares[shares > 0].min()), 1.0 / validation_rows)
        n1 = minority * validation_rows
        worst = max(worst, math.sqrt((validation_rows + 1) / (12.0 * n1 * (validation_rows - n1))))
    floor = certificate_floor(ds, cfg, "privacy_gap", seed)[0]
    scale = math.sqrt(validation_rows / max(len(ds.test), 1))
    return margin_of(worst, floor / scale, validation_rows, len(ds.test), assurance, worst / math.sqrt(folds))


def utility_reveal_on_train(ds: Dataset) -> dict[str, float]:
    """Per sensitive label, the signed gap of the utility labels' baseline (`baseline_probas`) fitted on one half of
    the training rows and read on the other: how much a release that keeps u reveals on its own. No test row is
    read."""
    from veil.certify.baseline import baseline_probas
    from veil.certify.intervals import class_auc_draws, signed_gap_draws

    half = np.random.default_rng(0).permutation(len(ds.train)) < len(ds.train) // 2
    a, b = ds.train.take(np.flatnonzero(half)), ds.train.take(np.flatnonzero(~half))
    out = {}
    for name, proba in baseline_probas(a, b, ds.num_classes).items():
        y = np.asarray(b.sensitive[name])
        out[name] = float(signed_gap_draws(class_auc_draws(y, proba, int(ds.num_classes[name]), None))[0])
    return out


def check_resolution(ds: Dataset, target: Target, cfg: AuditConfig, source: str, seed: int = 0) -> None:
    """Refuse, before anything trains, a gap, excess or AUC bound the test split is too small to certify: even a
    release independent of a sensitive label typically reaches a higher upper end of its 95% bound, against the
    certificate's adversaries. An excess bound is refused only where the utility labels reveal less of the label
    than that floor on the training rows: where they reveal more, a release that keeps u is judged against them,
    paired on the same rows, and its excess varies far less than an independent release's gap."""
    for bound in (target.get("privacy_gap"), target.get("excess_gap"), target.get("adversary_auc_max")):
        if bound is None:
            continue
        gap = bound.metric != "adversary_auc_max"
        res = resolution(ds.train, ds.num_classes, len(ds.test), len(cfg.suite), seed)
        if bound.metric == "excess_gap":
            reveal = utility_reveal_on_train(ds)
            res = [r for r in res if reveal.get(r.label, 0.0) < r.floor]
        if not res:
            continue
        worst = max(res, key=lambda r: r.floor if gap else r.auc_floor)
        floor, name = (worst.floor if gap else worst.auc_floor), worst.label
        if floor <= bound.limit:
            continue
        base = 0.0 if gap else 0.5
        need = math.ceil(len(ds.test) * ((floor - base) / (bound.limit - base)) ** 2)
        what = "the default target" if target.default else "the target"
        # a bound calibration can use: room for a release independent of s with its validation noise, and a quarter
        # more for one that keeps something
        usable = null_margin(ds, max(2, round(len(ds.train) * VALIDATION_SHARE)), cfg, ASSURANCE, seed)
        loose = math.ceil((max((floor - base) * 1.5, usable * 1.25) + base) * 100) / 100
        loosen = (
            f", loosen {what} (e.g. --target {bound.metric}={loose:g})"
            if loose <= base + 0.5
            else f" (no bound up to {base + 0.5:g} leaves calibration room on these rows)"
        )
        more = "Give more rows"
        n = ds.params.get("n")
        if isinstance(n, int) and not isinstance(n, bool):  # a generated dataset: say what size certifies it
            more += f" (-p n={math.ceil(n * need / len(ds.test) / 100) * 100})"
        raise UncertifiableTarget(
            f"target.{bound.metric}",
            bound.limit,
            f"a bound this data can certify, above {floor:.3f}: {source} holds {len(ds.test)} test rows, and even a "
            f"release independent of '{name}' typically reaches {floor:.3f} at the certificate's one-sided 95% upper "
            f"bound (the largest of its {len(cfg.suite)} adversaries'); certifying {bound.limit:g} takes about "
            f"{need} test rows. {more}{loosen}, or say --target none for no certificate",
            target.default,
            len(ds.test),
        )
