"""Leakage targets: what a user may demand of a release ("the adversary may gain at most this much"), checked up
front, and the protective default every privacy method gets when the user names none.

A target is a set of bounds, each on one metric of the certificate (`veil.certify.certificate`):

  excess_gap         how much more the release reveals than the utility labels alone do: the worst adversary's
                     AUC - 0.5 less that of the best predictor of the label from the utility labels (floored at 0),
                     paired on the same test rows (the default: a release may keep the task, and hide the rest)
  privacy_gap        the worst |AUC - 0.5| over the adversary suite and every sensitive label (0 = chance)
  adversary_auc_max  the highest adversary ROC-AUC over the same suite (a one-sided bound: below-chance is allowed)
  mi/<est>/<label>   the estimate of I(Z; label) in nats by MI estimator <est> (`veil.audit.mi`)
  eps                the epsilon of an eps-LDP mechanism (LDP-FRL, LDP-FedAvg, dp-input): a formal bound

Gap, excess and AUC bounds are met only when the upper end of the 95% bootstrap interval over test rows is within the
bound; MI and eps bounds compare the estimate or the mechanism's own epsilon."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from veil.errors import ConfigError

#: the target of a privacy method run with none given (docs/defaults.md says why 0.05): where s is independent of
#: the utility labels it is privacy_gap <= 0.05; where the task itself reveals s, the task is kept and the rest hidden
DEFAULT_TARGET: Mapping[str, float] = {"excess_gap": 0.05}
#: the bounds checked against the upper end of a one-sided bootstrap bound over test rows
INTERVAL_CHECKED = ("excess_gap", "privacy_gap", "adversary_auc_max")

#: metric -> (what it bounds, allowed range text, check)
BOUNDED: dict[str, tuple[str, str]] = {
    "excess_gap": (
        "worst AUC - 0.5 of the adversary suite beyond what the utility labels alone reveal, over the sensitive labels",
        "a number > 0 and <= 0.5",
    ),
    "privacy_gap": ("worst |AUC - 0.5| of the adversary suite over the sensitive labels", "a number > 0 and <= 0.5"),
    "adversary_auc_max": (
        "highest adversary ROC-AUC of the suite over the sensitive labels",
        "a number > 0.5 and <= 1",
    ),
    "eps": ("epsilon of the method's eps-LDP mechanism", "a number > 0"),
}
MI_PREFIX = "mi/"
NONE_WORDS = ("none", "off", "null")


@dataclass(frozen=True)
class Bound:
    """One bound of a target: `metric` <= `limit`."""

    metric: str
    limit: float

    @property
    def interval_checked(self) -> bool:
        """Whether the bound is checked against the upper end of a bootstrap interval (gap and AUC bounds)."""
        return self.metric in INTERVAL_CHECKED

    def text(self) -> str:
        return f"{self.metric} <= {self.limit:g}"


@dataclass(frozen=True)
class Target:
    """The bounds a release must meet; empty = no target (nothing is calibrated or certified)."""

    bounds: tuple[Bound, ...] = ()
    default: bool = False
    """True for the protective default a privacy method gets when the user gives no target."""

    def __bool__(self) -> bool:
        return bool(self.bounds)

    def get(self, metric: str) -> Bound | None:
        return next((b for b in self.bounds if b.metric == metric), None)

    def text(self) -> str:
        if not self.bounds:
            return "none"
        return ", ".join(b.text() for b in self.bounds) + (" (the default target)" if self.default else "")

    def to_dict(self) -> dict[str, float]:
        return {b.metric: b.limit for b in self.bounds}

    def params(self) -> dict[str, Any]:
        """As MLflow params: target.<metric> = limit, and target.source."""
        if not self.bounds:
            return {"target": "none"}
        out: dict[str, Any] = {f"target.{b.metric}": b.limit for b in self.bounds}
        out["target.source"] = "default" if self.default else "run"
        return out


def parse_target(value: Any, where: str | None = None) -> Target | None:
    """A target from a run file, sweep spec or `--target` flags: a mapping metric -> bound, or 'none' (no target).
    None (not given) stays None: the caller decides whether the default applies. Bad metrics or values raise,
    naming them and what is allowed."""
    if value is None:
        return None
    if value is False:  # YAML 1.1 reads a bare `off` / `no` as false
        return Target(())
    if isinstance(value, str):
        if value.strip().lower() in NONE_WORDS:
            return Target(())
        raise ConfigError("target", value, "a mapping of bounds, e.g. {privacy_gap: 0.05}, or 'none'", where)
    if not isinstance(value, Mapping) or not value:  # an empty mapping: a forgotten bound, not a choice of none
        raise ConfigError("target", value, "a mapping of bounds, e.g. {privacy_gap: 0.05}, or 'none'", where)
    bounds = [parse_bound(str(k), v, where) for k, v in value.items()]
    return Target(tuple(bounds))


def parse_bound(metric: str, value: Any, where: str | None = None) -> Bound:
    """One `metric: limit` entry of a target."""
    field = f"target.{metric}"
    if metric.startswith(MI_PREFIX):
        parts = metric.split("/")
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise ConfigError("target", metric, "mi/<estimator>/<sensitive label>, e.g. mi/variational/gender", where)
        from veil.audit.mi import MI_ESTIMATORS

        if parts[1] not in MI_ESTIMATORS:
            raise ConfigError(field, parts[1], "an MI estimator: " + " | ".join(MI_ESTIMATORS), where)
        allowed = "a number > 0 (nats)"
    elif metric in BOUNDED:
        allowed = BOUNDED[metric][1]
    else:
        raise ConfigError(
            "target", metric, " | ".join([*BOUNDED, "mi/<estimator>/<label>"]) + " (or 'none' for no target)", where
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ConfigError(field, value, allowed, where) from None
    limit = float(value)
    ok = math.isfinite(limit) and {
        "privacy_gap": 0 < limit <= 0.5,
        "excess_gap": 0 < limit <= 0.5,
        "adversary_auc_max": 0.5 < limit <= 1,
    }.get(metric, limit > 0)
    if not ok:
        raise ConfigError(field, value, allowed, where)
    return Bound(metric, limit)


def default_target() -> Target:
    """The protective default (`DEFAULT_TARGET`), marked as the default."""
    return Target(tuple(parse_bound(k, v) for k, v in DEFAULT_TARGET.items()), True)


def target_from_flags(items: list[str]) -> Target | None:
    """`--target privacy_gap=0.05 --target eps=4` (or `--target none`) as a Target; no flags -> None."""
    if not items:
        return None
    if len(items) == 1 and items[0].strip().lower() in NONE_WORDS:
        return Target(())
    pairs: dict[str, Any] = {}
    for item in items:
        if item.strip().lower() in NONE_WORDS:
            raise ConfigError("--target", item, "'none' alone, or METRIC=BOUND flags without it")
        if "=" not in item:
            raise ConfigError("--target", item, "METRIC=BOUND (e.g. privacy_gap=0.05) or 'none'")
        key, raw = item.split("=", 1)
        if key.strip() in pairs:
            raise ConfigError("--target", item, f"one bound per metric ({key.strip()} is given twice)")
        pairs[key.strip()] = raw.strip()
    return parse_target(pairs, where="--target")


def check_labels(target: Target, sensitive: tuple[str, ...], source: str) -> None:
    """An MI bound must name a sensitive label of the data (known once the data are loaded)."""
    for b in target.bounds:
        if b.metric.startswith(MI_PREFIX):
            label = b.metric.split("/")[2]
            if label not in sensitive:
                raise ConfigError(
                    f"target.{b.metric}", label, "a sensitive label of " + source + ": " + ", ".join(sensitive)
                )
