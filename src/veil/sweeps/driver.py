"""Run a sweep from the driver process: Ray Tune runs the trials (`veil.sweeps.trial`, in Ray workers), Optuna
suggests them (multi-objective), MLflow records them, and `veil.sweeps.monitor` prints progress here.

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
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from veil import process_env
from veil.console import warn
from veil.errors import ConfigError, VeilError
from veil.platform.cluster import ray_session
from veil.sweeps.monitor import SweepMonitor
from veil.sweeps.overview import publish
from veil.sweeps.population_trials import MEMBERS, grid_chunks, product_points
from veil.sweeps.preflight import check_data, check_keys, check_start, preload
from veil.sweeps.report import write_report
from veil.sweeps.results import (
    DEFAULT_ROOT,
    SPEC_ARTIFACT,
    TAG_ROLE,
    TAG_SPEC,
    TAG_STORAGE,
    TAG_SWEEP,
    TAG_WARNINGS,
    SweepNotFound,
    SweepRef,
    SweepResults,
    _state_path,
    collect,
    end_interrupted,
    locate,
    reopen_parent,
    supersede_orphans,
    tag_front,
)
from veil.sweeps.space import encode_value
from veil.sweeps.sweepspec import SweepSpec, spec_yaml, sweep_from_mapping
from veil.sweeps.trial import (
    CTX_KEY,
    federation_bundles,
    on_ray_actors,
    trainable,
    trial_dirname,
    trial_namer,
    tune_key,
    when_tracking_answers,
)

if TYPE_CHECKING:
    from veil.datasets.catalog import Preloaded


# ----------------------------------------------------------------------------------------------
# building the Tuner


def search_algorithm(spec: SweepSpec) -> tuple[Any, Any]:
    """(ConcurrencyLimiter(StudySearch), StudySearch) with the Optuna sampler registered under `spec.sampler`
    in `veil.sweeps.samplers`; (None, None) for grid (Tune's grid_search, see `param_space`)."""
    from veil.sweeps.samplers import sampler_entry

    entry = sampler_entry(spec.sampler, where=spec.source)
    sampler = entry.factory(spec)
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
        independent=entry.independent(spec),
        concurrency=spec.concurrency,
    )
    return ConcurrencyLimiter(searcher, max_concurrent=spec.concurrency), searcher


def param_space(spec: SweepSpec, ctx: Mapping[str, Any]) -> dict[str, Any]:
    space: dict[str, Any] = {CTX_KEY: dict(ctx)}
    if spec.sampler == "grid" and spec.population > 1:
        from ray import tune

        axes = {sp.canonical: [encode_value(v) for v in sp.grid_values()] for sp in spec.space}
        space[MEMBERS] = tune.grid_search(grid_chunks(product_points(axes), spec.population))
    elif spec.sampler == "grid":
        from ray import tune

        for sp in spec.space:
            space[sp.canonical] = tune.grid_search([encode_value(v) for v in sp.grid_values()])
    return space


def build_tuner(spec: SweepSpec, ctx: Mapping[str, Any], exp_dir: Path, monitor: Any, data: Preloaded | None = None):
    from ray import tune

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
        callbacks=[monitor],
        stop=monitor,
        failure_config=tune.FailureConfig(max_failures=spec.retries, fail_fast=False),
    )
    tuner = tune.Tuner(
        trainable(spec, data), param_space=param_space(spec, ctx), tune_config=tune_cfg, run_config=run_cfg
    )
    return tuner, searcher


# ----------------------------------------------------------------------------------------------
# Ray


def tune_defaults() -> None:
    """Driver-side Tune settings (`process_env.DEFAULTS`; an explicit environment variable wins)."""
    process_env.settle()
    quiet_missing_result_files()


class _NoResultFiles(logging.Filter):
    """Drops Tune's warning that it found no result files to read back: Veil's trials write none."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Failed to fetch metrics")


def quiet_missing_result_files() -> None:
    log = logging.getLogger("ray.tune.analysis.experiment_analysis")
    if not any(isinstance(f, _NoResultFiles) for f in log.filters):
        log.addFilter(_NoResultFiles())


# ----------------------------------------------------------------------------------------------
# sweep / resume / finish


def fit_to_cluster(spec: SweepSpec) -> SweepSpec:
    """Refuse per-trial requests the cluster can never grant (Ray would leave the trial PENDING forever), and
    drop a GPU request on a cluster without GPUs (trials then train on CPU), with a warning."""
    import dataclasses

    import ray

    from veil.sweeps.spec_keys import Resources

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
    from veil.platform.cluster import joins_cluster
    from veil.tracking.mlflow_run import (
        TrackedRun,
        check_tracking,
        require_shared_store,
        uri_source,
    )
    from veil.tracking.replay import recover

    spec, name, exp_dir = check_start(spec, name=name, trials=trials, storage_root=storage_root)
    uri = check_tracking(tracking_uri)
    require_shared_store(uri, joins_cluster(address), uri_source(tracking_uri))
    check_keys(spec, uri)
    recover(uri, "veil sweep")
    t0 = time.time()
    data = check_data(spec)  # before Ray starts: no thread of Veil's runs while ray.init sets its variables
    tune_defaults()
    with ray_session(address):
        t_ray = time.time()
        spec = fit_to_cluster(spec)
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
            tuner, searcher = build_tuner(spec, ctx, exp_dir, monitor, data)
            if spec.population > 1 and searcher is not None and not quiet:
                print(f"  {searcher.plan()}", flush=True)
            t_tune = time.time()
            try:
                grid = tuner.fit()
            finally:
                monitor.close()
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
            asks = searcher.ask_seconds if searcher is not None else []
            outcome.timings = {
                **sweep_timings(wall, t_ray - t0, t_fit - t_tune, time.time() - t_fit, grid, spec.concurrency),
                "ask": sum(asks),
            }

            def log_timings() -> None:
                run = TrackedRun(uri, parent.run_id)
                run.log_metrics(
                    {
                        f"time/{k}" if k != "orchestration" else "orchestration_share": v
                        for k, v in outcome.timings.items()
                    }
                )
                # stepped by trial number: how the sampler's ask time grows with the trials it has been told
                run.log_metric_rows([({"ask_seconds": s}, i + 1) for i, s in enumerate(asks)])

            when_tracking_answers(log_timings, uri)
            return outcome
        except BaseException as e:
            parent.fail(e)
            raise


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
    from veil.tracking.replay import sync

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
        (known_trial_ids is not None and spec.sampler == "grid" and len(known_trial_ids) < spec.tune_trials())
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

    from veil.platform.cluster import joins_cluster
    from veil.tracking.mlflow_run import TrackedRun, require_shared_store

    sref, state = locate(ref, tracking_uri=tracking_uri, storage_root=storage_root, command="veil resume")
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
    require_shared_store(sref.tracking_uri, joins_cluster(address), f"sweep {sref.name}'s tracking URI")
    t0 = time.time()
    data = preload(spec)
    tune_defaults()
    with ray_session(address):
        try:
            reopen_parent(sref.tracking_uri, sref.parent_run_id)
            if not quiet:
                print(f"resuming sweep {sref.name} from {exp_dir} (MLflow parent run {sref.parent_run_id})", flush=True)
            SweepMonitor.unpickled = []
            SweepMonitor.resumed_as = {
                "quiet": quiet,
                "t0": time.time(),
                "grid": spec.sampler == "grid",
                "population": spec.population,
                "tty": not quiet and sys.stdout.isatty(),
            }
            try:
                tuner = tune.Tuner.restore(
                    str(exp_dir),
                    trainable=trainable(spec, data),
                    resume_unfinished=True,
                    resume_errored=False,
                    restart_errored=retry_failed,
                )
                grid = tuner.fit()
            finally:
                SweepMonitor.resumed_as = {}
                for m in SweepMonitor.unpickled:
                    m.close()
            stopped = any(m.stopped_for_failures for m in SweepMonitor.unpickled)
            return finish_sweep(spec, sref, exp_dir, stopped, time.time() - t0, tune_trial_ids(grid))
        except BaseException as e:
            TrackedRun(sref.tracking_uri, sref.parent_run_id).fail(e)
            raise


__all__ = [
    "run_sweep",
    "resume_sweep",
    "SweepOutcome",
]
