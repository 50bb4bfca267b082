"""The MLflow UI on the store Veil logged to, and links into it.

MLflow 3.17's UI picks its GenAI or its model-training view from the page URL's `workflowType` parameter, else
the browser's last choice, else GenAI (the experiment tag `mlflow.experimentKind` no longer decides it), so every
link built here carries `workflowType=machine_learning`. A runs-table view (filter, sort, columns) saved as the
experiment tag `mlflow.sharedViewState.<key>` opens with `viewStateShareKey=<key>` in the URL; the UI's own
"share" button stores views the same way."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO
from urllib.parse import quote

from veil.errors import ConfigError, VeilError
from veil.tracking.mlflow_run import (
    TrackedRun,
    check_tracking,
    health_problem,
    local_artifact_root,
    local_store,
    seed_uri,
)

ML_VIEW = "workflowType=machine_learning"
SHARED_VIEW_TAG = "mlflow.sharedViewState."
HOST = "127.0.0.1"
START_TIMEOUT_S = 180.0

Link = tuple[str, str]
"""(what it shows, a path relative to the UI's root such as '#/experiments/1/runs/<id>?...')."""


class UIError(VeilError):
    """The MLflow UI could not be started or reached."""


# ----------------------------------------------------------------------------------------------
# links


def run_path(experiment_id: str, run_id: str) -> str:
    """A run's page (description, params, metrics, artifacts), relative to the UI's root."""
    return f"#/experiments/{experiment_id}/runs/{run_id}?{ML_VIEW}"


def runs_path(experiment_id: str, view_key: str | None = None) -> str:
    """An experiment's runs table, in the view saved under `view_key` when given."""
    path = f"#/experiments/{experiment_id}/runs?{ML_VIEW}"
    return path + (f"&viewStateShareKey={quote(view_key, safe='')}" if view_key else "")


def column(kind: str, name: str) -> str:
    """The runs table's id of a column: kind 'params' | 'metrics' | 'tags'."""
    return f"{kind}.`{name}`"


def runs_view_state(search_filter: str, order_by: str, ascending: bool, columns: Sequence[str]) -> dict[str, Any]:
    """A runs-table view: MLflow's search filter, the column to sort by (a `column()` id), the columns shown."""
    return {
        "searchFilter": search_filter,
        "orderByKey": order_by,
        "orderByAsc": ascending,
        "selectedColumns": list(columns),
        "runsHiddenMode": "SHOW_ALL",
    }


def save_runs_view(run: TrackedRun, key: str, state: Mapping[str, Any]) -> None:
    """Store a runs-table view on `run`'s experiment (through the run, so a server that is away gets it from the
    run's journal); `runs_path(experiment_id, key)` opens it."""
    run.set_experiment_tag(SHARED_VIEW_TAG + key, json.dumps(dict(state)))


# ----------------------------------------------------------------------------------------------
# the server


def is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def check_port(port: int) -> None:
    """Refuse a port another process holds on 127.0.0.1 (the flag named, before anything starts)."""
    if not 0 < port < 65536:
        raise ConfigError("--port", port, "a TCP port, 1..65535 (or leave it out for a free one)")
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            raise ConfigError("--port", port, f"a port free on {HOST} (this one is in use)") from None


def healthy(base_url: str, timeout: float = 3.0) -> bool:
    return health_problem(base_url, timeout) is None


def server_command(uri: str, port: int) -> list[str]:
    """`mlflow server` on `uri`, bound to 127.0.0.1, with the artifact root Veil's runs use for that store."""
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", HOST, "--port", str(port)]
    root = local_artifact_root(uri)
    if root is None and (store := local_store(uri)) is not None:
        root = store.resolve().as_uri()  # a file store keeps artifacts inside its own directory
    if root:
        cmd += ["--default-artifact-root", root]
    return cmd + ["--workers", "1"]


def start_server(uri: str, port: int, log: Path) -> subprocess.Popen:
    """Start `mlflow server` in its own session (Ctrl-C reaches Veil, which stops it); output goes to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    seed_uri(uri)
    with open(log, "w") as out:
        return subprocess.Popen(server_command(uri, port), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_ready(base_url: str, proc: subprocess.Popen, log: Path, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise UIError(f"the MLflow UI exited with status {proc.returncode} (log {log}):\n{tail}")
        if healthy(base_url):
            return
        time.sleep(0.5)
    raise UIError(f"the MLflow UI did not answer {base_url}/health within {timeout:.0f} s (log {log})")


def stop_server(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the server's process group (it started it), SIGKILL what is left after `grace` seconds."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def _print_links(base_url: str, links: Sequence[Link], out: TextIO) -> None:
    width = max((len(what) for what, _ in links), default=0)
    for what, path in links:
        print(f"  {what.ljust(width)}  {base_url}/{path}", file=out)


def serve(
    tracking_uri: str | None,
    *,
    port: int | None = None,
    links: Callable[[str], Sequence[Link]],
    log: Path = Path(".veil") / "mlflow-ui.log",
    out: TextIO | None = None,
) -> int:
    """`veil ui`: a tracking server URI is only checked and linked to; a local store (the embedded default
    sqlite:///<cwd>/mlflow.db, another sqlite file, a file store) gets `mlflow server` on 127.0.0.1, in the
    foreground until Ctrl-C (or SIGTERM), then stopped. `links(uri)` names the pages worth opening. Never
    opens a browser."""
    out = out or sys.stdout  # looked up per call: a default bound at import would miss a later redirection
    uri = check_tracking(tracking_uri)  # as every command: a scheme MLflow lacks, or a server away, is refused here
    if is_server(uri):
        base = uri.rstrip("/")
        print(f"MLflow UI at {base}", file=out)
        _print_links(base, links(uri), out)
        return 0
    store = local_store(uri)
    if store is not None and not store.exists():
        raise ConfigError(
            "--tracking-uri",
            uri,
            f"an MLflow store that exists ({store} does not: run a sweep first, e.g. "
            "`veil sweep sweeps/quickstart.yaml`, or pass the store it logged to)",
        )
    if port is None:
        port = free_port()
    else:
        check_port(port)
    base = f"http://{HOST}:{port}"
    found = links(uri)  # before the server starts: the store is read directly, and a bad one fails fast
    print(f"starting the MLflow UI on {uri} (about 20 s; log {log})", file=out, flush=True)
    proc = start_server(uri, port, log)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        wait_ready(base, proc, log)
        print(f"MLflow UI at {base} (Ctrl-C stops it)", file=out)
        _print_links(base, found, out)
        out.flush()
        proc.wait()
        raise UIError(f"the MLflow UI exited with status {proc.returncode} (log {log})")
    except KeyboardInterrupt:
        print("stopping the MLflow UI", file=out, flush=True)
        return 0
    finally:
        stop_server(proc)
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


__all__ = [
    "ML_VIEW",
    "SHARED_VIEW_TAG",
    "UIError",
    "column",
    "run_path",
    "runs_path",
    "runs_view_state",
    "save_runs_view",
    "serve",
]
