"""A `veil run` loses nothing when its tracking server dies mid-run, and no run stays RUNNING after its process
was SIGKILLed: real `veil run` processes, a real `mlflow server` this test kills (SIGKILL) and starts again."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from polling import first_run_logged
from veil.cli import main
from veil.tracking.journal import Journal, pending

EPOCHS = 15
# small nets on 300 training rows; each run is held after its first epoch (start_run), so the test strikes mid-training
RUN = ["run", "-m", "gpp", "-d", "gaussian-quadrant", "-p", "n=400", "--set", f"epochs={EPOCHS}"]
RUN += [
    "--set",
    "encoder_hidden=[16]",
    "--set",
    "head_hidden=[8]",
    "--set",
    "audit.epochs=2",
    "--quiet",
    "--target",
    "none",
]


def start_run(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """`veil run` in a new process with Veil's own MLflow HTTP retries (none of this test's), its stderr in
    cwd/stderr.txt. It pauses after its first epoch while cwd/hold exists (the test suite's pause, tests/veil_test_hooks.py), so
    the test strikes mid-training on any machine speed; `release` lets it go on."""
    from veil_test_hooks import hold_env

    (cwd / "hold").touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP_REQUEST_")}
    env.update(hold_env(cwd / "hold"))
    with open(cwd / "stderr.txt", "w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "veil.cli", *RUN, *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


def release(cwd: Path) -> None:
    (cwd / "hold").unlink()


@pytest.mark.slow  # two `mlflow server` starts (~15-50 s each here) around a 15-epoch run
def test_server_killed_mid_run_journal_then_sync(own_mlflow_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # this test's own client: no retries on a dead server
    server = own_mlflow_server
    c = MlflowClient(tracking_uri=server.uri)
    proc = start_run(tmp_path, "--tracking-uri", server.uri, "--json")
    try:
        run_id = first_run_logged(server.uri, proc, "loss/encoder")
        server.kill()
        killed_at = time.time()
        release(tmp_path)
        out, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    exited_after = time.time() - killed_at
    err = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["run_id"] == run_id
    assert err.count("stopped answering") == 1 and "veil sync" in err and "Traceback" not in err

    j = Journal.find(run_id, tmp_path / ".veil" / "journal")
    assert j is not None and j.closed()
    # the drop was noticed within seconds: one epoch plus MLflow's 2 short retries (not ~249 s per call)
    noticed = j.meta()["created"] - killed_at
    assert noticed < 30, f"the journal was opened {noticed:.1f} s after the kill"
    ops = j.ops()
    journaled = [m for op in ops if op["op"] == "metrics" for m in op["metrics"]]
    assert {"loss/encoder", "utility_auc", "adversary_auc"} <= {m[0] for m in journaled}
    arts = {f"{op['dir']}/{Path(f).name}" for op in ops if op["op"] == "artifact" for f in op["files"]}
    assert {"audit/report.json", "model/state.pt", "model/config.json"} <= arts
    assert ops[-1]["op"] == "end" and ops[-1]["status"] == "FINISHED"
    assert exited_after < 240, f"exit {exited_after:.0f} s after the kill"  # the remaining epochs and the audit

    server.start()
    assert c.get_run(run_id).info.status == "RUNNING"  # the server knows only what came before the drop
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["sync", "--tracking-uri", server.uri]) == 0
    table = capsys.readouterr().out
    assert run_id in table and "FINISHED" in table and "synced" in table
    run = c.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["veil.late"] == "true"
    assert run.data.params["method"] == "gpp" and "utility_auc" in run.data.metrics
    assert [m.step for m in c.get_metric_history(run_id, "loss/encoder")] == list(range(EPOCHS))
    report = json.loads(Path(c.download_artifacts(run_id, "audit/report.json", str(tmp_path))).read_text())
    assert report  # readable JSON from the server's artifact store
    assert pending(tmp_path / ".veil" / "journal") == []

    assert main(["sync", "--tracking-uri", server.uri]) == 0  # a second sync has nothing left to do
    assert "nothing to sync" in capsys.readouterr().out
    assert [m.step for m in c.get_metric_history(run_id, "loss/encoder")] == list(range(EPOCHS))


def test_sigkilled_run_is_closed_by_the_next_sync(in_tmp, capsys):
    store = f"sqlite:///{in_tmp / 'mlflow.db'}"
    c = MlflowClient(tracking_uri=store)
    proc = start_run(in_tmp)
    try:
        run_id = first_run_logged(store, proc, "loss/encoder")
        proc.send_signal(signal.SIGKILL)  # no handler runs: the run stays RUNNING
        proc.wait(timeout=30)
    finally:
        proc.kill()
    run = c.get_run(run_id)
    assert run.info.status == "RUNNING" and run.data.tags["veil.pid"] == str(proc.pid)
    assert main(["sync"]) == 0
    assert run_id in capsys.readouterr().out
    run = c.get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags["error"] == (
        f"process {proc.pid} on {socket.gethostname()} ended without closing the run (found by veil sync)"
    )
    assert main(["sync"]) == 0 and "nothing to sync" in capsys.readouterr().out


@pytest.fixture(autouse=True)
def _no_stray_journal_env(monkeypatch):
    monkeypatch.delenv("VEIL_JOURNAL_DIR", raising=False)
