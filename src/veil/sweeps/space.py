"""A sweep's search space: what `space:` may hold, read into SearchParams.

Each parameter's body is one of the `param()` dataclasses below, picked by its `type` (`veil.config.build_tagged`):
its keys, defaults, allowed values and doc lines are written there once, and docs/sweeps.md's space table is
generated from them (`tools/sweeps_doc.py`). The routing of a key to the method's or the dataset's config, and the
check of every end point and value against that config, stay with the spec (`veil.sweeps.sweepspec`).

    space:
      beta: {type: log, low: 0.05, high: 10}
      k: {type: int, low: 1, high: 8, step: 1}
      encoder_hidden: {type: categorical, values: [[16], [16, 16]]}
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from veil.config import REQUIRED, build_tagged, param
from veil.errors import ConfigError

PARAM_TYPES = ("float", "int", "log", "categorical")
TYPE_ALIASES = {
    "uniform": "float",
    "integer": "int",
    "log-float": "log",
    "loguniform": "log",
    "choice": "categorical",
}
"""Other spellings of a `type` (Optuna's and Tune's names), read as the type they name."""

SPACE_KIND = "search-space key"
"""What an unknown key under a parameter is called in errors."""


def _check_range(low: float, high: float, step: float | None) -> None:
    """A range's end points in order and its step within it (errors name the key; `build` adds the path)."""
    if low > high:
        raise ConfigError("high", high, f"a value above low = {low} (the range is inverted)")
    if low == high:
        raise ConfigError(
            "high", high, f"a value above low = {low} (the range is empty; a single value belongs under params:)"
        )
    if step is not None and step > high - low:
        raise ConfigError("step", step, f"a number > 0 and <= high - low ({high - low})")


@dataclass(frozen=True)
class FloatRange:
    """`type: float` (or uniform): a number drawn uniformly from low to high."""

    low: float = param(REQUIRED, "Lowest value tried")
    high: float = param(REQUIRED, "Highest value tried: above low")
    step: float | None = param(None, "Spacing of the values tried, at most high - low (none: any number)", gt=0)

    def check(self) -> None:
        _check_range(self.low, self.high, self.step)


@dataclass(frozen=True)
class IntRange:
    """`type: int` (or integer): an integer from low to high; the grid sampler visits each (by step)."""

    low: int = param(REQUIRED, "Lowest value tried")
    high: int = param(REQUIRED, "Highest value tried: above low")
    step: int | None = param(None, "Spacing of the values tried, at most high - low (none: 1)", gt=0)

    def check(self) -> None:
        _check_range(self.low, self.high, self.step)


@dataclass(frozen=True)
class LogRange:
    """`type: log` (or log-float, loguniform): a number from low to high drawn uniformly on a log scale."""

    low: float = param(REQUIRED, "Lowest value tried: above 0 on a log scale", gt=0)
    high: float = param(REQUIRED, "Highest value tried: above low")

    def check(self) -> None:
        _check_range(self.low, self.high, None)


CATEGORICAL_VALUES = (str, int, float, bool, list)
"""What one categorical value may be (or null): Optuna's choices, a list (a layer size list) carried as JSON."""


@dataclass(frozen=True)
class Categorical:
    """`type: categorical` (or choice; the type may be left out when `values` is given): one of a list of values,
    the grid sampler visits each."""

    values: tuple[Any, ...] = param(
        REQUIRED, "The values tried, in order: distinct numbers, strings, true/false, null or lists", allow_inf=True
    )

    def check(self) -> None:
        values = list(self.values)
        if not values:
            raise ConfigError("values", values, "a non-empty list of values")
        enc = [json.dumps(v, sort_keys=True, default=repr) for v in values]
        if len(set(enc)) != len(enc):
            dup = next(values[i] for i, e in enumerate(enc) if enc.index(e) != i)
            raise ConfigError("values", values, f"distinct values ({dup!r} appears twice)")
        for v in values:
            if not isinstance(v, CATEGORICAL_VALUES) and v is not None:
                raise ConfigError("values", v, "scalars or lists of scalars")


SPACE_TYPES: dict[str, type] = {"float": FloatRange, "int": IntRange, "log": LogRange, "categorical": Categorical}
"""Each `type` a searched parameter may have -> the dataclass its keys are read into (PARAM_TYPES' order)."""


@dataclass(frozen=True)
class SearchParam:
    """One searched parameter."""

    key: str
    """The key as written under `space:` (e.g. 'beta' or 'dataset.rho')."""
    section: str
    """'method' or 'dataset'."""
    name: str
    """Field name in that section's config (e.g. 'beta')."""
    type: str
    """float | int | log | categorical."""
    low: float | int | None = None
    high: float | int | None = None
    step: float | int | None = None
    values: tuple[Any, ...] = ()

    @property
    def canonical(self) -> str:
        """'method.beta' / 'dataset.rho': the key trials carry in their config."""
        return f"{self.section}.{self.name}"

    def grid_values(self) -> list[Any]:
        """Every value a grid visits (categorical values, or every int from low to high by step)."""
        if self.type == "categorical":
            return list(self.values)
        if self.type == "int":
            assert self.low is not None and self.high is not None  # int ranges are checked to have both ends
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        raise ConfigError(f"space.{self.key}.type", self.type, "categorical | int for the grid sampler")


def grid_size(space: tuple[SearchParam, ...], where: str) -> int:
    """How many points a grid over `space` has; a parameter a grid cannot enumerate is refused by name."""
    for sp in space:
        if sp.type not in ("categorical", "int"):
            raise ConfigError(
                f"space.{sp.key}.type",
                sp.type,
                "categorical | int for the grid sampler (list the grid's values with type: categorical)",
                where,
            )
    return math.prod(len(sp.grid_values()) for sp in space)


def parse_param(key: str, body: Any, section: str, name: str, where: str) -> SearchParam:
    """The body of `space.KEY` (routed to `section`'s field `name`) as a SearchParam; errors name the key."""
    k = f"space.{key}"
    found: tuple[str, Any] = build_tagged(
        SPACE_TYPES,
        body,
        where,
        path=k,
        kind=SPACE_KIND,
        aliases=TYPE_ALIASES,
        default="categorical" if "values" in body else None,
    )
    typ, dim = found
    if isinstance(dim, Categorical):
        values = tuple(tuple(v) if isinstance(v, list) else v for v in dim.values)
        return SearchParam(key, section, name, typ, values=values)
    return SearchParam(key, section, name, typ, dim.low, dim.high, getattr(dim, "step", None))


def parse_space(
    raw: Any,
    route: Callable[[str, str], tuple[str, str]],
    fixed: Mapping[str, Mapping[str, Any]],
    where: str,
) -> tuple[SearchParam, ...]:
    """`space:` as SearchParams: `route(key, where)` names each key's section and field, `fixed` holds the fixed
    values of each section ('method': params, 'dataset': dataset_params), which a searched one may not repeat."""
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(
            "space", raw, "a non-empty mapping PARAM: {type, low, high} | {type: categorical, values}", where
        )
    space = []
    for key, body in raw.items():
        if not isinstance(body, Mapping):
            raise ConfigError(
                f"space.{key}",
                body,
                "a mapping {type: float|int|log|categorical, low, high} or {type: categorical, values: [...]}",
                where,
            )
        section, name = route(str(key), where)
        space.append(parse_param(str(key), body, section, name, where))
    seen: dict[str, str] = {}
    for sp in space:
        if sp.canonical in seen:
            raise ConfigError(
                f"space.{sp.key}", sp.key, f"each parameter once (same as space.{seen[sp.canonical]})", where
            )
        seen[sp.canonical] = sp.key
        if sp.name in fixed[sp.section]:
            raise ConfigError(
                f"space.{sp.key}",
                sp.key,
                f"a parameter not also fixed under {'params' if sp.section == 'method' else 'dataset_params'}:",
                where,
            )
    return tuple(space)


# ----------------------------------------------------------------------------------------------
# encoding of categorical values (Optuna's categorical choices must be None/bool/int/float/str)


def encode_value(v: Any) -> Any:
    """Lists/tuples/dicts become JSON strings so Optuna and Tune can carry them; scalars pass through."""
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(list(v) if isinstance(v, tuple) else v)
    return v


def decode_value(v: Any) -> Any:
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def format_value(v: Any) -> str:
    """Short display of a parameter value."""
    v = decode_value(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "[" + ",".join(format_value(x) for x in v) + "]"
    return str(v)
