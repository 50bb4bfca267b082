"""Installs examples/plugin (an outside package adding a method and a dataset) into a folder of its own, the way
pip installs any package, and gives the environment that puts it on a process's path: entry points are found
wherever the package's dist-info is importable, so a test's processes (and a test cluster's nodes) see the plugin
while the test session's own interpreter, and every other test, do not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "plugin"


def install_plugin(target: Path) -> Path:
    """`pip install --no-deps --target TARGET examples/plugin` (offline: the build uses this environment's
    setuptools); returns TARGET."""
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target)]
    with tempfile.TemporaryDirectory() as tmp:  # built from a copy: the build leaves nothing in the repository
        source = shutil.copytree(PLUGIN, Path(tmp) / "plugin")
        subprocess.run([*cmd, str(source)], check=True, capture_output=True, text=True, timeout=300)
    return target


def with_plugin(target: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with TARGET first on PYTHONPATH and plugins loading again (the test session
    turns them off: tests/conftest.py)."""
    base = dict(os.environ if env is None else env)
    base.pop("VEIL_DISABLE_PLUGIN_AUTOLOAD", None)
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), base.get("PYTHONPATH", "")) if p)
    return base
