"""`veil nightly`: a benchmark suite run and compared with the last nightly, or a reproduction suite."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from veil.cli.flags import add_tracking_uri
from veil.errors import ConfigError
from veil.nightly_suite import (
    DEFAULT_SUITE,
    Suite,
    compare,
    format_checks,
    load_suite,
    nightly_history,
    previous_nightly,
    run_suite,
    trend_png,
)


def cmd_nightly(args: argparse.Namespace) -> int:
    from veil.cli.reproduce import cmd_reproduce
    from veil.platform.cluster import joins_cluster
    from veil.reproduce.suite import is_reproduce_suite
    from veil.tracking import TrackedRun
    from veil.tracking.mlflow_run import check_tracking, require_shared_store, uri_source

    if args.print_suite:
        if not Path(args.suite).is_file():
            raise ConfigError("--suite", args.suite, "an existing YAML file")
        print(Path(args.suite).read_text(), end="")
        return 0
    if is_reproduce_suite(args.suite):
        return cmd_reproduce(args)
    repro_only = [f for f in ("quick", "only", "table", "out") if getattr(args, f, None)]
    if repro_only:
        raise ConfigError(
            f"--{repro_only[0]}", getattr(args, repro_only[0]), "a suite with 'kind: reproduce'", args.suite
        )
    suite = load_suite(args.suite)
    if args.check:
        check_runs_on_data(suite)
        print(f"ok: suite {args.suite}: {len(suite.runs)} runs, {len(suite.sweeps)} sweeps: valid, nothing was run")
        return 0
    uri = check_tracking(args.tracking_uri)
    require_shared_store(uri, joins_cluster(args.address), uri_source(args.tracking_uri))
    prev_id, prev = previous_nightly(uri, suite.experiment, suite.digest)
    run_id, figures = run_suite(suite, uri, args.address)
    checks = compare(figures, prev, suite.tolerances)
    table = format_checks(checks)
    failed = [c for c in checks if not c.ok]
    parent = TrackedRun(uri, run_id)
    parent.log_text(
        f"# Nightly {time.strftime('%Y-%m-%d')}\n\nbaseline: {prev_id or 'none'}\n\n{table}\n\n![trend](trend.png)\n",
        "nightly/report.md",
    )
    history = [*nightly_history(uri, suite.experiment, suite.digest), (time.strftime("%m-%d %H:%M"), figures)]
    with tempfile.TemporaryDirectory() as d:
        parent.log_file(trend_png(history, checks, Path(d) / "trend.png"), "nightly")
    parent.log_dict([{"date": day, **f} for day, f in history], "nightly/trend.json")
    parent.set_tags({"veil.baseline": prev_id or "none", "veil.regressions": len(failed)})
    parent.finish()
    print(table)
    print(f"baseline: {prev_id or 'none (first nightly of this suite)'}; MLflow run {run_id} at {uri}")
    if failed:
        print(f"{len(failed)} regression(s)", file=sys.stderr)
        return 1
    return 0


def check_runs_on_data(suite: Suite) -> None:
    """Every run's checks that need its data, as `veil run --check` does them: the target its test split must
    certify (a calibrating run is refused, exit 2, when it cannot), so a nightly never fails on it overnight."""
    from veil.cli.run import check_run
    from veil.pipeline.execute import spec_from_mapping
    from veil.pipeline.validation import validate

    for name, mapping in suite.runs.items():
        print(f"run {name}:")
        check_run(validate(spec_from_mapping(mapping, where=f"runs.{name}")))


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nightly", help="run the benchmark suite and fail on a regression against the last nightly")
    p.add_argument(
        "--suite",
        default=str(DEFAULT_SUITE),
        help="suite YAML (default: the suite shipped with Veil; --print-suite shows it)",
    )
    p.add_argument("--print-suite", action="store_true", help="print the suite's YAML (to copy and edit), then stop")
    add_tracking_uri(p)
    p.add_argument("--address", help="Ray cluster to join for sweeps and ray-train runs")
    p.add_argument("--check", action="store_true", help="validate the suite and every spec in it, then stop")
    g = p.add_argument_group("reproduction suites (kind: reproduce, e.g. benchmarks/reproduce/suite.yaml)")
    g.add_argument("--quick", action="store_true", help="the suite's quick form (1 seed, few epochs: minutes)")
    g.add_argument(
        "--only",
        help="comma-separated rows (ROW), entries (ROW/ENTRY) or an entry's preset (ROW/ENTRY/PRESET) to run "
        "(default: every row)",
    )
    g.add_argument("--table", action="store_true", help="run nothing: rebuild the table from the MLflow records")
    g.add_argument(
        "--out",
        help="where RESULTS.md, results.json and fronts/ go (default: next to the suite; "
        "quick mode: .veil/reproduce-quick)",
    )
    p.set_defaults(func=cmd_nightly)
