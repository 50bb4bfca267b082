"""`veil sync`: replay journaled runs to their stores, close runs whose process ended."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from veil.cli.flags import add_tracking_uri
from veil.console import warn
from veil.tracking.journal import LATE_TAG

if TYPE_CHECKING:
    from veil.tracking.replay import Synced


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sync",
        help="replay runs journaled while the tracking server was away; close runs whose process ended",
        description="Replays every pending journal under .veil/journal (or $VEIL_JOURNAL_DIR) to the tracking "
        "server it was written for, in order (params, metrics, tags, artifacts, then the status), tags those "
        f"runs {LATE_TAG}=true and deletes the journals; safe to run again after an interruption. Then marks "
        "KILLED the RUNNING runs whose process on this host has ended. Exit 0 when nothing is left pending, "
        "1 when a journal could not be replayed yet (the table says why).",
    )
    add_tracking_uri(
        p,
        "only the journals of this store (default: every journal, each to its own store; stale runs are "
        "looked for on those stores and on $MLFLOW_TRACKING_URI or sqlite:///./mlflow.db)",
    )
    p.set_defaults(func=cmd_sync)


def cmd_sync(args: argparse.Namespace) -> int:
    from veil.tracking.journal import remote
    from veil.tracking.mlflow_run import absolute_uri, check_tracking, health_problem, local_store, resolve_tracking_uri
    from veil.tracking.replay import reap_stale, sync

    uri = check_tracking(args.tracking_uri) if args.tracking_uri else None
    rows = sync(uri, found_by="veil sync")
    stores = {uri or absolute_uri(resolve_tracking_uri())}
    stores |= {r.tracking_uri for r in rows if r.result == "synced"}
    reaped: list[tuple[str, str]] = []
    for store in sorted(stores):
        db = local_store(store)
        if (remote(store) and health_problem(store)) or (db is not None and not db.exists()):
            continue  # a server still away, or no local store here (sync never creates one)
        try:
            reaped += [(store, run_id) for run_id in reap_stale(store, "veil sync")]
        except Exception as e:  # noqa: BLE001 (a store that does not answer; the journals were the point)
            warn(f"could not look for stale runs on {store}: {e}")
    print_table(rows, reaped)
    return 0 if all(r.ok for r in rows) else 1


def print_table(rows: list[Synced], reaped: list[tuple[str, str]]) -> None:
    """What `veil sync` did, as a table (or one line when there was nothing to do)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # a pipe or a file: full run ids and URIs, not cells wrapped at 80 columns
        console = Console(width=240)
    if not rows and not reaped:
        console.print("nothing to sync: no pending journal and no stale RUNNING run")
        return
    table = Table(title="veil sync", show_lines=False)
    for name in ("run", "store", "status", "params", "metrics", "tags", "artifacts", "result"):
        table.add_column(name, justify="right" if name in ("params", "metrics", "tags", "artifacts") else "left")
    for r in rows:
        result = r.result + (f" ({'; '.join(r.notes)})" if r.notes else "")
        result = escape(result)
        table.add_row(
            r.run_id,
            escape(r.tracking_uri),
            r.status or "-",
            str(r.params),
            str(r.metrics),
            str(r.tags),
            str(r.artifacts),
            result if r.ok else f"[red]{result}[/red]",
        )
    for store, run_id in reaped:
        table.add_row(
            run_id, escape(store), "KILLED", "", "", "", "", "stale RUNNING run closed (its process had ended)"
        )
    console.print(table)
