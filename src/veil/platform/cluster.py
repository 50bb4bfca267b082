"""Joining or starting Ray: the one place Veil calls `ray.init`."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from veil import process_env, signals
from veil.console import verbose
from veil.keystore import key_env
from veil.plugins import AUTOLOAD_OFF
from veil.tracking.journal import journal_env

THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
"""Ray workers get one BLAS/OpenMP thread each, so concurrent trials and actors do not oversubscribe cores."""


def busy_threads(load: float, cpus: int, env: Mapping[str, str]) -> int | None:
    """Torch intra-op threads for a run in this process: 1 when the CPU is already busy (the 1-minute load average
    is at least the core count) and the user chose no thread count ($OMP_NUM_THREADS), else None (torch's default).
    Threads that wait for each other at every operation lose their time slices on busy cores; on free ones torch's
    own choice is kept (the figures: benchmarks/README.md)."""
    if "OMP_NUM_THREADS" in env or cpus < 2:
        return None
    return 1 if load >= cpus else None


def ensure_ray(address: str | None = None, *, log_to_driver: bool | None = None) -> bool:
    """Join `address` (e.g. 'auto' on a cluster's head node, or $RAY_ADDRESS), else start a fresh local Ray
    (never an unrelated one found on this machine). Returns True when this call started or joined Ray, so the
    caller knows to shut it down. Workers' output reaches this console only with `--verbose` (unless
    `log_to_driver` says otherwise); it stays in Ray's session logs."""
    import ray

    if ray.is_initialized():
        return False
    # workers journal, and keep release keys, where the driver does
    workers_env = {**process_env.settled(), **THREAD_ENV, **journal_env(), **key_env()}
    if AUTOLOAD_OFF in os.environ:  # a node started apart inherits nothing from this process
        workers_env[AUTOLOAD_OFF] = os.environ[AUTOLOAD_OFF]
    ray.init(
        address=address or os.environ.get("RAY_ADDRESS") or "local",
        include_dashboard=False,
        configure_logging=False,
        log_to_driver=verbose() if log_to_driver is None else log_to_driver,
        runtime_env={"env_vars": workers_env},
    )
    signals.reinstall()  # ray.init makes SIGTERM exit the driver at once, with no cleanup
    return True


@contextmanager
def ray_session(address: str | None = None, **kw: Any) -> Iterator[bool]:
    """`ensure_ray(address, **kw)` for the `with` block, and Ray shut down when it ends only if this call started
    or joined it (a Ray that was already up is left as it was); yields whether it did."""
    with ray_started_here_stops():
        yield ensure_ray(address, **kw)


@contextmanager
def ray_started_here_stops() -> Iterator[None]:
    """A Ray started inside the `with` block (an executor starts one on demand to place its work) is shut down
    when the block ends; one that was up before, a sweep's or the caller's own, is left as it was. Without it
    a run called in-process would leave its Ray running for whatever the caller does next."""
    was_up = _ray_up()
    try:
        yield
    finally:
        if not was_up and _ray_up():
            import ray

            ray.shutdown()


def _ray_up() -> bool:
    ray = sys.modules.get("ray")  # never imported: nothing can have started it (and importing it costs seconds)
    return ray is not None and ray.is_initialized()


def cluster_resources() -> dict[str, float]:
    """The cluster's total resources (CPU, GPU, memory, ...)."""
    import ray

    return {k: float(v) for k, v in ray.cluster_resources().items()}


def available_resources() -> dict[str, float]:
    """What the cluster has free right now."""
    import ray

    return {k: float(v) for k, v in ray.available_resources().items()}


def joins_cluster(address: str | None) -> bool:
    """Whether Ray work goes to an existing cluster (`--address`, or $RAY_ADDRESS), where it may run on other nodes."""
    target = address or os.environ.get("RAY_ADDRESS")
    return bool(target) and target != "local"


def ray_node_id() -> str:
    """The id of the Ray node this process runs on ('' outside Ray): trials record where they ran."""
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
