"""A sweep spec's settings: reading its scalar keys (`trials: 20`, `sampler: tpe`) against the `param()` fields of
SweepSpec, and its `resources` and `seeds`.

A scalar setting's default, range or choices and doc are written once, on its `param` field; `read_setting` applies
them to the value a spec gives and `setting_accepts` says in words what they allow, for the errors and for the
settings table of docs/sweeps.md (`tools/sweeps_doc.py`)."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, get_args

from veil.config import build, choices_of, hints, param
from veil.errors import ConfigError, UnknownNameError

MAX_TRIALS = 10_000
"""The most trials one sweep accepts (a grid included): a typo is refused up front, not estimated in centuries."""
SWEEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
"""A sweep's name (`name:`, `--name`): it names a directory under the storage and the MLflow parent run."""
MAX_RUNS = MAX_TRIALS
"""The most runs one sweep trains (trials x seeds): `seeds` multiplies the trials, under the same limit."""
MAX_CONCURRENCY = 10_000
"""The most trials one sweep runs at once (`concurrency`)."""
MAX_RETRIES = 100
"""The most times Tune re-runs one crashed trial (`retries`)."""


@dataclass(frozen=True)
class Resources:
    """What one trial reserves from the Ray cluster."""

    cpus: float = param(1.0, "CPUs one trial reserves, fractions allowed", gt=0)
    gpu: float = param(0.0, "GPUs one trial reserves: a fraction of one GPU, or whole GPUs", ge=0)


def _kinds(cls: type, name: str) -> list[Any]:
    """The types field `name` of `cls` holds besides None ([int] for `int | None`)."""
    typ = hints(cls)[name]
    return [a for a in (get_args(typ) or (typ,)) if a is not type(None)]


def setting_accepts(cls: type, name: str) -> str | None:
    """What scalar setting `name` (a `param` field of SweepSpec or Resources) accepts, as its errors and
    docs/sweeps.md say it: 'nsga2 | tpe | ...', 'an integer >= 1', 'an integer from 1 to 10000 (Veil's limit for
    one sweep)', 'a number > 0', 'a string'; None for a field that is no scalar setting (target: its own parser)."""
    meta = next(f for f in dataclasses.fields(cls) if f.name == name).metadata
    kinds, choices = _kinds(cls, name), choices_of(meta)
    if choices is not None:
        return " | ".join(str(c) for c in choices)
    if kinds == [str]:
        return "a string"
    if kinds not in ([int], [float]):
        return None
    noun = "an integer" if kinds == [int] else "a number"
    if meta.get("le") is not None:  # a sweep-level upper bound is Veil's own limit, refusing a typo up front
        return f"{noun} from {meta['ge']} to {meta['le']} (Veil's limit for one sweep)"
    return f"{noun} > {meta['gt']}" if meta.get("gt") is not None else f"{noun} >= {meta['ge']}"


def read_setting(
    cls: type, data: Mapping[str, Any], key: str, where: str, *, default: Any = dataclasses.MISSING
) -> Any:
    """Scalar setting `key` of the mapping `data`, or the default of `cls`'s field of that name when left out,
    checked against the field's choices or range (its `param`), so each default and bound is written once. The
    error names the key, the value and what the field accepts. `default` overrides the field's (a grid's size)."""
    name = key.rpartition(".")[2]
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    v = data.get(name, f.default if default is dataclasses.MISSING else default)
    if v is None and f.default is None:
        return None
    meta, kinds, allowed, choices = f.metadata, _kinds(cls, name), setting_accepts(cls, name), choices_of(f.metadata)
    assert allowed is not None, f"{key} is no scalar setting"
    if choices is not None:
        ok = isinstance(v, str) and v in choices
    elif kinds == [str]:
        ok = isinstance(v, str)
    else:
        integer = kinds == [int]
        ok = not isinstance(v, bool) and (
            isinstance(v, int) if integer else isinstance(v, (int, float)) and math.isfinite(v)
        )
        ok = ok and not (
            (meta.get("ge") is not None and v < meta["ge"])
            or (meta.get("gt") is not None and v <= meta["gt"])
            or (meta.get("le") is not None and v > meta["le"])
        )
        allowed += "" if integer else f" ({meta['doc']})"  # a number's unit: CPUs, a fraction of a GPU
    if not ok:
        raise ConfigError(key, v, allowed, where)
    return float(v) if kinds == [float] else v


def check_runs(trials: int, seeds: int, field: str, value: Any, where: str | None) -> None:
    """Refuse (naming `field` and its `value`) a sweep of more than MAX_RUNS runs: `trials` x `seeds`."""
    if trials * seeds > MAX_RUNS:
        raise ConfigError(
            field,
            value,
            f"at most {MAX_RUNS} runs in all (Veil's limit for one sweep): {trials} trials x {seeds} seed(s) "
            f"is {trials * seeds} runs",
            where,
        )


def read_mapping(data: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    """Mapping `key` of `data` (left out: empty), refused by name when it is something else."""
    v = data.get(key)
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ConfigError(key, v, "a mapping of name: value", where)
    return dict(v)


def read_resources(raw: Any, where: str) -> Resources:
    """`resources:` ({cpus: N, gpu: FRACTION}, either left out for its default) as Resources."""
    if raw is None:
        return Resources()
    if not isinstance(raw, Mapping):
        raise ConfigError("resources", raw, "a mapping {cpus: N, gpu: FRACTION}", where)
    return build(Resources, raw, where, strict=True, path="resources", kind="resource")


def read_seeds(raw: Any, where: str, default: tuple[int, ...]) -> tuple[int, ...]:
    """`seeds:` (a count n: seeds 0..n-1, or a list of distinct seeds; left out: `default`) as a tuple."""
    if raw is None:
        return default
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not 1 <= raw <= MAX_RUNS:
            raise ConfigError(
                "seeds", raw, f"a count from 1 to {MAX_RUNS} (seeds 0..n-1) or a list of distinct integers >= 0", where
            )
        return tuple(range(raw))
    if (
        isinstance(raw, list)
        and raw
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in raw)
        and len(set(raw)) == len(raw)
    ):
        return tuple(raw)
    raise ConfigError("seeds", raw, "a count >= 1 (seeds 0..n-1) or a list of distinct integers >= 0", where)


def read_federation(data: Mapping[str, Any], where: str, check: bool) -> tuple[str | None, str | None, dict[str, Any]]:
    """A federated sweep's `partition` (a scheme, parsed when `check`), `runtime` and `federation` keys."""
    partition = data.get("partition")
    if partition is not None:
        if not isinstance(partition, str) or not partition:
            raise ConfigError(
                "partition", partition, "a partition scheme string such as 'iid' or 'dirichlet:0.3'", where
            )
        if check:
            from veil.datasets.partition import parse_scheme

            try:
                parse_scheme(partition)
            except ConfigError as e:
                raise ConfigError(e.field, e.value, e.allowed, where) from None
            except UnknownNameError as e:
                raise ConfigError("partition", partition, f"a valid scheme ({e})", where) from None
    runtime = data.get("runtime")
    if runtime is not None and (not isinstance(runtime, str) or not runtime):
        raise ConfigError("runtime", runtime, "auto | in-process | ray-actors | virtual", where)
    return partition, runtime, read_mapping(data, "federation", where)
