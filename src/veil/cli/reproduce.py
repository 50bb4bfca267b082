"""`veil nightly` on a reproduction suite (`kind: reproduce`): check it, run it (unless --table), build the
table from MLflow records and attach it to a report run."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

from veil.reproduce.render import RECORDS_FILE, VERDICTS, write_results
from veil.reproduce.runs import run_repro
from veil.reproduce.suite import REPRO_TAG, load_repro_suite, variants


def cmd_reproduce(args: Any) -> int:
    """`veil nightly` on a reproduction suite: run (unless --table), then the table from MLflow records."""
    from veil.tracking import TrackedRun
    from veil.tracking.mlflow_run import check_tracking

    suite = load_repro_suite(args.suite)
    mode = "quick" if args.quick else "full"
    only = [s.strip() for s in (args.only or "").split(",") if s.strip()]
    if args.check:
        n = len(variants(suite, only))
        print(
            f"ok: reproduction suite {args.suite}: {len(suite.rows)} rows, {n} sweeps per mode: valid, nothing was run"
        )
        return 0
    uri = check_tracking(args.tracking_uri)
    errors = [] if args.table else run_repro(suite, mode, uri, args.address, only)
    out_dir = (
        Path(args.out) if args.out else (suite.path.parent if mode == "full" else Path(".veil") / "reproduce-quick")
    )
    summary, lines, pngs = write_results(suite, uri, mode, out_dir)
    parent = TrackedRun.start(
        uri,
        suite.experiment,
        f"reproduce-{mode}-{time.strftime('%Y-%m-%d')}",
        tags={REPRO_TAG: "report", f"{REPRO_TAG}.mode": mode, "veil.suite": suite.digest},
    )
    parent.log_file(out_dir / "RESULTS.md", "reproduce")
    parent.log_file(out_dir / "results.json", "reproduce")
    parent.log_file(out_dir / RECORDS_FILE, "reproduce")
    for png in pngs.values():
        parent.log_file(png, "reproduce/fronts")
    counts = {v: sum(ln.verdict == v for ln in lines) for v in VERDICTS}
    parent.log_metrics({"figures_" + re.sub(r"[^a-z]+", "_", k).strip("_"): float(v) for k, v in counts.items()})
    if errors:
        parent.set_tags({"veil.reproduce.errors": len(errors)})
    parent.finish()
    print(summary)
    print(f"table: {out_dir / 'RESULTS.md'}; MLflow run {parent.run_id} at {uri}")
    for e in errors:
        print(f"failed: {e}", file=sys.stderr)
    return 1 if errors else 0
