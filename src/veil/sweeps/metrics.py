"""The sweep's metric vocabulary: which metric names a sweep may optimise or constrain (`MetricContext`,
`check_metric`), their families, per-label forms, hypervolume reference defaults and the leakage metrics
measured as a gap from chance (`is_gap_metric`), plus the objective directions and convex-hull origins.

This module loads no torch, numpy, Ray or MLflow: the MI-estimator registry, which does, is imported only
when a metric named `mi/...` is looked up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from veil.errors import ConfigError, UnknownNameError

#: accepted spellings of an objective's direction (Optuna's "maximize"/"minimize" too)
DIRECTIONS: dict[str, str] = {"max": "max", "maximize": "max", "min": "min", "minimize": "min"}
#: convex-hull AUC origins: seed 003 reports (0, 0) and calls (0.5, 0.5) the logical one
AUC_ORIGINS: dict[str, float] = {"zero": 0.0, "half": 0.5}

#: metrics every audited run logs (veil.pipeline.execute.execute: the fresh-probe audit plus timings)
RUN_METRICS = (
    "utility_acc",
    "utility_auc",
    "adversary_acc",
    "adversary_auc",
    "privacy_gap",
    "utility_logloss",
    "adversary_logloss",
    "train_seconds",
    "total_seconds",
)
#: per-label variants '<prefix>/<label>' (label: a utility or sensitive label of the dataset)
PER_LABEL_METRICS = (
    "utility_acc",
    "utility_auc",
    "adversary_acc",
    "adversary_auc",
    "privacy_gap",
    "majority",
    "logloss",
)
#: the adversary-capacity sweep's summary metrics (logged when `audit: {capacity: true}`), plus
#: 'capacity/<role>_<acc|auc>/<label>/<probe>' per label and probe
CAPACITY_METRICS = (
    "adversary_auc_max",
    "adversary_acc_max",
    "adversary_auc_mean",
    "adversary_auc_std",
    "privacy_gap_max",
    "utility_auc_max",
    "utility_acc_max",
)
#: seed 003's weak/strong adversary and utility-provider scenarios (methods that release records in the
#: input's format, e.g. adjustable-ae): '<scenario>_<acc|auc>' and '<scenario>_<acc|auc>/<label>'
OBFUSCATION_SCENARIOS = (
    "weak_adversary",
    "strong_adversary",
    "original_adversary",
    "provider_utility",
    "original_utility",
)
#: metrics only federated runs log (veil.platform.federation)
FEDERATED_METRICS = (
    "rounds",
    "bytes_up_total",
    "bytes_down_total",
    "bytes_join_initial",
    "bytes_down_final",
    "failures_total",
    "restarts",
    "federation_seconds",
    "startup_seconds",
    "rounds_per_second",
    "per_node/utility_auc_min",
    "per_node/utility_auc_mean",
    "per_node/adversary_auc_max",
    "per_node/adversary_auc_mean",
    "per_node/utility_acc_mean",
    "per_node/adversary_acc_max",
)
#: what a certified sweep tracks of each trial's certificate: met (the mean over seeds is the share of seeds that
#: met it), the worst gap's 95% upper end and the worst excess over the utility labels' (the default target's)
CERTIFICATE_METRICS = ("certificate/met", "certificate/privacy_gap_high", "certificate/excess_gap_high")
#: metrics shown in trial tables besides the objectives (the raw adversary_auc next to privacy_gap: the gap
#: says how much leaks, the AUC on which side of chance the adversary sits)
SUMMARY_METRICS = ("utility_auc", "adversary_auc", "privacy_gap", "utility_acc", "adversary_acc", "total_seconds")
#: hypervolume reference used when the spec gives none: the worst sensible value of each bounded metric
DEFAULT_REFERENCE = {
    "utility_auc": 0.5,
    "utility_acc": 0.0,
    "adversary_auc": 1.0,
    "adversary_acc": 1.0,
    "privacy_gap": 0.5,
    "utility_auc_max": 0.5,
    "utility_acc_max": 0.0,
    "adversary_auc_max": 1.0,
    "adversary_acc_max": 1.0,
    "adversary_auc_mean": 1.0,
    "privacy_gap_max": 0.5,
    **{f"{s}_auc": (1.0 if "adversary" in s else 0.5) for s in OBFUSCATION_SCENARIOS},
    **{f"{s}_acc": (1.0 if "adversary" in s else 0.0) for s in OBFUSCATION_SCENARIOS},
}
#: leakage metrics measured as the distance of the adversary from chance, |AUC - 0.5| in [0, 0.5]
GAP_METRICS = ("privacy_gap", "privacy_gap_max")
#: raw adversary scores that reward an inverted adversary, and the gap metric to minimise instead
RAW_LEAKAGE = {
    "adversary_auc": "privacy_gap",
    "adversary_acc": "privacy_gap",
    "adversary_auc_max": "privacy_gap_max",
    "adversary_acc_max": "privacy_gap_max",
    "adversary_auc_mean": "privacy_gap_max",
}
_LABEL_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True)
class MetricContext:
    """What decides which metrics a trial's run logs."""

    method: str
    federated: bool = False
    capacity: bool = False
    obfuscation: bool = False
    everything: bool = False
    """Accept every known metric (specs read back without the registry)."""
    mi: str = "none"
    """The run's `audit.mi` estimator ('none' = no MI metrics)."""

    def known(self) -> list[str]:
        """Metric names a run produces (per-label variants as '<prefix>/<label>')."""
        names = list(RUN_METRICS) + [f"{p}/<label>" for p in PER_LABEL_METRICS]
        if self.capacity or self.everything:
            names += list(CAPACITY_METRICS) + ["capacity/<role>_<acc|auc>/<label>/<probe>"]
        if self.obfuscation or self.everything:
            names += [f"{s}_{m}" for s in OBFUSCATION_SCENARIOS for m in ("acc", "auc")]
            names += [f"{s}_{m}/<label>" for s in OBFUSCATION_SCENARIOS for m in ("acc", "auc")]
        if self.federated or self.everything:
            names += list(FEDERATED_METRICS)
        if self.mi != "none" or self.everything:
            names += [f"mi/{self.mi if self.mi != 'none' else '<estimator>'}/<label>"]
        return names


def known_metrics(federated: bool = False, capacity: bool = False, obfuscation: bool = False) -> list[str]:
    """Metric names a run produces (per-label variants as '<prefix>/<label>')."""
    return MetricContext("", federated, capacity, obfuscation).known()


def _family(metric: str) -> str | None:
    """'run' | 'capacity' | 'obfuscation' | 'federated' for a known metric name, else None."""
    if metric in RUN_METRICS:
        return "run"
    if metric in CAPACITY_METRICS:
        return "capacity"
    if metric in FEDERATED_METRICS:
        return "federated"
    prefix, sep, label = metric.partition("/")
    scen = {f"{s}_{m}" for s in OBFUSCATION_SCENARIOS for m in ("acc", "auc")}
    if not sep and metric in scen:
        return "obfuscation"
    if sep and _LABEL_RE.match(label.replace("/", "")):
        if prefix in PER_LABEL_METRICS:
            return "run"
        if prefix in scen:
            return "obfuscation"
        if prefix == "mi":
            from veil.audit.mi import MI_ESTIMATORS

            if re.match(rf"^({'|'.join(map(re.escape, MI_ESTIMATORS))})/[^/]+$", label):
                return "mi"
        if prefix == "capacity" and re.match(r"^(utility|adversary)_(acc|auc)/[^/]+/[^/]+(/std)?$", label):
            return "capacity"
    return None


def check_metric(metric: Any, key: str, where: str, ctx: MetricContext) -> str:
    """`metric` if the trial's run logs it, else an error naming the key and the value."""
    if not isinstance(metric, str) or not metric:
        raise ConfigError(key, metric, "a metric name: " + ", ".join(ctx.known()), where)
    family = _family(metric)
    if family is None:
        raise UnknownNameError("metric", metric, ctx.known(), where=f"{where}: key '{key}'")
    if ctx.everything or family == "run":
        return metric
    why = {
        "capacity": (ctx.capacity, "set `audit: {capacity: true}` to run the adversary-capacity sweep"),
        "obfuscation": (
            ctx.obfuscation,
            "only methods that release records in the input's format log it (e.g. adjustable-ae)",
        ),
        "federated": (ctx.federated, "federated runs only log it"),
        "mi": (
            family == "mi" and ctx.mi == metric.split("/")[1],
            "set `audit: {mi: ESTIMATOR}` with the estimator it names",
        ),
    }[family]
    if not why[0]:
        raise ConfigError(
            key,
            metric,
            f"a metric that method {ctx.method!r} produces here ({why[1]}): " + ", ".join(ctx.known()),
            where,
        )
    return metric


def metric_label(metric: str) -> tuple[str, str] | None:
    """(role, label) of a per-label metric: role 'utility', 'sensitive' or 'any' (mi, majority); None for a
    metric that names no label."""
    family = _family(metric)
    if family is None or metric in RUN_METRICS or metric in CAPACITY_METRICS or metric in FEDERATED_METRICS:
        return None
    prefix, sep, rest = metric.partition("/")
    if not sep:
        return None
    if prefix == "mi":
        return "any", rest.split("/")[1]
    if prefix == "capacity":
        head, label = rest.split("/")[:2]
        prefix = head
    else:
        label = rest
    role = "utility" if "utility" in prefix else "sensitive" if "adversary" in prefix or "gap" in prefix else "any"
    return role, label


def default_reference(metric: str) -> float | None:
    """The hypervolume reference `metric` gets when the spec gives none: DEFAULT_REFERENCE's value, a per-label
    metric that of its prefix ('privacy_gap/s' -> 0.5); None when there is no sensible default."""
    if metric in DEFAULT_REFERENCE:
        return DEFAULT_REFERENCE[metric]
    prefix, sep, _ = metric.partition("/")
    return DEFAULT_REFERENCE.get(prefix) if sep and prefix in PER_LABEL_METRICS else None


def is_gap_metric(metric: str) -> bool:
    """True for `privacy_gap`, `privacy_gap/<label>` and `privacy_gap_max`: leakage as |AUC - 0.5|."""
    return metric.partition("/")[0] in GAP_METRICS


def gap_alternative(metric: str) -> str | None:
    """The gap metric to minimise instead of raw adversary score `metric` (per-label forms keep their label),
    or None when `metric` is not a raw adversary score."""
    prefix, sep, label = metric.partition("/")
    better = RAW_LEAKAGE.get(prefix)
    if better is None or (sep and prefix not in PER_LABEL_METRICS):
        return None
    return f"{better}/{label}" if sep else better


def raw_leakage_warning(metric: str, key: str, where: str) -> str | None:
    """Why bounding raw adversary score `metric` from above (an objective to minimise, or a `<=` constraint)
    can be gamed, naming the metric to use instead; None for any other metric."""
    better = gap_alternative(metric)
    if better is None:
        return None
    return (
        f"{where}: {key}: {metric!r} rewards an inverted adversary: a probe that ranks the sensitive label "
        "backwards scores below chance (AUC 0.2) yet leaks as much as one at 0.8, so lower is not always more "
        f"private; use {better!r} (|AUC - 0.5|, folded per class; worst 0.5) instead"
    )
