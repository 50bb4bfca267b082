"""Run a sweep: Ray Tune runs the trials, Optuna suggests them (multi-objective), MLflow records them.

- Trials: a Tune function trainable (`sweep_trial`) wrapped by `tune.with_resources`; it runs every seed
  of its configuration sequentially through `veil.run.execute` (inline by default: seconds per trial; or
  under Ray Train with `executor: ray-train`, the trial itself then reserving only 0.1 CPU) and reports
  the mean and std of each metric over the seeds.
- Suggestions: `StudySearch(space, metric=[...], mode=[...], sampler=NSGAII|TPE|Random)` (veil.sweeps.search:
  an Optuna study through its public ask/tell) inside a `ConcurrencyLimiter`. The grid sampler uses Tune's own `grid_search` instead (every point exactly
  once, whatever the concurrency; Optuna's GridSampler may hand a running point out again under
  parallel ask/tell).
- Failures: a crashed trial is recorded (child run FAILED with its error; Tune trial ERROR) and the
  sweep goes on; `max_failures` stops it once more trials than that have failed.
- Storage: Tune's experiment under ./.veil/sweeps/<name>/ (plus `veil-sweep.json`, which `veil resume`
  reads); `Tuner.restore` continues a sweep whose driver was killed (see `resume_sweep`).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

from ray.tune import Callback
from ray.tune.stopper import Stopper

from veil.console import warn
from veil.errors import ConfigError, VeilError
from veil.platform.cluster import ensure_ray
from veil.sweeps.overview import publish
from veil.sweeps.population import MEMBER_RESULTS, MEMBERS, grid_chunks, grid_points, member_values
from veil.sweeps.report import write_report
from veil.sweeps.results import (
    DEFAULT_ROOT,
    SPEC_ARTIFACT,
    STD_PREFIX,
    TAG_CONFIG,
    TAG_NODE,
    TAG_NUMBER,
    TAG_POPULATION,
    TAG_ROLE,
    TAG_SEED,
    TAG_SEEDS,
    TAG_SPEC,
    TAG_STORAGE,
    TAG_SWEEP,
    TAG_TRIAL,
    TAG_WARNINGS,
    SweepNotFound,
    SweepRef,
    SweepResults,
    _state_path,
    analyze,
    collect,
    end_interrupted,
    fmt_metric,
    format_report,
    format_table,
    locate,
    reopen_parent,
    settle_attempts,
    supersede_orphans,
    tag_front,
)
from veil.sweeps.spec import (
    SweepSpec,
    check_metric_labels,
    decode_value,
    encode_value,
    format_value,
    metric_label,
    spec_yaml,
    sweep_from_mapping,
)
from veil.tracking import PARENT_TAG

CTX_KEY = "_veil"


def tune_key(metric: str) -> str:
    """Metric name as reported to Tune/Optuna ('/' would read as nesting there)."""
    return metric.replace("/", "__")


def default_name(spec: SweepSpec) -> str:
    return f"{spec.stem}-{time.strftime('%Y%m%d-%H%M%S')}"


# ----------------------------------------------------------------------------------------------
# one trial (runs in a Ray worker; `run_trial` itself needs no Ray)


def _aggregate(per_seed: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Mean and (population) std over seeds of every metric all seeds have."""
    import numpy as np

    keys = set(per_seed[0])
    for m in per_seed[1:]:
        keys &= set(m)
    out: dict[str, float] = {}
    for k in sorted(keys):
        vals = np.array([float(m[k]) for m in per_seed], dtype=float)
        out[k] = float(vals.mean())
        if len(per_seed) > 1:
            out[STD_PREFIX + k] = float(vals.std())
    return out


def _failed_run(
    uri: str,
    spec: SweepSpec,
    run_name: str,
    parent: str | None,
    tags: Mapping[str, str],
    values: Mapping[str, Any],
    error: BaseException,
) -> str:
    from veil.tracking.mlflow_run import TrackedRun

    run = TrackedRun.start(uri, spec.experiment, run_name, parent_run_id=parent, tags=tags)
    run.log_params({f"sweep.{k}": v for k, v in values.items()})
    run.fail(error)
    return run.run_id


T = TypeVar("T")
STORE_WAIT_S = 300.0
"""How long a sweep waits for a tracking server that stopped answering (a restart takes ~20 s)."""


def when_tracking_answers(call: Callable[[], T], uri: str) -> T:
    """`call()`, retried every few seconds while the tracking server does not answer (connection refused, timeout,
    5xx), for up to STORE_WAIT_S: a trial's bookkeeping and the sweep's final reading wait out a server restart
    instead of failing. Other errors, and a server still away after that, propagate."""
    from tenacity import retry, retry_if_exception, stop_after_delay, wait_fixed

    from veil.tracking.journal import unavailable

    def note(state: Any) -> None:
        if state.attempt_number == 1:
            print(f"[veil] the tracking server {uri} does not answer; waiting for it", file=sys.stderr, flush=True)

    waiting = retry(
        retry=retry_if_exception(unavailable),
        stop=stop_after_delay(STORE_WAIT_S),
        wait=wait_fixed(3),
        before_sleep=note,
        reraise=True,
    )
    return waiting(call)()


def trial_tags(
    values: Mapping[str, Any], trial_id: str, sweep: str, number: int | None, population: str | None = None
) -> dict[str, str]:
    """The tags every run of one trial carries (its seeds' runs too)."""
    from veil.platform.cluster import ray_node_id

    return {
        TAG_SWEEP: sweep,
        TAG_TRIAL: trial_id,
        TAG_ROLE: "trial",
        TAG_CONFIG: json.dumps({k: v for k, v in values.items()}, default=str),
        **({TAG_NUMBER: str(number)} if number is not None else {}),
        **({TAG_POPULATION: population} if population is not None else {}),
        TAG_NODE: ray_node_id(),
    }


def trial_run_name(sweep: str, trial_id: str, values: Mapping[str, Any]) -> str:
    label = " ".join(f"{k.split('.', 1)[1]}={format_value(v)}" for k, v in values.items())
    return f"{sweep}/{trial_id} {label}"[:200]


def start_seeds_run(
    spec: SweepSpec,
    values: Mapping[str, Any],
    uri: str,
    run_name: str,
    parent_run_id: str | None,
    tags: Mapping[str, str],
) -> Any:
    """The run of a multi-seed trial (its seeds' runs are its children), with the trial's params logged."""
    from veil.tracking.mlflow_run import TrackedRun

    seeds = list(spec.seeds)
    run = TrackedRun.start(
        uri, spec.experiment, run_name, parent_run_id=parent_run_id, tags={**tags, TAG_SEEDS: ",".join(map(str, seeds))}
    )
    try:
        run.log_params(
            {
                **{k: json.dumps(v) if isinstance(v, list) else v for k, v in values.items()},
                "seeds": seeds,
                "method": spec.method,
                "dataset": spec.dataset,
            }
        )
    except BaseException as e:
        run.fail(e)
        raise
    return run


def trial_outcome(spec: SweepSpec, metrics: Mapping[str, float], run: Any, t0: float) -> dict[str, Any]:
    """What a trial reports to Tune: objectives and tracked metrics (means, 'std/' stds), its run id and
    seconds. Raises (and fails `run`) when an objective is not a finite number."""
    bad = [m for m in spec.metrics if not math.isfinite(metrics.get(m, float("nan")))]
    if bad:
        err = ValueError(
            f"objective {bad[0]!r} is {metrics.get(bad[0], 'missing')} (not a finite number); "
            "the trial counts as failed"
        )
        run.fail(err)
        raise err
    out: dict[str, Any] = {}
    for m in spec.tracked_metrics():
        if m in metrics:
            out[tune_key(m)] = metrics[m]
        if STD_PREFIX + m in metrics:
            out[tune_key(STD_PREFIX + m)] = metrics[STD_PREFIX + m]
    out["mlflow_run_id"] = run.run_id
    out["trial_seconds"] = time.time() - t0
    return out


def recorded_outcome(spec: SweepSpec, run: Any, trial_id: str) -> dict[str, Any]:
    """What a trial reports when an earlier attempt of it FINISHED (`settle_attempts`): that run's own metrics, read
    back, and its id; it is not trained again, so its seconds are the ones it took then."""
    print(
        f"[veil] trial {trial_id} finished before the sweep stopped (run {run.info.run_id}): reported from its "
        "record, not trained again",
        flush=True,
    )
    metrics = run.data.metrics
    out: dict[str, Any] = {}
    for m in spec.tracked_metrics():
        for key in (m, STD_PREFIX + m):
            if key in metrics:
                out[tune_key(key)] = metrics[key]
    out["mlflow_run_id"] = run.info.run_id
    out["trial_seconds"] = ((run.info.end_time or 0) - (run.info.start_time or 0)) / 1000
    return out


def run_trial(
    spec: SweepSpec,
    values: Mapping[str, Any],
    trial_id: str,
    *,
    sweep: str,
    parent_run_id: str | None,
    tracking_uri: str,
    storage: Path | None = None,
    number: int | None = None,
) -> dict[str, Any]:
    """Run every seed of one configuration, log the trial's child run, return the metrics to report
    (means over seeds, 'std/<metric>' stds, 'mlflow_run_id'). Raises when a seed crashes or an objective
    is not a finite number; the child run is then FAILED with the error. `number` is the trial's number
    (`trial_number`), tagged so reports number trials as the progress lines do."""
    from veil.run import execute, validate
    from veil.tracking.mlflow_run import TrackedRun, experiment_id

    t0 = time.time()
    exp_id = when_tracking_answers(lambda: experiment_id(tracking_uri, spec.experiment), tracking_uri)
    tags = trial_tags(values, trial_id, sweep, number)
    kept = when_tracking_answers(
        lambda: settle_attempts(tracking_uri, exp_id, sweep, trial_id, tags[TAG_CONFIG]), tracking_uri
    )
    if kept is not None:
        return recorded_outcome(spec, kept, trial_id)
    run_name = trial_run_name(sweep, trial_id, values)
    seeds = list(spec.seeds)

    if len(seeds) == 1:
        rtags = {**tags, TAG_SEED: str(seeds[0])}
        rs = spec.run_spec(values, seeds[0], tracking_uri=tracking_uri, run_name=run_name, tags=rtags)
        try:
            v = validate(rs)
        except VeilError as e:
            _failed_run(tracking_uri, spec, run_name, parent_run_id, rtags, values, e)
            raise
        res = execute(v, parent_run_id=parent_run_id, storage=storage)
        run = TrackedRun(tracking_uri, res.run_id)
        metrics = _aggregate([res.metrics])
    else:
        run = start_seeds_run(spec, values, tracking_uri, run_name, parent_run_id, tags)
        try:
            per_seed = []
            for s in seeds:
                rs = spec.run_spec(
                    values,
                    s,
                    tracking_uri=tracking_uri,
                    run_name=f"{run_name} seed={s}",
                    tags={**tags, TAG_ROLE: "seed", TAG_SEED: str(s)},
                )
                per_seed.append(execute(rs, parent_run_id=run.run_id, storage=storage).metrics)
            metrics = _aggregate(per_seed)
            run.log_metrics(metrics)
        except BaseException as e:
            run.fail(e)
            raise
    out = trial_outcome(spec, metrics, run, t0)
    if len(seeds) > 1:
        run.finish()
    return out


def member_id(trial_id: str, index: int) -> str:
    """The trial id of member `index` (0-based) of the population Tune runs as `trial_id`."""
    return f"{trial_id}.{index + 1}"


def member_number(number: int | None, index: int, population: int) -> int | None:
    """Trial number of member `index` of population `number`: populations of P number their members
    (number - 1) * P + 1 ... so trials keep one numbering whatever the population size."""
    return None if number is None else (number - 1) * population + index + 1


def run_population(
    spec: SweepSpec,
    members: Sequence[Mapping[str, Any]],
    trial_id: str,
    *,
    sweep: str,
    parent_run_id: str | None,
    tracking_uri: str,
    storage: Path | None = None,
    number: int | None = None,
) -> dict[str, Any]:
    """Run a population of trials (`members`: each one's searched values) as one vectorised training per seed
    (`veil.run.execute_population`), each member logged as its own trial run exactly as if it had run alone.
    Returns {'members': [what `run_trial` reports, or None for a member that failed], 'trial_seconds'}; a
    member that fails (invalid values, a non-finite objective) is recorded FAILED and the rest go on."""
    from veil.run import execute_population, validate
    from veil.tracking.mlflow_run import TrackedRun, experiment_id

    t0 = time.time()
    exp_id = when_tracking_answers(lambda: experiment_id(tracking_uri, spec.experiment), tracking_uri)
    ids = [member_id(trial_id, i) for i in range(len(members))]
    tags = [
        trial_tags(v, ids[i], sweep, member_number(number, i, spec.population), trial_id) for i, v in enumerate(members)
    ]
    kept = when_tracking_answers(
        lambda: [settle_attempts(tracking_uri, exp_id, sweep, mid, t[TAG_CONFIG]) for mid, t in zip(ids, tags)],
        tracking_uri,
    )
    names = [trial_run_name(sweep, ids[i], v) for i, v in enumerate(members)]
    seeds = list(spec.seeds)
    label = f"population #{number}" if number is not None else f"population {trial_id}"

    def note(text: str) -> None:
        print(f"[veil] {label}: {text}", flush=True)

    outcomes: list[dict[str, Any] | None] = [None] * len(members)
    for i, run in enumerate(kept):
        if run is not None:
            outcomes[i] = recorded_outcome(spec, run, ids[i])
    live = [i for i, run in enumerate(kept) if run is None]
    failed: dict[int, BaseException] = {}
    runs: dict[int, Any] = {}
    if len(seeds) > 1:
        for i in live:
            runs[i] = start_seeds_run(spec, members[i], tracking_uri, names[i], parent_run_id, tags[i])
    per_seed: dict[int, list[dict[str, float]]] = {i: [] for i in live}
    try:
        for s in seeds:
            batch: list[tuple[int, Any]] = []
            for i in live:
                rtags = {**tags[i], TAG_SEED: str(s)}
                if len(seeds) > 1:
                    rtags.update({TAG_ROLE: "seed", PARENT_TAG: runs[i].run_id})
                name = names[i] if len(seeds) == 1 else f"{names[i]} seed={s}"
                rs = spec.run_spec(members[i], s, tracking_uri=tracking_uri, run_name=name, tags=rtags)
                try:
                    batch.append((i, validate(rs)))
                except VeilError as e:
                    if len(seeds) == 1:
                        _failed_run(tracking_uri, spec, name, parent_run_id, rtags, members[i], e)
                    else:
                        runs[i].fail(e)
                    failed[i] = e
            if not batch:
                continue
            # several seeds: each seed's run is a child of its member's trial run (set through the parent tag)
            results = execute_population(
                [v for _, v in batch],
                parent_run_id=parent_run_id if len(seeds) == 1 else None,
                storage=storage,
                note=note,
            )
            for (i, _), res in zip(batch, results):
                per_seed[i].append(res.metrics)
                if len(seeds) == 1:
                    runs[i] = TrackedRun(tracking_uri, res.run_id)
            live = [i for i in live if i not in failed]
    except BaseException as e:
        for i in live:
            if len(seeds) > 1:
                runs[i].fail(e)
        raise
    for i in live:
        metrics = _aggregate(per_seed[i])
        if len(seeds) > 1:
            runs[i].log_metrics(metrics)
        try:
            outcomes[i] = trial_outcome(spec, metrics, runs[i], t0)
        except ValueError as e:
            note(f"member {ids[i]} failed: {e}")
            continue
        if len(seeds) > 1:
            runs[i].finish()
    for i, err in failed.items():
        note(f"member {ids[i]} failed: {err}")
    done = [o for o in outcomes if o is not None]
    if not done:
        raise RuntimeError(f"every member of {label} failed (see their MLflow runs)")
    seconds = time.time() - t0
    trained = [o for o in (outcomes[i] for i in live) if o is not None]
    for o in trained:  # each member's share, so summed trial seconds stay the work done
        o["trial_seconds"] = seconds / len(trained)
    # Tune insists on the searcher's metrics in every result: the members' mean, for its bookkeeping only (the
    # searcher tells Optuna each member's own values, and MLflow holds each member's run).
    means = {k: sum(float(o[k]) for o in done) / len(done) for k in (tune_key(m) for m in spec.metrics)}
    return {MEMBER_RESULTS: outcomes, **means, "trial_seconds": seconds}


def sweep_trial(config: dict[str, Any], spec: SweepSpec) -> None:
    """The Tune function trainable: one configuration (or a population of them), all its seeds, one report.
    `spec` is the driver's validated SweepSpec (shipped once through the object store by
    `tune.with_parameters`, never re-parsed)."""
    import torch
    from ray import tune

    ctx = config[CTX_KEY]
    torch.set_num_threads(int(ctx.get("threads", 1)))
    context = tune.get_context()
    where = dict(
        sweep=ctx["sweep"],
        parent_run_id=ctx["parent_run_id"],
        tracking_uri=ctx["tracking_uri"],
        storage=Path(ctx["storage"]) / "train",
        number=number_from_name(context.get_trial_name()),
    )
    if MEMBERS in config:
        members = [{k: decode_value(v) for k, v in m.items()} for m in config[MEMBERS]]
        tune.report(run_population(spec, members, context.get_trial_id(), **where))
        return
    values = {k: decode_value(v) for k, v in config.items() if k != CTX_KEY}
    tune.report(run_trial(spec, values, context.get_trial_id(), **where))


def trial_dirname(trial: Any) -> str:
    return f"trial_{trial.trial_id}"


def trial_number(trial: Any, grid: bool) -> int | None:
    """1, 2, ... in the order Tune created the trials: the counter that starts its experiment tag, which Tune
    saves with the experiment, so a trial keeps its number across `veil resume` (the grid's counts from 0)."""
    head = str(getattr(trial, "experiment_tag", "")).split("_", 1)[0]
    return int(head) + (1 if grid else 0) if head.isdigit() else None


def trial_namer(grid: bool) -> Callable[[Any], str]:
    """Tune's `trial_name_creator`: 'trial-<number>-<id>', the name a trial reads from its context."""
    return lambda trial: f"trial-{trial_number(trial, grid)}-{trial.trial_id}"


def number_from_name(name: str) -> int | None:
    m = re.match(r"trial-(\d+)-", name or "")
    return int(m.group(1)) if m else None


def on_ray_actors(spec: SweepSpec) -> bool:
    """Whether the sweep's trials run their federation as Ray actors (runtime ray-actors / virtual / auto)."""
    return spec.federated and (spec.runtime or "in-process") != "in-process"


def federation_bundles(spec: SweepSpec, config: Mapping[str, Any]) -> list[dict[str, float]]:
    """The placement group of one federated trial: its driver, the coordinator and the node hosts the trial's
    K (searched or fixed) and runtime call for, within `resources.cpus`."""
    from veil.platform.federation import trial_bundles
    from veil.run import validate

    values = {k: decode_value(v) for k, v in config.items() if k != CTX_KEY}
    v = validate(spec.run_spec(values, spec.seeds[0]))
    nodes = int(getattr(v.method_config, "K", 1))
    budget = spec.resources.cpus
    if v.runtime == "ray-actors":
        hosts = nodes
    else:
        fed_hosts = v.federation.hosts if v.federation is not None else 0
        hosts = min(nodes, fed_hosts or max(1, int(budget - 0.1)))
    return trial_bundles(hosts, budget)


def trainable(spec: SweepSpec):
    """`sweep_trial` with the trial's Ray resources attached: a federation's coordinator and node host actors
    run inside the trial's own placement group (`federation_bundles`)."""
    from ray import tune

    if on_ray_actors(spec):

        def resources(config: dict[str, Any]) -> Any:
            return tune.PlacementGroupFactory(federation_bundles(spec, config), strategy="PACK")

        return tune.with_resources(tune.with_parameters(sweep_trial, spec=spec), resources)
    if spec.executor == "ray-train":
        res = {"cpu": 0.1}  # the TorchTrainer's workers reserve the real resources
    else:
        res = {"cpu": spec.resources.cpus}
        if spec.resources.gpu:
            res["gpu"] = spec.resources.gpu
    return tune.with_resources(tune.with_parameters(sweep_trial, spec=spec), res)


# ----------------------------------------------------------------------------------------------
# live progress (driver side) + stopping after too many failures


def _front_mask(points: list[list[float]], directions: list[str]) -> list[bool]:
    from veil.sweeps.pareto import pareto_front

    return list(pareto_front(points, directions)) if points else []


PROBE_EVERY_S = 2.0
"""How often a sweep's driver asks the tracking server's /health while trials run (to report an outage)."""


class SweepMonitor(Callback, Stopper):
    """A Tune Callback (progress lines and the current front) that is also a Stopper (max_failures).
    Picklable: Tune stores it with the experiment, and `veil resume` gets it back."""

    def __init__(self, spec: SweepSpec, total: int, quiet: bool = False, tracking_uri: str | None = None) -> None:
        self.tracking_uri = tracking_uri
        self.outage_since: float | None = None
        self.last_probe = 0.0
        self.metrics = list(spec.metrics)
        self.directions = list(spec.directions)
        self.keys = [(sp.canonical, sp.key) for sp in spec.space]
        self.grid = spec.sampler == "grid"
        self.population = spec.population
        self.member_failures = 0
        self.total = total
        self.max_failures = spec.max_failures
        self.quiet = quiet
        self.failed = 0
        self.done: dict[str, tuple[list[float], str]] = {}
        self.front_ids: set[str] = set()
        self.t0 = time.time()
        self.stopped_for_failures = False

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)

    def _label(self, cfg: Mapping[str, Any]) -> str:
        return " ".join(f"{key}={format_value(cfg.get(canon))}" for canon, key in self.keys)

    def _name(self, trial: Any) -> str:
        number = trial_number(trial, self.grid)
        return f"#{number} {trial.trial_id}" if number is not None else trial.trial_id

    def _entries(self, trial: Any) -> list[tuple[str, str, str, list[float] | None]]:
        """(id, name, label, objectives or None) of each trial a Tune trial ran: itself, or its population's members."""
        cfg, r = trial.config or {}, trial.last_result or {}
        keys = [tune_key(m) for m in self.metrics]
        if MEMBERS not in cfg:
            return [(trial.trial_id, self._name(trial), self._label(cfg), member_values(r, keys))]
        number = trial_number(trial, self.grid)
        reported = r.get(MEMBER_RESULTS) or []
        out = []
        for i, m in enumerate(cfg[MEMBERS]):
            mid = member_id(trial.trial_id, i)
            n = member_number(number, i, self.population)
            out.append(
                (
                    mid,
                    f"#{n} {mid}" if n is not None else mid,
                    self._label(m),
                    member_values(reported[i] if i < len(reported) else None, keys),
                )
            )
        return out

    def _absorb_finished(self, trials: list) -> None:
        """Count trials that finished before this process started (a resumed sweep), without printing them."""
        for t in trials:
            if t.status == "TERMINATED":
                for mid, _, label, vals in self._entries(t):
                    if vals is not None and mid not in self.done:
                        self.done[mid] = (vals, label)
        self.front_ids = self._front()

    def _front(self) -> set[str]:
        ids = list(self.done)
        mask = _front_mask([self.done[i][0] for i in ids], self.directions)
        return {i for i, keep in zip(ids, mask) if keep}

    def _elapsed(self) -> str:
        s = int(time.time() - self.t0)
        return f"{s // 60:02d}:{s % 60:02d}"

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._absorb_finished(trials)
        members = (trial.config or {}).get(MEMBERS)
        if members is None:
            self._say(f"[{self._elapsed()}] start  {self._name(trial)}  {self._label(trial.config or {})}")
            return
        first = member_number(trial_number(trial, self.grid), 0, self.population)
        span = f"trials #{first}-#{first + len(members) - 1}" if first is not None else f"{len(members)} trials"
        self._say(f"[{self._elapsed()}] start  population {self._name(trial)}  {span}, trained as one model")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        entries = self._entries(trial)
        if all(vals is None for *_, vals in entries) and MEMBERS not in (trial.config or {}):
            return
        self._absorb_finished([t for t in trials if t is not trial])
        population = MEMBERS in (trial.config or {})
        for mid, name, label, vals in entries:
            if vals is None:
                self.member_failures += 1
                self._say(f"[{self._elapsed()}] FAILED {name}  {label}  (see its MLflow run)")
                continue
            self.done[mid] = (vals, label)
        front = self._front()
        r = trial.last_result or {}
        reported = r.get(MEMBER_RESULTS) if population else [r]
        for (mid, name, label, vals), rep in zip(entries, reported or [None] * len(entries)):
            if vals is None:
                continue
            cells = "  ".join(f"{m} {fmt_metric(v)}" for m, v in zip(self.metrics, vals))
            star = "  * front" if mid in front else ""
            seconds = float((rep or {}).get("trial_seconds", 0))
            self._say(
                f"[{self._elapsed()}] done   {name}  {label}  {cells}  "
                f"({seconds:.1f} s){star}   [{len(self.done)}/{self.total} finished]"
            )
        self._count_failures(trials)
        if front != self.front_ids:
            self.front_ids = front
            self._print_front()

    def _print_front(self) -> None:
        rows = sorted(
            (self.done[i] for i in self.front_ids), key=lambda x: x[0][0], reverse=self.directions[0] == "max"
        )
        lines = [f"    current front ({len(rows)}):"]
        for vals, label in rows:
            lines.append("      " + "  ".join(fmt_metric(v) for v in vals) + f"   {label}")
        self._say("\n".join(lines))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._count_failures(trials)
        msg = ""
        try:
            if trial.error_file and os.path.exists(trial.error_file):
                lines = [ln for ln in Path(trial.error_file).read_text().strip().splitlines() if ln.strip()]
                msg = lines[-1][:200] if lines else ""
        except Exception:
            pass
        label = self._label(trial.config or {}) if MEMBERS not in (trial.config or {}) else "population"
        self._say(f"[{self._elapsed()}] FAILED {self._name(trial)}  {label}  {msg}")
        if self.max_failures is not None and self.failed > self.max_failures:
            self.stopped_for_failures = True
            self._say(
                f"[{self._elapsed()}] {self.failed} trials failed (max_failures {self.max_failures}): "
                "stopping the sweep"
            )

    def _count_failures(self, trials: list) -> None:
        """Failed trials so far: every member of an errored Tune trial, and members that failed on their own."""
        errored = sum(len((t.config or {}).get(MEMBERS) or [0]) for t in trials if t.status == "ERROR")
        self.failed = errored + self.member_failures

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        self._count_failures(trials)
        self._watch_tracking()

    def _watch_tracking(self) -> None:
        """Say when the tracking server stops answering and when it answers again (probed every PROBE_EVERY_S
        from the driver's loop): trials go on into local journals meanwhile, and the console says so as it
        happens, not only in the final report."""
        uri = getattr(self, "tracking_uri", None)  # a monitor pickled by an older Veil has none
        if not uri or not uri.startswith(("http://", "https://")) or time.time() - self.last_probe < PROBE_EVERY_S:
            return
        from veil.tracking.mlflow_run import health_problem

        self.last_probe = time.time()
        problem = health_problem(uri, timeout=2.0)
        if problem and self.outage_since is None:
            self.outage_since = time.time()
            self._say(
                f"[{self._elapsed()}] tracking server {uri} is not answering ({problem}): trials go on and keep "
                "their records in local journals, replayed once it is back"
            )
        elif not problem and self.outage_since is not None:
            self._say(
                f"[{self._elapsed()}] tracking server {uri} answers again (down about "
                f"{time.time() - self.outage_since:.0f} s): journaled records are replayed before the report"
            )
            self.outage_since = None

    # Stopper
    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.max_failures is not None and self.failed > self.max_failures


# ----------------------------------------------------------------------------------------------
# building the Tuner


def search_algorithm(spec: SweepSpec) -> tuple[Any, Any]:
    """(ConcurrencyLimiter(StudySearch), StudySearch) with the Optuna sampler registered under `spec.sampler`
    in `veil.sweeps.samplers`; (None, None) for grid (Tune's grid_search, see `param_space`)."""
    from veil.sweeps.samplers import get_sampler

    sampler = get_sampler(spec.sampler, where=spec.source)(spec)
    if sampler is None:
        return None, None
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    from ray.tune.search import ConcurrencyLimiter

    from veil.sweeps.search import StudySearch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists: dict[str, Any] = {}
    for sp in spec.space:
        if sp.type == "categorical":
            dists[sp.canonical] = CategoricalDistribution([encode_value(v) for v in sp.values])
            continue
        if sp.low is None or sp.high is None:  # load_sweep gives every numeric range both ends
            raise ConfigError(
                f"space.{sp.key}", {"low": sp.low, "high": sp.high}, "a range with low and high", spec.source
            )
        if sp.type == "int":
            dists[sp.canonical] = IntDistribution(int(sp.low), int(sp.high), step=int(sp.step or 1))
        elif sp.type == "log":
            dists[sp.canonical] = FloatDistribution(float(sp.low), float(sp.high), log=True)
        else:
            dists[sp.canonical] = FloatDistribution(float(sp.low), float(sp.high), step=sp.step)
    searcher = StudySearch(
        dists,
        metric=[tune_key(m) for m in spec.metrics],
        mode=list(spec.directions),
        sampler=sampler,
        population=spec.population,
        total=spec.trials,
    )
    return ConcurrencyLimiter(searcher, max_concurrent=spec.concurrency), searcher


def param_space(spec: SweepSpec, ctx: Mapping[str, Any]) -> dict[str, Any]:
    space: dict[str, Any] = {CTX_KEY: dict(ctx)}
    if spec.sampler == "grid" and spec.population > 1:
        from ray import tune

        axes = {sp.canonical: [encode_value(v) for v in sp.grid_values()] for sp in spec.space}
        space[MEMBERS] = tune.grid_search(grid_chunks(grid_points(axes), spec.population))
    elif spec.sampler == "grid":
        from ray import tune

        for sp in spec.space:
            space[sp.canonical] = tune.grid_search([encode_value(v) for v in sp.grid_values()])
    return space


def build_tuner(spec: SweepSpec, ctx: Mapping[str, Any], exp_dir: Path, monitor: Any):
    from ray import tune
    from ray.tune.logger import JsonLoggerCallback

    limiter, searcher = search_algorithm(spec)
    if spec.sampler == "grid":
        tune_cfg = tune.TuneConfig(
            num_samples=1,
            max_concurrent_trials=spec.concurrency,
            reuse_actors=True,
            trial_dirname_creator=trial_dirname,
            trial_name_creator=trial_namer(grid=True),
        )
    else:
        tune_cfg = tune.TuneConfig(
            search_alg=limiter,
            num_samples=spec.tune_trials(),
            reuse_actors=True,
            trial_dirname_creator=trial_dirname,
            trial_name_creator=trial_namer(grid=False),
        )
    run_cfg = tune.RunConfig(
        name=exp_dir.name,
        storage_path=str(exp_dir.parent.resolve()),
        verbose=0,
        callbacks=[monitor, JsonLoggerCallback()],
        stop=monitor,
        failure_config=tune.FailureConfig(max_failures=spec.retries, fail_fast=False),
    )
    tuner = tune.Tuner(trainable(spec), param_space=param_space(spec, ctx), tune_config=tune_cfg, run_config=run_cfg)
    return tuner, searcher


# ----------------------------------------------------------------------------------------------
# Ray


def tune_defaults() -> None:
    """Driver-side Tune settings (an explicit environment variable wins)."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the legacy reporter honours verbose=0: our monitor prints
    # Tune snapshots the experiment every 10 s or more by default; trials here take seconds, so snapshot
    # every 2 s: after a driver kill fewer finished trials have to run again.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "2")
    # Trials report to MLflow: of Tune's own result files only result.json is kept (`build_tuner` adds its logger;
    # Tune reads it back for the ResultGrid); CSV and TensorBoard (which cannot take a population's per-member
    # list) would be unread copies written on every report.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")


# ----------------------------------------------------------------------------------------------
# sweep / resume / finish


def fit_to_cluster(spec: SweepSpec) -> SweepSpec:
    """Refuse per-trial requests the cluster can never grant (Ray would leave the trial PENDING forever), and
    drop a GPU request on a cluster without GPUs (trials then train on CPU), with a warning."""
    import dataclasses

    import ray

    from veil.sweeps.spec import Resources

    res = ray.cluster_resources()
    cpus, gpus = float(res.get("CPU", 0)), float(res.get("GPU", 0))
    want = 0.1 if spec.executor == "ray-train" else spec.resources.cpus
    if want > cpus:
        raise ConfigError(
            "resources.cpus",
            spec.resources.cpus,
            f"at most the cluster's {cpus:g} CPUs (a trial that does not fit would wait forever)",
            spec.source,
        )
    if on_ray_actors(spec) and not any(p.section == "method" and p.name == "K" for p in spec.space):
        try:  # a trial whose federation cannot fit its CPUs is refused now, not when Tune schedules it
            federation_bundles(spec, {})
        except VeilError as e:
            raise ConfigError("resources.cpus", spec.resources.cpus, str(e), spec.source) from None
    if spec.resources.gpu > 0 and gpus == 0:
        warn(f"{spec.source}: resources.gpu = {spec.resources.gpu:g} but the cluster has no GPU; trials train on CPU")
        raw = {**spec.raw, "resources": {"cpus": spec.resources.cpus, "gpu": 0}}
        return dataclasses.replace(spec, resources=Resources(spec.resources.cpus, 0.0), raw=raw)
    if spec.resources.gpu > gpus:
        raise ConfigError("resources.gpu", spec.resources.gpu, f"at most the cluster's {gpus:g} GPUs", spec.source)
    return spec


def check_dataset_labels(spec: SweepSpec) -> None:
    """Per-label objectives and constraints checked against the dataset's labels, known once it is loaded
    (cached after the first load), and a user's data file loaded (so checked) with every seed's split:
    refused before Ray starts or the parent run exists rather than failing every trial."""
    from veil.datasets.registry import is_file_dataset, load_dataset
    from veil.run import validate

    per_label = any(metric_label(m) for m in [*spec.metrics, *(c.metric for c in spec.constraints)])
    if not per_label and not is_file_dataset(spec.dataset):
        return
    seeds = spec.seeds if is_file_dataset(spec.dataset) else spec.seeds[:1]
    for seed in seeds:
        ds = load_dataset(spec.dataset, validate(spec.run_spec({}, seed)).dataset_config)
    check_metric_labels(spec, ds.utility_names, ds.sensitive_names)


@dataclass
class SweepOutcome:
    """What `run_sweep` / `resume_sweep` hand back."""

    name: str
    parent_run_id: str
    tracking_uri: str
    experiment_dir: Path
    results: SweepResults
    report_dir: Path
    files: dict[str, Path]
    seconds: float
    stopped_for_failures: bool
    incomplete: bool = False
    """Interrupted before every trial ran (continue it with `veil resume`)."""
    searcher: Any = None
    """The StudySearch (its `study` is the Optuna study), None for grid sweeps."""
    timings: dict[str, float] = field(default_factory=dict)
    """Where the sweep's wall time went (`sweep_timings`), logged to the parent as time/* metrics."""


def sweep_timings(
    wall: float, ray_start: float, tune: float, finish: float, grid: Any, concurrency: int
) -> dict[str, float]:
    """Wall time split into Ray start-up, Tune (trials and their scheduling), and the final report; `trials`
    is the trials' own seconds (each trial's report) and `orchestration` the share of the wall time not
    explained by trials running `concurrency` at a time: 1 - (trials / concurrency) / wall."""
    trials = 0.0
    for r in grid:
        trials += float((r.metrics or {}).get("trial_seconds") or 0.0)
    return {
        "wall": wall,
        "ray_start": ray_start,
        "tune": tune,
        "finish": finish,
        "trials": trials,
        "orchestration": max(0.0, 1.0 - (trials / max(1, concurrency)) / wall) if wall > 0 else 0.0,
    }


def run_sweep(
    spec: SweepSpec,
    *,
    name: str | None = None,
    address: str | None = None,
    tracking_uri: str | None = None,
    trials: int | None = None,
    storage_root: str | Path = DEFAULT_ROOT,
    quiet: bool = False,
) -> SweepOutcome:
    """Start a sweep: parent MLflow run, Tune + Optuna trials, then the front, plots and parent metrics."""
    import dataclasses

    from veil.platform.cluster import require_shared_store
    from veil.tracking.mlflow_run import TrackedRun, check_tracking, uri_source
    from veil.tracking.sync import recover

    if trials is not None:
        if spec.sampler == "grid" and trials != spec.trials:
            raise ConfigError("--trials", trials, f"the grid's size {spec.trials} (a grid runs every point once)")
        if trials < 1:
            raise ConfigError("--trials", trials, "an integer >= 1")
        raw = {**spec.raw, "trials": trials}
        spec = dataclasses.replace(spec, trials=trials, raw=raw)
    name = name or default_name(spec)
    for warning in spec.warnings:
        warn(warning)
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$", name):
        raise ConfigError("--name", name, "letters, digits, '_', '-', '.' (it names a directory and an MLflow run)")
    exp_dir = (Path(storage_root) / name).resolve()
    if exp_dir.exists():
        raise ConfigError("--name", name, f"a new sweep name: {exp_dir} exists (continue it with `veil resume {name}`)")
    uri = check_tracking(tracking_uri)
    require_shared_store(uri, address, uri_source(tracking_uri))
    recover(uri, "veil sweep")
    check_dataset_labels(spec)
    t0 = time.time()
    tune_defaults()
    started = ensure_ray(address)
    t_ray = time.time()
    try:
        spec = fit_to_cluster(spec)
    except BaseException:
        if started:
            import ray

            ray.shutdown()
        raise
    parent = TrackedRun.start(
        uri,
        spec.experiment,
        name,
        tags={
            TAG_ROLE: "sweep",
            TAG_SWEEP: name,
            TAG_SPEC: spec.stem,
            TAG_STORAGE: str(exp_dir),
            "veil.method": spec.method,
            "veil.dataset": spec.dataset,
            "veil.sampler": spec.sampler,
            **({TAG_WARNINGS: "\n".join(spec.warnings)} if spec.warnings else {}),
        },
    )
    try:
        parent.log_params(spec.flat_params())
        parent.log_dict({"spec": dict(spec.raw), "source": spec.source}, SPEC_ARTIFACT)
        parent.log_text(spec_yaml(spec), "sweep/spec.yaml")
        ctx = {
            "sweep": name,
            "parent_run_id": parent.run_id,
            "tracking_uri": uri,
            "storage": str(exp_dir),
            "threads": max(1, int(spec.resources.cpus)),
        }
        exp_dir.mkdir(parents=True)
        _state_path(exp_dir).write_text(
            json.dumps({**ctx, "spec": dict(spec.raw), "source": spec.source, "created": time.time()}, indent=2)
        )
        total = spec.trials
        monitor = SweepMonitor(spec, total, quiet, uri)
        if not quiet:
            print(
                f"sweep {name}: {spec.method} on {spec.dataset}, {total} trials x {len(spec.seeds)} seed(s), "
                f"sampler {spec.sampler}, concurrency {spec.concurrency}\n  MLflow parent run {parent.run_id} at {uri}"
                f"\n  Tune storage {exp_dir}",
                flush=True,
            )
        tuner, searcher = build_tuner(spec, ctx, exp_dir, monitor)
        t_tune = time.time()
        grid = tuner.fit()
        t_fit = time.time()
        outcome = finish_sweep(
            spec,
            SweepRef(name, parent.run_id, parent.experiment_id, uri, str(exp_dir), "RUNNING"),
            exp_dir,
            monitor.stopped_for_failures,
            time.time() - t0,
            tune_trial_ids(grid),
        )
        outcome.searcher = searcher
        wall = time.time() - t0
        outcome.timings = sweep_timings(wall, t_ray - t0, t_fit - t_tune, time.time() - t_fit, grid, spec.concurrency)
        when_tracking_answers(
            lambda: TrackedRun(uri, parent.run_id).log_metrics(
                {f"time/{k}" if k != "orchestration" else "orchestration_share": v for k, v in outcome.timings.items()}
            ),
            uri,
        )
        return outcome
    except BaseException as e:
        parent.fail(e)
        raise
    finally:
        if started:
            import ray

            ray.shutdown()


def tune_trial_ids(grid: Any) -> set[str]:
    """Ids of every trial in a Tune ResultGrid (its directories are named trial_<id>, see trial_dirname)."""
    ids = set()
    for r in grid:
        name = Path(r.path).name if getattr(r, "path", None) else ""
        tid = name[len("trial_") :] if name.startswith("trial_") else (r.metrics or {}).get("trial_id")
        if tid:
            ids.add(tid)
    return ids


def finish_sweep(
    spec: SweepSpec,
    ref: SweepRef,
    exp_dir: Path,
    stopped: bool,
    seconds: float,
    known_trial_ids: set[str] | None = None,
) -> SweepOutcome:
    """Reconcile orphaned child runs, read the trials back from MLflow, tag the front, log the report files
    and metrics to the parent, and write its description (the front, linked) and the trials' runs-table view."""
    from veil.tracking.mlflow_run import TrackedRun, client
    from veil.tracking.sync import sync

    # Trial runs that lost the server mid-sweep finished into the local journal: once it answers, replay them.
    when_tracking_answers(lambda: client(ref.tracking_uri).search_experiments(max_results=1), ref.tracking_uri)
    sync(ref.tracking_uri, found_by="veil sweep")
    if known_trial_ids is not None:
        supersede_orphans(ref.tracking_uri, ref.experiment_id, ref.parent_run_id, known_trial_ids)
    interrupted = end_interrupted(ref.tracking_uri, ref.experiment_id, ref.name)
    results = collect(ref, spec)
    tag_front(results)
    report_dir = exp_dir / "report"
    files = write_report(results, report_dir)
    parent = TrackedRun(ref.tracking_uri, ref.parent_run_id)
    c = results.counts
    metrics = {
        "hypervolume": results.hypervolume,
        "n_trials": c["trials"],
        "n_finished": c["finished"],
        "n_failed": c["failed"],
        "n_front": c["front"],
        "sweep_seconds": seconds,
    }
    if results.chull_auc is not None:
        metrics["chull_auc"] = results.chull_auc
    parent.log_metrics(metrics)
    for key in ("front.csv", "trials.csv", "trials.parquet", "summary.json"):
        parent.log_file(files[key], "results")
    for key in ("front.png", "front.html"):
        parent.log_file(files[key], "plots")
    publish(results)
    # Interrupted (Ctrl-C: Tune stops gracefully and returns) when trials are missing or still running.
    # A grid's trials all exist in Tune from the start, so trials that never ran count through their missing runs.
    incomplete = not stopped and (
        (known_trial_ids is not None and len(known_trial_ids) < spec.tune_trials())
        or c["trials"] < spec.trials
        or c["running"] > 0
        or interrupted > 0
    )
    if stopped:
        parent.set_tags({"veil.stopped": "max_failures"})
    if incomplete:
        parent.set_tags({"veil.incomplete": "true"})
    parent.finish("KILLED" if incomplete else "FAILED" if stopped or c["finished"] == 0 else "FINISHED")
    if parent.journal is not None:  # the server dropped while the parent was being closed
        when_tracking_answers(lambda: client(ref.tracking_uri).search_experiments(max_results=1), ref.tracking_uri)
        sync(ref.tracking_uri, found_by="veil sweep")
    return SweepOutcome(
        ref.name,
        ref.parent_run_id,
        ref.tracking_uri,
        exp_dir,
        results,
        report_dir,
        files,
        seconds,
        stopped,
        incomplete=incomplete,
    )


def _restored_monitor(tuner: Any) -> "SweepMonitor | None":
    try:
        cbs = tuner._local_tuner.get_run_config().callbacks or []  # noqa: SLF001 (no public accessor)
    except Exception:
        return None
    return next((cb for cb in cbs if isinstance(cb, SweepMonitor)), None)


def resume_sweep(
    ref: str,
    *,
    address: str | None = None,
    tracking_uri: str | None = None,
    storage_root: str | Path = DEFAULT_ROOT,
    retry_failed: bool = False,
    quiet: bool = False,
) -> SweepOutcome:
    """Continue a sweep whose driver died: `Tuner.restore(..., resume_unfinished=True)`. Finished trials are
    kept; trials in flight at the kill run again from scratch and supersede their earlier MLflow child run,
    so each trial is counted once. `retry_failed` also re-runs trials that had crashed."""
    from ray import tune

    from veil.platform.cluster import require_shared_store
    from veil.tracking.mlflow_run import TrackedRun

    sref, state = locate(ref, tracking_uri=tracking_uri, storage_root=storage_root)
    if state is None:
        raise SweepNotFound(
            f"sweep {sref.name!r}: its Tune storage {sref.storage} is not reachable from here "
            f"(run `veil resume` where the sweep ran, or pass the experiment directory)"
        )
    exp_dir = Path(state["storage"])
    if not tune.Tuner.can_restore(str(exp_dir)):
        raise SweepNotFound(
            f"sweep {sref.name!r}: {exp_dir} holds no Tune experiment to restore (the driver died "
            "before Tune's first snapshot; start it again with `veil sweep`)"
        )
    spec = sweep_from_mapping(state["spec"], where=state["source"])
    require_shared_store(sref.tracking_uri, address, f"sweep {sref.name}'s tracking URI")
    t0 = time.time()
    tune_defaults()
    started = ensure_ray(address)
    try:
        reopen_parent(sref.tracking_uri, sref.parent_run_id)
        if not quiet:
            print(f"resuming sweep {sref.name} from {exp_dir} (MLflow parent run {sref.parent_run_id})", flush=True)
        tuner = tune.Tuner.restore(
            str(exp_dir),
            trainable=trainable(spec),
            resume_unfinished=True,
            resume_errored=False,
            restart_errored=retry_failed,
        )
        monitor = _restored_monitor(tuner)
        if monitor is not None:  # it comes back as pickled at the start: this process's settings instead
            monitor.quiet, monitor.t0, monitor.grid = quiet, time.time(), spec.sampler == "grid"
            monitor.population = spec.population
            monitor.member_failures = getattr(monitor, "member_failures", 0)
        grid = tuner.fit()
        stopped = bool(getattr(monitor, "stopped_for_failures", False))
        return finish_sweep(spec, sref, exp_dir, stopped, time.time() - t0, tune_trial_ids(grid))
    except BaseException as e:
        TrackedRun(sref.tracking_uri, sref.parent_run_id).fail(e)
        raise
    finally:
        if started:
            import ray

            ray.shutdown()


__all__ = [
    "run_sweep",
    "resume_sweep",
    "run_trial",
    "sweep_trial",
    "SweepOutcome",
    "SweepMonitor",
    "tune_key",
    "format_report",
    "format_table",
    "analyze",
]
