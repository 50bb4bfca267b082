"""The fault tests' pause and node deaths, plugged into runs through Veil's instrumentation hooks ($VEIL_EPOCH_HOOK,
$VEIL_ROUND_HOOK), so no production function knows about them.

Node deaths (`fail_nodes`, plugged in by `fault_env`): $VEIL_TEST_FAULTS lists 'NODE@ROUND' entries; the host of that
node dies as that round starts: its Ray actor process exits (a crashed machine), in process it raises
`InjectedFault`, which the in-process pool treats as a death.

The pause: A run (and a sweep trial numbered 2 or later) pauses once its first epoch is
logged and flushed to the store, for as long as the file named by $VEIL_TEST_HOLD exists: a test strikes a run,
its server or a sweep at a known point on any machine speed instead of racing it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

HOLD_FILE_ENV = "VEIL_TEST_HOLD"
FAULTS_ENV = "VEIL_TEST_FAULTS"
TESTS = Path(__file__).resolve().parent


def search_path() -> str:
    """A PYTHONPATH that finds this module in every process a run starts (Ray workers inherit it)."""
    return os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)


def hold_env(gate: Path) -> dict[str, str]:
    """The variables that plug the pause in behind the file `gate` (add them to a process's environment): the hook
    and a PYTHONPATH that finds this module in every process the run starts (Ray workers and cluster nodes
    inherit it)."""
    return {
        "VEIL_EPOCH_HOOK": "veil_test_hooks:hold_after_first_epoch",
        HOLD_FILE_ENV: str(gate),
        "PYTHONPATH": search_path(),
    }


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


def fault_env(*entries: str) -> dict[str, str]:
    """The variables that plug node deaths in: 'NODE@ROUND' entries (set them in the process that runs the
    federation, or in the environment of the process that starts its Ray)."""
    return {"VEIL_ROUND_HOOK": "veil_test_hooks:fail_nodes", FAULTS_ENV: ",".join(entries), "PYTHONPATH": search_path()}


def fail_nodes(context: Mapping[str, Any]) -> Callable[[int, list[int]], None] | None:
    plan = dict(map(int, e.split("@")) for e in os.environ.get(FAULTS_ENV, "").split(",") if e)
    mine = {node: rnd for node, rnd in plan.items() if node in context["nodes"]}
    if not mine:
        return None

    def on_round(rnd: int, node_ids: list[int]) -> None:
        hit = [k for k in node_ids if mine.get(k) == rnd]
        if not hit:
            return
        if context["own_process"]:  # a real process death, as a crashed machine
            print(f"[test] node host {context['host']} (nodes {hit}) exits in round {rnd}", file=sys.stderr, flush=True)
            os._exit(17)
        from veil.methods.federated.core import InjectedFault

        raise InjectedFault(f"node(s) {hit} fail in round {rnd}")

    return on_round
