"""One trial of a sweep, run inside a Ray Tune trial worker: `sweep_trial` (the Tune function trainable, which
`trainable` wraps in `tune.with_resources`) runs every seed of its configuration sequentially through
`veil.pipeline.execute.execute` (inline by default: seconds per trial; or under Ray Train with `executor: ray-train`, the
trial itself then reserving only 0.1 CPU), or a population of configurations as one vectorised training, logs
each trial's MLflow child run (FAILED with its error when it crashes) and reports the mean and std of each
metric over the seeds. `run_trial` itself needs no Ray. Imports nothing of the driver's side
(`veil.sweeps.driver`, `veil.sweeps.monitor`)."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

from veil.console import logger
from veil.errors import VeilError
from veil.sweeps.model import SweepSpec
from veil.sweeps.population_trials import MEMBER_RESULTS, MEMBERS, member_numbers
from veil.sweeps.results import (
    STD_PREFIX,
    TAG_CONFIG,
    TAG_NODE,
    TAG_NUMBER,
    TAG_PARETO,
    TAG_POPULATION,
    TAG_ROLE,
    TAG_SEED,
    TAG_SEEDS,
    TAG_SWEEP,
    TAG_TRIAL,
    settle_attempts,
    settle_members,
)
from veil.sweeps.space import decode_value, format_value
from veil.tracking import PARENT_TAG

if TYPE_CHECKING:
    from veil.datasets.catalog import Preloaded

CTX_KEY = "_veil"


def tune_key(metric: str) -> str:
    """Metric name as reported to Tune/Optuna ('/' would read as nesting there)."""
    return metric.replace("/", "__")


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

    from veil.console import warn
    from veil.tracking.journal import unavailable

    def note(state: Any) -> None:
        if state.attempt_number == 1:
            warn(f"the tracking server {uri} does not answer; waiting for it")

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
        TAG_PARETO: "false",  # the sweep's end tags its front true (`tag_front`)
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
    logger().info(
        f"trial {trial_id} finished before the sweep stopped (run {run.info.run_id}): reported from its record, "
        "not trained again"
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
    data: Preloaded | None = None,
) -> dict[str, Any]:
    """Run every seed of one configuration, log the trial's child run, return the metrics to report
    (means over seeds, 'std/<metric>' stds, 'mlflow_run_id'). Raises when a seed crashes or an objective
    is not a finite number; the child run is then FAILED with the error. `number` is the trial's number
    (`trial_number`), tagged so reports number trials as the progress lines do; `data`: the sweep's datasets,
    loaded once by its driver."""
    from veil.pipeline.execute import execute
    from veil.pipeline.validation import validate
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
        res = execute(v, parent_run_id=parent_run_id, storage=storage, data=data)
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
                per_seed.append(execute(rs, parent_run_id=run.run_id, storage=storage, data=data).metrics)
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
    numbers: Sequence[int | None] | None = None,
    data: Preloaded | None = None,
) -> dict[str, Any]:
    """Run a population of trials (`members`: each one's searched values) as one vectorised training per seed
    (`veil.pipeline.execute.execute_population`), each member logged as its own trial run exactly as if it had run alone.
    `number` is the Tune trial's, `numbers` the members' trial numbers (`member_numbers`; none by default).
    Returns {'members': [what `run_trial` reports, or None for a member that failed], 'trial_seconds'}; a
    member that fails (invalid values, a non-finite objective) is recorded FAILED and the rest go on."""
    from veil.pipeline.execute import execute_population
    from veil.pipeline.validation import validate
    from veil.tracking.mlflow_run import TrackedRun, experiment_id

    t0 = time.time()
    exp_id = when_tracking_answers(lambda: experiment_id(tracking_uri, spec.experiment), tracking_uri)
    ids = [member_id(trial_id, i) for i in range(len(members))]
    tags = [trial_tags(v, ids[i], sweep, numbers[i] if numbers else None, trial_id) for i, v in enumerate(members)]
    configs = {mid: t[TAG_CONFIG] for mid, t in zip(ids, tags)}
    kept = when_tracking_answers(lambda: settle_members(tracking_uri, exp_id, sweep, trial_id, configs), tracking_uri)
    names = [trial_run_name(sweep, ids[i], v) for i, v in enumerate(members)]
    seeds = list(spec.seeds)
    label = f"population #{number}" if number is not None else f"population {trial_id}"

    def note(text: str) -> None:
        logger().info(f"{label}: {text}")

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
                data=data,
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


def sweep_trial(config: dict[str, Any], spec: SweepSpec, data: Preloaded | None = None) -> None:
    """The Tune function trainable: one configuration (or a population of them), all its seeds, one report.
    `spec` is the driver's validated SweepSpec and `data` the datasets it loaded (`preload`), both shipped once
    through the object store by `tune.with_parameters`, never re-parsed or re-read."""
    import torch
    from ray import tune

    ctx = config[CTX_KEY]
    torch.set_num_threads(int(ctx.get("threads", 1)))
    context = tune.get_context()
    number = number_from_name(context.get_trial_name())
    where = dict(
        sweep=ctx["sweep"],
        parent_run_id=ctx["parent_run_id"],
        tracking_uri=ctx["tracking_uri"],
        storage=Path(ctx["storage"]) / "train",
        number=number,
        data=data,
    )
    if MEMBERS in config:
        members = [{k: decode_value(v) for k, v in m.items()} for m in config[MEMBERS]]
        numbers = member_numbers(config, number, spec.population)
        tune.report(run_population(spec, members, context.get_trial_id(), numbers=numbers, **where))
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
    from veil.pipeline.validation import validate
    from veil.platform.federation import trial_bundles

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


def trainable(spec: SweepSpec, data: Preloaded | None = None):
    """`sweep_trial` with the trial's Ray resources attached: a federation's coordinator and node host actors
    run inside the trial's own placement group (`federation_bundles`). `data` goes to every trial through the
    object store."""
    from ray import tune

    fn = tune.with_parameters(sweep_trial, spec=spec, data=data)
    if on_ray_actors(spec):

        def resources(config: dict[str, Any]) -> Any:
            return tune.PlacementGroupFactory(federation_bundles(spec, config), strategy="PACK")

        return tune.with_resources(fn, resources)
    if spec.executor == "ray-train":
        res = {"cpu": 0.1}  # the TorchTrainer's workers reserve the real resources
    else:
        res = {"cpu": spec.resources.cpus}
        if spec.resources.gpu:
            res["gpu"] = spec.resources.gpu
    return tune.with_resources(fn, res)


__all__ = [
    "CTX_KEY",
    "tune_key",
    "run_trial",
    "run_population",
    "sweep_trial",
    "trainable",
    "when_tracking_answers",
]
