"""Running a reproduction suite: every selected entry variant as an ordinary Veil sweep on one Ray session,
tagged in MLflow with its suite, row, entry, preset and mode; a failed sweep is recorded and the others run."""

from __future__ import annotations

import re
import sys
import time
from typing import Sequence

from veil.reproduce.suite import REPRO_TAG, Entry, ReproSuite, Row, sweep_spec, variants


def run_repro(
    suite: ReproSuite, mode: str, tracking_uri: str, address: str | None = None, only: Sequence[str] = ()
) -> list[str]:
    """Run every entry variant as a sweep tagged with its row, entry, variant and mode; the errors of those that
    failed (each failure is recorded and the others still run)."""
    from veil.platform.cluster import ray_session

    todo = variants(suite, only)
    with ray_session(address):  # one Ray for every sweep: each would otherwise start and stop its own
        return _run_all(suite, mode, tracking_uri, address, todo)


def _run_all(
    suite: ReproSuite, mode: str, tracking_uri: str, address: str | None, todo: Sequence[tuple[Row, Entry, str]]
) -> list[str]:
    from veil.sweeps.driver import run_sweep
    from veil.tracking import TrackedRun

    errors = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for i, (row, entry, preset) in enumerate(todo, 1):
        label = f"{row.id} / {entry.label}" + (f" (preset {preset})" if preset else "")
        print(f"[reproduce] {i}/{len(todo)} {label} [{mode}]", file=sys.stderr, flush=True)
        slug = re.sub(r"[^A-Za-z0-9]+", "-", entry.label).strip("-").lower()
        name = f"repro-{row.id}-{slug}{'-' + preset if preset else ''}-{mode}-{stamp}"
        try:
            outcome = run_sweep(
                sweep_spec(suite, row, entry, preset, mode), name=name, address=address, tracking_uri=tracking_uri
            )
        except Exception as e:  # recorded; the next entry still runs
            errors.append(f"{label}: {type(e).__name__}: {e}")
            print(f"[reproduce] FAILED {label}: {e}", file=sys.stderr, flush=True)
            continue
        if outcome.incomplete:  # Ctrl-C or SIGTERM: Tune stops a sweep gracefully and returns; stop the suite too
            raise KeyboardInterrupt(
                f"{label} stopped before every trial ran and {len(todo) - i} later sweep(s) did not start; "
                "the table keeps each entry's last finished sweep"
            )
        tags = {
            REPRO_TAG: "true",
            f"{REPRO_TAG}.suite": str(suite.path.name),
            f"{REPRO_TAG}.row": row.id,
            f"{REPRO_TAG}.entry": entry.label,
            f"{REPRO_TAG}.preset": preset or "spec",
            f"{REPRO_TAG}.mode": mode,
        }
        TrackedRun(outcome.tracking_uri, outcome.parent_run_id).set_tags(tags)
    return errors
