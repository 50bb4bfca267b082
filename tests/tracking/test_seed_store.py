"""A new embedded store starts as a copy of an empty one (`veil.tracking.mlflow_run.seed_store`): the copy must be
the store MLflow itself builds, with the default experiment where MLflow would put it, and a cached copy MLflow
refuses must cost nothing but the build it was to save. Real MLflow, real sqlite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from veil.tracking import mlflow_run


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VEIL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cache"


def contents(db: Path) -> tuple[list[list[str]], list[tuple], list[tuple], list[tuple]]:
    """The schema (each statement as its sorted lines), the schema revision, the experiments (name, artifact
    location, stage) and the workspaces."""
    with sqlite3.connect(db) as con:
        # MLflow's own builds order a table's constraints differently from one process to the next
        schema = sorted(
            sorted(line.strip().rstrip(",") for line in sql.splitlines())
            for (sql,) in con.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")
        )
        revision = con.execute("SELECT * FROM alembic_version").fetchall()
        experiments = con.execute(
            "SELECT experiment_id, name, artifact_location, lifecycle_stage FROM experiments ORDER BY experiment_id"
        ).fetchall()
        workspaces = con.execute("SELECT * FROM workspaces").fetchall()
    con.close()
    return schema, revision, experiments, workspaces


def test_a_seeded_store_is_the_store_mlflow_builds(tmp_path: Path, cache: Path):
    built, seeded = tmp_path / "built" / "mlflow.db", tmp_path / "seeded" / "mlflow.db"
    for db in (built, seeded):
        db.parent.mkdir()
    MlflowClient(tracking_uri=f"sqlite:///{built}").search_experiments()  # MLflow alone, no Veil
    mlflow_run.client(f"sqlite:///{seeded}").search_experiments()

    assert mlflow_run.empty_store_path().parent == cache / "mlflow"
    with sqlite3.connect(mlflow_run.empty_store_path()) as con:
        assert con.execute("SELECT COUNT(*) FROM experiments").fetchone() == (0,)
    con.close()
    assert contents(seeded) == contents(built)
    # the default experiment is MLflow's, with the opener's artifact root (here: ./mlruns), not the cache's
    assert contents(seeded)[2] == [(0, "Default", str(tmp_path / "mlruns" / "0"), "active")]


def test_the_next_new_store_copies_the_cached_one(tmp_path: Path, cache: Path):
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    assert mlflow_run.seed_store(first) is True
    template = mlflow_run.empty_store_path()
    stamp = template.stat().st_mtime_ns
    assert mlflow_run.seed_store(second) is True
    assert template.stat().st_mtime_ns == stamp
    assert second.read_bytes() == template.read_bytes()
    assert mlflow_run.seed_store(second) is False  # an existing store is never replaced
    assert mlflow_run.seed_store(Path(":memory:")) is False and not Path(":memory:").exists()
    # by URI (what `veil ui` seeds before its server opens the store): sqlite only
    assert mlflow_run.seed_uri(f"sqlite:///{tmp_path / 'c.db'}") is True
    assert (tmp_path / "c.db").read_bytes() == template.read_bytes()
    assert mlflow_run.seed_uri(f"file:{tmp_path / 'mlruns'}") is False and not (tmp_path / "mlruns").exists()
    assert mlflow_run.seed_uri("http://127.0.0.1:5000") is False
    uri = f"sqlite:///{second}"
    run = mlflow_run.client(uri).create_run(mlflow_run.experiment_id(uri, "veil"))
    assert MlflowClient(tracking_uri=uri).get_run(run.info.run_id).info.status == "RUNNING"


@pytest.mark.parametrize("damage", ["garbage", "cut short", "holds an experiment"])
def test_a_damaged_cached_store_is_built_again(tmp_path: Path, cache: Path, damage: str):
    assert mlflow_run.seed_store(tmp_path / "first.db") is True
    template = mlflow_run.empty_store_path()
    good = template.read_bytes()
    if damage == "garbage":
        template.write_bytes(b"not a database" * 100)
    elif damage == "cut short":
        template.write_bytes(good[: len(good) // 3])
    else:
        MlflowClient(tracking_uri=f"sqlite:///{template}").create_experiment("left behind")
    db = tmp_path / "mlflow.db"

    exp = mlflow_run.experiment_id(f"sqlite:///{db}", "veil")

    assert MlflowClient(tracking_uri=f"sqlite:///{db}").get_experiment(exp).name == "veil"
    assert [e.name for e in MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()] == ["veil", "Default"]
    assert contents(template) == contents(tmp_path / "first.db")


def test_an_unwritable_cache_leaves_the_build_to_mlflow(tmp_path: Path, cache: Path):
    cache.write_text("a file where the cache directory would be")
    db = tmp_path / "mlflow.db"
    assert mlflow_run.seed_store(db) is False
    assert not db.exists()
    mlflow_run.client(f"sqlite:///{db}").search_experiments()
    assert contents(db)[2][0][1] == "Default"
