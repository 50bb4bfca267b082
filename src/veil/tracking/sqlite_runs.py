"""Read a run's children straight from an embedded (sqlite) MLflow store: their info, tags and latest metrics.

MLflow's `search_runs` loads every param of every run it returns, through its ORM, and a sweep's trial runs carry
dozens of params each (every field of their config): at 1,000 trials that is most of `veil report`'s time. A
sweep's analysis reads none of them, and no MLflow API leaves them out, so for a sqlite store this module asks the
three tables it needs (`runs`, `tags`, `latest_metrics`) on a read-only connection. Anything else (a tracking
server, a store whose tables do not have the columns read here) returns None and the caller uses MLflow."""

from __future__ import annotations

import math
import sqlite3
from types import SimpleNamespace
from typing import Any

from veil.tracking.mlflow_run import PARENT_TAG, local_store

#: the columns read, per table: a store without them (another MLflow schema) is read through MLflow instead
COLUMNS = {
    "runs": {"run_uuid", "status", "start_time", "end_time", "lifecycle_stage", "experiment_id"},
    "tags": {"key", "value", "run_uuid"},
    "latest_metrics": {"key", "value", "is_nan", "run_uuid"},
}


def _connect(uri: str) -> sqlite3.Connection | None:
    """A read-only connection to the store's database, or None when `uri` is not an existing sqlite file."""
    if not uri.startswith("sqlite:///"):
        return None
    db = local_store(uri)
    if db is None or not db.is_file():
        return None
    return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)


def _schema_known(con: sqlite3.Connection) -> bool:
    for table, needed in COLUMNS.items():
        have = {row[1] for row in con.execute(f"PRAGMA table_info({table})")}
        if not needed <= have:
            return False
    return True


def child_runs(uri: str, parent_run_id: str, experiment_id: str | None = None) -> list[Any] | None:
    """The active direct children of `parent_run_id` as objects shaped like MLflow's runs without params
    (`.info.run_id/status/start_time/end_time/experiment_id`, `.data.tags`, `.data.metrics`), ordered by start
    time; None when the store is not one this module reads (then ask MLflow)."""
    con = _connect(uri)
    if con is None:
        return None
    try:
        if not _schema_known(con):
            return None
        where = "r.lifecycle_stage = 'active' AND p.key = ? AND p.value = ?"
        args: list[Any] = [PARENT_TAG, parent_run_id]
        if experiment_id is not None:
            where += " AND r.experiment_id = ?"
            args.append(int(experiment_id))
        ids = f"SELECT r.run_uuid FROM runs r JOIN tags p ON p.run_uuid = r.run_uuid WHERE {where}"
        con.execute("BEGIN")  # one snapshot for the three reads: a sweep may be adding runs meanwhile
        info = con.execute(
            "SELECT run_uuid, status, start_time, end_time, experiment_id FROM runs "
            f"WHERE run_uuid IN ({ids}) ORDER BY start_time, run_uuid",
            args,
        ).fetchall()
        tags: dict[str, dict[str, str]] = {row[0]: {} for row in info}
        metrics: dict[str, dict[str, float]] = {row[0]: {} for row in info}
        for run, key, value in con.execute(f"SELECT run_uuid, key, value FROM tags WHERE run_uuid IN ({ids})", args):
            tags[run][key] = value
        for run, key, value, is_nan in con.execute(
            f"SELECT run_uuid, key, value, is_nan FROM latest_metrics WHERE run_uuid IN ({ids})", args
        ):
            metrics[run][key] = math.nan if is_nan else float(value)
    except sqlite3.DatabaseError:
        return None  # not a store this module knows (or not a database): MLflow says what is wrong
    finally:
        con.close()
    return [
        SimpleNamespace(
            info=SimpleNamespace(
                run_id=run, status=status, start_time=start, end_time=end, experiment_id=str(experiment)
            ),
            data=SimpleNamespace(tags=tags[run], metrics=metrics[run]),
        )
        for run, status, start, end, experiment in info
    ]


__all__ = ["child_runs"]
