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

import functools
import json
from pathlib import Path
from typing import Any

import yaml

from veil.certify.target import parse_target
from veil.errors import ConfigError, UnknownNameError, VeilError
from veil.names import check_mlflow_name
from veil.pipeline.runspec import KeyRouter, centralized_refusal, check_keys, read_yaml_file
from veil.sweeps.metrics import MetricContext
from veil.sweeps.model import SPEC_KEYS, SweepSpec
from veil.sweeps.objectives import leakage_warnings, parse_constraints, parse_objectives, parse_reference
from veil.sweeps.population_trials import product_points
from veil.sweeps.samplers import sampler_entry
from veil.sweeps.space import SearchParam, grid_size, parse_space
from veil.sweeps.spec_keys import (
    SWEEP_NAME,
    check_runs,
    read_federation,
    read_mapping,
    read_resources,
    read_seeds,
    read_setting,
)

#: where Tune keeps sweeps (`--storage`): <root>/<sweep name>
DEFAULT_ROOT = Path(".veil") / "sweeps"

_setting = functools.partial(read_setting, SweepSpec)
"""Scalar setting KEY of a spec mapping (data, key, where), as its SweepSpec field allows (veil.sweeps.spec_keys)."""
_mapping = read_mapping


def load_sweep(path: str | Path, *, check_names: bool = True) -> SweepSpec:
    """Read and validate a YAML sweep spec (yaml.safe_load)."""
    data = read_yaml_file(path, "sweep file", "an existing YAML file (see sweeps/*.yaml)")
    return sweep_from_mapping(data, where=str(path), check_names=check_names)


class _Sections:
    """Field names of the method, dataset and audit configs, for routing and checking keys (through the one
    `KeyRouter` the CLI uses too)."""

    def __init__(self, method: str, dataset: str, where: str, check: bool) -> None:
        self.check = check
        self.method_cls: Any = None
        self.router: KeyRouter | None = None
        if not check:
            return
        from veil.datasets.catalog import get_dataset_entry
        from veil.methods.cards import method_card

        try:
            self.method_cls = method_card(method)
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


def _check_values(spec_fields: dict[str, Any], sp: SearchParam, where: str) -> None:
    """Every end point / categorical value must build a valid method or dataset config."""
    from veil.datasets.catalog import dataset_params
    from veil.methods.cards import method_config

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


def sweep_from_mapping(data: Any, where: str = "sweep spec", *, check_names: bool = True) -> SweepSpec:
    """Validate a YAML mapping into a SweepSpec. `check_names=False` skips the registry checks (method,
    parameter names and ranges), for reading back a stored spec whose method is not importable here."""
    check_keys(data, SPEC_KEYS, "sweep spec", where)
    method, dataset = data["method"], data["dataset"]
    sections = _Sections(method, dataset, where, check_names)
    if check_names:
        from veil.methods.cards import is_federated

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

    partition, runtime, federation = read_federation(data, where, check_names)
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

    space = parse_space(data.get("space"), sections.route, {"method": params, "dataset": dparams}, where)

    objectives = parse_objectives(data.get("objectives"), where, metric_ctx)
    reference = parse_reference(data.get("reference"), objectives, where)
    constraints = parse_constraints(data.get("constraints"), where, metric_ctx)

    sampler = _setting(data, "sampler", where)
    sopts = sampler_entry(sampler).check_options(_mapping(data, "sampler_options", where), where)

    if sampler == "grid":
        grid = grid_size(space, where)
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

    seeds = read_seeds(data.get("seeds"), where, SweepSpec.seeds)
    if check_names:  # a stored sweep reads back as it ran
        check_runs(trials, len(seeds), "seeds", data.get("seeds"), where)
    concurrency = _setting(data, "concurrency", where)
    population = _setting(data, "population", where)
    resources = read_resources(data.get("resources"), where)
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
    if sweep_name is not None and (not isinstance(sweep_name, str) or not SWEEP_NAME.match(sweep_name)):
        raise ConfigError("name", sweep_name, "letters, digits, '_', '-', '.'", where)
    description = _setting(data, "description", where)

    warnings = leakage_warnings(objectives, constraints, where)
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
    import veil.methods.builtin  # noqa: F401  (importing every built-in method registers their population forms)
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
    from veil.pipeline.validation import validate

    fields = {
        "method": spec.method,
        "dataset": spec.dataset,
        "params": spec.params,
        "dataset_params": spec.dataset_params,
    }
    try:
        validate(spec.run_spec({}, spec.seeds[0]))  # fixed params, audit and executor on their own first
        for sp in spec.space:
            _check_values(fields, sp, where)
    except (ConfigError, UnknownNameError) as e:
        raise _located(e, where) from None
    _check_probes(spec, where)


def _located(e: ConfigError | UnknownNameError, where: str) -> ConfigError | UnknownNameError:
    """A run config's error, located in the spec: the key it comes from there ('params.lr', 'audit.mi') and the
    file."""
    if isinstance(e, ConfigError):
        if e.where == where:
            return e
        key = _section_key(e.where) or e.field
        return ConfigError(f"{key}.{e.field}" if key != e.field else key, e.value, e.allowed, where)
    if e.where and e.where.startswith(where):
        return e
    section = _section_key(e.where)
    return UnknownNameError(e.kind, e.name, e.valid, where=f"{where}: key '{section}'" if section else where)


End = tuple[str, Any]
"""One end of a searched parameter: its label ('space.d_z.high', 'space.act.values') and its value."""


def _end(sp: SearchParam, high: bool) -> End:
    """A range's low or high end, a categorical's first or last value."""
    if sp.type == "categorical":
        return f"space.{sp.key}.values", sp.values[-1 if high else 0]
    return f"space.{sp.key}.{'high' if high else 'low'}", sp.high if high else sp.low


def _probes(space: tuple[SearchParam, ...]) -> list[dict[str, End]]:
    """The points of the space whose runs are validated (keyed by canonical name): the low corner, the high corner,
    and each other categorical value with the rest at their high end; every end and value, without the product."""
    low = {sp.canonical: _end(sp, False) for sp in space}
    high = {sp.canonical: _end(sp, True) for sp in space}
    points = [low, high]
    for sp in space:
        if sp.type == "categorical":
            points += [{**high, sp.canonical: (f"space.{sp.key}.values", v)} for v in sp.values[:-1]]
    return points


def _refusal(spec: SweepSpec, point: dict[str, End]) -> ConfigError | UnknownNameError | None:
    """Why the run of the space's `point` is refused (None: it validates)."""
    from veil.pipeline.validation import validate

    try:
        validate(spec.run_spec({k: v for k, (_, v) in point.items()}, spec.seeds[0]))
    except (ConfigError, UnknownNameError) as e:
        return e
    return None


def _check_probes(spec: SweepSpec, where: str) -> None:
    """The run of every `_probes` point validates (the memory check, an MI estimator's width, ...); a refusal names
    the space value that is refused on its own when one is, else every value the point moved."""
    points = _probes(spec.space)
    for i, point in enumerate(points):
        error = _refusal(spec, point)
        if error is None:
            continue
        base = points[0] if i else {}  # the low corner passed; it is checked against the fixed params alone
        moved = [k for k in point if base.get(k) != point[k]]
        for k in moved:
            alone = _refusal(spec, {**base, k: point[k]})
            if alone is not None:
                error, moved = alone, [k]
                break
        raise _at_point(error, [point[k] for k in moved], moved, where)


def _shown(v: Any) -> Any:
    """A categorical value as the spec writes it (lists are carried as tuples)."""
    return list(v) if isinstance(v, tuple) else v


def _at_point(e: ConfigError | UnknownNameError, ends: list[End], keys: list[str], where: str) -> VeilError:
    """A point's refusal, naming the space value refused: as the field itself when the run refused that
    parameter ('space.d_z.high'), else added to the field the run refused ('audit.mi ... (with space.d_z.high =
    64)')."""
    located = _located(e, where)
    if not isinstance(e, ConfigError) or not isinstance(located, ConfigError):
        return located
    if len(ends) == 1 and e.field in (keys[0], keys[0].partition(".")[2]):
        label, value = ends[0]
        return ConfigError(label, _shown(value), e.allowed, where)
    moved = ", ".join(f"{label} = {_shown(v)!r}" for label, v in ends)
    return ConfigError(located.field, located.value, f"{located.allowed} (with {moved})", where)


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
