"""`veil run` sent SIGTERM or SIGHUP mid-training ends like Ctrl-C: the MLflow run is KILLED with the signal
recorded (not RUNNING forever), the process exits promptly with 128 + the signal number and no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from polling import first_run_logged

LONG = ["--set", "n=2000", "--set", "epochs=500", "--set", "audit.epochs=1", "--quiet", "--target", "none"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_ends_the_run_killed(tmp_path, sig):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "veil.cli", "run", "-m", "gpp", "-d", "gaussian-correlated", *LONG],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run_id = first_run_logged(uri, proc, timeout=120)
        t0 = time.time()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        seconds = time.time() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"{sig.name}: exit {proc.returncode} {seconds:.1f} s after the signal")
    assert proc.returncode == 128 + sig, err[-3000:]
    assert seconds < 15, seconds
    assert f"interrupted (received {sig.name})" in err and "Traceback" not in err
    run = MlflowClient(tracking_uri=uri).get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags["error"] == f"Terminated: received {sig.name}"
    assert "loss/encoder" in run.data.metrics  # what was logged before the signal stays
