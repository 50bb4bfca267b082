"""Waiting in tests for what another process does: one poll loop (tenacity's), failing with what was awaited."""

from __future__ import annotations

import subprocess
from typing import Callable, TypeVar

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

T = TypeVar("T")


def wait_for(
    what: str, ready: Callable[[], T], timeout: float, alive: Callable[[], None] | None = None, every: float = 0.3
) -> T:
    """Poll `ready` every `every` s until it returns something truthy, and return that; fail naming `what` after
    `timeout` s. `alive` runs before each poll and raises if what is waited on has died."""

    def probe() -> T:
        if alive:
            alive()
        return ready()

    try:
        return Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(every), retry=retry_if_result(lambda v: not v))(
            probe
        )
    except RetryError:
        raise AssertionError(f"{what}: not within {timeout:g} s") from None


def first_run_logged(uri: str, proc: subprocess.Popen, metric: str | None = None, timeout: float = 240) -> str:
    """The id of the first run of experiment 'veil' once it has logged `metric` (any metric when None); fails if
    `proc`, the process that logs it, ends first. It reads through Veil's own client, which opens a new embedded
    store under the store's lock: a bare `MlflowClient` would start building the schema while `proc` builds it too,
    and the two migrations collide ('table _alembic_tmp_experiments already exists')."""
    from veil.tracking.mlflow_run import client

    def running() -> None:
        assert proc.poll() is None, f"the run ended before it logged: {(proc.communicate()[1] or '')[-3000:]}"

    def logged() -> str | None:
        try:
            c = client(uri)
            exp = c.get_experiment_by_name("veil")
            runs = c.search_runs([exp.experiment_id]) if exp else []
        except Exception:  # noqa: BLE001 (the store is still being created)
            return None
        metrics = runs[0].data.metrics if runs else {}
        return runs[0].info.run_id if metrics and (metric is None or metric in metrics) else None

    return wait_for(f"a run logging {metric or 'a metric'}", logged, timeout, running, every=0.2)
