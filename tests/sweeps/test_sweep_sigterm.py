"""A sweep driver sent SIGTERM stops like Ctrl-C: Tune stops its trials, their child runs end KILLED and tagged
interrupted, the parent run ends KILLED and incomplete, the driver exits 143 with a `veil resume` hint and
leaves no Ray process behind; `veil resume` then finishes every trial once and clears the parent's stale tags."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid

import pytest
import yaml
from mlflow.tracking import MlflowClient
from test_resume import SPEC, ray_pids, resume_in_subprocess, stop_pids, trial_runs, veil_cmd

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TRIALS = 4


def test_sigterm_stops_the_sweep_and_resume_finishes_it(tmp_path):
    name = "terminated"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec_file = tmp_path / "sweep.yaml"
    spec_file.write_text(yaml.safe_dump({**SPEC, "trials": TRIALS}))
    storage = tmp_path / "sweeps"
    tag = uuid.uuid4().hex[:8]
    ray_tmp1, ray_tmp2 = f"/tmp/vst-{tag}-a", f"/tmp/vst-{tag}-b"  # short: Ray's socket paths have a length limit
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}
    driver = subprocess.Popen(
        veil_cmd("sweep", str(spec_file), "--name", name, "--tracking-uri", uri, "--storage", str(storage)),
        cwd=tmp_path,
        env={**env, "RAY_TMPDIR": ray_tmp1},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            assert driver.poll() is None, driver.communicate()[0][-4000:]
            status = {r.info.status for r in trial_runs(uri, name)} if (tmp_path / "mlflow.db").exists() else set()
            if {"FINISHED", "RUNNING"} <= status:  # one trial done, one in flight
                break
            time.sleep(0.3)
        else:
            pytest.fail("no trial finished with another in flight in 240 s")
        t0 = time.time()
        driver.send_signal(signal.SIGTERM)
        out, _ = driver.communicate(timeout=120)
        seconds = time.time() - t0
        left = ray_pids(ray_tmp1)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
        stop_pids(ray_pids(ray_tmp1, {driver.pid}))
    print(f"driver exited {driver.returncode} {seconds:.1f} s after SIGTERM")
    assert driver.returncode == 143, out[-4000:]
    assert f"continue it with `veil resume {name}`" in out and "Traceback" not in out
    assert not left, "Ray processes outlived the terminated driver"
    runs = trial_runs(uri, name)
    assert len(runs) < TRIALS and not [r for r in runs if r.info.status == "RUNNING"]
    # the trial in flight is KILLED (unless it finished while Tune was stopping)
    stopped = [r for r in runs if r.info.status != "FINISHED"]
    assert all(r.info.status == "KILLED" and r.data.tags["veil.interrupted"] == "true" for r in stopped)
    c = MlflowClient(tracking_uri=uri)
    parent_id = c.search_runs(
        [runs[0].info.experiment_id], f"tags.`veil.role` = 'sweep' and tags.`veil.sweep` = '{name}'"
    )[0].info.run_id
    parent = c.get_run(parent_id)
    assert parent.info.status == "KILLED" and parent.data.tags["veil.incomplete"] == "true"

    proc = resume_in_subprocess(name, storage, tmp_path, {**env, "RAY_TMPDIR": ray_tmp2})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["trials"] == TRIALS and summary["finished"] == TRIALS
    parent = c.get_run(parent_id)
    assert parent.info.status == "FINISHED"
    assert not {"error", "veil.incomplete", "veil.stopped"} & set(parent.data.tags)
