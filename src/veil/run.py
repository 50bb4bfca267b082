"""One run: load data, train a method (inline or under Ray Train), release z, audit it, track everything.

A RunSpec is validated completely (method, dataset and audit parameters, ranges, executor) before any
data are loaded or any training starts."""
from __future__ import annotations

import dataclasses
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from veil import __version__
from veil.audit.probes import AuditConfig, AuditReport, audit
from veil.config import as_params, build
from veil.datasets.registry import dataset_params, load_dataset
from veil.errors import ConfigError, UnknownNameError
from veil.methods.registry import get_method, method_config

RUN_KEYS = ("method", "dataset", "params", "dataset_params", "audit", "seed", "executor", "num_workers", "use_gpu",
            "experiment", "run_name", "tracking_uri", "address", "tags", "partition", "runtime", "federation")


@dataclass(frozen=True)
class RunSpec:
    """Everything one `veil run` needs."""

    method: str
    """Registered method name (see `veil methods`)."""
    dataset: str
    """Registered dataset name (see `veil datasets`) or a path to a CSV/Parquet file."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Method parameters (e.g. beta, d_z, epochs)."""
    dataset_params: Mapping[str, Any] = field(default_factory=dict)
    """Dataset parameters (e.g. n, rho)."""
    audit: Mapping[str, Any] = field(default_factory=dict)
    """Fresh-probe audit parameters (hidden, epochs, lr, ...)."""
    seed: int = 0
    """Seeds the dataset split, the method and the probes unless their own `seed` is set."""
    executor: str = "auto"
    """'inline', 'ray-train', or 'auto' (ray-train when use_gpu or num_workers > 1, else inline)."""
    num_workers: int = 1
    """Ray Train data-parallel workers."""
    use_gpu: bool = False
    """Train on GPUs when the cluster has them (falls back to CPU with a warning)."""
    experiment: str = "veil"
    """MLflow experiment name."""
    run_name: str | None = None
    """MLflow run name (default: '<method>-<dataset>')."""
    tracking_uri: str | None = None
    """MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///<cwd>/mlflow.db)."""
    address: str | None = None
    """Ray address to join ('auto' on a cluster node); default: start a local Ray when needed."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Extra MLflow tags."""
    partition: str = "iid"
    """Federated methods: how training rows are split over nodes ('iid', 'dirichlet:0.3', 'silo:node', ...)."""
    runtime: str = "auto"
    """Federated methods: 'in-process', 'ray-actors' (an actor per node), 'virtual' (many nodes per actor,
    vectorised) or 'auto' (= virtual)."""
    federation: Mapping[str, Any] = field(default_factory=dict)
    """Federated methods: placement, live audit and fault options (see `veil.platform.fed.runner.FederationOptions`)."""

    def method_values(self) -> dict[str, Any]:
        return {"seed": self.seed, **self.params}

    def dataset_values(self) -> dict[str, Any]:
        values = dict(self.dataset_params)
        try:
            fields = {f.name for f in dataclasses.fields(dataset_params(self.dataset).__class__)}
        except UnknownNameError:
            fields = set()
        if "seed" in fields:
            values.setdefault("seed", self.seed)
        return values

    def audit_values(self) -> dict[str, Any]:
        return {"seed": self.seed, **self.audit}


@dataclass(frozen=True)
class ValidatedRun:
    """A RunSpec whose every part has been checked and built."""

    spec: RunSpec
    method_config: Any
    dataset_config: Any
    audit_config: AuditConfig
    executor: str


def spec_from_mapping(data: Mapping[str, Any], where: str = "run spec") -> RunSpec:
    """Build a RunSpec from a YAML mapping; unknown keys are rejected by name."""
    if not isinstance(data, Mapping):
        raise ConfigError("run spec", type(data).__name__, "a mapping of keys " + ", ".join(RUN_KEYS), where)
    for k in data:
        if k not in RUN_KEYS:
            raise UnknownNameError("run key", k, list(RUN_KEYS), where)
    for k in ("method", "dataset"):
        if k not in data:
            raise ConfigError(k, None, "a name (required)", where)
    for k in ("params", "dataset_params", "audit", "tags", "federation"):
        if data.get(k) is not None and not isinstance(data[k], Mapping):
            raise ConfigError(k, data[k], "a mapping", where)
    kw = {k: v for k, v in data.items() if v is not None}
    spec = RunSpec(**kw)
    if not isinstance(spec.seed, int) or isinstance(spec.seed, bool) or spec.seed < 0:
        raise ConfigError("seed", spec.seed, "an integer >= 0", where)
    if not isinstance(spec.num_workers, int) or spec.num_workers < 1:
        raise ConfigError("num_workers", spec.num_workers, "an integer >= 1", where)
    return spec


def load_run_file(path: str | Path) -> RunSpec:
    """Read a YAML run file (safe-loaded)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError("run file", str(p), "an existing YAML file")
    return spec_from_mapping(yaml.safe_load(p.read_text()) or {}, where=str(p))


def validate(spec: RunSpec) -> ValidatedRun:
    """Check method, dataset, audit and execution settings; raises before anything is trained."""
    from veil.platform.train import EXECUTORS, choose_executor

    mcfg = method_config(spec.method, spec.method_values())
    dcfg = dataset_params(spec.dataset, spec.dataset_values())
    acfg = build(AuditConfig, spec.audit_values(), where="audit")
    if spec.executor not in EXECUTORS:
        raise ConfigError("executor", spec.executor, " | ".join(EXECUTORS))
    if is_federated(spec.method):
        from veil.platform.fed.runner import FederationOptions, resolve_runtime

        if acfg.mi != "none":
            raise ConfigError("audit.mi", acfg.mi, "none: MI estimates are not wired into federated runs yet")

        resolve_runtime(spec.runtime)
        build(FederationOptions, dict(spec.federation), where="federation")
        return ValidatedRun(spec, mcfg, dcfg, acfg, f"federated:{resolve_runtime(spec.runtime)}")
    if not get_method(spec.method).releases_input_format:
        check_mi_case(acfg, mcfg.d_z)
    for key, default in (("partition", "iid"), ("runtime", "auto"), ("federation", {})):
        if getattr(spec, key) != default:
            raise ConfigError(key, getattr(spec, key), f"{default!r}: '{spec.method}' is not a federated method")
    return ValidatedRun(spec, mcfg, dcfg, acfg, choose_executor(spec.executor, spec.num_workers, spec.use_gpu))


def is_federated(method: str) -> bool:
    """Whether `method` trains by federation (its class says `federated = True`)."""
    return bool(getattr(get_method(method), "federated", False))


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
        out = {"run_id": self.run_id, "experiment_id": self.experiment_id, "tracking_uri": self.tracking_uri,
               "params": self.params, "metrics": self.metrics, "seconds": round(self.seconds, 3)}
        if self.extra.get("per_node"):
            out["per_node"] = self.extra["per_node"]
        return out


def code_version() -> str:
    """Package version plus the git commit when run from a checkout."""
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:
        sha = ""
    return f"{__version__}+{sha}" if sha else __version__


def run_params(v: ValidatedRun, ds_params: Mapping[str, Any], deviations: Mapping[str, Any]) -> dict[str, Any]:
    """Flat params recorded in MLflow: method.*, dataset.*, audit.*, run.*."""
    s = v.spec
    out: dict[str, Any] = {"method": s.method, "dataset": s.dataset, "seed": s.seed, "executor": v.executor,
                           "num_workers": s.num_workers, "use_gpu": s.use_gpu, "code_version": code_version()}
    out.update(as_params(v.method_config, "method."))
    out.update({f"dataset.{k}": val for k, val in ds_params.items()})
    out.update(as_params(v.audit_config, "audit."))
    out.update({f"method.deviation.{k}": val for k, val in deviations.items()})
    return out


def check_mi_case(acfg: AuditConfig, release_width: int) -> None:
    """Refuse, before training, an MI estimator asked for a release it cannot handle."""
    from veil.audit.mi import DEFAULT_KNN_MAX_DIM

    if acfg.mi == "ksg" and release_width > DEFAULT_KNN_MAX_DIM:
        raise ConfigError("audit.mi", "ksg", f"variational or mine: the kNN estimator handles z of at most "
                          f"{DEFAULT_KNN_MAX_DIM} columns and this run releases {release_width}")


def extra_audits(v: ValidatedRun, ds: Any, z_train: Any, z_test: Any, tracker: Any) -> dict[str, float]:
    """The stronger audits a run asks for: the adversary-capacity sweep, and seed 003's weak/strong
    adversaries and utility provider for methods that release records in the input's format."""
    out: dict[str, float] = {}
    if v.audit_config.mi != "none":
        from veil.audit.mi import estimate_mi
        from veil.audit.probes import label_tasks

        estimates = {}
        for _, name, _, y_tr, y_te, offset in label_tasks(ds.train, ds.test, ds.num_classes):
            est = estimate_mi(z_train, y_tr, z_test, y_te, v.audit_config.mi, seed=v.audit_config.seed + offset)
            out[f"mi/{v.audit_config.mi}/{name}"] = est.value
            estimates[name] = est.as_dict()
        tracker.log_dict(estimates, "audit/mi.json")  # names the estimator behind every figure
        tracker.set_tags({"veil.mi_estimator": v.audit_config.mi})
    if v.audit_config.capacity:
        from veil.audit.capacity import CapacityConfig, capacity_audit

        ccfg = build(CapacityConfig, {"epochs": v.audit_config.epochs, "lr": v.audit_config.lr,
                                      "seed": v.audit_config.seed}, where="audit")
        cap = capacity_audit(z_train, ds.train, z_test, ds.test, ds.num_classes, ccfg)
        out.update(cap.metrics())
        tracker.log_dict(cap.to_dict(), "audit/capacity.json")
    if get_method(v.spec.method).releases_input_format:
        from veil.audit.obfuscation import obfuscation_audit

        obf = obfuscation_audit(ds.train.x, z_train, ds.train, ds.test.x, z_test, ds.test, ds.num_classes,
                                v.audit_config)
        out.update(obf.metrics())
        tracker.log_dict(obf.to_dict(), "audit/obfuscation.json")
    return out


def log_release(tracker: Any, v: ValidatedRun, ds: Any, method: Any, report: AuditReport, code_version: str,
                **config_extra: Any) -> None:
    """Artifacts every run leaves: the trained weights with their config, and the audit report."""
    tracker.log_torch_state(method.state(), "model/state.pt")
    tracker.log_dict({"method": v.spec.method, "config": dataclasses.asdict(v.method_config),
                      "task": dataclasses.asdict(ds.task()), "code_version": code_version, **config_extra},
                     "model/config.json")
    tracker.log_dict(report.to_dict(), "audit/report.json")
    tracker.log_text(report.to_markdown() + "\n", "audit/report.md")


def execute(spec: RunSpec, *, on_epoch: Callable[[int, dict[str, float]], None] | None = None,
            parent_run_id: str | None = None, storage: Path | None = None) -> RunResult:
    """Validate, then train, release, audit and track one run. A crash leaves the MLflow run FAILED
    with everything logged before it."""
    from veil.platform.train import train_inline, train_ray
    from veil.tracking.mlflow_run import TrackedRun

    v = validate(spec)
    if is_federated(spec.method):
        from veil.platform.fed.runner import execute_federated

        return execute_federated(v, on_epoch=on_epoch, parent_run_id=parent_run_id)
    t0 = time.time()
    tracker = TrackedRun.start(spec.tracking_uri, spec.experiment, spec.run_name or f"{spec.method}-{spec.dataset}",
                               parent_run_id=parent_run_id,
                               tags={"veil.method": spec.method, "veil.dataset": spec.dataset, **spec.tags})
    with tracker:
        ds = load_dataset(spec.dataset, spec.dataset_values())
        if get_method(spec.method).releases_input_format:  # release width is known only now
            check_mi_case(v.audit_config, ds.d_in)
        params = run_params(v, ds.params, get_method(spec.method).deviations(v.method_config))
        tracker.log_params(params)

        def log_epoch(epoch: int, row: dict[str, float]) -> None:
            tracker.log_metrics(row, step=epoch)
            if on_epoch:
                on_epoch(epoch, row)

        mvals = dataclasses.asdict(v.method_config)
        if v.executor == "inline":
            outcome = train_inline(spec.method, mvals, ds, log_epoch, spec.use_gpu)
        else:
            outcome = train_ray(spec.method, mvals, ds, num_workers=spec.num_workers, use_gpu=spec.use_gpu,
                                storage=storage or Path(".veil") / "ray", tracking_uri=tracker.tracking_uri,
                                run_id=tracker.run_id, address=spec.address)
        tracker.set_tags({"veil.device": outcome.device})
        z_train, z_test = outcome.method.encode(ds.train.x), outcome.method.encode(ds.test.x)
        report = audit(z_train, ds.train, z_test, ds.test, ds.num_classes, v.audit_config)
        metrics = report.metrics()
        metrics.update(extra_audits(v, ds, z_train, z_test, tracker))
        metrics["train_seconds"] = outcome.seconds
        metrics["train_rows"] = len(ds.train)
        metrics["total_seconds"] = time.time() - t0
        tracker.log_metrics(metrics)
        log_release(tracker, v, ds, outcome.method, report, params["code_version"])
        if outcome.history:
            tracker.log_dict(outcome.history, "training/history.json")
    return RunResult(tracker.run_id, tracker.experiment_id, tracker.tracking_uri, params, metrics, report,
                     outcome.history, time.time() - t0)


def load_method(state_file: str | Path, method: str, config: Mapping[str, Any], task: Any):
    """Rebuild a trained method from a `model/state.pt` artifact (loaded with weights_only=True)."""
    import torch

    from veil.methods.registry import create_method

    m = create_method(method, config, task)
    m.load_state(torch.load(state_file, weights_only=True))
    return m

