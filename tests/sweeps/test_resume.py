"""`veil resume` after the sweep's driver is SIGKILLed mid-sweep: finished trials are kept, trials in flight
run again and supersede their orphaned MLflow child runs, and every trial is counted exactly once, in MLflow
and in `veil report`. The sweep runs in a subprocess that starts its own local Ray under its own temp dir;
the test stops exactly those Ray processes (found by that path, plus their descendants) by PID."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TRIALS = 12
SPEC = {  # about 4-5 s per trial on one core (once warm, trials no longer re-parse the spec), so the kill lands mid-sweep
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "dataset_params": {"n": 1500},
    "params": {"epochs": 80, "lr": 1.0e-3, "encoder_hidden": [32], "head_hidden": [8], "d_z": 4},
    "audit": {"epochs": 3, "hidden": [16]},
    "space": {"beta": {"type": "log", "low": 0.05, "high": 8}},
    "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "adversary_auc", "direction": "min"}],
    "sampler": "nsga2",
    "sampler_options": {"population_size": 4},
    "trials": TRIALS,
    "concurrency": 2,
    "resources": {"cpus": 1},
}


def veil_cmd(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "veil"), *args]


def resume_in_subprocess(name: str, storage: Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`veil resume NAME --json --quiet` in a new process; the Ray processes it started (under env's RAY_TMPDIR)
    are stopped whatever happens."""
    try:
        return subprocess.run(
            veil_cmd("resume", name, "--storage", str(storage), "--json", "--quiet"),
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
    finally:
        stop_pids(ray_pids(env["RAY_TMPDIR"]))


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) for every process we can read."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (d / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out[int(d.name)] = (ppid, cmd)
    return out


def ray_pids(marker: str, roots: set[int] = frozenset()) -> set[int]:
    """Processes whose command line names `marker` (the cluster's temp dir), the `roots`, and all their
    descendants (Ray workers rename themselves 'ray::...', so they are found as the raylet's children)."""
    table = _proc_table()
    found = {pid for pid, (_, cmd) in table.items() if marker in cmd} | {p for p in roots if p in table}
    grew = True
    while grew:
        kids = {pid for pid, (ppid, _) in table.items() if ppid in found} - found
        found |= kids
        grew = bool(kids)
    found.discard(os.getpid())
    return found


def stop_pids(pids: set[int]) -> None:
    """SIGTERM, wait up to 2 s, then SIGKILL what is left (gcs_server ignores SIGTERM)."""
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + wait
        while time.time() < deadline and any(Path(f"/proc/{p}").exists() and _alive(p) for p in pids):
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def trial_runs(uri: str, name: str) -> list:
    from veil.sweeps.results import TAG_ROLE, search_runs

    return [r for r in search_runs(uri, f"tags.`veil.sweep` = '{name}'") if r.data.tags.get(TAG_ROLE) == "trial"]


def test_resume_after_driver_kill(tmp_path):
    from mlflow.tracking import MlflowClient

    name = "killed"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec_file = tmp_path / "resume.yaml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    storage = tmp_path / "sweeps"
    tag = uuid.uuid4().hex[:8]
    ray_tmp1, ray_tmp2 = f"/tmp/vrs-{tag}-a", f"/tmp/vrs-{tag}-b"  # short: Ray's socket paths have a length limit
    base_env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}
    log1 = open(tmp_path / "sweep.log", "w")
    driver = subprocess.Popen(
        veil_cmd("sweep", str(spec_file), "--name", name, "--tracking-uri", uri, "--storage", str(storage)),
        cwd=tmp_path,
        env={**base_env, "RAY_TMPDIR": ray_tmp1},
        stdout=log1,
        stderr=subprocess.STDOUT,
    )
    exp_dir = storage / name
    before_kill: set[str] = set()
    t0 = time.time()
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            assert driver.poll() is None, (tmp_path / "sweep.log").read_text()[-4000:]
            if list(exp_dir.glob("experiment_state-*.json")) and (tmp_path / "mlflow.db").exists():
                done = {r.data.tags["veil.trial_id"] for r in trial_runs(uri, name) if r.info.status == "FINISHED"}
                if len(done) >= 2:
                    time.sleep(2.5)  # let Tune's 2-second snapshot catch up with what finished
                    before_kill = {
                        r.data.tags["veil.trial_id"] for r in trial_runs(uri, name) if r.info.status == "FINISHED"
                    }
                    break
            time.sleep(0.3)
        else:
            pytest.fail("the sweep did not finish 2 trials in 240 s")
        assert driver.poll() is None, "the sweep finished before it could be killed; make trials slower"
        driver.send_signal(signal.SIGKILL)  # the driver dies; its Ray processes linger
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
        stop_pids(ray_pids(ray_tmp1, {driver.pid}))
        log1.close()
    assert not ray_pids(ray_tmp1), "leftover Ray processes of the killed sweep"
    print(f"killed after {time.time() - t0:.1f} s")
    runs_at_kill = trial_runs(uri, name)
    assert len({r.data.tags["veil.trial_id"] for r in runs_at_kill}) < TRIALS

    proc = resume_in_subprocess(name, storage, tmp_path, {**base_env, "RAY_TMPDIR": ray_tmp2})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    print(f"resumed and finished after {time.time() - t0:.1f} s")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "] start " not in proc.stdout  # the restored progress monitor honours this process's --quiet
    assert summary["trials"] == TRIALS and summary["finished"] == TRIALS and summary["failed"] == 0

    runs = trial_runs(uri, name)
    live = [r for r in runs if r.data.tags.get("veil.superseded") != "true"]
    ids = [r.data.tags["veil.trial_id"] for r in live]
    assert len(ids) == TRIALS and len(set(ids)) == TRIALS, "each trial exactly once among live child runs"
    assert all(r.info.status == "FINISHED" for r in live)
    superseded = [r for r in runs if r.data.tags.get("veil.superseded") == "true"]
    assert all(r.info.status in ("KILLED", "FINISHED", "FAILED") for r in superseded)
    rerun = {r.data.tags["veil.trial_id"] for r in superseded}
    assert before_kill - rerun, "at least one trial finished before the kill is kept, not run again"
    assert len(superseded) <= len(runs_at_kill)

    parent = MlflowClient(uri).get_run(summary["parent_run_id"])
    assert parent.info.status == "FINISHED" and parent.data.metrics["n_trials"] == TRIALS

    out = tmp_path / "report"
    rep = subprocess.run(
        veil_cmd("report", name, "--storage", str(storage), "--out", str(out)),
        cwd=tmp_path,
        env=base_env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert rep.returncode == 0, rep.stderr[-3000:]
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == TRIALS and trials["trial_id"].is_unique and (trials["status"] == "FINISHED").all()
    # trial numbers are Tune's creation counter: the killed sweep's progress lines and the report agree
    started = re.findall(r"\] start  #(\d+) (\w+)", (tmp_path / "sweep.log").read_text())
    number = dict(zip(trials["trial_id"], trials["trial"]))
    assert before_kill <= {tid for _, tid in started}
    assert all(number[tid] == int(n) for n, tid in started if tid in number)
    assert sorted(trials["trial"]) == list(range(1, TRIALS + 1))
