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
from veil.certify.target import Target
from veil.datasets.base import Dataset
from veil.errors import ConfigError


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


def check_resolution(ds: Dataset, target: Target, cfg: AuditConfig, source: str, seed: int = 0) -> None:
    """Refuse, before anything trains, a gap or AUC bound the test split is too small to certify: even a release
    independent of a sensitive label typically reaches a higher upper end of its 95% interval, against the
    certificate's adversaries."""
    for bound in (target.get("privacy_gap"), target.get("adversary_auc_max")):
        if bound is None:
            continue
        gap = bound.metric == "privacy_gap"
        floor, name = certificate_floor(ds, cfg, bound.metric, seed)
        if floor <= bound.limit:
            continue
        base = 0.0 if gap else 0.5
        need = math.ceil(len(ds.test) * ((floor - base) / (bound.limit - base)) ** 2)
        what = "the default target" if target.default else "the target"
        loose = math.ceil(((floor - base) * 1.5 + base) * 100) / 100
        more = "Give more rows"
        n = ds.params.get("n")
        if isinstance(n, int) and not isinstance(n, bool):  # a generated dataset: say what size certifies it
            more += f" (-p n={math.ceil(n * need / len(ds.test) / 100) * 100})"
        raise ConfigError(
            f"target.{bound.metric}",
            bound.limit,
            f"a bound this data can certify, above {floor:.3f}: {source} holds {len(ds.test)} test rows, and even a "
            f"release independent of '{name}' typically reaches {floor:.3f} at the certificate's one-sided 95% upper "
            f"bound (the largest of its {len(cfg.suite)} adversaries'); certifying {bound.limit:g} takes about "
            f"{need} test rows. {more}, loosen {what} (e.g. --target {bound.metric}={loose:g}), or say "
            "--target none for no certificate",
        )
