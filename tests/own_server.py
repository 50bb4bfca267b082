"""A real `mlflow server` that a test owns: it can kill it (SIGKILL, as a crash) and start it again on the same
port and stores (tests/tracking, tests/chaos). The session's `mlflow_server` fixture is shared and never killed."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from polling import wait_for
from veil.tracking.mlflow_run import seed_store
from veil.tracking.server import free_port


class OwnServer:
    """`mlflow server` on `host`:`port` (127.0.0.1 unless said) with a sqlite store and a local artifact root under
    `root`; `script=True` starts it as users do, through mlflow/start-server.sh."""

    def __init__(self, root: Path, host: str = "127.0.0.1", script: bool = False) -> None:
        self.root, self.port, self.host, self.script = root, free_port(), host, script
        self.uri = f"http://{host}:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> None:
        exe = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
        if self.script:
            cmd = ["bash", str(Path(__file__).resolve().parents[1] / "mlflow" / "start-server.sh")]
            env = {"MLFLOW_HOST": self.host, "MLFLOW_PORT": str(self.port), "MLFLOW_ROOT": str(self.root)}
            env |= {"MLFLOW_WORKERS": "1", "MLFLOW_BIN": exe}
        else:
            seed_store(self.root / "mlflow.db")
            cmd = [exe, "server", "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}"]
            cmd += ["--default-artifact-root", str(self.root / "artifacts"), "--host", self.host]
            cmd += ["--port", str(self.port), "--workers", "1"]
            env = {}
        with open(self.root / "server.log", "a") as log:
            self.proc = subprocess.Popen(
                cmd,
                env={**os.environ, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: kill() reaches the workers too
            )
        wait_for(f"mlflow server at {self.uri} answering /health", self._healthy, timeout, self._running)

    def _running(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited: {(self.root / 'server.log').read_text()[-2000:]}")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL the server's process group (a crash: nothing is flushed or closed) and wait for it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=20)

    def stop(self) -> None:
        """SIGTERM the server's process group (SIGKILL after 20 s) and wait for it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()
