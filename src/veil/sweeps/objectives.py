"""What a sweep optimises: its `objectives`, their hypervolume `reference` point and its `constraints`.

An objective and a constraint are `param()` dataclasses read through `veil.config.build`, so their keys, allowed
values and doc lines are written once (docs/sweeps.md's objective and constraint tables are generated from them);
which metrics a sweep's runs log is the metric vocabulary's to say (`veil.sweeps.metrics`).

    objectives:
      - {metric: utility_auc, direction: max}
      - privacy_gap: min                       # shorthand
    reference: {utility_auc: 0.5, privacy_gap: 0.5}
    constraints: ['utility_auc >= 0.8']
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from veil.config import REQUIRED, build, param
from veil.errors import ConfigError, UnknownNameError
from veil.sweeps.metrics import (
    DIRECTIONS,
    MetricContext,
    check_metric,
    default_reference,
    metric_label,
    raw_leakage_warning,
)

CONSTRAINT_OPS = (">=", "<=", ">", "<")
_CONSTRAINT_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(>=|<=|>|<)\s*([-+0-9.eE]+|inf|-inf)\s*$")
DIRECTION_NAMES = tuple(dict.fromkeys(DIRECTIONS.values()))
METRIC_DOC = "A metric every trial's runs log (the metrics below; METRIC/LABEL for one label)"


@dataclass(frozen=True)
class Objective:
    """A metric to optimise: `{metric: NAME, direction: max}`, or the shorthand `{NAME: max}` / 'NAME: max'."""

    metric: str = param(REQUIRED, METRIC_DOC)
    direction: str = param(
        REQUIRED,
        "Whether a higher (max) or a lower (min) value is better (maximize, minimize too)",
        choices=DIRECTION_NAMES,
    )


@dataclass(frozen=True)
class Constraint:
    """A feasibility condition 'METRIC OP NUMBER' such as 'utility_auc >= 0.8' (infeasible trials never join the
    front)."""

    metric: str = param(REQUIRED, METRIC_DOC)
    op: str = param(REQUIRED, "How a trial's value compares with the bound", choices=CONSTRAINT_OPS)
    value: float = param(REQUIRED, "The bound: a number", allow_inf=True)

    def holds(self, x: float) -> bool:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return False
        return {">=": x >= self.value, "<=": x <= self.value, ">": x > self.value, "<": x < self.value}[self.op]

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


def parse_objectives(raw: Any, where: str, ctx: MetricContext) -> tuple[Objective, ...]:
    """`objectives:` as Objectives, each metric one `ctx`'s runs log, each once."""
    if not isinstance(raw, list) or not raw:
        raise ConfigError("objectives", raw, "a non-empty list of {metric: NAME, direction: max|min}", where)
    out: list[Objective] = []
    for i, item in enumerate(raw):
        k = f"objectives[{i}]"
        if isinstance(item, str) and ":" in item:  # shorthand 'utility_auc: max' read as a one-key mapping below
            m, _, d = item.partition(":")
            item = {"metric": m.strip(), "direction": d.strip()}
        if isinstance(item, Mapping) and len(item) == 1 and "metric" not in item:
            ((m, d),) = item.items()
            item = {"metric": m, "direction": d}
        if not isinstance(item, Mapping):
            raise ConfigError(k, item, "{metric: NAME, direction: max|min}", where)
        way = item.get("direction")
        item = {**item, "direction": DIRECTIONS.get(way, way) if isinstance(way, str) else way}
        try:
            given = build(Objective, item, where, strict=True, path=k, kind="objective key")
        except ConfigError as e:
            if e.field == f"{k}.metric":  # say which metrics there are
                check_metric(item.get("metric"), e.field, where, ctx)
            raise
        metric = check_metric(given.metric, f"{k}.metric", where, ctx)
        if any(o.metric == metric for o in out):
            raise ConfigError(f"{k}.metric", metric, "each metric once", where)
        out.append(Objective(metric, given.direction))
    return tuple(out)


def _number(v: Any, key: str, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise ConfigError(key, v, "a finite number", where)
    return float(v)


def parse_reference(raw: Any, objectives: tuple[Objective, ...], where: str) -> tuple[float, ...]:
    """`reference:` (a mapping METRIC: value or a list, one value per objective; left out: each metric's default
    reference) as one value per objective."""
    metrics = [o.metric for o in objectives]
    if raw is None:
        defaults = [default_reference(m) for m in metrics]
        missing = [m for m, d in zip(metrics, defaults) if d is None]
        if missing:
            raise ConfigError(
                "reference",
                None,
                f"a hypervolume reference point (no default for {', '.join(missing)}): "
                "{METRIC: value, ...} or a list, one value per objective",
                where,
            )
        return tuple(d for d in defaults if d is not None)
    if isinstance(raw, Mapping):
        for k in raw:
            if k not in metrics:
                raise UnknownNameError("reference metric", k, metrics, where=f"{where}: key 'reference'")
        missing = [m for m in metrics if m not in raw]
        if missing:
            raise ConfigError(
                "reference", dict(raw), f"a value for every objective (missing {', '.join(missing)})", where
            )
        return tuple(_number(raw[m], f"reference.{m}", where) for m in metrics)
    if isinstance(raw, list):
        if len(raw) != len(metrics):
            raise ConfigError(
                "reference", raw, f"{len(metrics)} values, one per objective ({', '.join(metrics)})", where
            )
        return tuple(_number(v, f"reference[{i}]", where) for i, v in enumerate(raw))
    raise ConfigError("reference", raw, "{METRIC: value, ...} or a list, one value per objective", where)


def parse_constraints(raw: Any, where: str, ctx: MetricContext) -> tuple[Constraint, ...]:
    """`constraints:` (one 'METRIC OP NUMBER' string or a list of them) as Constraints on metrics `ctx` logs."""
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        raise ConfigError("constraints", raw, "a list like ['utility_auc >= 0.9']", where)
    out = []
    for i, item in enumerate(raw):
        m = _CONSTRAINT_RE.match(item) if isinstance(item, str) else None
        if not m:
            raise ConfigError(
                f"constraints[{i}]",
                item,
                f"'METRIC {' | '.join(CONSTRAINT_OPS)} NUMBER', e.g. 'utility_auc >= 0.9'",
                where,
            )
        metric = check_metric(m.group(1), f"constraints[{i}]", where, ctx)
        try:
            value = float(m.group(3))
        except ValueError:
            raise ConfigError(f"constraints[{i}]", item, "a number on the right-hand side", where) from None
        parts = {"metric": metric, "op": m.group(2), "value": value}
        out.append(build(Constraint, parts, where, strict=True, path=f"constraints[{i}]"))
    return tuple(out)


def leakage_warnings(objectives: Sequence[Objective], constraints: Sequence[Constraint], where: str) -> tuple[str, ...]:
    """A warning for each raw adversary score the sweep minimises or bounds from above (an inverted adversary
    games it), naming the key and the gap metric to use instead."""
    found = [
        *(
            raw_leakage_warning(o.metric, f"objectives[{i}]", where)
            for i, o in enumerate(objectives)
            if o.direction == "min"
        ),
        *(
            raw_leakage_warning(c.metric, f"constraints[{i}]", where)
            for i, c in enumerate(constraints)
            if c.op in ("<=", "<")
        ),
    ]
    return tuple(w for w in found if w)


def check_metric_labels(spec: Any, utility: Sequence[str], sensitive: Sequence[str]) -> None:
    """Refuse an objective or constraint of sweep `spec` (a SweepSpec) on a label the dataset does not have,
    naming the labels it has."""
    named = [(f"objectives[{i}].metric", o.metric) for i, o in enumerate(spec.objectives)]
    named += [(f"constraints[{i}]", c.metric) for i, c in enumerate(spec.constraints)]
    for key, metric in named:
        found = metric_label(metric)
        if found is None:
            continue
        role, label = found
        allowed = {"utility": utility, "sensitive": sensitive}.get(role, [*utility, *sensitive])
        if label not in allowed:
            prefix = metric[: -len(label)]
            raise ConfigError(
                key,
                metric,
                f"a {'' if role == 'any' else role + ' '}label of dataset {spec.dataset!r}: "
                + ", ".join(prefix + x for x in allowed)
                + f" (utility labels: {', '.join(utility)}; sensitive labels: {', '.join(sensitive)})",
                spec.source,
            )
