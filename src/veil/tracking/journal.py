"""A run's MLflow calls kept on local disk while the tracking server is unreachable (replayed by
`veil.tracking.replay`).

When a call of a `TrackedRun` to a tracking server fails (connection refused, timeout, 5xx after MLflow's short
retries), that call and every later call of the run go to a journal, `.veil/journal/<run id>/`: `meta.json`
(tracking URI, experiment, the process that wrote it), `ops.jsonl` (params, metrics with step and timestamp,
tags, tags of the run's experiment, artifacts, the terminal status, in order) and `artifacts/<seq>/<file>` (the artifacts' bytes). Calls that
succeeded before the drop are on the server already, so the journal starts at the failing call: nothing is
ever held only in memory. Every write goes through a temporary file and an atomic rename under a file lock, so
a crash mid-write leaves the previous state, never half an entry.

Journaling starts at the first failed call rather than ahead of every call (write-ahead): the calls before it
were acknowledged by the server, the failed one and all later ones are on disk before the call returns."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from veil.paths import write_atomic

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

JOURNAL_ENV = "VEIL_JOURNAL_DIR"
HOST_TAG, PID_TAG, PID_START_TAG = "veil.host", "veil.pid", "veil.pid_start"
LATE_TAG = "veil.late"
OFFLINE_PREFIX = "offline-"
IDS_FILE = "ids.json"
STALE_SEARCH_MAX = 200


def journal_root() -> Path:
    """Where journals live: $VEIL_JOURNAL_DIR, else ./.veil/journal (absolute)."""
    env = os.environ.get(JOURNAL_ENV)
    return Path(env) if env else (Path.cwd() / ".veil" / "journal").resolve()


def journal_env() -> dict[str, str]:
    """The variables Ray workers need to journal where the driver does."""
    return {JOURNAL_ENV: str(journal_root())}


# ---------------------------------------------------------------------------------------------------
# which process owns a run
# ---------------------------------------------------------------------------------------------------
def process_tags() -> dict[str, str]:
    """Tags naming this process, so a later command can tell when it ended without closing its run."""
    import psutil

    return {
        HOST_TAG: socket.gethostname(),
        PID_TAG: str(os.getpid()),
        PID_START_TAG: f"{psutil.Process().create_time():.2f}",
    }


def process_gone(pid: str | int | None, start: str | float | None) -> bool:
    """True when process `pid` of this host has ended (or the pid now belongs to a process started at another
    time than `start`, the create time recorded with it)."""
    import psutil

    try:
        proc = psutil.Process(int(pid))  # type: ignore[arg-type]
        created = proc.create_time()
        if proc.status() == psutil.STATUS_ZOMBIE:
            return True
    except (psutil.NoSuchProcess, psutil.ZombieProcess, TypeError, ValueError):
        return True
    except psutil.AccessDenied:
        return False
    try:
        return start is not None and abs(created - float(start)) > 1.0
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------------------
# when the server counts as gone
# ---------------------------------------------------------------------------------------------------
def unavailable(error: BaseException) -> bool:
    """True for a failure of the tracking server itself (no connection, a timeout, a 5xx once MLflow's retries
    are spent); False for an answer that refuses the request (e.g. a param logged with another value)."""
    import requests
    from mlflow.exceptions import MlflowException

    if isinstance(error, (requests.ConnectionError, requests.Timeout)):
        return True
    if not isinstance(error, MlflowException):
        return False
    text = str(error)
    if text.startswith("API request to") and "failed with" in text and "error code 4" not in text:
        return True
    return error.get_http_status_code() >= 500 and error.error_code != "INVALID_PARAMETER_VALUE"


def remote(uri: str) -> bool:
    """Whether `uri` is a tracking server (the only kind of store that can drop mid-run)."""
    return uri.split(":", 1)[0].lower() in ("http", "https")


# ---------------------------------------------------------------------------------------------------
# the journal on disk
# ---------------------------------------------------------------------------------------------------
def _write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=1).encode())


@dataclass(frozen=True)
class Journal:
    """One run's journal directory."""

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @classmethod
    def find(cls, run_id: str, root: Path | None = None) -> Journal | None:
        """The journal of `run_id`, when one is pending."""
        path = (root or journal_root()) / run_id
        return cls(path) if (path / "meta.json").exists() else None

    @classmethod
    def create(cls, run_id: str, meta: Mapping[str, Any], root: Path | None = None) -> Journal:
        """The journal of `run_id`, created with `meta` unless one exists (built aside, then renamed in whole)."""
        root = root or journal_root()
        root.mkdir(parents=True, exist_ok=True)
        final = root / run_id
        if not (final / "meta.json").exists():
            tmp = root / f".new-{run_id}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
            _write_json(tmp / "meta.json", {"run_id": run_id, **meta})
            (tmp / "ops.jsonl").touch()
            try:
                os.rename(tmp, final)
            except OSError:  # another process created it first
                shutil.rmtree(tmp, ignore_errors=True)
        return cls(final)

    def _lock(self):
        from filelock import FileLock

        return FileLock(str(self.path / ".lock"), timeout=60)

    def exists(self) -> bool:
        return (self.path / "meta.json").exists()

    def meta(self) -> dict[str, Any]:
        return json.loads((self.path / "meta.json").read_text())

    def ops(self) -> list[dict[str, Any]]:
        """The journaled calls, in the order they were made."""
        text = (self.path / "ops.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def append(self, op: Mapping[str, Any], files: Mapping[str, Path] | None = None) -> None:
        """Add one call; `files` (artifact name -> local file) are copied in first, so an entry never points at
        a file that is not there."""
        with self._lock():
            ops_file = self.path / "ops.jsonl"
            old = ops_file.read_bytes()
            seq = old.count(b"\n")
            entry = dict(op)
            if files:
                folder = self.path / "artifacts" / f"{seq:06d}"
                folder.mkdir(parents=True, exist_ok=True)
                for name, src in files.items():
                    write_atomic(folder / name, Path(src).read_bytes())
                entry["files"] = [str((folder / name).relative_to(self.path)) for name in files]
            write_atomic(ops_file, old + json.dumps(entry).encode() + b"\n")

    def progress(self) -> dict[str, Any]:
        p = self.path / "progress.json"
        return json.loads(p.read_text()) if p.exists() else {"done": 0}

    def set_progress(self, **values: Any) -> None:
        _write_json(self.path / "progress.json", {**self.progress(), **values})

    def closed(self) -> bool:
        """Whether the run's terminal status is in the journal."""
        return any(op["op"] == "end" for op in self.ops())

    def remove(self) -> None:
        """Delete the journal (renamed away first, so a crash half-way never leaves a half journal pending)."""
        gone = self.path.with_name(f".done-{self.run_id}-{uuid.uuid4().hex[:8]}")
        os.rename(self.path, gone)
        shutil.rmtree(gone, ignore_errors=True)


def pending(root: Path | None = None) -> list[Journal]:
    """Every journal waiting for replay, oldest first (a parent run's before its children's)."""
    root = root or journal_root()
    if not root.is_dir():
        return []
    found = [Journal(p) for p in root.iterdir() if not p.name.startswith(".") and (p / "meta.json").exists()]
    return sorted(found, key=lambda j: (j.meta().get("created", 0.0), j.run_id))


def ids(root: Path) -> dict[str, str]:
    """Offline run ids already replayed -> the ids the server gave them."""
    p = root / IDS_FILE
    return json.loads(p.read_text()) if p.exists() else {}


def remember_id(root: Path, offline: str, real: str) -> None:
    from filelock import FileLock

    with FileLock(str(root / f"{IDS_FILE}.lock"), timeout=60):
        _write_json(root / IDS_FILE, {**ids(root), offline: real})


# ---------------------------------------------------------------------------------------------------
# applying a call to a store (live and at replay)
# ---------------------------------------------------------------------------------------------------
def apply(c: MlflowClient, run_id: str, op: Mapping[str, Any], base: Path | None = None) -> None:
    """Send one call to the store. Artifacts come from `op['files']` (relative to `base`, the journal) or
    `op['sources']` (live: local paths)."""
    from mlflow.entities import Metric, Param, RunTag

    kind = op["op"]
    if kind == "params":
        items = [Param(k, v) for k, v in op["params"].items()]
        for i in range(0, len(items), 100):  # MLflow caps a batch at 100 params
            c.log_batch(run_id, params=items[i : i + 100])
    elif kind == "metrics":
        metrics = [Metric(k, v, ts, step) for k, v, ts, step in op["metrics"]]
        for i in range(0, len(metrics), 1000):
            c.log_batch(run_id, metrics=metrics[i : i + 1000])
    elif kind == "tags":
        c.log_batch(run_id, tags=[RunTag(k, v) for k, v in op["tags"].items()])
    elif kind == "artifact":
        paths = [base / f for f in op["files"]] if base is not None else [Path(s) for s in op["sources"]]
        for p in paths:
            c.log_artifact(run_id, str(p), op.get("dir"))
    elif kind == "end":
        c.set_terminated(run_id, status=op["status"], end_time=op.get("time"))
    elif kind == "untag":
        present = c.get_run(run_id).data.tags
        for key in op["keys"]:
            if key in present:
                c.delete_tag(run_id, key)
    elif kind == "reopen":
        c.update_run(run_id, status="RUNNING")
    elif kind == "experiment_tag":  # the run's experiment, looked up at send time: an offline run has none yet
        c.set_experiment_tag(c.get_run(run_id).info.experiment_id, op["key"], op["value"])
    else:
        raise ValueError(f"unknown journal entry {kind!r}")


def new_offline_id() -> str:
    """A run id for a run started while its server was away (replaced by the server's id at replay)."""
    return OFFLINE_PREFIX + uuid.uuid4().hex


def now_ms() -> int:
    return int(time.time() * 1000)
