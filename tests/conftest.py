"""Shared fixtures: an isolated dataset cache, a real local Ray and a real MLflow server on 127.0.0.1.
Each fixture stops only the processes it started."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch

from veil.tracking.ui import free_port

torch.set_num_threads(1)  # 2-core CI: one thread per process keeps Ray workers and probes from thrashing


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory):
    os.environ["VEIL_CACHE_DIR"] = str(tmp_path_factory.mktemp("veil-cache"))
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    yield


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test from an empty working directory (the embedded MLflow store lands there)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def unused_port() -> int:
    """A port on 127.0.0.1 nothing listens on (as of now)."""
    return free_port()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory):
    """A real `mlflow server` bound to 127.0.0.1 with a sqlite store; yields its URI."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    exe = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [
            exe,
            "server",
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--default-artifact-root",
            str(root / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError("mlflow server did not answer /health within 120 s")
        yield uri
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        log.close()


@pytest.fixture(scope="session")
def ray_local(tmp_path_factory: pytest.TempPathFactory):
    """A real local Ray (2 CPUs, no dashboard) in its own temp dir; shut down at the end of the session."""
    import ray

    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    tmp = Path("/tmp") / f"veil-ray-{os.getpid()}"  # short path: Ray's socket names have a length limit
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(tmp),
        configure_logging=False,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
    )
    yield ray
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)
