"""Shared fixtures: an isolated dataset cache, a real local Ray and a real MLflow server on 127.0.0.1.
Each fixture stops only the processes it started."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

# the suite knows Veil's own names only, whatever plugins this environment has installed (the README installs
# examples/plugin); tests of plugins put theirs back on a process's path (tests/support/plugin_install.py)
os.environ["VEIL_DISABLE_PLUGIN_AUTOLOAD"] = "1"

from veil import process_env  # noqa: E402
from veil.tracking.server import free_port  # noqa: E402

# the environment a Veil process gives what it starts (the MLflow servers of the fixtures and tests among them)
process_env.settle()

# test support the processes a test starts import too (tests/support/veil_test_hooks.py: the runs' pause)
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

torch.set_num_threads(1)  # 2-core CI: one thread per process keeps Ray workers and probes from thrashing
# and in the veil processes tests start; set, it also keeps `veil run`'s busy-CPU note (pin_threads_if_busy) off
# the consoles tests read, whatever the machine's load
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a slow test first, then those starting Ray, then the rest (order kept within each): with
    `make test`'s workers taking a file at a time, the long files start first instead of ending the run alone."""

    def weight(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("ray") else 2

    by_file: dict[str, int] = {}
    for item in items:
        by_file[item.location[0]] = min(by_file.get(item.location[0], 2), weight(item))
    items.sort(key=lambda item: by_file[item.location[0]])  # stable: a file's tests keep their order


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
    """A real `mlflow server` bound to 127.0.0.1 with a sqlite store, shared by the session; yields its URI."""
    from own_server import OwnServer

    server = OwnServer(tmp_path_factory.mktemp("mlflow-server"))
    try:
        server.start()
        yield server.uri
    finally:
        server.stop()


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
    _session_ray.append(True)
    yield ray
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)


_session_ray: list[bool] = []  # non-empty once this worker's `ray_local` is up


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """A test that leaves a Ray of its own running in this process fails here, by name (before the session's
    `ray_local` is up; after, every test shares that one): the run or sweep it called must shut down what it
    started (`ray_started_here_stops`, `ray_session`)."""
    ray = sys.modules.get("ray")
    if not _session_ray and ray is not None and ray.is_initialized():
        ray.shutdown()
        pytest.fail(f"{item.nodeid} left a Ray running in the test process")
