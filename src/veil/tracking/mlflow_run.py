"""MLflow glue: where runs go, and a run handle that logs params, metrics and artifacts in batches.

Everything goes through one `MlflowClient` factory, `client(uri)`, with explicit run ids (no fluent global state), so the same
handle works in the driver, in a Ray Train worker (rebuilt from `(tracking_uri, run_id)`) and in
concurrently running Tune trials."""

from __future__ import annotations

import json
import math
import os
import socket
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping
from urllib.parse import urlsplit

from veil.errors import ConfigError, TrackingUnavailable

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

DEFAULT_EXPERIMENT = "veil"
PARENT_TAG = "mlflow.parentRunId"
# Veil's experiments are model-training experiments (runs, not traces). MLflow 3.17's UI picks its view from the
# page URL instead (`veil.tracking.ui` builds links that say so); the tag still names the kind for the UI's
# experiment-type settings and for MLflow versions that read it.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


def resolve_tracking_uri(uri: str | None = None) -> str:
    """`uri`, else $MLFLOW_TRACKING_URI, else the embedded store sqlite:///<cwd>/mlflow.db (MLflow 3's own default)."""
    if uri:
        return uri
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path.cwd().resolve() / 'mlflow.db'}"


TRACKING_SCHEMES = ("http", "https", "sqlite", "file", "postgresql", "mysql", "mssql")
DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
PROBE_TIMEOUT_S = 3.0


def uri_source(uri: str | None) -> str:
    """Where the tracking URI came from, for error messages."""
    if uri:
        return "--tracking-uri"
    return "MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI") else "the default tracking store"


def check_tracking(uri: str | None = None, source: str | None = None) -> str:
    """The resolved, absolute tracking URI once its scheme is known and the store answers (a server within
    PROBE_TIMEOUT_S, a local store writable): refuse before any compute rather than retry for minutes later."""
    source = source or uri_source(uri)
    resolved = absolute_uri(resolve_tracking_uri(uri))
    scheme = urlsplit(resolved).scheme.split("+", 1)[0].lower()  # postgresql+psycopg2 -> postgresql
    if scheme and scheme not in TRACKING_SCHEMES:
        raise ConfigError(
            source,
            resolved,
            f"a URI with scheme {', '.join(TRACKING_SCHEMES)} (e.g. sqlite:///mlflow.db) or a local path",
        )
    if scheme in ("file", "") and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("1", "true"):
        # MLflow 3 refuses its filesystem store (maintenance mode) deep inside the first client call.
        raise ConfigError(
            source,
            resolved,
            "a database or server store: MLflow 3's filesystem store is in maintenance mode; use "
            f"sqlite:///{Path(local_store(resolved) or '.').resolve() / 'mlflow.db'} (or set MLFLOW_ALLOW_FILE_STORE=true)",
        )
    problem = _probe(resolved, scheme or "file")
    if problem:
        raise TrackingUnavailable(
            f"{source}: the MLflow tracking store {resolved} is not usable ({problem}); nothing was started. "
            + (
                "Start the server, or pass another --tracking-uri."
                if scheme.startswith("http")
                else "Pass another --tracking-uri."
            )
        )
    return resolved


def health_problem(base_url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """What is wrong with the MLflow server at `base_url` (GET /health), or None when it answers."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/health", timeout=timeout):
            return None
    except urllib.error.HTTPError as e:  # the server answered; only its own failures count
        return f"GET /health answered {e.code}" if e.code >= 500 else None
    except (OSError, ValueError) as e:
        return f"GET /health failed within {timeout:g} s: {getattr(e, 'reason', e)}"


def local_store(uri: str) -> Path | None:
    """The database file of a sqlite store, the directory of a file store (or a bare path); None otherwise."""
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :])
    if uri.startswith("file:"):
        return Path(urlsplit(uri).path)
    return None if "://" in uri else Path(uri)


def _probe(uri: str, scheme: str) -> str | None:
    """What is wrong with the store at `uri`, or None when it answers."""
    if scheme in ("http", "https"):
        return health_problem(uri)
    if scheme == "sqlite":
        db = local_store(uri)
        return _writable(db, "database") if db and str(db) not in ("", ":memory:") else None
    if scheme == "file" or scheme == "":
        store = local_store(uri)
        return _writable(store, "store directory") if store else None
    host, port = urlsplit(uri).hostname, urlsplit(uri).port or DATABASE_PORTS.get(scheme)
    if host and port:
        try:
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
        except OSError as e:
            return f"no connection to {host}:{port} within {PROBE_TIMEOUT_S:g} s: {e}"
    return None


def _writable(path: Path, what: str) -> str | None:
    """None when `path` (a file or directory, existing or to be created) can be written by this process."""
    if path.exists():
        return None if os.access(path, os.W_OK) else f"the {what} {path} is not writable"
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not a writable directory, so {path} cannot be created"
    if what == "database" and parent != path.parent:
        return f"the directory {path.parent} does not exist"
    return None


def absolute_uri(uri: str) -> str:
    """`uri` with a relative sqlite / file store (or a bare path) made absolute: processes that run in another
    working directory (Tune trials run in their trial directory) then write where the driver reads."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(uri[len("sqlite:///") :]).resolve())
    if uri.startswith("file:") and not uri.startswith("file:///"):
        return Path(uri[len("file:") :]).resolve().as_uri()
    if "://" not in uri and not uri.startswith("file:"):
        return str(Path(uri).resolve())
    return uri


def local_artifact_root(uri: str) -> str | None:
    """Where a local sqlite store keeps artifacts: ./mlartifacts beside the database (as a file URI), where
    `mlflow ui` and `mlflow server` expect them; None for other stores (their own default applies)."""
    db = local_store(uri) if uri.startswith("sqlite:///") else None
    return None if db is None else (db.parent / "mlartifacts").resolve().as_uri()


SCHEMA_LOCK_TIMEOUT_S = 300.0
_schema_ready: set[str] = set()


def client(uri: str) -> MlflowClient:
    """The one place Veil builds an `MlflowClient` (explicit tracking URI, no fluent global state)."""
    from mlflow.tracking import MlflowClient

    if uri.startswith("sqlite:///") and uri not in _schema_ready:
        _open_store_once(uri)
    return MlflowClient(tracking_uri=uri)


def _open_store_once(uri: str) -> None:
    """Let one process at a time open the embedded store first: MLflow creates and migrates its tables when a
    client opens it, and two processes doing that at once in a fresh directory collide ('duplicate column
    name')."""
    from filelock import FileLock
    from mlflow.tracking import MlflowClient

    with FileLock(f"{local_store(uri)}.lock", timeout=SCHEMA_LOCK_TIMEOUT_S):
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    _schema_ready.add(uri)


def experiment_id(uri: str, name: str) -> str:
    """Id of experiment `name`, created on first use. With a local sqlite store the artifacts go to
    ./mlartifacts beside the database, where `mlflow ui` and `mlflow server` expect them."""
    c = client(uri)
    exp = c.get_experiment_by_name(name)
    if exp is not None:
        if "mlflow.experimentKind" not in exp.tags:
            c.set_experiment_tag(exp.experiment_id, *next(iter(EXPERIMENT_KIND.items())))
        return exp.experiment_id
    try:
        return c.create_experiment(name, artifact_location=local_artifact_root(uri), tags=EXPERIMENT_KIND)
    except Exception:  # created concurrently by another trial
        exp = c.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def _metric_value(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


class TrackedRun:
    """One MLflow run: batched params/metrics/tags, artifacts from memory, a terminal status."""

    def __init__(self, tracking_uri: str, run_id: str) -> None:
        self.tracking_uri, self.run_id = tracking_uri, run_id
        self.client = client(tracking_uri)

    @classmethod
    def start(
        cls,
        tracking_uri: str | None = None,
        experiment: str = DEFAULT_EXPERIMENT,
        run_name: str | None = None,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> "TrackedRun":
        uri = resolve_tracking_uri(tracking_uri)
        exp_id = experiment_id(uri, experiment)
        all_tags = dict(tags or {})
        if parent_run_id:
            all_tags[PARENT_TAG] = parent_run_id
        run = client(uri).create_run(exp_id, tags=all_tags, run_name=run_name)
        return cls(uri, run.info.run_id)

    @property
    def experiment_id(self) -> str:
        return self.client.get_run(self.run_id).info.experiment_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, json.dumps(v) if isinstance(v, (list, dict)) else str(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):  # MLflow caps a batch at 100 params
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log_metrics(self, metrics: Mapping[str, Any], step: int = 0) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, val, now, step) for k, v in metrics.items() if (val := _metric_value(v)) is not None]
        for i in range(0, len(items), 1000):
            self.client.log_batch(self.run_id, metrics=items[i : i + 1000])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_text(self, text: str, artifact_file: str) -> None:
        self.client.log_text(self.run_id, text, artifact_file)

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        self.client.log_text(self.run_id, json.dumps(obj, indent=2, default=str), artifact_file)

    def log_file(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_torch_state(self, state: Mapping[str, Any], artifact_file: str) -> None:
        import torch

        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / Path(artifact_file).name
            torch.save(dict(state), p)
            self.log_file(p, str(Path(artifact_file).parent) if Path(artifact_file).parent != Path(".") else None)

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)

    def __enter__(self) -> "TrackedRun":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        """FINISHED on success; on any error FAILED with the error (KILLED for Ctrl-C, SIGTERM, SIGHUP), which
        propagates."""
        if exc is None:
            self.finish()
        else:
            self.fail(exc)
        return False

    def fail(self, error: BaseException) -> None:
        """Record the error and mark the run FAILED (KILLED when interrupted); what was logged before stays."""
        try:
            self.set_tags({"error": f"{type(error).__name__}: {error}"[:5000]})
        finally:
            self.finish("KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")
