"""What Veil sets in its own environment (`veil.process_env`): its defaults only where the user set nothing, and
the same values handed to Ray's workers, which on another node inherit nothing from the driver. (That the writes
happen before any other thread runs is checked on real `veil` processes in tests/test_console_quiet.py.)"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

from veil import process_env


def test_settle_sets_what_the_user_did_not(monkeypatch):
    for key in process_env.DEFAULTS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")  # the user's choice wins
    process_env.settle()
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "false"
    assert os.environ["RAY_USAGE_STATS_ENABLED"] == "0" and os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2"
    assert process_env.settled() == {**process_env.DEFAULTS, "MLFLOW_DISABLE_TELEMETRY": "false"}


def test_rays_workers_get_the_drivers_settled_values(monkeypatch):
    """ensure_ray hands the settled values (the user's override included) to every worker, with the thread caps
    and the journal's path (unit test: `ray` is a stub that records its init)."""
    from veil.platform import cluster

    for key in process_env.DEFAULTS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")
    seen: dict = {}
    stub = types.SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: seen.update(kw))
    monkeypatch.setitem(sys.modules, "ray", stub)
    monkeypatch.setattr(cluster.signals, "reinstall", lambda: None)
    assert cluster.ensure_ray() is True
    env = seen["runtime_env"]["env_vars"]
    assert {k: env[k] for k in process_env.DEFAULTS} == {**process_env.DEFAULTS, "MLFLOW_HTTP_REQUEST_TIMEOUT": "60"}
    assert env["VEIL_JOURNAL_DIR"] and env["OMP_NUM_THREADS"]
    assert env["VEIL_KEY_BASE"] == str(Path.cwd().resolve())  # a trial, in its own directory, keeps keys here


def test_rays_workers_get_the_plugin_switch_only_when_it_is_set(monkeypatch):
    """A worker on a node started apart inherits nothing, so `ensure_ray` passes VEIL_DISABLE_PLUGIN_AUTOLOAD on
    when the driver has it, and leaves the workers' own choice alone when it does not (`ray` is a stub)."""
    from veil import plugins
    from veil.platform import cluster

    seen: list[dict] = []
    stub = types.SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: seen.append(kw))
    monkeypatch.setitem(sys.modules, "ray", stub)
    monkeypatch.setattr(cluster.signals, "reinstall", lambda: None)
    monkeypatch.setenv(plugins.AUTOLOAD_OFF, "1")
    cluster.ensure_ray()
    monkeypatch.delenv(plugins.AUTOLOAD_OFF)
    cluster.ensure_ray()
    on, off = (kw["runtime_env"]["env_vars"] for kw in seen)
    assert on[plugins.AUTOLOAD_OFF] == "1" and plugins.AUTOLOAD_OFF not in off
