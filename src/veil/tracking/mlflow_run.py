"""MLflow glue: where runs go, and a run handle that logs params, metrics and artifacts in batches.

Everything goes through one `MlflowClient` factory, `client(uri)`, with explicit run ids (no fluent global state), so the same
handle works in the driver, in a Ray Train worker (rebuilt from `(tracking_uri, run_id)`) and in
concurrently running Tune trials."""

from __future__ import annotations

import base64
import json
import math
import os
import shutil
import socket
import sqlite3
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence
from urllib.parse import urlsplit

from veil import process_env
from veil.console import warn
from veil.errors import ConfigError, TrackingUnavailable
from veil.paths import cache_root, nearest_existing, write_atomic
from veil.tracking import journal
from veil.tracking.journal import Journal

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

DEFAULT_EXPERIMENT = "veil"
PARENT_TAG = "mlflow.parentRunId"
# Veil's experiments are model-training experiments (runs, not traces). MLflow 3.17's UI picks its view from the
# page URL instead (`veil.tracking.server` builds links that say so); the tag still names the kind for the UI's
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
            f"{sqlite_for(Path(local_store(resolved) or '.'))} (or set MLFLOW_ALLOW_FILE_STORE=true)",
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


def api_problem(base_url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """What refuses the first real call to the MLflow server at `base_url` (a one-row experiment search), where
    /health says OK: MLflow 3's host check answers 403 to a Host header it does not allow, i.e. a server reached
    by a public address or a DNS name. None when the call goes through (or fails for another reason, which the
    client's own errors then name)."""
    request = urllib.request.Request(
        f"{base_url.rstrip('/')}/api/2.0/mlflow/experiments/search",
        data=b'{"max_results": 1}',
        headers={"Content-Type": "application/json", **auth_headers()},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError as e:
        body = e.read(300).decode(errors="replace")
        if e.code == 403 and "Host header" in body:
            host = urlsplit(base_url).netloc
            return (
                f"it answers /health but refuses API calls made to {host} ({body.strip()!r}): MLflow's host check "
                f"admits only localhost and private addresses unless the server is started with --allowed-hosts. "
                f"Start it with `--allowed-hosts {host}` (mlflow/start-server.sh adds its own address; name others "
                f"in MLFLOW_ALLOWED_HOSTS)"
            )
        return None
    except (OSError, ValueError):
        return None  # /health answered a moment ago: a slow call is the client's to retry


def auth_headers() -> dict[str, str]:
    """The credentials MLflow's client would send (MLFLOW_TRACKING_TOKEN, or _USERNAME and _PASSWORD)."""
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    if token:
        return {"Authorization": f"Bearer {token}"}
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    return {}


def require_shared_store(uri: str, on_cluster: bool, source: str = "--tracking-uri") -> None:
    """On a cluster (`on_cluster`: work may run on other nodes), trials log from the node they run on: a sqlite /
    file store there would be a different, node-local file, and results would scatter. Refuse it before anything
    starts."""
    if not on_cluster or local_store(uri) is None:
        return
    raise ConfigError(
        source,
        uri,
        "a tracking server every node reaches when work runs on a Ray cluster (--address / RAY_ADDRESS): a "
        "local sqlite or file store would be a different file on each node. Start one on the head with "
        "`bash mlflow/start-server.sh` and pass --tracking-uri http://127.0.0.1:5000 (README, 'Scale out')",
    )


def sqlite_for(path: Path) -> str:
    """The sqlite URI a bare path most likely meant: the file itself where it is one (or is named like a database),
    else mlflow.db in that directory."""
    path = path.resolve()
    if path.is_file() or path.suffix.lower() in (".db", ".sqlite", ".sqlite3"):
        return f"sqlite:///{path}"
    return f"sqlite:///{path / 'mlflow.db'}"


def require_existing_store(uri: str, command: str) -> None:
    """Refuse, for a command that only reads runs (`veil release`), a local store that does not exist: MLflow would
    create an empty one there, which cannot hold the run asked for. The error says where it looked and how to
    point the command at the store `veil run` wrote."""
    db = local_store(uri)
    if db is not None and db.is_file() and db.stat().st_size == 0:  # MLflow would build its tables in it
        raise TrackingUnavailable(
            f"{command}: {db} is an empty file, not an MLflow store, so there is no run to read (it was left as it "
            "was). Pass --tracking-uri with the store `veil run` wrote."
        )
    if db is not None and not db.exists():
        raise TrackingUnavailable(
            f"{command}: there is no MLflow store at {db}, so no run to read (nothing was created). It reads the "
            "store `veil run` wrote: mlflow.db in the directory `veil run` ran from, unless that run was given "
            "--tracking-uri or $MLFLOW_TRACKING_URI. Run it from that directory, or pass --tracking-uri "
            "sqlite:////path/to/mlflow.db (or the tracking server's URL)."
        )


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
        return health_problem(uri) or api_problem(uri)
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
    parent = nearest_existing(path.parent)
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

    process_env.settle()
    if uri.startswith("sqlite:///") and uri not in _schema_ready:
        _open_store_once(uri)
    return MlflowClient(tracking_uri=uri)


def _open_store_once(uri: str) -> None:
    """Let one process at a time open the embedded store first: MLflow creates and migrates its tables when a
    client opens it, and two processes doing that at once in a fresh directory collide ('duplicate column
    name'). A new store starts as a copy of an empty one (`seed_store`), under the same lock."""
    from filelock import FileLock
    from mlflow.tracking import MlflowClient

    db = local_store(uri)
    with FileLock(f"{db}.lock", timeout=SCHEMA_LOCK_TIMEOUT_S):
        if db is not None:
            _copy_empty_store(db)
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    _schema_ready.add(uri)


def empty_store_path() -> Path:
    """The cached empty store for the installed MLflow (its schema is that version's)."""
    from importlib.metadata import version

    return cache_root() / "mlflow" / f"empty-store-{version('mlflow')}.db"


def seed_store(db: Path) -> bool:
    """Start a sqlite store that does not exist yet as a copy of an empty one; whether it did. MLflow builds a new
    database by running each of its schema migrations, about 3 s that every new store directory would pay again;
    the copy is what MLflow built for this version once, less its default experiment, which MLflow adds back when
    the store opens, with this store's artifact root. Where the cache cannot be written, MLflow builds the store."""
    from filelock import FileLock

    if not _new_store(db):
        return False
    try:
        with FileLock(f"{db}.lock", timeout=SCHEMA_LOCK_TIMEOUT_S):
            return _copy_empty_store(db)
    except OSError:
        return False


def seed_uri(uri: str) -> bool:
    """`seed_store` for the database of a sqlite `uri`; False for any other store."""
    db = local_store(uri) if uri.startswith("sqlite:///") else None
    return db is not None and seed_store(db)


def _new_store(db: Path) -> bool:
    return str(db) not in ("", ":memory:") and not db.exists()


def _copy_empty_store(db: Path) -> bool:
    """`seed_store`'s copy, for a caller that holds the database's lock."""
    if not _new_store(db):
        return False
    try:
        template = empty_store_path()
        if not _empty_store(template):
            _build_empty_store(template)
        write_atomic(db, template.read_bytes())
    except OSError:
        return False
    return True


def _empty_store(path: Path) -> bool:
    """Whether `path` is a store's database with a schema revision and no experiment (a cache cut short or
    overwritten is not)."""
    if not path.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as con:
            if con.execute("PRAGMA quick_check").fetchone() != ("ok",):
                return False
            revisions = con.execute("SELECT version_num FROM alembic_version").fetchall()
            experiments = con.execute("SELECT COUNT(*) FROM experiments").fetchone()
    except sqlite3.Error:
        return False
    return len(revisions) == 1 and experiments == (0,)


def _build_empty_store(template: Path) -> None:
    from filelock import FileLock
    from mlflow.tracking import MlflowClient

    template.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{template}.lock", timeout=SCHEMA_LOCK_TIMEOUT_S):
        if _empty_store(template):
            return
        with tempfile.TemporaryDirectory(dir=template.parent) as tmp:
            built = Path(tmp) / "store.db"
            MlflowClient(tracking_uri=f"sqlite:///{built}").search_experiments(max_results=1)
            with closing(sqlite3.connect(built)) as con, con:
                con.execute("DELETE FROM experiments")
            os.replace(built, template)


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


#: a JSON artifact longer than this (compact) is stored compact: indenting goes through json's pure-Python encoder,
#: seconds for a federation's per-round, per-node records, and no one reads megabytes of JSON by eye
PRETTY_JSON_LIMIT = 1 << 20


def json_text(obj: Any) -> str:
    """`obj` as JSON: indented when short, compact past `PRETTY_JSON_LIMIT` characters."""
    text = json.dumps(obj, default=str, separators=(",", ":"))
    return text if len(text) > PRETTY_JSON_LIMIT else json.dumps(obj, indent=2, default=str)


def _artifact_dir(artifact_file: str) -> str | None:
    """The artifact directory of `artifact_file` ('audit' for 'audit/report.json'), None at the top."""
    parent = Path(artifact_file).parent
    return None if parent == Path(".") else str(parent)


_dropped_said: set[str] = set()


def _say_dropped(uri: str, run_id: str, path: Path, why: BaseException | str) -> None:
    """Tell the console once per process and server that the server dropped, where the journal is and what
    replays it."""
    if uri in _dropped_said:
        return
    _dropped_said.add(uri)
    reason = _short_reason(why)
    warn(
        f"the tracking server {uri} stopped answering ({reason}); run {run_id} goes on and its "
        f"remaining params, metrics, artifacts and status are kept in the journal {path}. `veil sync` replays "
        "them once the server is back (the next `veil run` or `veil sweep` does it too)."
    )


def _short_reason(why: BaseException | str) -> str:
    """The gist of a failed MLflow request ('connection refused', 'timed out'), not its 500-character text."""
    text = str(why)
    for needle, gist in (("Connection refused", "connection refused"), ("imed out", "timed out")):
        if needle in text:
            return gist
    return text.splitlines()[0][:160] if text else type(why).__name__


def _metric_value(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


class Writer:
    """MLflow calls sent in order on one background thread, so training, the audit and the certificate do not wait
    on a tracking server's round trips (`writes_in_background`). Several runs may share one writer (a
    population's members: one member's artifacts go out while the next is certified). `drain()` waits for every
    call sent so far and raises the first error; the run whose call failed has already been marked FAILED."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="veil-mlflow")
        self._pending: list[Future[None]] = []

    def submit(self, send: Any) -> None:
        self._raise_finished()
        self._pending.append(self._pool.submit(send))

    def _raise_finished(self) -> None:
        """Raise the first error among the calls already done (an early error is not held until `drain`)."""
        for f in [f for f in self._pending if f.done()]:
            self._pending.remove(f)
            f.result()

    def drain(self) -> None:
        while self._pending:
            self._pending.pop(0).result()

    def close(self) -> None:
        """Drain, then stop the thread."""
        try:
            self.drain()
        finally:
            self._pool.shutdown(wait=True)


def writes_in_background(uri: str) -> bool:
    """Whether a run's calls to `uri` go out on a background `Writer`: for a tracking server, whose cost is mostly
    waiting on round trips. An embedded store (sqlite, files) costs CPU in this very process, which a second
    thread cannot overlap; there it would only contend for the GIL."""
    return journal.remote(uri)


def _stage(files: Mapping[str, Path]) -> tuple[Path, dict[str, Path]]:
    """Copies of `files` that belong to a background call: the caller may delete its own before the call runs."""
    folder = Path(tempfile.mkdtemp(prefix="veil-mlflow-"))
    return folder, {name: Path(shutil.copy2(src, folder / name)) for name, src in files.items()}


class TrackedRun:
    """One MLflow run: batched params/metrics/tags, artifacts from memory, a terminal status. When its tracking
    server stops answering, this call and every later one go to the run's local journal
    (`veil.tracking.journal`), replayed by `veil sync`; the run goes on. Given a `Writer`, calls go out on its
    background thread, in order; `finish` then waits for them only when the run owns the writer."""

    def __init__(
        self,
        tracking_uri: str,
        run_id: str,
        experiment_id: str | None = None,
        writer: Writer | None = None,
        owns_writer: bool = False,
    ) -> None:
        self.tracking_uri, self.run_id = tracking_uri, run_id
        self.client = client(tracking_uri)
        self._experiment_id = experiment_id
        self._journal: Journal | None = None
        self.writer, self._owns_writer = writer, owns_writer
        self._failed: BaseException | None = None  # a background call's error: the run ends FAILED with it

    @classmethod
    def start(
        cls,
        tracking_uri: str | None = None,
        experiment: str = DEFAULT_EXPERIMENT,
        run_name: str | None = None,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
        writer: Writer | None | Literal["own"] = None,
    ) -> "TrackedRun":
        """A new run, tagged with this process (host, pid, its start time) so a later command can tell when the
        process ended without closing it. A server that is away already gets the run from the journal.
        `writer`: send later calls on this background `Writer`, or on one of the run's own ("own", drained by
        `finish`; only for a tracking server, `writes_in_background`); None: every call waits for the store."""
        uri = resolve_tracking_uri(tracking_uri)
        all_tags = {**dict(tags or {}), **journal.process_tags()}
        if parent_run_id:
            all_tags[PARENT_TAG] = parent_run_id
        if parent_run_id and parent_run_id.startswith(journal.OFFLINE_PREFIX):  # the server has no such parent yet
            return cls._start_offline(uri, experiment, run_name, all_tags, "its parent run was started offline")
        try:
            exp_id = experiment_id(uri, experiment)
            run = client(uri).create_run(exp_id, tags=all_tags, run_name=run_name)
        except Exception as e:
            if not (journal.remote(uri) and journal.unavailable(e)):
                raise
            return cls._start_offline(uri, experiment, run_name, all_tags, e)
        out = cls(uri, run.info.run_id, exp_id)
        if writer == "own":
            out.writer, out._owns_writer = (Writer(), True) if writes_in_background(uri) else (None, False)
        else:
            out.writer = writer
        return out

    @classmethod
    def _start_offline(
        cls, uri: str, experiment: str, run_name: str | None, tags: Mapping[str, str], why: BaseException | str
    ) -> "TrackedRun":
        """A run that exists only in its journal until `veil sync` creates it on the server."""
        run = cls(uri, journal.new_offline_id(), "")
        start = {"experiment": experiment, "run_name": run_name, "tags": dict(tags), "time": journal.now_ms()}
        run._open_journal(why, start=start)
        return run

    @property
    def experiment_id(self) -> str:
        if self._experiment_id is None:
            j = self._active_journal()
            if j is not None:
                return str(j.meta().get("experiment_id") or "")
            self._experiment_id = self.client.get_run(self.run_id).info.experiment_id
        return self._experiment_id

    @property
    def journal(self) -> Journal | None:
        """The run's local journal, once the server dropped."""
        return self._active_journal()

    def _active_journal(self) -> Journal | None:
        """The journal this run writes to: opened here or by another process of the run (a Ray Train worker);
        None again once `veil sync` replayed a closed one."""
        if self._journal is None or not self._journal.exists():
            self._journal = journal.Journal.find(self.run_id)
        return self._journal

    def _open_journal(self, why: BaseException | str, start: Mapping[str, Any] | None = None) -> Journal:
        meta = {
            "tracking_uri": self.tracking_uri,
            "experiment_id": self._experiment_id,
            "created": time.time(),
            "dropped_because": str(why)[:1000],
            **{k.split(".", 1)[1]: v for k, v in journal.process_tags().items()},
            **({"start": dict(start)} if start else {}),
        }
        self._journal = journal.Journal.create(self.run_id, meta)
        _say_dropped(self.tracking_uri, self.run_id, self._journal.path, why)
        return self._journal

    def _record(
        self, op: Mapping[str, Any], files: Mapping[str, Path] | None = None, owned: Path | None = None
    ) -> None:
        """Send one call now, or queue it on the run's writer. `owned`: a temporary folder holding `files` that
        the call removes once sent (so a background call takes them without a copy)."""
        if self.writer is None:
            try:
                self._send(op, files)
            finally:
                if owned is not None:
                    shutil.rmtree(owned, ignore_errors=True)
            return
        folder, staged = (owned, files) if owned is not None else _stage(files) if files else (None, None)

        def send() -> None:
            try:
                self._send_after_errors(op, staged)
            finally:
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)

        self.writer.submit(send)

    def _send_after_errors(self, op: Mapping[str, Any], files: Mapping[str, Path] | None) -> None:
        """A background call: after one of the run's calls failed, the rest are dropped and its end is FAILED,
        with the error, as a failing call would have ended it in the foreground."""
        if self._failed is None:
            try:
                self._send(op, files)
            except BaseException as e:
                self._failed = e
                raise
        elif op["op"] == "end":
            self._send({"op": "tags", "tags": {"error": f"{type(self._failed).__name__}: {self._failed}"[:5000]}})
            self._send({**op, "status": "FAILED"})

    def _send(self, op: Mapping[str, Any], files: Mapping[str, Path] | None = None) -> None:
        """Send one call to the server, or to the journal once the server has dropped."""
        j = self._active_journal()
        if j is None:
            try:
                journal.apply(self.client, self.run_id, {**op, "sources": [str(p) for p in (files or {}).values()]})
                return
            except Exception as e:
                if not (journal.remote(self.tracking_uri) and journal.unavailable(e)):
                    raise
                j = self._open_journal(e)
        j.append(op, files)

    def log_params(self, params: Mapping[str, Any]) -> None:
        self._record(
            {
                "op": "params",
                "params": {k: json.dumps(v) if isinstance(v, (list, dict)) else str(v) for k, v in params.items()},
            }
        )

    def log_metrics(self, metrics: Mapping[str, Any], step: int = 0) -> None:
        now = int(time.time() * 1000)
        items = [[k, val, now, step] for k, v in metrics.items() if (val := _metric_value(v)) is not None]
        if items:
            self._record({"op": "metrics", "metrics": items})

    def log_metric_rows(self, rows: Sequence[tuple[Mapping[str, Any], int]]) -> None:
        """Several steps' metrics, (row, step) each, in one call."""
        now = int(time.time() * 1000)
        items = [
            [k, val, now, step] for row, step in rows for k, v in row.items() if (val := _metric_value(v)) is not None
        ]
        if items:
            self._record({"op": "metrics", "metrics": items})

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self._record({"op": "tags", "tags": {k: str(v) for k, v in tags.items()}})

    def delete_tags(self, keys: Sequence[str]) -> None:
        """Remove these tags where the run has them."""
        self._record({"op": "untag", "keys": list(keys)})

    def set_experiment_tag(self, key: str, value: str) -> None:
        """A tag of the run's experiment (a saved runs-table view), journaled with the run's other calls."""
        self._record({"op": "experiment_tag", "key": key, "value": str(value)})

    def reopen(self) -> None:
        """RUNNING again (a resumed sweep's parent run)."""
        self._record({"op": "reopen"})

    def log_written(self, artifact_file: str, write: Callable[[Path], Any]) -> None:
        """An artifact that `write` puts into a temporary folder of the call's own (removed once it is sent)."""
        folder = Path(tempfile.mkdtemp(prefix="veil-mlflow-"))
        p = folder / Path(artifact_file).name
        try:
            write(p)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._record({"op": "artifact", "dir": _artifact_dir(artifact_file)}, {p.name: p}, owned=folder)

    def log_text(self, text: str, artifact_file: str) -> None:
        self.log_written(artifact_file, lambda p: p.write_text(text, encoding="utf-8"))

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        self.log_text(json_text(obj), artifact_file)

    def log_columns(self, columns: Mapping[str, Any], artifact_file: str) -> None:
        """Named columns of equal length (numpy arrays) as one Parquet table."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.log_written(artifact_file, lambda p: pq.write_table(pa.table(dict(columns)), p))

    def log_file(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._record({"op": "artifact", "dir": artifact_path}, {Path(path).name: Path(path)})

    def log_torch_state(self, state: Mapping[str, Any], artifact_file: str) -> None:
        import torch

        self.log_written(artifact_file, lambda p: torch.save(dict(state), p))

    def finish(self, status: str = "FINISHED") -> None:
        """End the run; with a writer of its own, wait for every call it queued (raising a failed call's error)."""
        self._record({"op": "end", "status": status, "time": int(time.time() * 1000)})
        if self.writer is not None and self._owns_writer:
            writer, self.writer = self.writer, None  # later calls (a failure record) go out directly
            writer.close()

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


class MetricBuffer:
    """Per-step metric rows sent to a run in batches: the first row at once, then at most one call every `every_s`
    seconds, and whatever is left at `flush()`. Short runs (a sweep's trials) then cost one call for all their epochs, and a long run's
    curves still reach the UI within seconds."""

    def __init__(self, run: TrackedRun, every_s: float = 2.0) -> None:
        self.run, self.every_s = run, every_s
        self.rows: list[tuple[Mapping[str, Any], int]] = []
        self.last = -math.inf  # the first row goes out at once: the UI shows the run is training

    def add(self, row: Mapping[str, Any], step: int) -> None:
        self.rows.append((dict(row), step))
        if time.monotonic() - self.last >= self.every_s:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.run.log_metric_rows(self.rows)
            self.rows = []
        self.last = time.monotonic()
