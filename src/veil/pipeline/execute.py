"""THE run pipeline: validate once -> executor -> audit -> log, for every run (centralized or federated, from
`veil run` or a sweep trial).

A RunSpec is validated completely (method, dataset, audit and federation parameters, ranges, executor) into a
`ValidatedRun` before any data are loaded or any training starts; everything downstream uses its built configs."""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from veil import __version__
from veil.audit.probes import AuditReport
from veil.audit.settings import AuditConfig
from veil.audit.step import AuditOutcome, audit_release, audit_releases, stacked_audit
from veil.certify.calibrate import EXIT_NOT_MET, Calibration, EpochHook, Subject, Trained, calibrate
from veil.certify.certificate import Certificate, certify
from veil.certify.target import Target
from veil.config import as_params
from veil.datasets.catalog import NOTHING, Preloaded
from veil.datasets.dataset import Dataset
from veil.datasets.transform import FeatureTransform
from veil.keystore import KEY_ID_TAG
from veil.methods.builtin import get_method
from veil.pipeline.runspec import (
    RUN_KEYS,
    RunSpec,
    ValidatedRun,
    load_run_file,
    spec_from_mapping,
)
from veil.pipeline.validation import check_release, check_target, validate

if TYPE_CHECKING:
    from veil.platform.executors import Job, Training, TrainOutcome
    from veil.tracking.mlflow_run import Writer


HOOK_ENV = "VEIL_EPOCH_HOOK"
"""Instrumentation every run loads, unset in normal use (`veil.plugins.instrumentation`): its factory gets the run's
MLflow `tags` and `flush` (writes the epochs logged so far to the store) and returns an on-epoch callback or None
(the fault tests' pauses plug in here)."""


def epoch_hook(context: Mapping[str, Any]) -> Callable[[int, dict[str, float]], None] | None:
    """The $VEIL_EPOCH_HOOK callback for one run, or None; a name that does not load is a ConfigError."""
    from veil.plugins import instrumentation

    hook: Callable[[int, dict[str, float]], None] | None = instrumentation(HOOK_ENV, context)
    return hook


@dataclass
class RunResult:
    """What a finished run produced."""

    run_id: str
    experiment_id: str
    tracking_uri: str
    params: dict[str, Any]
    metrics: dict[str, float]
    report: AuditReport
    history: list[dict[str, float]]
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)
    """Federated runs: 'per_node' audit rows and 'federation' totals."""
    certificate: Certificate | None = None
    """The release's certificate against the run's target (None: the run has no target)."""
    calibration: Calibration | None = None
    """The calibration that set the privacy knob (None: the run did not calibrate)."""

    @property
    def exit_code(self) -> int:
        """0, or `EXIT_NOT_MET` when the run calibrated for its target and its release does not meet it."""
        failed = self.certificate is not None and not self.certificate.met
        return EXIT_NOT_MET if failed and self.calibration is not None else 0

    def to_json(self) -> dict[str, Any]:
        out = {
            "run_id": self.run_id,
            "experiment_id": self.experiment_id,
            "tracking_uri": self.tracking_uri,
            "params": self.params,
            "metrics": self.metrics,
            "seconds": round(self.seconds, 3),
        }
        if self.extra.get("per_node"):
            out["per_node"] = self.extra["per_node"]
        if self.certificate is not None:
            out["certificate"] = self.certificate.to_dict()
        return out


def code_version() -> str:
    """Package version plus the git commit when run from a checkout."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except Exception:
        sha = ""
    return f"{__version__}+{sha}" if sha else __version__


def run_params(v: ValidatedRun, ds_params: Mapping[str, Any]) -> dict[str, Any]:
    """Flat params recorded in MLflow: method.*, dataset.*, audit.*, run.*."""
    s = v.spec
    out: dict[str, Any] = {
        "method": s.method,
        "dataset": s.dataset,
        "seed": s.seed,
        "executor": v.executor_label,
        "num_workers": s.num_workers,
        "use_gpu": s.use_gpu,
        "code_version": code_version(),
    }
    out.update(as_params(v.method_config, "method."))
    out.update({f"dataset.{k}": val for k, val in ds_params.items()})
    out.update(as_params(v.audit_config, "audit."))
    out.update(
        {f"method.deviation.{k}": val for k, val in get_method(s.method).recorded_deviations(v.method_config).items()}
    )
    out.update(v.target.params())
    if v.knob_set_by is not None:
        out["knob_set_by"] = v.knob_set_by
    return out


def log_outcome(
    tracker: Any,
    v: ValidatedRun,
    ds: Dataset,
    outcome: TrainOutcome,
    audited: AuditOutcome,
    job: Job,
    code_version: str,
) -> None:
    """Artifacts every run leaves: the trained weights with their config, the audit report and the audits'
    files, the training history, and for a federation its rounds, failures and nodes."""
    spec = v.spec
    tracker.log_torch_state(outcome.method.state(), "model/state.pt")
    extra = {"partition": v.partition, "runtime": v.runtime} if job.federation is not None else {}
    tracker.log_dict(
        {
            "method": spec.method,
            "config": dataclasses.asdict(v.method_config),
            "task": dataclasses.asdict(ds.task()),
            "code_version": code_version,
            **extra,
        },
        "model/config.json",
    )
    tracker.log_dict(feature_transform(ds).to_dict(), "model/features.json")
    tracker.log_dict(audited.report.to_dict(), "audit/report.json")
    tracker.log_text(audited.report.to_markdown() + "\n", "audit/report.md")
    for path, obj in audited.artifacts.items():
        tracker.log_text(obj, path) if isinstance(obj, str) else tracker.log_dict(obj, path)
    fed, plan = outcome.federation, job.federation
    if fed is not None and plan is not None:
        from veil.methods.federated.coordinator import node_table

        tracker.log_dict([r.to_dict() for r in fed.records], "federation/rounds.json")
        tracker.log_columns(node_table(fed.records), "federation/round_nodes.parquet")
        tracker.log_dict(fed.failures(), "federation/failures.json")
        tracker.log_dict(
            {
                "join_bytes": {str(k): b for k, b in fed.join_bytes.items()},
                "final_bytes": {str(k): b for k, b in fed.final_bytes.items()},
                "node_rows": {str(k): int(len(p)) for k, p in enumerate(plan.parts)},
                "objectives": [{"utility": list(o.utility), "sensitive": list(o.sensitive)} for o in plan.objectives],
            },
            "federation/nodes.json",
        )
    if outcome.history:
        tracker.log_dict(outcome.history, "training/history.json")


def execute(
    run: RunSpec | ValidatedRun,
    *,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    parent_run_id: str | None = None,
    storage: Path | None = None,
    note: Callable[[str], None] | None = None,
    data: Preloaded | None = None,
) -> RunResult:
    """THE pipeline of every run, centralized or federated, from the CLI or a sweep trial: validate (unless
    given a validated run), load the data, let the executor check and plan it, calibrate the privacy knob when
    the run asks for it, then track: train, audit, certify, log. Everything refusable is refused before the
    MLflow run starts; a crash after that leaves the run FAILED with everything logged before it. `note` hears
    calibration's progress lines; `data`: datasets loaded already (a sweep's, through Ray's object store)."""
    v = run if isinstance(run, ValidatedRun) else validate(run)
    ds = (data or NOTHING).load(v.spec.dataset, v.dataset_config)
    return execute_loaded(v, ds, on_epoch=on_epoch, parent_run_id=parent_run_id, storage=storage, note=note)


def execute_loaded(
    v: ValidatedRun,
    ds: Dataset,
    *,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    parent_run_id: str | None = None,
    storage: Path | None = None,
    note: Callable[[str], None] | None = None,
) -> RunResult:
    """`execute` on data already loaded for `v`: check, calibrate the knob when the run asks for it, plan with the
    run's executor, track. A Ray the executor starts for the run is shut down when it ends."""
    from veil.platform.cluster import ray_started_here_stops

    with ray_started_here_stops():
        return _execute_loaded(v, ds, on_epoch, parent_run_id, storage, note)


def _execute_loaded(
    v: ValidatedRun,
    ds: Dataset,
    on_epoch: Callable[[int, dict[str, float]], None] | None,
    parent_run_id: str | None,
    storage: Path | None,
    note: Callable[[str], None] | None,
) -> RunResult:
    from veil.platform.executors import get_executor

    check_release(v, ds)
    check_target(v, ds)  # cheap: before the executor, which may start Ray to place a federation
    storage = storage or Path(".veil") / "ray"
    job = get_executor(v.executor)(training(v), ds, storage)  # its refusals come before calibration's minutes
    if v.calibration is None:
        return track(v, ds, job, on_epoch=on_epoch, parent_run_id=parent_run_id, note=note)
    cal = calibrate(calibration_subject(v, job.device), ds, v.target, v.calibration, note, on_epoch)
    v, job = calibrated_job(v, ds, cal, storage)
    trains = cal.method is None  # trained again (a federation); else its epochs are only logged
    return track(
        v, ds, job, on_epoch=on_epoch if trains else None, parent_run_id=parent_run_id, calibration=cal, note=note
    )


def training(v: ValidatedRun) -> Training:
    """What an executor needs of run `v`."""
    from veil.platform.executors import Training

    s = v.spec
    return Training(
        s.method, v.method_config, s.seed, s.use_gpu, s.num_workers, s.address, v.runtime, v.partition, v.federation
    )


def calibration_subject(v: ValidatedRun, device: str | None = None) -> Subject:
    """What calibration needs of run `v`: its method, config, audit settings and seed, where its centralized
    candidates train (`device`, the run's executor's when it knows it: the GPU check and its warning are made
    once), and how a federated method's candidate trains (one in-process federation each)."""
    from veil.platform.executors import local_device

    if v.executor != "federated":
        where = device or local_device(v.spec.use_gpu)
        return Subject(v.spec.method, v.method_config, v.audit_config, v.spec.seed, where)

    warned = False  # the linked-view warning is said once per calibration, not once per candidate

    def federate(config: Any, ds: Dataset, audit: AuditConfig, on_epoch: EpochHook | None) -> Trained:
        nonlocal warned
        from veil.certify.wire import linked_rows
        from veil.console import warn
        from veil.platform.executors import get_executor

        assert v.federation is not None
        fed = dataclasses.replace(v.federation, per_node_audit=False, audit_every=0)
        vc = dataclasses.replace(v, method_config=config, runtime="in-process", federation=fed)
        job = get_executor("federated")(training(vc), ds, Path(".veil") / "ray")
        assert job.federation is not None
        capture = wire_capture(v.target, job, ds) if job.federation.method.private_encoders() else None
        outcome = job.train(on_epoch, None, None)
        out = audit_release(outcome.method, ds, audit, federation=job.federation)
        # the certificate also checks the aggregator's linked view (D-GPP), so the candidate is scored on it too
        linked = linked_rows(capture, getattr(outcome.method, "released", None), ds) if capture else None
        if capture and linked is None and not warned:
            warned = True
            warn(
                "calibration scored a candidate on its release alone: the aggregator's linked view could not be "
                "joined for every row of the fold (no sampled round was captured, or the final release missed some "
                "client's rows), so the certificate's linked check may read higher than calibration expected"
            )
        views = ((*linked, stacked_audit([linked], ds, audit)[0]),) if linked is not None else ()
        return Trained(outcome.method, outcome.history, out.z_train, out.z_test, out.report, views)

    return Subject(v.spec.method, v.method_config, v.audit_config, v.spec.seed, "cpu", federate)


def calibrated_job(v: ValidatedRun, ds: Dataset, cal: Calibration, storage: Path) -> tuple[ValidatedRun, Job]:
    """The run with its knob at the calibrated value, and the job that releases it: the calibrated candidate
    itself (centralized, also where it trained on a sample: `CalibrationConfig.max_rows`), or the value trained
    again on every training row (a federation)."""
    from veil.platform.executors import TrainOutcome, get_executor

    knob = cal.knob
    v = dataclasses.replace(v, method_config=knob.apply(v.method_config, cal.released.value))
    if cal.method is None:
        return v, get_executor(v.executor)(training(v), ds, storage)
    job = get_executor("inline")(training(v), ds, storage)
    outcome = TrainOutcome(cal.method, cal.history, "inline", job.device or "cpu", cal.seconds)
    tags = {"veil.calibrated": "true"}
    return v, dataclasses.replace(replayed(job, outcome), tags={**job.tags, **tags})


def audit_note(cfg: AuditConfig, ds: Dataset) -> str:
    """What the audit about to start does, for the console (it can take longer than training)."""
    probes = len(ds.label_names)
    return (
        f"auditing the release: {probes} fresh probe{'s' if probes > 1 else ''} "
        f"({'-'.join(map(str, cfg.hidden)) or 'linear'}, {cfg.epochs} epochs) on {len(ds.train)} train / "
        f"{len(ds.test)} test rows"
    )


def live_audit(job: Job, ds: Dataset) -> Any:
    """The between-rounds audit of a federated job that asks for one (`fed.audit_every`), else None."""
    from veil.audit.nodes import live_auditor

    plan = job.federation
    return live_auditor(plan, ds) if plan is not None and plan.options.audit_every else None


def track(
    v: ValidatedRun,
    ds: Dataset,
    job: Job,
    *,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    parent_run_id: str | None = None,
    tags: Mapping[str, str] | None = None,
    audited: AuditOutcome | None = None,
    audit_seconds: float = 0.0,
    spent: float = 0.0,
    calibration: Calibration | None = None,
    note: Callable[[str], None] | None = None,
    writer: Writer | None = None,
) -> RunResult:
    """One planned run in its own MLflow run: params, `job.train` (its rows as per-epoch metrics), the audit
    (`audited` when done already, its share of that audit's time `audit_seconds`), metrics and artifacts. `tags`
    are added to the run's own; `spent`: seconds spent on it before (a population member's share of training and
    audit), counted in total_seconds. `note`
    hears when the audit and the certificate start (the console's progress bar closes and names them).
    With a tracking server, MLflow calls go out on a background thread (`writer`, shared by a population and
    drained by its caller; else the run's own, drained before this returns). What the job starts early
    (`Job.warm`: a federation's actors) starts before the tracking store opens."""
    from veil.tracking.mlflow_run import MetricBuffer, TrackedRun

    spec = v.spec
    t0 = time.time() - spent
    with contextlib.ExitStack() as stack:
        if job.warm is not None:  # started now, it starts while the store opens; released at the end if unused
            stack.callback(job.warm())
        tracker = TrackedRun.start(
            spec.tracking_uri,
            spec.experiment,
            spec.run_name or f"{spec.method}-{spec.dataset}",
            parent_run_id=parent_run_id,
            tags={
                "veil.method": spec.method,
                "veil.dataset": spec.dataset,
                **({"veil.federated": "true"} if job.federation is not None else {}),
                **({"veil.device": job.device} if job.device else {}),
                **spec.tags,
                **(tags or {}),
            },
            writer=writer or "own",
        )
        stack.enter_context(tracker)
        params = {**run_params(v, ds.params), **job.params, **(calibration.params() if calibration else {})}
        tracker.log_params(params)
        federated = job.federation is not None

        curves = MetricBuffer(tracker)

        def log_epoch(epoch: int, row: dict[str, float]) -> None:
            if federated:  # one row per round, stepped from 1
                curves.add({k: x for k, x in row.items() if k not in ("round", "rounds_total")}, epoch + 1)
            else:
                curves.add(row, epoch)
            if on_epoch:
                on_epoch(epoch, row)
            if hook:
                hook(epoch, row)

        hook = epoch_hook({"tags": dict(spec.tags), "flush": curves.flush})
        capture = wire_capture(v.target, job, ds)
        try:
            outcome = job.train(log_epoch, tracker, live_audit(job, ds))
        finally:
            curves.flush()  # a crash keeps the curves up to it
        tracker.set_tags({"veil.device": outcome.device, **job.tags})
        say = note or (lambda _: None)
        stages = {"audit_seconds": audit_seconds}  # where the run's time went, by stage
        if audited is None:
            say(audit_note(v.audit_config, ds))
            t_audit = time.time()
            audited = audit_release(outcome.method, ds, v.audit_config, federation=job.federation)
            stages["audit_seconds"] = time.time() - t_audit
        if keep_release_key(outcome.method, tracker.run_id, tracker.tracking_uri) is not None:
            tracker.set_tags({KEY_ID_TAG: outcome.method.release_key.id})  # a fingerprint: `veil release` checks it
        if audited.tags:
            tracker.set_tags(audited.tags)
        metrics = audited.metrics
        if outcome.federation is not None:
            metrics.update(outcome.federation.totals())
        metrics["train_seconds"] = outcome.seconds
        if not federated:
            metrics["train_rows"] = len(ds.train)
        if v.target:
            say(f"certifying the release against {v.target.text()}: adversary suite {', '.join(v.audit_config.suite)}")
        t_cert = time.time()
        cert = certify_release(v, ds, outcome.method, audited, calibration)
        if cert is not None:
            stages["certificate_seconds"] = time.time() - t_cert
        if cert is not None and capture is not None:
            say(f"certifying the coordinator's view: {len(capture.views)} sampled rounds")
            t_wire = time.time()
            metrics.update(certify_wire(v.target, v.audit_config, ds, outcome.method, cert, capture))
            stages["wire_seconds"] = time.time() - t_wire
        if calibration is not None:
            stages["calibration_seconds"] = calibration.seconds
        metrics.update(stages)
        if cert is not None:
            metrics.update(cert.metrics())
            tracker.log_dict(cert.to_dict(), "certificate.json")
            tracker.log_text(cert.to_markdown() + "\n", "certificate.md")
            tracker.set_tags(
                {"veil.certificate": "met" if cert.met else "not met", "mlflow.note.content": cert.to_markdown()}
            )
        if calibration is not None:
            tracker.log_dict(calibration.to_dict(), "calibration.json")
            tracker.log_written("calibration.png", calibration.plot)
        metrics["total_seconds"] = time.time() - t0
        tracker.log_metrics(metrics)
        log_outcome(tracker, v, ds, outcome, audited, job, params["code_version"])
    extra: dict[str, Any] = {}
    if outcome.federation is not None:
        extra = {
            "per_node": audited.per_node,
            "federation": {
                **outcome.federation.totals(),
                "runtime": v.runtime,
                "failures": outcome.federation.failures(),
            },
        }
    return RunResult(
        tracker.run_id,
        tracker.experiment_id,
        tracker.tracking_uri,
        params,
        metrics,
        audited.report,
        outcome.history,
        time.time() - t0,
        extra=extra,
        certificate=cert,
        calibration=calibration,
    )


def keep_release_key(method: Any, run_id: str, tracking_uri: str) -> Path | None:
    """Keep the key the run's audited release was drawn under outside MLflow (`veil.keystore`), so that `veil
    release` releases the same rows with the same z; None when there is none to keep (a set release_seed stands
    for the key, and a method whose encoders stay on its clients releases under their own keys)."""
    from veil.keystore import save_key
    from veil.randomness import ReleaseKey

    if method.config.release_seed is not None or not isinstance(method.release_key, ReleaseKey):
        return None
    if getattr(method, "private_encoders", lambda: False)():
        return None
    return save_key(method.release_key, run_id, tracking_uri)


def wire_capture(target: Target, job: Job, ds: Dataset) -> Any:
    """The capture of what the coordinator receives in sampled rounds (`veil.certify.wire`), installed on the job's
    federation; None for a run without a target, a centralized run, or one that samples no round."""
    from veil.certify.wire import wire_capture as capture_of

    plan = job.federation
    if not target or plan is None:
        return None
    plan.wire = capture_of(plan, ds)
    return plan.wire


def certify_wire(
    target: Target, audit: AuditConfig, ds: Dataset, method: Any, cert: Certificate, capture: Any
) -> dict[str, float]:
    """Certify the coordinator's view (`veil.certify.wire.audit_wire`) and attach it to `cert` (for D-GPP its
    checks decide `cert.met`); returns its certificate/wire_* metrics."""
    from veil.certify.wire import attach, audit_wire

    section = audit_wire(capture, ds, target, audit, method)
    attach(cert, section)
    return section.metrics()


def certify_release(
    v: ValidatedRun, ds: Dataset, method: Any, audited: AuditOutcome, calibration: Calibration | None
) -> Certificate | None:
    """The release's certificate against the run's target (None without a target)."""
    if not v.target:
        return None
    knob = get_method(v.spec.method).privacy_knob
    knob_info = None
    if knob is not None:
        knob_info = {"field": knob.field, "value": knob.read(v.method_config), "set_by": v.knob_set_by}
    cert = certify(
        audited.z_train,
        audited.z_test,
        audited.covered(ds),
        audited.report,
        v.target,
        v.audit_config,
        ldp=method.ldp_release(),
        knob=knob_info,
        calibration=calibration.to_dict() if calibration is not None else None,
    )
    if cert.knob is not None and cert.knob["set_by"] == "run" and not cert.met:
        # whether "leave the knob unset" is advice that works: calibrating it for this target could be refused
        from veil.certify.resolution import check_resolution
        from veil.errors import UncertifiableTarget

        try:
            check_resolution(ds, v.target, v.audit_config, v.spec.dataset, v.spec.seed)
        except UncertifiableTarget as e:
            cert.knob["calibration_refused"] = str(e)
    return cert


# -- population trials -----------------------------------------------------------------------------------
def replayed(job: Job, outcome: TrainOutcome) -> Job:
    """`job` with its training already done (a population member): `train` hands its rows to the epoch hook,
    one call per epoch as `Method.fit` does, and returns `outcome`."""

    def train(
        on_epoch: Callable[[int, dict[str, float]], None] | None, tracker: Any, live_audit: Any = None
    ) -> TrainOutcome:
        for epoch, row in enumerate(outcome.history):
            if on_epoch:
                on_epoch(epoch, row)
        return outcome

    return dataclasses.replace(job, train=train)


def run_label(i: int, v: ValidatedRun) -> str:
    """How a population's notes name run i ('run 3 (trial-3)')."""
    return f"run {i}" + (f" ({v.spec.run_name})" if v.spec.run_name else "")


def population_key(v: ValidatedRun) -> tuple[Any, ...] | None:
    """What runs of one population must share beyond the method's config; None: the run cannot join one."""
    if v.executor != "inline":
        return None
    return (v.spec.dataset, v.dataset_config, v.spec.method, v.spec.use_gpu)


def train_population(
    runs: Sequence[ValidatedRun],
    ds: Dataset,
    storage: Path,
    parent_run_id: str | None,
) -> list[RunResult]:
    """Train `runs` (one population) as one model, audit each member, and track each in its own MLflow run
    exactly as `execute` would (tags veil.population.* added)."""
    from veil.methods.method import TrainContext
    from veil.methods.population import fit_population
    from veil.platform.executors import TrainOutcome, get_executor
    from veil.tracking.mlflow_run import Writer, resolve_tracking_uri, writes_in_background

    for v in runs:
        check_release(v, ds)
    jobs = [get_executor("inline")(training(v), ds, storage) for v in runs]
    device = jobs[0].device or "cpu"
    size = len(runs)
    t0 = time.time()
    fitted = fit_population(
        runs[0].spec.method, [v.method_config for v in runs], ds.task(), ds.train, TrainContext(device)
    )
    train_seconds = time.time() - t0
    outcomes = [TrainOutcome(m, h, "inline", device, train_seconds / size) for m, h in fitted]
    t1 = time.time()
    audits = audit_releases([o.method for o in outcomes], ds, [v.audit_config for v in runs])
    audit_share = (time.time() - t1) / size
    results = []
    # a server's round trips: member p's artifacts go out while member p + 1 is certified
    writer = Writer() if writes_in_background(resolve_tracking_uri(runs[0].spec.tracking_uri)) else None
    try:
        for p, (v, job, outcome, audited) in enumerate(zip(runs, jobs, outcomes, audits)):
            tags = {
                "veil.population.size": str(size),
                "veil.population.member": str(p),
                "veil.population.train_seconds": f"{train_seconds:.3f}",
            }
            results.append(
                track(
                    v,
                    ds,
                    replayed(job, outcome),
                    parent_run_id=parent_run_id,
                    tags=tags,
                    audited=audited,
                    audit_seconds=audit_share,
                    spent=outcome.seconds + audit_share,
                    writer=writer,
                )
            )
    finally:
        if writer is not None:
            writer.close()
    return results


def execute_population(
    runs: Sequence[ValidatedRun],
    *,
    parent_run_id: str | None = None,
    storage: Path | None = None,
    note: Callable[[str], None] | None = None,
    data: Preloaded | None = None,
) -> list[RunResult]:
    """Execute `runs` (results in their order), training those that differ only in their method's continuous
    knobs as one vectorised population per group (`veil.methods.population`) on data loaded once; each member
    is audited and logged as its own MLflow run, exactly as a solo `execute` logs it, plus tags
    veil.population.size / .member / .train_seconds (train_seconds: the group's time / its size). Runs that
    cannot join a population (another executor or dataset, a method without a population form, a structural
    difference) run through `execute` one by one, and `note` hears why."""
    from veil.methods.population import plan_population

    say = note or (lambda _: None)
    storage = storage or Path(".veil") / "ray"
    keys = [population_key(v) for v in runs]
    home = next((k for k in keys if k is not None), None)  # populations train on the first inline run's data
    ds = (data or NOTHING).load(home[0], home[1]) if home is not None else None
    results: dict[int, RunResult] = {}
    groups: list[tuple[tuple[Any, ...], list[int]]] = []  # by population_key (compared, not hashed)
    for i, (v, key) in enumerate(zip(runs, keys)):
        if key is None or home is None or key[:2] != home[:2]:
            why = f"executor {v.executor_label}: populations train inline" if key is None else data_difference(v, home)
            say(f"{run_label(i, v)} trains alone: {why}")
            results[i] = execute(v, parent_run_id=parent_run_id, storage=storage, data=data)
        else:
            found = next((idx for k, idx in groups if k == key), None)
            groups.append((key, [i])) if found is None else found.append(i)
    for _, idx in groups:
        assert ds is not None  # grouped runs share the data loaded above
        configs = [runs[i].method_config for i in idx]
        plan = plan_population(configs, runs[idx[0]].spec.method, [run_label(i, runs[i]) for i in idx])
        for reason in plan.reasons:
            say(reason)
        for group in plan.groups:
            members = [idx[j] for j in group]
            if len(members) == 1:
                results[members[0]] = execute_loaded(runs[members[0]], ds, parent_run_id=parent_run_id, storage=storage)
                continue
            trained = train_population([runs[i] for i in members], ds, storage, parent_run_id)
            results.update(zip(members, trained))
    return [results[i] for i in range(len(runs))]


def data_difference(v: ValidatedRun, home: tuple[Any, ...] | None) -> str:
    """How run v's dataset differs from the population's (`population_key`'s first two entries)."""
    if home is None or v.spec.dataset != home[0]:
        return f"dataset differs ({v.spec.dataset} vs {home[0] if home else None})"
    mine, theirs = as_params(v.dataset_config), as_params(home[1])
    diff = ", ".join(f"{k} {mine.get(k)} vs {theirs.get(k)}" for k in mine if mine.get(k) != theirs.get(k))
    return f"dataset {v.spec.dataset} params differ ({diff})"


def feature_transform(ds: Dataset) -> FeatureTransform:
    """How new rows become the run's input (`veil release`): the dataset's recorded transform, else its feature
    columns by name (x0, x1, ... when it names none), its label columns allowed and ignored."""
    if ds.transform is not None:
        return ds.transform
    names = ds.feature_names if len(ds.feature_names) == ds.d_in else tuple(f"x{i}" for i in range(ds.d_in))
    return FeatureTransform.of_features(names, other=ds.label_names)


def load_method(state_file: str | Path, method: str, config: Mapping[str, Any], task: Any):
    """Rebuild a trained method from a `model/state.pt` artifact (loaded with weights_only=True)."""
    import torch

    from veil.methods.builtin import create_method

    m = create_method(method, config, task)
    m.load_state(torch.load(state_file, weights_only=True))
    return m


__all__ = [
    "RUN_KEYS",
    "RunResult",
    "RunSpec",
    "ValidatedRun",
    "code_version",
    "execute",
    "execute_population",
    "load_method",
    "load_run_file",
    "run_params",
    "spec_from_mapping",
]
