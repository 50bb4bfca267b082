"""`veil ui` for real: on the embedded store of a working directory it starts `mlflow server` on 127.0.0.1 only,
prints the latest sweep's links and stops the server on Ctrl-C; on a tracking server it only prints the links;
a missing store or a busy port is refused with the flag named."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from veil.cli import main
from veil.sweeps.results import TAG_ROLE, TAG_SWEEP
from veil.tracking import TrackedRun
from veil.tracking.server import free_port

SRC = str(Path(__file__).resolve().parents[2] / "src")


def listening_addresses(port: int) -> set[str]:
    """Local IPv4/IPv6 addresses with a socket LISTENing on `port` (from /proc/net/tcp*)."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                out.add(addr)
    return out


def server_session(port: int) -> list[str]:
    """The command lines of the processes in the session of the `mlflow server` on `port` (from /proc)."""
    procs: dict[int, tuple[int, str]] = {}
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit():
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                procs[int(p.name)] = (os.getsid(int(p.name)), cmd)
        except OSError:  # gone meanwhile
            continue
    sids = {sid for sid, cmd in procs.values() if "mlflow server" in cmd and f"--port {port} " in cmd}
    return [cmd for sid, cmd in procs.values() if sid in sids]


def fake_sweep(uri: str, name: str) -> TrackedRun:
    parent = TrackedRun.start(uri, "veil", name, tags={TAG_ROLE: "sweep", TAG_SWEEP: name})
    parent.finish()
    return parent


def test_ui_serves_the_embedded_store_on_loopback_and_stops_on_ctrl_c(tmp_path):
    parent = fake_sweep(f"sqlite:///{tmp_path / 'mlflow.db'}", "quick-1")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC, "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", None)  # what `veil ui` gives its server, not the suite's
    proc = subprocess.Popen(
        [sys.executable, "-m", "veil.cli", "ui", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.time() + 240
        while time.time() < deadline and not any("its trials as a table" in ln for ln in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip())
        text = "\n".join(lines)
        base = f"http://127.0.0.1:{port}"
        assert f"MLflow UI at {base} (Ctrl-C stops it)" in text, text
        run_url = f"{base}/#/experiments/{parent.experiment_id}/runs/{parent.run_id}?workflowType=machine_learning"
        assert f"latest sweep quick-1, front and summary:  {run_url}" in text
        assert "viewStateShareKey=veil-quick-1" in text
        assert f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}" in text  # the cwd's embedded store
        with urllib.request.urlopen(f"{base}/ajax-api/2.0/mlflow/runs/get?run_id={parent.run_id}", timeout=10) as r:
            assert parent.run_id in r.read().decode()  # the server reads that store
        assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
        commands = server_session(port)
        assert any("uvicorn" in c for c in commands), commands
        assert not any("huey" in c or "_job_runner" in c for c in commands), commands  # no MLflow job workers
        assert (tmp_path / ".veil" / "mlflow-ui.log").exists()

        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal does
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "stopping the MLflow UI" in rest
        assert listening_addresses(port) == set()  # the server it started is gone
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_ui_on_a_tracking_server_prints_links_and_returns(mlflow_server, capsys):
    parent = fake_sweep(mlflow_server, "remote-1")
    assert main(["ui", "--tracking-uri", mlflow_server]) == 0
    out = capsys.readouterr().out
    assert f"MLflow UI at {mlflow_server}\n" in out
    assert (
        f"{mlflow_server}/#/experiments/{parent.experiment_id}/runs/{parent.run_id}?workflowType=machine_learning"
        in out
    )


def test_ui_refuses_a_missing_store_and_a_busy_port(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["ui"]) == 2
    err = capsys.readouterr().err
    assert "--tracking-uri" in err and f"{tmp_path.resolve() / 'mlflow.db'} does not" in err
    assert not (tmp_path / "mlflow.db").exists()  # nothing created

    fake_sweep(f"sqlite:///{tmp_path / 'mlflow.db'}", "s")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["ui", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert "--port" in err and "in use" in err and str(port) in err
    assert not (tmp_path / ".veil" / "mlflow-ui.log").exists()  # refused before anything started


@pytest.mark.parametrize("port", [0, 70000])
def test_ui_port_must_be_a_tcp_port(tmp_path, monkeypatch, capsys, port):
    monkeypatch.chdir(tmp_path)
    fake_sweep(f"sqlite:///{tmp_path / 'mlflow.db'}", "s")
    assert main(["ui", "--port", str(port)]) == 2
    assert "1..65535" in capsys.readouterr().err


def test_ui_refuses_an_unknown_scheme_and_an_absent_server_as_other_commands_do(
    tmp_path, monkeypatch, capsys, unused_port
):
    monkeypatch.chdir(tmp_path)
    assert main(["ui", "--tracking-uri", "foo://x"]) == 2  # was MLflow's UnsupportedModelRegistryStoreURIException
    err = capsys.readouterr().err
    assert "invalid value for '--tracking-uri': 'foo://x' (allowed: a URI with scheme http, https, sqlite" in err
    assert "Traceback" not in err
    assert main(["ui", "--tracking-uri", f"http://127.0.0.1:{unused_port}"]) == 2
    err = capsys.readouterr().err
    assert "--tracking-uri: the MLflow tracking store" in err and "nothing was started" in err
    assert list(tmp_path.iterdir()) == []  # no store, no log
