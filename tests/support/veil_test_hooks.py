"""The fault tests' pause, plugged into runs through Veil's instrumentation hook ($VEIL_EPOCH_HOOK), so no
production function knows about it. A run (and a sweep trial numbered 2 or later) pauses once its first epoch is
logged and flushed to the store, for as long as the file named by $VEIL_TEST_HOLD exists: a test strikes a run,
its server or a sweep at a known point on any machine speed instead of racing it."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

HOLD_FILE_ENV = "VEIL_TEST_HOLD"
TESTS = Path(__file__).resolve().parent


def hold_env(gate: Path) -> dict[str, str]:
    """The variables that plug the pause in behind the file `gate` (add them to a process's environment): the hook
    and a PYTHONPATH that finds this module in every process the run starts (Ray workers and cluster nodes
    inherit it)."""
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    return {"VEIL_EPOCH_HOOK": "veil_test_hooks:hold_after_first_epoch", HOLD_FILE_ENV: str(gate), "PYTHONPATH": path}


def hold_after_first_epoch(context: Mapping[str, Any]) -> Callable[[int, dict[str, float]], None] | None:
    gate = os.environ.get(HOLD_FILE_ENV)
    number = context["tags"].get("veil.trial_number")
    if not gate or (number is not None and int(number) < 2):
        return None  # trial 1 of a sweep runs through: the interrupted sweep has exactly one trial done
    held = False

    def hold(epoch: int, row: dict[str, float]) -> None:
        nonlocal held
        if held:
            return
        held = True
        context["flush"]()  # the store shows the first epoch while the run waits
        while Path(gate).exists():
            time.sleep(0.2)

    return hold


RECORDED: list[tuple[int, dict[str, str]]] = []
"""What `record_epochs` saw in this process: (epoch, the run's tags) per epoch."""


def record_epochs(context: Mapping[str, Any]) -> Callable[[int, dict[str, float]], None]:
    def record(epoch: int, row: dict[str, float]) -> None:
        context["flush"]()
        RECORDED.append((epoch, dict(context["tags"])))

    return record
