"""Four `veil run` processes started at once in a fresh directory share the embedded sqlite store: MLflow's
table creation runs once under a file lock beside the database, so none fails with 'duplicate column name'
(before the lock, 3 of 3 attempts with two processes had one failure). With an empty cache they also race to
build the cached empty store that new stores are copied from (`seed_store`)."""

from __future__ import annotations

import os
import subprocess
import sys

from mlflow.tracking import MlflowClient

from veil.tracking import mlflow_run

RUNS = 4
TINY = ["--set", "n=200", "--set", "epochs=1", "--set", "audit.epochs=1", "--quiet", "--target", "none"]


def test_four_runs_at_once_in_a_fresh_directory(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "veil.cli", "run", "-m", "gpp", "-d", "gaussian-correlated", *TINY],
            cwd=tmp_path,
            env={**env, "OMP_NUM_THREADS": "1", "VEIL_CACHE_DIR": str(tmp_path / "cache")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(RUNS)
    ]
    try:
        outputs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("veil").experiment_id])
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * RUNS
    assert (tmp_path / "mlflow.db.lock").exists()
    assert [p.name for p in (tmp_path / "cache" / "mlflow").glob("*.db")] == [mlflow_run.empty_store_path().name]
