"""A 2-node Ray cluster on 127.0.0.1, as a user runs one: a head and a second node started with `ray start`
(each with its own CPUs, memory and object store, both with the same auth mode), the tracking server from
`mlflow/start-server.sh`, and a sweep submitted through the Ray Jobs API. Trials must run on both nodes and
land, with their artifacts, in the one tracking server. Everything started here is stopped here, by PID."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from veil.sweeps.results import TAG_NODE, TAG_ROLE, TAG_SUPERSEDED, TAG_SWEEP, TAG_TRIAL
from veil.tracking.ui import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sweeps"))
from test_resume import ray_pids, stop_pids  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.ray]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MIB = 2**20


def ray_start(env: dict[str, str], *args: str) -> None:
    proc = subprocess.run(
        [str(BIN / "ray"), "start", "--disable-usage-stats", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def wait_for(what: str, ok, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ok():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout:.0f} s")


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(env, dashboard URL, tracking URI, tmp): a head and one more node on 127.0.0.1, 1 CPU each, and an MLflow
    server. Ray 2.60 turns token auth on by default; both nodes and the job client share RAY_AUTH_MODE."""
    tmp = tmp_path_factory.mktemp("two-nodes")
    ray_tmp = Path("/tmp") / f"veil2n-{os.getpid()}"  # Ray's socket paths have a length limit
    env = {
        **os.environ,
        "RAY_TMPDIR": str(ray_tmp),
        "RAY_AUTH_MODE": "disabled",
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "OMP_NUM_THREADS": "1",
        "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    }
    env.pop("RAY_ADDRESS", None)
    port, dash, mlflow_port = free_port(), free_port(), free_port()
    sizes = ("--num-cpus=1", f"--memory={1536 * MIB}", f"--object-store-memory={200 * MIB}")
    server = None
    try:
        ray_start(
            env,
            "--head",
            f"--port={port}",
            f"--temp-dir={ray_tmp}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dash}",
            *sizes,
        )
        ray_start(env, f"--address=127.0.0.1:{port}", *sizes)
        server = subprocess.Popen(
            ["bash", str(ROOT / "mlflow" / "start-server.sh")],
            env={**env, "MLFLOW_PORT": str(mlflow_port), "MLFLOW_ROOT": str(tmp / "mlflow"), "MLFLOW_WORKERS": "1"},
            stdout=open(tmp / "mlflow.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        uri = f"http://127.0.0.1:{mlflow_port}"
        wait_for("the tracking server answers /health", lambda: answers(f"{uri}/health"), 120)
        wait_for("the Jobs API answers", lambda: answers(f"http://127.0.0.1:{dash}/api/version"), 60)
        yield env, f"http://127.0.0.1:{dash}", uri, tmp
    finally:
        if server is not None:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)
        stop_pids(ray_pids(str(ray_tmp)))


def submit(dashboard: str, entrypoint: str, env: dict[str, str], timeout: float = 500) -> tuple[str, str]:
    """Submit `entrypoint` as a Ray job (the Jobs API, as `ray job submit` does); wait; (status, logs)."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(dashboard)
    job = client.submit_job(entrypoint=entrypoint, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = client.get_job_status(job)
        if status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
            return str(status), client.get_job_logs(job)
        time.sleep(2)
    client.stop_job(job)
    pytest.fail(f"job {job} did not end within {timeout:.0f} s: {client.get_job_logs(job)[-3000:]}")


def test_a_submitted_sweep_runs_on_both_nodes_into_one_server(cluster):
    from mlflow.tracking import MlflowClient

    env, dashboard, uri, tmp = cluster
    spec = {
        "method": "gpp",
        "dataset": "gaussian-correlated",
        "dataset_params": {"n": 300},
        "params": {"epochs": 3, "lr": 1.0e-3, "encoder_hidden": [16], "head_hidden": [8], "d_z": 4},
        "audit": {"epochs": 2, "hidden": [16]},
        "space": {"beta": {"type": "log", "low": 0.05, "high": 8}},
        "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
        "reference": {"utility_auc": 0.5, "privacy_gap": 0.5},
        "sampler": "random",
        "sampler_seed": 1,
        "trials": 4,
        "concurrency": 2,
        "resources": {"cpus": 1},
        "experiment": "two-nodes",
    }
    (tmp / "two.yaml").write_text(yaml.safe_dump(spec))
    cmd = (
        f"{BIN / 'veil'} sweep {tmp / 'two.yaml'} --name two --address auto --tracking-uri {uri} "
        f"--storage {tmp / 'sweeps'} --quiet --json"
    )
    status, logs = submit(dashboard, cmd, env)
    assert status == "SUCCEEDED", logs[-4000:]
    summary = json.loads(logs.strip().splitlines()[-1])
    assert summary["trials"] == 4 and summary["finished"] == 4

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("two-nodes")
    runs = c.search_runs([exp.experiment_id], f"tags.`{TAG_SWEEP}` = 'two'")
    trials = [r for r in runs if r.data.tags.get(TAG_ROLE) == "trial" and TAG_SUPERSEDED not in r.data.tags]
    assert len(trials) == 4 and len({r.data.tags[TAG_TRIAL] for r in trials}) == 4
    assert all(r.info.status == "FINISHED" for r in trials)
    nodes = {r.data.tags[TAG_NODE] for r in trials}
    assert len(nodes) == 2 and "" not in nodes, nodes  # both nodes ran trials
    for r in trials:  # artifacts went through the server, not to a node's disk
        assert r.info.artifact_uri.startswith("mlflow-artifacts:/")
        report = json.loads(Path(c.download_artifacts(r.info.run_id, "audit/report.json", str(tmp / "dl"))).read_text())
        assert {s["label"] for s in report["scores"]} == {"u", "s"}, report
