"""Sweep specs: a YAML file under `sweeps/` -> a validated, frozen SweepSpec.

Everything is checked before a single trial starts: unknown keys, the method, every fixed and searched
parameter (against the method's Config fields and the dataset's params fields, including each range's end
points and every categorical value), the objectives and constraints (metrics a run actually produces), the
sampler and its options, the hypervolume reference point, resources and executor. Each error names the
file, the key and the value.

    method: gpp
    dataset: gaussian-correlated
    dataset_params: {n: 3000, rho: 0.5}
    params: {epochs: 15, lr: 1.0e-3}
    space:
      beta: {type: log, low: 0.05, high: 10}       # float | int | log | categorical
    objectives:
      - {metric: utility_auc, direction: max}
      - {metric: privacy_gap, direction: min}    # |AUC - 0.5|: an inverted adversary cannot game it
    sampler: nsga2                                 # nsga2 | tpe | random | grid
    trials: 14
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence, get_args

import yaml

from veil.audit.targets import parse_target
from veil.config import choices_of, hints, param
from veil.errors import ConfigError, UnknownNameError
from veil.names import MLFLOW_NAME_LIMITS, check_mlflow_name
from veil.runspec import EXECUTOR_CHOICES, KeyRouter, centralized_refusal, check_keys, read_yaml_file
from veil.sweeps.metrics import (
    AUC_ORIGINS,
    CERTIFICATE_METRICS,
    DIRECTIONS,
    SUMMARY_METRICS,
    MetricContext,
    check_metric,
    default_reference,
    metric_label,
    raw_leakage_warning,
)
from veil.sweeps.population import product_points
from veil.sweeps.samplers import sampler_entry, sampler_names

#: where Tune keeps sweeps (`--storage`): <root>/<sweep name>
DEFAULT_ROOT = Path(".veil") / "sweeps"

SPEC_KEYS = (
    "description",
    "name",
    "method",
    "dataset",
    "dataset_params",
    "partition",
    "runtime",
    "federation",
    "params",
    "space",
    "objectives",
    "sampler",
    "sampler_options",
    "sampler_seed",
    "trials",
    "seeds",
    "concurrency",
    "population",
    "resources",
    "reference",
    "constraints",
    "max_failures",
    "retries",
    "audit",
    "executor",
    "num_workers",
    "experiment",
    "chull_origin",
    "target",
)
SWEEP_EXECUTORS = tuple(e for e in EXECUTOR_CHOICES if e != "auto")
PARAM_TYPES = ("float", "int", "log", "categorical")
_TYPE_ALIASES = {
    "float": "float",
    "uniform": "float",
    "int": "int",
    "integer": "int",
    "log": "log",
    "log-float": "log",
    "loguniform": "log",
    "categorical": "categorical",
    "choice": "categorical",
}
RESOURCE_KEYS = ("cpus", "gpu")

CONSTRAINT_OPS = (">=", "<=", ">", "<")
_CONSTRAINT_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(>=|<=|>|<)\s*([-+0-9.eE]+|inf|-inf)\s*$")


def check_metric_labels(spec: SweepSpec, utility: Sequence[str], sensitive: Sequence[str]) -> None:
    """Refuse an objective or constraint on a label the dataset does not have, naming the labels it has."""
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


# ----------------------------------------------------------------------------------------------
# parts of a spec


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


@dataclass(frozen=True)
class Objective:
    """A metric to optimise."""

    metric: str
    direction: str
    """'max' or 'min'."""


@dataclass(frozen=True)
class Constraint:
    """A feasibility condition 'metric op value' (infeasible trials never join the front)."""

    metric: str
    op: str
    value: float

    def holds(self, x: float) -> bool:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return False
        return {">=": x >= self.value, "<=": x <= self.value, ">": x > self.value, "<": x < self.value}[self.op]

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


@dataclass(frozen=True)
class Resources:
    """What one trial reserves from the Ray cluster."""

    cpus: float = param(1.0, "CPUs one trial reserves, fractions allowed", gt=0)
    gpu: float = param(0.0, "GPUs one trial reserves: a fraction of one GPU, or whole GPUs", ge=0)


MAX_TRIALS = 10_000
"""The most trials one sweep accepts (a grid included): a typo is refused up front, not estimated in centuries."""


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: what to train, what to search, what to optimise, how to run it."""

    method: str
    dataset: str
    objectives: tuple[Objective, ...]
    space: tuple[SearchParam, ...]
    reference: tuple[float, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    dataset_params: Mapping[str, Any] = field(default_factory=dict)
    audit: Mapping[str, Any] = field(default_factory=dict)
    # A `param` field is a setting: its default, range or choices and doc are written there only. The parser reads
    # the scalar ones through `_setting`; docs/sweeps.md's settings table is generated from them (veil.sweeps.docs).
    partition: str | None = param(
        None,
        "Federated methods only: how rows are split over the nodes (iid, dirichlet:0.3, silo:node, ...; default iid)",
    )
    runtime: str | None = param(
        None, "Federated methods only: where nodes run (sweeps default to in-process: no actors competing with trials)"
    )
    federation: Mapping[str, Any] = field(default_factory=dict)
    """Federated methods: FederationOptions (see `veil run --help`, fed.NAME)."""
    federated: bool = False
    sampler: str = param(
        "nsga2", "The Optuna sampler that suggests trials, or a plugin's (docs/extending.md)", choices=sampler_names
    )
    sampler_options: Mapping[str, Any] = field(default_factory=dict)
    sampler_seed: int = param(0, "Seed of the Optuna sampler (the runs' seeds are `seeds`)", ge=0)
    trials: int = param(20, "Configurations to try (grid: the grid's size, may be left out)", ge=1, le=MAX_TRIALS)
    seeds: tuple[int, ...] = (0,)
    """Seeds every trial trains on, its metrics averaged over them ('seeds:' a count n or a list)."""
    concurrency: int = param(2, "Trials running at once", ge=1)
    population: int = param(
        1,
        "Trials trained together as one vectorised model on one worker (Populations, below); not NSGA-II's "
        "population_size",
        ge=1,
    )
    resources: Resources = Resources()
    constraints: tuple[Constraint, ...] = ()
    max_failures: int | None = param(
        None, "Stop the sweep once more than this many trials have failed (none: never stop for failures)", ge=0
    )
    retries: int = param(
        0, "Tune re-runs of a crashed trial (FailureConfig.max_failures); 0 records the crash and moves on", ge=0
    )
    executor: str = param(
        "inline",
        "Where each trial's runs train: inline (seconds per trial) or ray-train (a TorchTrainer per seed)",
        choices=SWEEP_EXECUTORS,
    )
    num_workers: int = param(1, "Ray Train workers (executor: ray-train only)", ge=1)
    experiment: str = param(
        "veil",
        f"MLflow experiment of the sweep's runs: a non-empty name of at most {MLFLOW_NAME_LIMITS['experiment']} "
        "characters, as MLflow allows",
    )
    chull_origin: str = param(
        "zero", "Convex-hull AUC origin: zero (seed 003's) or half (chance on both axes)", choices=tuple(AUC_ORIGINS)
    )
    target: Any = param(
        None,
        "The leakage target every trial's release is certified against ({privacy_gap: 0.1}, adversary_auc_max, "
        "eps, mi/EST/LABEL, or 'none': no certificate; below); left out: the default target (privacy_gap <= 0.05) "
        "for a method with a privacy knob, none otherwise",
    )
    name: str | None = param(None, "Default sweep-name prefix (else the file name): letters, digits, '_', '-', '.'")
    description: str = param("", "Free text describing the sweep")
    warnings: tuple[str, ...] = ()
    """Accepted but doubtful choices (e.g. minimising raw adversary_auc), each naming the key and the fix."""
    source: str = "sweep spec"
    """The file the spec came from (used in error messages)."""
    raw: Mapping[str, Any] = field(default_factory=dict)
    """The mapping it was built from (shipped to trials and stored in MLflow)."""

    # -- derived ---------------------------------------------------------------------------------

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(o.metric for o in self.objectives)

    @property
    def directions(self) -> tuple[str, ...]:
        return tuple(o.direction for o in self.objectives)

    @property
    def stem(self) -> str:
        return self.name or (Path(self.source).stem if self.source.endswith((".yaml", ".yml")) else self.method)

    def tracked_metrics(self) -> list[str]:
        """Objectives, constraint metrics and the summary metrics, in that order, without repeats."""
        out: list[str] = []
        for m in [*self.metrics, *(c.metric for c in self.constraints), *SUMMARY_METRICS, *self.certificate_metrics()]:
            if m not in out:
                out.append(m)
        return out

    def certifies(self) -> bool:
        """Whether its trials are certified against a target (the spec's, or a privacy method's default)."""
        from veil.audit.targets import parse_target
        from veil.methods.registry import get_method

        given = parse_target(self.target)
        return bool(given) if given is not None else get_method(self.method).privacy_knob is not None

    def target_text(self) -> str:
        """The target trials are certified against, as text ('privacy_gap <= 0.05 (the default target)')."""
        from veil.audit.targets import default_target, parse_target

        return (parse_target(self.target) or default_target()).text()

    def target_bound(self, metric: str) -> float | None:
        """The bound the sweep's target (or the default one) puts on `metric`, if any (a certified sweep only)."""
        from veil.audit.targets import default_target, parse_target

        if not self.certifies():
            return None
        bound = (parse_target(self.target) or default_target()).get(metric)
        return bound.limit if bound is not None else None

    def certificate_metrics(self) -> tuple[str, ...]:
        """The certificate's figures a certified sweep tracks per trial (CERTIFICATE_METRICS), else none."""
        return CERTIFICATE_METRICS if self.certifies() else ()

    def tune_trials(self) -> int:
        """How many Tune trials run the sweep's trials: one per population of up to `population` trials."""
        return math.ceil(self.trials / self.population)

    def grid_size(self) -> int:
        return math.prod(len(p.grid_values()) for p in self.space)

    def run_spec(
        self,
        values: Mapping[str, Any],
        seed: int,
        *,
        tracking_uri: str | None = None,
        run_name: str | None = None,
        tags: Mapping[str, str] | None = None,
        use_gpu: bool | None = None,
    ):
        """The RunSpec of one seed of one trial: fixed params overlaid with the trial's searched `values`
        (keyed 'method.NAME' / 'dataset.NAME')."""
        from veil.run import RunSpec

        params, dparams = dict(self.params), dict(self.dataset_params)
        for key, v in values.items():
            section, _, name = key.partition(".")
            (params if section == "method" else dparams)[name] = v
        fed: dict[str, Any] = {}
        if self.federated:
            fed = {
                "partition": self.partition or "iid",
                "runtime": self.runtime or "in-process",
                "federation": dict(self.federation),
            }
        return RunSpec(
            method=self.method,
            dataset=self.dataset,
            params=params,
            dataset_params=dparams,
            audit=dict(self.audit),
            seed=int(seed),
            executor=self.executor,
            num_workers=self.num_workers,
            use_gpu=self.resources.gpu > 0 if use_gpu is None else use_gpu,
            experiment=self.experiment,
            run_name=run_name,
            tracking_uri=tracking_uri,
            tags=dict(tags or {}),
            target=self.target,
            calibrate=False,
            **fed,
        )

    def flat_params(self) -> dict[str, Any]:
        """What the parent MLflow run records as params."""
        out: dict[str, Any] = {
            "sweep.method": self.method,
            "sweep.dataset": self.dataset,
            "sweep.sampler": self.sampler,
            "sweep.trials": self.trials,
            "sweep.seeds": list(self.seeds),
            "sweep.concurrency": self.concurrency,
            "sweep.population": self.population,
            "sweep.objectives": [f"{o.metric}:{o.direction}" for o in self.objectives],
            "sweep.reference": list(self.reference),
            "sweep.executor": self.executor,
            "sweep.resources": dataclasses.asdict(self.resources),
            "sweep.sampler_seed": self.sampler_seed,
        }
        if self.federated:
            out["sweep.partition"] = self.partition or "iid"
            out["sweep.runtime"] = self.runtime or "in-process"
            out.update({f"fixed.federation.{k}": v for k, v in self.federation.items()})
        if self.constraints:
            out["sweep.constraints"] = [str(c) for c in self.constraints]
        for p in self.space:
            desc = list(p.values) if p.type == "categorical" else [p.low, p.high]
            out[f"space.{p.canonical}"] = {"type": p.type, "range": desc}
        out.update({f"fixed.method.{k}": v for k, v in self.params.items()})
        out.update({f"fixed.dataset.{k}": v for k, v in self.dataset_params.items()})
        out.update({f"fixed.audit.{k}": v for k, v in self.audit.items()})
        return out


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


# ----------------------------------------------------------------------------------------------
# loading


def load_sweep(path: str | Path, *, check_names: bool = True) -> SweepSpec:
    """Read and validate a YAML sweep spec (yaml.safe_load)."""
    data = read_yaml_file(path, "sweep file", "an existing YAML file (see sweeps/*.yaml)")
    return sweep_from_mapping(data, where=str(path), check_names=check_names)


def _num(v: Any, key: str, where: str, *, integer: bool = False) -> float | int:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    if integer:
        ok = ok and (isinstance(v, int) or float(v).is_integer())
    if not ok or not math.isfinite(float(v)):
        raise ConfigError(key, v, "an integer" if integer else "a finite number", where)
    return int(v) if integer else float(v)


def _integer(v: Any, key: str, where: str, lo: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise ConfigError(key, v, f"an integer >= {lo}", where)
    return v


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


def _setting(
    data: Mapping[str, Any], key: str, where: str, *, cls: type = SweepSpec, default: Any = dataclasses.MISSING
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


def _mapping(data: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    v = data.get(key)
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ConfigError(key, v, "a mapping of name: value", where)
    return dict(v)


class _Sections:
    """Field names of the method, dataset and audit configs, for routing and checking keys (through the one
    `KeyRouter` the CLI uses too)."""

    def __init__(self, method: str, dataset: str, where: str, check: bool) -> None:
        self.check = check
        self.method_cls: Any = None
        self.router: KeyRouter | None = None
        if not check:
            return
        from veil.datasets.registry import get_dataset_entry
        from veil.methods.registry import get_method

        try:
            self.method_cls = get_method(method)
        except UnknownNameError as e:
            raise UnknownNameError("method", method, e.valid, where=f"{where}: key 'method'") from None
        try:
            get_dataset_entry(dataset)
        except UnknownNameError as e:
            raise UnknownNameError("dataset", dataset, e.valid, where=f"{where}: key 'dataset'") from None
        self.router = KeyRouter.for_run(method, dataset)

    def names(self, section: str) -> frozenset[str]:
        assert self.router is not None
        return self.router.names[section]

    def route(self, key: str, where: str) -> tuple[str, str]:
        """'beta' -> ('method', 'beta'); 'dataset.rho' -> ('dataset', 'rho'); unknown names raise."""
        if self.router is None:
            section, dot, name = key.partition(".")
            return (section, name) if dot and section in ("method", "dataset") else ("method", key)
        if key == "seed":
            raise ConfigError("space.seed", key, "a method or dataset parameter (seeds are set by 'seeds:')", where)
        try:
            return self.router.route(key, sections=("method", "dataset"), where=where, field=f"space.{key}")
        except UnknownNameError as e:
            detail = f"key 'space.{key}'" if "." in key else "key 'space'"
            valid = [v for v in e.valid if v not in ("seed", "dataset.seed")] if e.kind == "parameter" else e.valid
            raise UnknownNameError(e.kind, e.name, valid, where=f"{where}: {detail}") from None


def _parse_param(key: str, body: Any, sections: _Sections, where: str) -> SearchParam:
    k = f"space.{key}"
    if not isinstance(body, Mapping):
        raise ConfigError(
            k,
            body,
            "a mapping {type: float|int|log|categorical, low, high} or {type: categorical, values: [...]}",
            where,
        )
    section, name = sections.route(str(key), where)
    allowed_keys = ("type", "low", "high", "step", "values")
    for bk in body:
        if bk not in allowed_keys:
            raise UnknownNameError("search-space key", bk, list(allowed_keys), where=f"{where}: key '{k}'")
    typ = body.get("type")
    if typ is None and "values" in body:
        typ = "categorical"
    if not isinstance(typ, str) or typ not in _TYPE_ALIASES:
        raise ConfigError(f"{k}.type", typ, " | ".join(PARAM_TYPES), where)
    typ = _TYPE_ALIASES[typ]
    if typ == "categorical":
        for bad in ("low", "high", "step"):
            if bad in body:
                raise ConfigError(
                    f"{k}.{bad}", body[bad], "no range for a categorical parameter (use values: [...])", where
                )
        values = body.get("values")
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{k}.values", values, "a non-empty list of values", where)
        enc = [json.dumps(v, sort_keys=True) for v in values]
        dup = next((values[i] for i, e in enumerate(enc) if enc.index(e) != i), None)
        if len(set(enc)) != len(enc):
            raise ConfigError(f"{k}.values", values, f"distinct values ({dup!r} appears twice)", where)
        for v in values:
            if not isinstance(v, (str, int, float, bool, list)) and v is not None:
                raise ConfigError(f"{k}.values", v, "scalars or lists of scalars", where)
        return SearchParam(
            str(key), section, name, typ, values=tuple(tuple(v) if isinstance(v, list) else v for v in values)
        )
    if "values" in body:
        raise ConfigError(
            f"{k}.values",
            body["values"],
            f"no values list for a {typ} range (use low/high, or type: categorical)",
            where,
        )
    for need in ("low", "high"):
        if need not in body:
            raise ConfigError(f"{k}.{need}", None, "a number (required for a range)", where)
    integer = typ == "int"
    low, high = (
        _num(body["low"], f"{k}.low", where, integer=integer),
        _num(body["high"], f"{k}.high", where, integer=integer),
    )
    if low > high:
        raise ConfigError(f"{k}.high", high, f"a value above low = {low} (the range is inverted)", where)
    if low == high:
        raise ConfigError(
            f"{k}.high",
            high,
            f"a value above low = {low} (the range is empty; a single value belongs under params:)",
            where,
        )
    if typ == "log" and low <= 0:
        raise ConfigError(f"{k}.low", low, "a number > 0 for a log range", where)
    step = body.get("step")
    if step is not None:
        if typ == "log":
            raise ConfigError(f"{k}.step", step, "no step for a log range", where)
        step = _num(step, f"{k}.step", where, integer=integer)
        if step <= 0 or step > high - low:
            raise ConfigError(f"{k}.step", step, f"a number > 0 and <= high - low ({high - low})", where)
    return SearchParam(str(key), section, name, typ, low, high, step)


def _check_values(spec_fields: dict[str, Any], sp: SearchParam, where: str) -> None:
    """Every end point / categorical value must build a valid method or dataset config."""
    from veil.datasets.registry import dataset_params
    from veil.methods.registry import method_config

    probes = list(sp.values) if sp.type == "categorical" else [sp.low, sp.high]
    for i, v in enumerate(probes):
        label = f"space.{sp.key}.values" if sp.type == "categorical" else f"space.{sp.key}.{('low', 'high')[i]}"
        try:
            if sp.section == "method":
                method_config(spec_fields["method"], {**spec_fields["params"], "seed": 0, sp.name: v})
            else:
                dataset_params(spec_fields["dataset"], {**spec_fields["dataset_params"], sp.name: v})
        except ConfigError as e:
            if e.field != sp.name:
                fixed = "dataset_params" if sp.section == "dataset" else "params"
                raise ConfigError(f"{fixed}.{e.field}", e.value, f"{e.allowed} (with {label} = {v!r})", where) from None
            raise ConfigError(label, v, f"{e.allowed} ({sp.section} field {sp.name!r})", where) from None


def _parse_objectives(raw: Any, where: str, ctx: MetricContext) -> tuple[Objective, ...]:
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
        for ik in item:
            if ik not in ("metric", "direction"):
                raise UnknownNameError("objective key", ik, ["metric", "direction"], where=f"{where}: key '{k}'")
        metric = check_metric(item.get("metric"), f"{k}.metric", where, ctx)
        direction = item.get("direction")
        if not isinstance(direction, str) or direction not in DIRECTIONS:
            raise ConfigError(f"{k}.direction", direction, "max | min", where)
        if any(o.metric == metric for o in out):
            raise ConfigError(f"{k}.metric", metric, "each metric once", where)
        out.append(Objective(metric, DIRECTIONS[direction]))
    return tuple(out)


def _parse_reference(raw: Any, objectives: tuple[Objective, ...], where: str) -> tuple[float, ...]:
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
        return tuple(_num(raw[m], f"reference.{m}", where) for m in metrics)
    if isinstance(raw, list):
        if len(raw) != len(metrics):
            raise ConfigError(
                "reference", raw, f"{len(metrics)} values, one per objective ({', '.join(metrics)})", where
            )
        return tuple(_num(v, f"reference[{i}]", where) for i, v in enumerate(raw))
    raise ConfigError("reference", raw, "{METRIC: value, ...} or a list, one value per objective", where)


def _parse_constraints(raw: Any, where: str, ctx: MetricContext) -> tuple[Constraint, ...]:
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
                f"constraints[{i}]", item, "'METRIC >= | <= | > | < NUMBER', e.g. 'utility_auc >= 0.9'", where
            )
        metric = check_metric(m.group(1), f"constraints[{i}]", where, ctx)
        try:
            value = float(m.group(3))
        except ValueError:
            raise ConfigError(f"constraints[{i}]", item, "a number on the right-hand side", where) from None
        out.append(Constraint(metric, m.group(2), value))
    return tuple(out)


def _parse_seeds(raw: Any, where: str) -> tuple[int, ...]:
    if raw is None:
        return tuple(SweepSpec.seeds)
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise ConfigError("seeds", raw, "a count >= 1 (seeds 0..n-1) or a list of distinct integers >= 0", where)
        return tuple(range(raw))
    if (
        isinstance(raw, list)
        and raw
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in raw)
        and len(set(raw)) == len(raw)
    ):
        return tuple(raw)
    raise ConfigError("seeds", raw, "a count >= 1 (seeds 0..n-1) or a list of distinct integers >= 0", where)


def _parse_resources(raw: Any, where: str) -> Resources:
    if raw is None:
        return Resources()
    if not isinstance(raw, Mapping):
        raise ConfigError("resources", raw, "a mapping {cpus: N, gpu: FRACTION}", where)
    for k in raw:
        if k not in RESOURCE_KEYS:
            raise UnknownNameError("resource", k, list(RESOURCE_KEYS), where=f"{where}: key 'resources'")
    return Resources(*(_setting(raw, f"resources.{k}", where, cls=Resources) for k in RESOURCE_KEYS))


def sweep_from_mapping(data: Any, where: str = "sweep spec", *, check_names: bool = True) -> SweepSpec:
    """Validate a YAML mapping into a SweepSpec. `check_names=False` skips the registry checks (method,
    parameter names and ranges), for reading back a stored spec whose method is not importable here."""
    check_keys(data, SPEC_KEYS, "sweep spec", where)
    method, dataset = data["method"], data["dataset"]
    sections = _Sections(method, dataset, where, check_names)
    if check_names:
        from veil.methods.registry import is_federated

        federated = is_federated(method)
    else:
        federated = bool(data.get("partition") or data.get("runtime") or data.get("federation"))

    params = _mapping(data, "params", where)
    dparams = _mapping(data, "dataset_params", where)
    audit = _mapping(data, "audit", where)
    target = data.get("target")
    parse_target(target, where)  # a bad bound is refused here, naming it
    if check_names:
        for key, names, kind in (
            ("params", sections.names("method"), "method parameter"),
            ("dataset_params", sections.names("dataset"), "dataset parameter"),
            ("audit", sections.names("audit"), "audit parameter"),
        ):
            for name in _mapping(data, key, where):
                if name not in names:
                    raise UnknownNameError(kind, name, sorted(names), where=f"{where}: key '{key}'")
        if "seed" in params or "seed" in dparams:
            raise ConfigError(
                "params.seed" if "seed" in params else "dataset_params.seed",
                "seed",
                "no fixed seed: a sweep sets seeds with 'seeds:'",
                where,
            )

    partition = data.get("partition")
    if partition is not None:
        if not isinstance(partition, str) or not partition:
            raise ConfigError(
                "partition", partition, "a partition scheme string such as 'iid' or 'dirichlet:0.3'", where
            )
        if check_names:
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
    federation = _mapping(data, "federation", where)
    if check_names and not federated:
        for key, val in (("partition", partition), ("runtime", runtime), ("federation", federation or None)):
            if val is not None:
                raise centralized_refusal(key, val, method, where)
    metric_ctx = MetricContext(
        method,
        federated,
        bool(audit.get("capacity")),
        bool(getattr(sections.method_cls, "releases_input_format", False)),
        everything=not check_names,
        mi=str(audit.get("mi", "none")),
    )

    raw_space = data.get("space")
    if not isinstance(raw_space, Mapping) or not raw_space:
        raise ConfigError(
            "space", raw_space, "a non-empty mapping PARAM: {type, low, high} | {type: categorical, values}", where
        )
    space = tuple(_parse_param(str(k), v, sections, where) for k, v in raw_space.items())
    seen: dict[str, str] = {}
    for sp in space:
        if sp.canonical in seen:
            raise ConfigError(
                f"space.{sp.key}", sp.key, f"each parameter once (same as space.{seen[sp.canonical]})", where
            )
        seen[sp.canonical] = sp.key
        fixed = params if sp.section == "method" else dparams
        if sp.name in fixed:
            raise ConfigError(
                f"space.{sp.key}",
                sp.key,
                f"a parameter not also fixed under {'params' if sp.section == 'method' else 'dataset_params'}:",
                where,
            )

    objectives = _parse_objectives(data.get("objectives"), where, metric_ctx)
    reference = _parse_reference(data.get("reference"), objectives, where)
    constraints = _parse_constraints(data.get("constraints"), where, metric_ctx)

    sampler = _setting(data, "sampler", where)
    sopts = _mapping(data, "sampler_options", where)
    allowed = sampler_entry(sampler).options
    for k in sopts:
        if k not in allowed:
            raise UnknownNameError(
                f"{sampler} sampler option", k, list(allowed), where=f"{where}: key 'sampler_options'"
            )
    if sampler == "nsga2" and "population_size" in sopts:  # NSGA-II works with one objective too (a plain GA)
        _integer(sopts["population_size"], "population_size", where, 2)

    if sampler == "grid":
        for sp in space:
            if sp.type not in ("categorical", "int"):
                raise ConfigError(
                    f"space.{sp.key}.type",
                    sp.type,
                    "categorical | int for the grid sampler (list the grid's values with type: categorical)",
                    where,
                )
        grid = math.prod(len(sp.grid_values()) for sp in space)
        if data.get("trials", grid) != grid:
            raise ConfigError(
                "trials",
                data["trials"],
                f"the grid's size {grid} (or leave it out): a grid runs every point once",
                where,
            )
        trials = _setting(data, "trials", where, default=grid)  # a grid larger than Veil's limit is refused too
    else:
        trials = _setting(data, "trials", where)

    seeds = _parse_seeds(data.get("seeds"), where)
    concurrency = _setting(data, "concurrency", where)
    population = _setting(data, "population", where)
    resources = _parse_resources(data.get("resources"), where)
    max_failures = _setting(data, "max_failures", where)
    retries = _setting(data, "retries", where)
    sampler_seed = _setting(data, "sampler_seed", where)
    executor = _setting(data, "executor", where)
    num_workers = _setting(data, "num_workers", where)
    if num_workers > 1 and executor != "ray-train":
        raise ConfigError("num_workers", num_workers, "1 unless executor is ray-train", where)
    experiment = check_mlflow_name("experiment", data.get("experiment", SweepSpec.experiment), where)
    chull_origin = _setting(data, "chull_origin", where)
    sweep_name = data.get("name")
    if sweep_name is not None and (
        not isinstance(sweep_name, str) or not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", sweep_name)
    ):
        raise ConfigError("name", sweep_name, "letters, digits, '_', '-', '.'", where)
    description = _setting(data, "description", where)

    warnings = tuple(
        w
        for w in [
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
        if w
    )
    spec = SweepSpec(
        method=method,
        dataset=dataset,
        objectives=objectives,
        space=space,
        reference=reference,
        params=params,
        dataset_params=dparams,
        audit=audit,
        partition=partition,
        runtime=runtime,
        federation=federation,
        federated=federated,
        sampler=sampler,
        sampler_options=sopts,
        sampler_seed=sampler_seed,
        trials=trials,
        seeds=seeds,
        concurrency=concurrency,
        population=population,
        resources=resources,
        constraints=constraints,
        max_failures=max_failures,
        retries=retries,
        executor=executor,
        num_workers=num_workers,
        experiment=experiment,
        chull_origin=chull_origin,
        target=target,
        name=sweep_name,
        description=description,
        warnings=warnings,
        source=where,
        raw=json.loads(json.dumps(dict(data), default=str)),
    )
    if check_names:
        _check_run(spec, where)
        _check_population(spec, where)
    return spec


def _check_population(spec: SweepSpec, where: str) -> None:
    """A population (> 1) needs a centralized method with a population form, trained inline on one worker."""
    if spec.population == 1:
        return
    from veil.methods.population import population_methods

    names = population_methods()
    if spec.federated or spec.method not in names:
        raise ConfigError(
            "population",
            spec.population,
            f"1 for method {spec.method!r}: populations train methods {', '.join(names)} (centralized, "
            "vectorised on one worker)",
            where,
        )
    if spec.executor != "inline":
        raise ConfigError(
            "population", spec.population, "1 unless executor is inline (one worker per population)", where
        )


def _check_run(spec: SweepSpec, where: str) -> None:
    """Fixed params, every range end point and categorical value, audit and executor all validate."""
    from veil.run import validate

    fields = {
        "method": spec.method,
        "dataset": spec.dataset,
        "params": spec.params,
        "dataset_params": spec.dataset_params,
    }
    first = {sp.canonical: (sp.values[0] if sp.type == "categorical" else sp.low) for sp in spec.space}
    try:
        validate(spec.run_spec({}, spec.seeds[0]))  # fixed params, audit and executor on their own first
        for sp in spec.space:
            _check_values(fields, sp, where)
        validate(spec.run_spec(first, spec.seeds[0]))
    except ConfigError as e:
        if e.where == where:
            raise
        key = _section_key(e.where) or e.field
        raise ConfigError(f"{key}.{e.field}" if key != e.field else key, e.value, e.allowed, where) from None
    except UnknownNameError as e:
        if e.where and e.where.startswith(where):
            raise
        section = _section_key(e.where)
        raise UnknownNameError(
            e.kind, e.name, e.valid, where=f"{where}: key '{section}'" if section else where
        ) from None


def _section_key(inner_where: str | None) -> str | None:
    """The spec key a config's own error location ('method \'gpp\'', 'audit', ...) corresponds to."""
    w = inner_where or ""
    if w in ("audit", "federation"):
        return w
    if w.startswith("method"):
        return "params"
    if w.startswith("dataset"):
        return "dataset_params"
    return None


def spec_yaml(spec: SweepSpec) -> str:
    """The spec's source mapping as YAML (what the parent run stores)."""
    return yaml.safe_dump(dict(spec.raw), sort_keys=False)


def grid_points(spec: SweepSpec) -> list[dict[str, Any]]:
    """Every point of a grid spec, as trial configs."""
    return product_points({sp.canonical: sp.grid_values() for sp in spec.space})


load_sweep_spec = load_sweep  # the name veil.nightly imports
