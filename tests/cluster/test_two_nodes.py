"""A 2-node Ray cluster on 127.0.0.1, as a user runs one: a head and a second node started with `ray start`
(each with its own CPUs, memory and object store, both with the same auth mode), the tracking server from
`mlflow/start-server.sh`, and a sweep submitted through the Ray Jobs API. Trials must run on both nodes and
land, with their artifacts, in the one tracking server. Everything started here is stopped here, by PID."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Callable

import pytest
import yaml
from plugin_install import install_plugin, with_plugin
from tenacity import (
    retry,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_fixed,
)
from veil_test_hooks import hold_env

from polling import wait_for
from sweep_procs import ray_pids, stop_pids
from veil.sweeps.results import TAG_NODE, TAG_ROLE, TAG_SUPERSEDED, TAG_SWEEP, TAG_TRIAL
from veil.tracking.server import free_port

pytestmark = [pytest.mark.cluster, pytest.mark.ray, pytest.mark.slow]  # ~2 min: a 2-node cluster

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MIB = 2**20


class NodeStartTimeout(Exception):
    """`ray start` gave up waiting for its raylet to register (Ray's fixed 30 s): a loaded machine, not our bug."""


def ray_start(env: dict[str, str], ray_tmp: str, args: Callable[[], tuple[str, ...]]) -> None:
    """`ray start` with `args()` (fresh ports each try). Ray waits a fixed 30 s for the raylet to register with
    the GCS; on a loaded CI machine that can lapse, so a timed-out start is stopped (only the processes it
    started) and tried again, up to 3 times. Any other failure fails at once."""

    def once() -> None:
        before = ray_pids(ray_tmp)
        proc = subprocess.run(
            [str(BIN / "ray"), "start", "--disable-usage-stats", *args()],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        out = proc.stdout[-2000:] + proc.stderr[-2000:]
        if proc.returncode != 0:
            stop_pids(ray_pids(ray_tmp) - before)
            if "timed out during startup" in out:
                raise NodeStartTimeout(out)
        assert proc.returncode == 0, out

    retry(
        retry=retry_if_exception_type(NodeStartTimeout),
        stop=stop_after_attempt(3),
        wait=wait_fixed(5),
        reraise=True,
    )(once)()


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(env, dashboard URL, tracking URI, tmp, the second node's PIDs): a head and one more node on 127.0.0.1, 1 CPU each, and an MLflow
    server. Ray 2.60 turns token auth on by default; both nodes and the job client share RAY_AUTH_MODE. Both
    nodes carry the test suite's trial pause (tests/veil_test_hooks.py), inert until a test creates tmp/hold."""
    tmp = tmp_path_factory.mktemp("two-nodes")
    ray_tmp = Path("/tmp") / f"veil2n-{os.getpid()}"  # Ray's socket paths have a length limit
    env = {
        **os.environ,
        "RAY_TMPDIR": str(ray_tmp),
        "RAY_AUTH_MODE": "disabled",
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "OMP_NUM_THREADS": "1",
        "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
        **hold_env(tmp / "hold"),
    }
    env = with_plugin(install_plugin(tmp / "plugin"), env)  # every node has the outside package (examples/plugin)
    env.pop("RAY_ADDRESS", None)
    port, dash, mlflow_port = free_port(), free_port(), free_port()
    sizes = ("--num-cpus=1", f"--memory={1536 * MIB}", f"--object-store-memory={200 * MIB}")

    def own_ports() -> tuple[str, ...]:
        """Ports of a node's agents: their defaults are fixed, and two nodes on one machine would collide."""
        flags = ("dashboard-agent-listen-port", "dashboard-agent-grpc-port", "metrics-export-port")
        return tuple(f"--{f}={free_port()}" for f in (*flags, "runtime-env-agent-port"))

    server = None
    try:
        ray_start(
            env,
            str(ray_tmp),
            lambda: (
                "--head",
                f"--port={port}",
                f"--temp-dir={ray_tmp}",
                "--include-dashboard=true",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={dash}",
                f"--ray-client-server-port={free_port()}",
                *sizes,
                *own_ports(),
            ),
        )
        head_pids = ray_pids(str(ray_tmp))
        ray_start(env, str(ray_tmp), lambda: (f"--address=127.0.0.1:{port}", *sizes, *own_ports()))
        worker_pids = ray_pids(str(ray_tmp)) - head_pids  # the second node's raylet and agents
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
        yield env, f"http://127.0.0.1:{dash}", uri, tmp, worker_pids
    finally:
        if server is not None:
            os.killpg(server.pid, 15)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a loaded machine: SIGKILL after SIGTERM, as OwnServer.stop does
                os.killpg(server.pid, 9)
                server.wait(timeout=30)
        stop_pids(ray_pids(str(ray_tmp)))
        shutil.rmtree(ray_tmp, ignore_errors=True)


def sweep_spec(*, trials: int, epochs: int, experiment: str, n: int = 300, retries: int = 0) -> dict:
    """A small GPP sweep, one CPU a trial, two at a time: one trial on each node."""
    return {
        "method": "gpp",
        "dataset": "gaussian-correlated",
        "dataset_params": {"n": n},
        "params": {"epochs": epochs, "lr": 1.0e-3, "encoder_hidden": [16], "head_hidden": [8], "d_z": 4},
        "audit": {"epochs": 2, "hidden": [16]},
        "space": {"beta": {"type": "log", "low": 0.05, "high": 8}},
        "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
        "reference": {"utility_auc": 0.5, "privacy_gap": 0.5},
        "sampler": "random",
        "sampler_seed": 1,
        "trials": trials,
        "concurrency": 2,
        "resources": {"cpus": 1},
        "retries": retries,
        "experiment": experiment,
    }


def trial_runs(uri: str, experiment: str, sweep: str) -> list:
    """The sweep's trial child runs that count (not superseded attempts)."""
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = c.search_runs([exp.experiment_id], f"tags.`{TAG_SWEEP}` = '{sweep}'")
    return [r for r in runs if r.data.tags.get(TAG_ROLE) == "trial" and TAG_SUPERSEDED not in r.data.tags]


def submit(dashboard: str, entrypoint: str, timeout: float = 500, while_running=None) -> tuple[str, str]:
    """Submit `entrypoint` as a Ray job (the Jobs API, as `ray job submit` does; with env_vars of its own, as users
    pass them); call `while_running()` until it returns True; wait for the end; (status, logs). Both waits share
    `timeout`."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(dashboard)
    no_agent_yet = retry_if_exception(lambda e: isinstance(e, RuntimeError) and "No available agent" in str(e))
    # the head's job agent registers some seconds after the dashboard answers
    job = retry(retry=no_agent_yet, stop=stop_after_delay(90), wait=wait_fixed(2), reraise=True)(client.submit_job)(
        entrypoint=entrypoint, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}}
    )

    def ended() -> bool:
        return client.get_job_status(job) in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)

    deadline = time.time() + timeout
    try:
        if while_running is not None:
            wait_for(f"job {job}: what the test waits for", lambda: while_running() or ended(), timeout, every=1)
        wait_for(f"job {job} to end", ended, max(1.0, deadline - time.time()), every=2)
    except AssertionError as e:
        logs = client.get_job_logs(job)
        client.stop_job(job)
        pytest.fail(f"{e}: {logs[-3000:]}")
    return str(client.get_job_status(job)), client.get_job_logs(job)


def submit_sweep(cluster, spec: dict, name: str) -> dict:
    """`veil sweep` of `spec` named `name`, submitted through the Jobs API; its --json summary once it succeeded."""
    _, dashboard, uri, tmp, _ = cluster
    (tmp / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    cmd = (
        f"{BIN / 'veil'} sweep {tmp / f'{name}.yaml'} --name {name} --address auto --tracking-uri {uri} "
        f"--storage {tmp / 'sweeps'} --quiet --json"
    )
    status, logs = submit(dashboard, cmd)
    assert status == "SUCCEEDED", logs[-4000:]
    return json.loads(logs.strip().splitlines()[-1])


def test_a_submitted_sweep_runs_on_both_nodes_into_one_server(cluster):
    from mlflow.tracking import MlflowClient

    env, dashboard, uri, tmp, _ = cluster
    summary = submit_sweep(cluster, sweep_spec(trials=4, epochs=3, experiment="two-nodes"), "two")
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


def test_a_method_from_an_outside_package_sweeps_on_both_nodes(cluster):
    """examples/plugin's method and dataset, installed on the nodes (their PYTHONPATH) and nowhere in Veil's
    source, swept through the Jobs API: each trial worker finds them through the entry points (issue 28)."""
    env, dashboard, uri, tmp, _ = cluster
    spec = {
        **sweep_spec(trials=4, epochs=1, experiment="plugin"),
        "method": "mean-nulling",
        "dataset": "tilted-blobs",
        "dataset_params": {"n": 600},
        "params": {"d_z": 3},
        "space": {"steps": {"type": "categorical", "values": [1, 2, 3, 4]}},
        "sampler": "grid",
        "target": "none",
    }
    spec.pop("trials")
    summary = submit_sweep(cluster, spec, "plugin")
    assert summary["trials"] == 4 and summary["finished"] == 4
    trials = trial_runs(uri, "plugin", "plugin")
    assert len(trials) == 4 and all(r.info.status == "FINISHED" for r in trials)
    assert {r.data.params["method"] for r in trials} == {"mean-nulling"}
    assert len({r.data.tags[TAG_NODE] for r in trials}) == 2  # both nodes imported the plugin and ran its trials
    # the release hides s at a useful utility on every trial (u and s correlate at rho 0.3)
    assert all(float(r.data.metrics["privacy_gap"]) <= 0.1 for r in trials)


def test_a_node_removed_mid_sweep_has_its_trial_retried_elsewhere(cluster):
    """Kill the second node (its raylet and agents, SIGKILL) while one of its trials runs: Tune retries the trial
    on the head (`retries`), the sweep succeeds, and every trial is recorded exactly once (the cut-off attempt is
    superseded and KILLED, never left RUNNING). Trials 2+ are held after their first epoch until the kill, so
    both nodes run a trial when it lands, on any machine speed. Runs last: the cluster has one node afterwards."""
    from mlflow.tracking import MlflowClient

    env, dashboard, uri, tmp, worker_pids = cluster
    (tmp / "removed.yaml").write_text(
        yaml.safe_dump(sweep_spec(trials=3, epochs=60, n=1500, retries=2, experiment="removed"))
    )
    cmd = (
        f"{BIN / 'veil'} sweep {tmp / 'removed.yaml'} --name removed --address auto --tracking-uri {uri} "
        f"--storage {tmp / 'sweeps'} --quiet --json"
    )
    nodes_at_start = {r.data.tags[TAG_NODE] for r in trial_runs(uri, "two-nodes", "two")}
    killed: dict[str, str] = {}
    gate = tmp / "hold"
    gate.touch()

    def kill_the_second_node_once_it_trains() -> bool:
        running = [r for r in trial_runs(uri, "removed", "removed") if r.info.status == "RUNNING"]
        if len({r.data.tags[TAG_NODE] for r in running}) < 2:
            return False  # wait until both nodes run a trial: the second node's is then cut off
        stop_pids(worker_pids)
        killed.update({r.data.tags[TAG_TRIAL]: r.data.tags[TAG_NODE] for r in running})
        gate.unlink()
        return True

    status, logs = submit(dashboard, cmd, timeout=600, while_running=kill_the_second_node_once_it_trains)
    assert killed, "both nodes never ran a trial at once"
    assert status == "SUCCEEDED", logs[-4000:]
    assert len(nodes_at_start) == 2
    trials = trial_runs(uri, "removed", "removed")
    assert sorted(r.data.tags[TAG_TRIAL] for r in trials) == sorted({r.data.tags[TAG_TRIAL] for r in trials})
    assert len(trials) == 3 and all(r.info.status == "FINISHED" for r in trials)
    c = MlflowClient(uri)
    everything = c.search_runs([c.get_experiment_by_name("removed").experiment_id], "")
    assert not [r.info.run_id for r in everything if r.info.status == "RUNNING"]
    retried = [
        r
        for r in trials
        if r.data.tags[TAG_TRIAL] in killed and killed[r.data.tags[TAG_TRIAL]] != r.data.tags[TAG_NODE]
    ]
    assert retried, (killed, [(r.data.tags[TAG_TRIAL], r.data.tags[TAG_NODE]) for r in trials])
