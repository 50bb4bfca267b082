"""THE run pipeline: validate once -> executor -> audit -> log, for every run (centralized or federated, from
`veil run` or a sweep trial).

A RunSpec is validated completely (method, dataset, audit and federation parameters, ranges, executor) into a
`ValidatedRun` before any data are loaded or any training starts; everything downstream uses its built configs."""

from __future__ import annotations

import dataclasses
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from veil import __version__
from veil.audit.probes import AuditConfig, AuditReport
from veil.audit.release import AuditOutcome, audit_release, check_mi_case
from veil.config import as_params, build
from veil.datasets.base import Dataset
from veil.datasets.partition import parse_scheme
from veil.datasets.registry import dataset_params, load_dataset
from veil.errors import ConfigError, UnknownNameError
from veil.methods.federated.simulation import FederationOptions
from veil.methods.registry import get_method, is_federated, method_config
from veil.runspec import RUN_KEYS, RunSpec, ValidatedRun, centralized_refusal, load_run_file, spec_from_mapping
from veil.sizing import check_memory

if TYPE_CHECKING:
    from veil.platform.executors import Job, TrainOutcome


def validate(spec: RunSpec) -> ValidatedRun:
    """Check and build method, dataset, audit and execution settings, once; raises before anything is trained."""
    from veil.platform.executors import EXECUTOR_CHOICES, choose_executor
    from veil.platform.fed.runtime import get_runtime

    mcfg = method_config(spec.method, spec.method_values())
    dcfg = dataset_params(spec.dataset, spec.dataset_values())
    acfg = build(AuditConfig, spec.audit_values(), where="audit")
    check_memory(mcfg, dcfg, spec.dataset, get_method(spec.method).releases_input_format)
    if spec.executor not in EXECUTOR_CHOICES:
        raise ConfigError("executor", spec.executor, " | ".join(EXECUTOR_CHOICES))
    if is_federated(spec.method):
        if acfg.mi != "none":
            raise ConfigError("audit.mi", acfg.mi, "none: MI estimates are not wired into federated runs yet")
        try:
            runtime = get_runtime(spec.runtime or "auto").name
        except UnknownNameError as e:
            raise ConfigError("runtime", spec.runtime, " | ".join(e.valid)) from None
        partition = spec.partition or "iid"
        parse_scheme(partition)  # a bad scheme fails here, before any data are loaded
        fed = build(FederationOptions, dict(spec.federation), where="federation")
        return ValidatedRun(spec, mcfg, dcfg, acfg, "federated", fed, runtime, partition)
    width = get_method(spec.method).release_width_for(mcfg, None)
    if width is not None:  # else known once the data are loaded: `check_release`
        check_mi_case(acfg, width)
    for key in ("partition", "runtime", "federation"):
        if getattr(spec, key):
            raise centralized_refusal(key, getattr(spec, key), spec.method)
    return ValidatedRun(spec, mcfg, dcfg, acfg, choose_executor(spec.executor, spec.num_workers, spec.use_gpu))


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


def check_release(v: ValidatedRun, ds: Dataset) -> None:
    """Checks that need the data: the MI estimator copes with the release's width (known only with the task:
    EIGAN derives d_z from the allies' classes, the adjustable AE releases x')."""
    width = get_method(v.spec.method).release_width_for(v.method_config, ds.task())
    if v.executor != "federated" and width is not None:
        check_mi_case(v.audit_config, width)


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
    tracker.log_dict(audited.report.to_dict(), "audit/report.json")
    tracker.log_text(audited.report.to_markdown() + "\n", "audit/report.md")
    for path, obj in audited.artifacts.items():
        tracker.log_text(obj, path) if isinstance(obj, str) else tracker.log_dict(obj, path)
    fed, plan = outcome.federation, job.federation
    if fed is not None and plan is not None:
        tracker.log_dict([r.to_dict() for r in fed.records], "federation/rounds.json")
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
) -> RunResult:
    """THE pipeline of every run, centralized or federated, from the CLI or a sweep trial: validate (unless
    given a validated run), load the data, let the executor check and plan it, then track: train, audit, log.
    Everything refusable is refused before the MLflow run starts; a crash after that leaves the run FAILED
    with everything logged before it."""
    from veil.platform.executors import get_executor
    from veil.tracking.mlflow_run import TrackedRun

    v = run if isinstance(run, ValidatedRun) else validate(run)
    spec = v.spec
    ds = load_dataset(spec.dataset, v.dataset_config)
    check_release(v, ds)
    job = get_executor(v.executor)(v, ds, storage or Path(".veil") / "ray")
    t0 = time.time()
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
        },
    )
    with tracker:
        params = {**run_params(v, ds.params), **job.params}
        tracker.log_params(params)
        federated = job.federation is not None

        def log_epoch(epoch: int, row: dict[str, float]) -> None:
            if federated:  # one row per round, stepped from 1
                tracker.log_metrics(
                    {k: x for k, x in row.items() if k not in ("round", "rounds_total")}, step=epoch + 1
                )
            else:
                tracker.log_metrics(row, step=epoch)
            if on_epoch:
                on_epoch(epoch, row)

        outcome = job.train(log_epoch, tracker)
        tracker.set_tags({"veil.device": outcome.device, **job.tags})
        audited = audit_release(outcome.method, ds, v.audit_config, federation=job.federation)
        if audited.tags:
            tracker.set_tags(audited.tags)
        metrics = audited.metrics
        if outcome.federation is not None:
            metrics.update(outcome.federation.totals())
        metrics["train_seconds"] = outcome.seconds
        if not federated:
            metrics["train_rows"] = len(ds.train)
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
    )


def load_method(state_file: str | Path, method: str, config: Mapping[str, Any], task: Any):
    """Rebuild a trained method from a `model/state.pt` artifact (loaded with weights_only=True)."""
    import torch

    from veil.methods.registry import create_method

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
    "load_method",
    "load_run_file",
    "run_params",
    "spec_from_mapping",
    "validate",
]
