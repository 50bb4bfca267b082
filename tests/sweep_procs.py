"""Helpers shared by the tests that run `veil sweep` / `veil resume` in a subprocess (tests/sweeps, tests/chaos):
start a sweep under its own Ray temp dir, wait on an observable condition, stop exactly the processes it
started (found by that temp dir, plus their descendants) by PID, and read its trial runs back from MLflow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Any

import yaml


def veil_cmd(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "veil"), *args]


def base_env() -> dict[str, str]:
    """This process's environment without a Ray address or a tracking URI (each test names its own)."""
    return {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}


def ray_tmp(prefix: str) -> str:
    """A fresh, short Ray temp dir (Ray's socket paths have a length limit)."""
    return f"/tmp/{prefix}-{uuid.uuid4().hex[:8]}"


def write_spec(folder: Path, spec: dict[str, Any], name: str = "sweep.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(spec))
    return path


def start_sweep(
    spec_file: Path,
    name: str,
    uri: str,
    storage: Path,
    cwd: Path,
    ray_dir: str,
    out: IO[str] | int,
    *extra: str,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """`veil sweep SPEC --name NAME` in a new process with its own local Ray under `ray_dir` (`env`: added to
    the environment, e.g. a failpoint)."""
    return subprocess.Popen(
        veil_cmd("sweep", str(spec_file), "--name", name, "--tracking-uri", uri, "--storage", str(storage), *extra),
        cwd=cwd,
        env={**base_env(), "RAY_TMPDIR": ray_dir, **(env or {})},
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
    )


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


def last_json(stdout: str) -> dict[str, Any]:
    """The JSON summary `--json` prints as the last stdout line."""
    return json.loads(stdout.strip().splitlines()[-1])


def stop_driver(driver: subprocess.Popen, ray_dir: str) -> None:
    """Kill the driver if it still runs, then every Ray process it left under `ray_dir`."""
    if driver.poll() is None:
        driver.kill()
        driver.wait(timeout=30)
    stop_pids(ray_pids(ray_dir, {driver.pid}))


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line and environment) for every process we can read."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cmd += " " + (d / "environ").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (d / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out[int(d.name)] = (ppid, cmd)
    return out


def ray_pids(marker: str, roots: set[int] = frozenset()) -> set[int]:
    """Processes whose command line or environment names `marker` (the cluster's temp dir, its RAY_TMPDIR), the
    `roots`, and all their descendants (Ray workers rename themselves 'ray::...', so they are found as the raylet's
    children; Ray's client server outlives its parent, so only its environment names the cluster)."""
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
        while time.time() < deadline and any(alive(p) for p in pids):
            time.sleep(0.1)


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def trial_runs(uri: str, name: str) -> list:
    """Every trial child run of sweep `name` (superseded ones included)."""
    from veil.sweeps.results import TAG_ROLE, search_runs

    return [r for r in search_runs(uri, f"tags.`veil.sweep` = '{name}'") if r.data.tags.get(TAG_ROLE) == "trial"]


def sweep_runs(uri: str, name: str) -> list:
    """Every run of sweep `name`: its parent and its trials."""
    from veil.sweeps.results import search_runs

    return list(search_runs(uri, f"tags.`veil.sweep` = '{name}'"))
