"""Replaying journals (`veil.tracking.journal`) to their tracking server, and closing runs whose process ended.

`replay` sends a journal to its server in order, tags the run `veil.late=true`, and deletes the journal; it is
idempotent (params with the same value and metric points already there are skipped, progress is kept in
`progress.json`), so an interrupted replay simply runs again. `recover` does that at the start of `veil run`,
`veil sweep` and `veil sync`, and marks KILLED the RUNNING runs whose process on this host has ended."""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from veil.console import warn
from veil.tracking.journal import (
    HOST_TAG,
    LATE_TAG,
    OFFLINE_PREFIX,
    PID_START_TAG,
    PID_TAG,
    STALE_SEARCH_MAX,
    Journal,
    apply,
    ids,
    journal_root,
    pending,
    process_gone,
    remember_id,
    remote,
)
from veil.tracking.mlflow_run import PARENT_TAG, absolute_uri, client, experiment_id, health_problem, local_store

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


# ---------------------------------------------------------------------------------------------------
# replay
# ---------------------------------------------------------------------------------------------------
@dataclass
class Synced:
    """What one replay did (a row of `veil sync`'s table)."""

    run_id: str
    tracking_uri: str
    status: str = ""
    params: int = 0
    metrics: int = 0
    tags: int = 0
    artifacts: int = 0
    result: str = "synced"
    ok: bool = True
    notes: list[str] = field(default_factory=list)


def owner_alive(meta: Mapping[str, Any]) -> bool:
    """Whether the process that writes this journal still runs (on this host)."""
    if meta.get("host") != socket.gethostname():
        return False
    return not process_gone(meta.get("pid"), meta.get("pid_start"))


def replay(journal: Journal, uri: str | None = None, found_by: str = "veil sync") -> Synced:
    """Send `journal` to its tracking store (or `uri`) in order, then delete it. A journal whose process ended
    without a terminal status ends KILLED with the error tag saying so."""
    meta = journal.meta()
    uri = uri or meta["tracking_uri"]
    c = client(uri)
    progress = journal.progress()
    run_id = progress.get("run_id") or meta["run_id"]
    out = Synced(run_id, uri)
    start = meta.get("start")
    if start and not progress.get("run_id"):  # the run itself was started while the server was away
        tags = dict(start["tags"])
        parent = tags.get(PARENT_TAG, "")
        if parent.startswith(OFFLINE_PREFIX):
            tags[PARENT_TAG] = ids(journal.path.parent).get(parent, parent)
        run = c.create_run(
            experiment_id(uri, start["experiment"]), start_time=start["time"], tags=tags, run_name=start["run_name"]
        )
        run_id = out.run_id = run.info.run_id
        journal.set_progress(run_id=run_id)
        remember_id(journal.path.parent, meta["run_id"], run_id)
        out.notes.append(f"started offline as {meta['run_id']}")
    c.set_tag(run_id, LATE_TAG, "true")
    ops = journal.ops()
    seen = _logged_points(c, run_id, {m[0] for op in ops if op["op"] == "metrics" for m in op["metrics"]})
    for i, op in enumerate(ops):
        _count(out, op)
        if i < int(progress.get("done", 0)):
            continue
        if op["op"] == "metrics":  # skip points a partial replay (or the failing call itself) already logged
            op = {**op, "metrics": [m for m in op["metrics"] if tuple(m) not in seen]}
        apply(c, run_id, op, journal.path)
        journal.set_progress(done=i + 1)
    if not out.status:
        error = f"process {meta.get('pid')} on {meta.get('host')} ended without closing the run (found by {found_by})"
        c.set_tag(run_id, "error", error)
        c.set_terminated(run_id, status="KILLED")
        out.status = "KILLED"
    journal.remove()
    return out


def _logged_points(c: MlflowClient, run_id: str, keys: set[str]) -> set[tuple[Any, ...]]:
    """(key, value, timestamp, step) of the metric points the run already has, for the keys the journal logs."""
    logged = c.get_run(run_id).data.metrics
    return {
        (k, m.value, m.timestamp, m.step) for k in sorted(keys & set(logged)) for m in c.get_metric_history(run_id, k)
    }


def _count(out: Synced, op: Mapping[str, Any]) -> None:
    kind = op["op"]
    if kind == "params":
        out.params += len(op["params"])
    elif kind == "metrics":
        out.metrics += len(op["metrics"])
    elif kind == "tags":
        out.tags += len(op["tags"])
    elif kind == "artifact":
        out.artifacts += len(op["files"])
    elif kind == "end":
        out.status = op["status"]
    elif kind == "reopen":
        out.status = "RUNNING"


def same_store(a: str, b: str) -> bool:
    """Whether two tracking URIs name the same store."""
    return absolute_uri(a).rstrip("/") == absolute_uri(b).rstrip("/")


def sync(uri: str | None = None, found_by: str = "veil sync", root: Path | None = None) -> list[Synced]:
    """Replay every pending journal (only those of store `uri` when given) whose server answers and whose
    process has ended or closed its run; the others stay pending, with the reason."""
    out: list[Synced] = []
    down: dict[str, str | None] = {}
    for j in pending(root):
        meta = j.meta()
        target = meta["tracking_uri"]
        if uri is not None and not same_store(uri, target):
            continue
        if not j.closed() and owner_alive(meta):
            out.append(_left(j, meta, f"pending: process {meta.get('pid')} is still writing it", ok=True))
            continue
        if remote(target):
            if target not in down:
                down[target] = health_problem(target)
            if down[target]:
                out.append(_left(j, meta, f"pending: server unreachable ({down[target]})", ok=False))
                continue
        try:
            out.append(replay(j, found_by=found_by))
        except Exception as e:  # noqa: BLE001 (kept pending, reported in the table)
            out.append(_left(j, meta, f"pending: replay failed: {type(e).__name__}: {e}"[:300], ok=False))
    return out


def _left(j: Journal, meta: Mapping[str, Any], why: str, ok: bool) -> Synced:
    s = Synced(j.progress().get("run_id") or j.run_id, meta["tracking_uri"], result=why, ok=ok)
    for op in j.ops():
        _count(s, op)
    return s


# ---------------------------------------------------------------------------------------------------
# stale RUNNING runs
# ---------------------------------------------------------------------------------------------------
def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def reap_stale(uri: str, found_by: str, root: Path | None = None) -> list[str]:
    """Mark KILLED the RUNNING runs (at most STALE_SEARCH_MAX, newest first) whose process on this host has
    ended; return their ids. Runs with a pending journal are left to the replay."""
    c = client(uri)
    host = socket.gethostname()
    experiments = [e.experiment_id for e in c.search_experiments(max_results=1000)]
    if not experiments:
        return []
    runs = c.search_runs(
        experiments,
        filter_string=f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = {_quote(host)}",
        max_results=STALE_SEARCH_MAX,
    )
    root = root or journal_root()
    reaped = []
    for run in runs:
        tags = run.data.tags
        if PID_TAG not in tags or Journal.find(run.info.run_id, root) is not None:
            continue
        if not process_gone(tags[PID_TAG], tags.get(PID_START_TAG)):
            continue
        error = f"process {tags[PID_TAG]} on {host} ended without closing the run (found by {found_by})"
        c.set_tag(run.info.run_id, "error", error)
        c.set_terminated(run.info.run_id, status="KILLED")
        reaped.append(run.info.run_id)
    return reaped


def recover(uri: str, found_by: str) -> tuple[list[Synced], list[str]]:
    """At the first contact with a store: replay its pending journals, then mark its stale RUNNING runs KILLED.
    Never fails the command that calls it: a problem is printed and the command goes on."""
    synced: list[Synced] = []
    reaped: list[str] = []
    db = local_store(uri)
    if db is not None and not db.exists():
        return synced, reaped  # a local store not created yet: nothing to recover, and nothing is created here
    try:
        synced = sync(uri, found_by=found_by)
        reaped = reap_stale(uri, found_by)
    except Exception as e:  # noqa: BLE001 (recovery must never block a new run)
        warn(f"could not check {uri} for journaled or stale runs: {e}")
    done = [s.run_id for s in synced if s.result == "synced"]
    if done:
        print(
            f"[veil] replayed {len(done)} journaled run(s) to {uri} (tag {LATE_TAG}=true): {', '.join(done)}",
            file=sys.stderr,
        )
    if reaped:
        print(
            f"[veil] marked {len(reaped)} run(s) KILLED whose process had ended: {', '.join(reaped)}", file=sys.stderr
        )
    return synced, reaped
