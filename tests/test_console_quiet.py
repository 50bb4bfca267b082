"""Quiet by default: a `veil run` from a fresh directory prints Veil's own lines and nothing of MLflow's or
Ray's chatter below warnings; `--verbose` lets it through. Each run is a fresh `veil` process (MLflow reads its
logging level when imported), from an empty directory with an empty cache (so MLflow builds its database, the
empty store new stores are copied from, and would say so)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from polling import wait_for
from sweep_procs import ray_pids, stop_pids

VEIL_LINE = re.compile(
    r"^$|^veil run  \S+ on \S+  \(executor \S+, [\d.]+ s\)$|^\|.*\|$|^utility_acc \d|^per node \(|^rounds \d+  bytes up "
    r"|^MLflow run [0-9a-f]{32} \(experiment \d+\) at sqlite:///"
    r"|^certificate (MET|NOT MET): target |^  \S+ <= [\d.]+: |^  note: |^no leakage target \(target: none\)|^n/a: nodes? "
)
"""Every line a `veil run` summary is made of (the audit tables are Markdown rows)."""
NOISE = ("Creating initial MLflow database tables", "Token authentication", "core_worker.cc", "INFO", "WARNING")


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A new user's environment: none of what Veil (or a run earlier in this process) sets for itself."""
    from veil.process_env import DEFAULTS

    drop = ("MLFLOW_", "VEIL_VERBOSE", "RAY_ADDRESS", *DEFAULTS)
    return {**{k: v for k, v in os.environ.items() if not k.startswith(drop)}, **(extra or {})}


def start(cwd: Path, *args: str, env: dict[str, str] | None = None, launcher: Path | None = None) -> subprocess.Popen:
    cmd = [sys.executable, *([str(launcher)] if launcher else ["-m", "veil.cli"]), *args]
    return subprocess.Popen(cmd, cwd=cwd, env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: int = 300) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def assert_only_veil_lines(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert [ln for ln in lines if not VEIL_LINE.match(ln)] == []
    assert not [n for n in NOISE if n in proc.stdout]
    assert lines[-1].startswith("MLflow run ")


def assert_no_name_added_beside_a_thread(writes: Path, veils: str) -> None:
    """The run's environment writes (`support/env_writes.py`): Veil's `veils`, MLflow's telemetry switch and
    Ray's PYTHONBREAKPOINT among them, and none that added a name while another Python thread was alive."""
    recorded = [json.loads(line) for line in writes.read_text().splitlines()]
    assert [w for w in recorded if w["op"] == "set" and w["new"] and w["others"]] == []
    assert {veils, "MLFLOW_DISABLE_TELEMETRY", "PYTHONBREAKPOINT"} <= {w["key"] for w in recorded}


PCA = ["run", "-m", "pca", "-d", "gaussian-quadrant", "-p", "n=400", "--set", "audit.epochs=2"]


def test_run_prints_only_veils_lines(tmp_path):
    for name in ("quiet", "verbose"):
        (tmp_path / name).mkdir()
    procs = tuple(  # side by side
        start(tmp_path / name, *PCA, *flags, env={"VEIL_CACHE_DIR": str(tmp_path / f"cache-{name}")})
        for name, flags in (("quiet", ()), ("verbose", ("--verbose",)))
    )
    quiet, loud = map(finish, procs)
    assert_only_veil_lines(quiet)
    assert quiet.stdout.splitlines()[1].startswith("veil run  pca on gaussian-quadrant  (executor inline, ")
    assert loud.returncode == 0
    assert "INFO mlflow.store.db.utils: Creating initial MLflow database tables" in loud.stderr


@pytest.mark.ray
@pytest.mark.slow
def test_federated_run_on_ray_prints_only_veils_lines(tmp_path):
    """Nodes in Ray actors (runtime virtual): no forwarded worker lines (`core_worker.cc ... E`), no notice of
    Ray's token authentication; and no other thread ran while a name was added to the environment."""
    ray_tmp = f"/tmp/vq-{uuid.uuid4().hex[:8]}"  # Ray's socket paths have a length limit
    args = ["run", "-m", "d-eigan", "-d", "gaussian-nodes", "--set", "K=4", "--set", "epochs=2", "--target", "none"]
    writes = tmp_path / "env-writes.jsonl"
    env = {"RAY_TMPDIR": ray_tmp, "VEIL_TEST_ENV_WRITES": str(writes)}
    try:
        proc = finish(start(tmp_path, *args, "--set", "audit.epochs=2", "--quiet", env=env, launcher=ENV_WRITES))
    finally:
        stop_pids(ray_pids(ray_tmp))
    assert_only_veil_lines(proc)
    assert "executor federated:virtual" in proc.stdout and "rounds 2  bytes up " in proc.stdout
    assert_no_name_added_beside_a_thread(writes, "RAY_OVERRIDE_JOB_RUNTIME_ENV")


ENV_WRITES = Path(__file__).parent / "support" / "env_writes.py"
SLOW_SWEEP = """\
method: gpp
dataset: gaussian-correlated
dataset_params: {n: 1000}
params: {epochs: 300, encoder_hidden: [16], head_hidden: [8]}
audit: {epochs: 2, hidden: [8]}
space: {beta: {type: log, low: 0.1, high: 2}}
objectives: [{metric: utility_auc, direction: max}, {metric: privacy_gap, direction: min}]
trials: 4
concurrency: 1
"""


@pytest.mark.ray
@pytest.mark.slow
def test_interrupted_sweep_ends_with_veils_resume_hint(tmp_path):
    """Ctrl-C: Tune stops the sweep; its `Tuner.restore(...)` advice is not shown, Veil's hint comes last. Up to
    there no other thread ran while a name was added to the environment (a rare SIGSEGV at start: process_env)."""
    (tmp_path / "slow.yaml").write_text(SLOW_SWEEP)
    ray_tmp = f"/tmp/vq-{uuid.uuid4().hex[:8]}"
    log, writes = tmp_path / "sweep.log", tmp_path / "env-writes.jsonl"
    with open(log, "w") as out:
        driver = subprocess.Popen(
            [sys.executable, str(ENV_WRITES), "sweep", "slow.yaml", "--name", "cut"],
            cwd=tmp_path,
            env=_env({"RAY_TMPDIR": ray_tmp, "VEIL_TEST_ENV_WRITES": str(writes)}),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:

            def running() -> None:
                assert driver.poll() is None, log.read_text()[-3000:]

            wait_for("the first trial's start line", lambda: "] start  #1 " in log.read_text(), 240, running)
            driver.send_signal(signal.SIGINT)
            assert driver.wait(timeout=180) == 1
        finally:
            if driver.poll() is None:
                driver.kill()
            stop_pids(ray_pids(ray_tmp))
    text = log.read_text()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[-1] == "error: the sweep was interrupted before every trial ran; continue it with `veil resume cut`"
    assert "Tuner.restore" not in text and "Token authentication" not in text
    assert_no_name_added_beside_a_thread(writes, "TUNE_GLOBAL_CHECKPOINT_S")


def test_warnings_go_through_the_veil_logger(capsys):
    """Veil's warnings are records of the 'veil' logger (issue 27: they were bare prints): on stderr in Veil's
    style by default, and silenced or captured by the user's own logging configuration."""
    import logging

    from veil.console import warn

    warn("first")
    assert capsys.readouterr().err == "[veil] warning: first\n"
    log = logging.getLogger("veil")
    log.setLevel(logging.ERROR)
    try:
        warn("second")
        assert capsys.readouterr().err == ""
    finally:
        log.setLevel(logging.INFO)
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    log.addHandler(handler)
    try:
        warn("third")
    finally:
        log.removeHandler(handler)
    assert seen == ["third"] and capsys.readouterr().err == "[veil] warning: third\n"
