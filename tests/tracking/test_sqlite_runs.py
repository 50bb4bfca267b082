"""`child_runs` reads a parent's children from an embedded store exactly as MLflow's search returns them, less
their params, and stands aside (None) for stores it does not read."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

from veil.tracking import client
from veil.tracking.sqlite_runs import child_runs


def _store(tmp_path: Path) -> tuple[str, str, str]:
    """A store with a parent run, four children (one failed, one with a NaN metric, one deleted), a child of
    another parent and an unrelated run; returns its URI, experiment id and the parent's run id."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = client(uri)
    exp = c.create_experiment("x")
    parent = c.create_run(exp).info.run_id
    other = c.create_run(exp).info.run_id
    for i in range(4):
        run = c.create_run(exp, tags={"mlflow.parentRunId": parent, "veil.trial": f"t{i}", "n": str(i)}).info.run_id
        c.log_param(run, "beta", 0.1 * i)
        c.log_metric(run, "utility_auc", 0.5 + i / 10, step=0)
        c.log_metric(run, "utility_auc", 0.6 + i / 10, step=1)  # the latest step is what a run's metrics hold
        c.log_metric(run, "gap", math.nan if i == 2 else i / 100)
        c.set_terminated(run, "FAILED" if i == 1 else "FINISHED")
        if i == 3:
            c.delete_run(run)
    c.create_run(exp, tags={"mlflow.parentRunId": other})
    c.create_run(exp)
    return uri, exp, parent


def test_child_runs_match_mlflows_search_without_params(tmp_path: Path) -> None:
    uri, exp, parent = _store(tmp_path)
    ours = child_runs(uri, parent, exp)
    theirs = client(uri).search_runs([exp], f"tags.`mlflow.parentRunId` = '{parent}'")
    assert ours is not None and len(ours) == 3  # the deleted child and the other parent's are left out
    assert {r.info.run_id for r in ours} == {r.info.run_id for r in theirs}
    by_id = {r.info.run_id: r for r in theirs}
    for r in ours:
        m = by_id[r.info.run_id]
        assert (r.info.status, r.info.start_time, r.info.end_time, r.info.experiment_id) == (
            m.info.status,
            m.info.start_time,
            m.info.end_time,
            m.info.experiment_id,
        )
        assert r.data.tags == m.data.tags
        assert r.data.metrics.keys() == m.data.metrics.keys()
        for k, v in m.data.metrics.items():
            assert (math.isnan(v) and math.isnan(r.data.metrics[k])) or r.data.metrics[k] == v
    assert sorted(r.data.tags["n"] for r in ours) == ["0", "1", "2"]
    assert [r.info.status for r in sorted(ours, key=lambda r: r.data.tags["n"])] == ["FINISHED", "FAILED", "FINISHED"]
    assert child_runs(uri, parent, None) is not None and len(child_runs(uri, parent, None) or []) == 3


def test_child_runs_stand_aside_for_stores_they_do_not_read(tmp_path: Path) -> None:
    assert child_runs("http://127.0.0.1:5000", "abc") is None
    assert child_runs(f"sqlite:///{tmp_path / 'missing.db'}", "abc") is None
    not_a_db = tmp_path / "text.db"
    not_a_db.write_text("not sqlite")
    assert child_runs(f"sqlite:///{not_a_db}", "abc") is None
    other_schema = tmp_path / "other.db"
    with sqlite3.connect(other_schema) as con:
        con.execute("CREATE TABLE runs (run_uuid TEXT)")
    assert child_runs(f"sqlite:///{other_schema}", "abc") is None
