"""`veil sweep`, `veil resume`, `veil report`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from veil.cli.flags import add_tracking_uri

if TYPE_CHECKING:
    from veil.sweeps.model import SweepSpec


def _print_files(files: dict, out=sys.stdout) -> None:
    print("files:", file=out)
    for key, path in files.items():
        print(f"  {key:<15} {path}", file=out)


def cmd_sweep(args: argparse.Namespace) -> int:
    from veil.sweeps.sweepspec import load_sweep

    spec = load_sweep(args.spec)  # the spec's checks; the start's own follow, all before Ray or MLflow start
    if args.check:
        return check_sweep(spec, args)
    from veil.sweeps.driver import run_sweep

    outcome = run_sweep(
        spec,
        name=args.name,
        address=args.address,
        tracking_uri=args.tracking_uri,
        trials=args.trials,
        storage_root=args.storage,
        quiet=args.quiet,
    )
    return _finish(outcome, args)


def check_sweep(spec: SweepSpec, args: argparse.Namespace) -> int:
    """`veil sweep --check`: what the start checks before the tracking store (the trials, the name, the storage)
    and the data's checks; nothing is created, Ray and MLflow are not loaded."""
    from veil.sweeps.preflight import check_data, check_keys, check_start

    spec, _, _ = check_start(spec, name=args.name, trials=args.trials, storage_root=args.storage)
    check_keys(spec, args.tracking_uri)
    check_data(spec)
    objectives = ", ".join(f"{o.metric} ({o.direction})" for o in spec.objectives)
    print(
        f"ok: sweep spec {args.spec}: {spec.method} on {spec.dataset}, {spec.trials} trials x {len(spec.seeds)} "
        f"seed(s), sampler {spec.sampler}, objectives {objectives}: valid, nothing was run"
    )
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from veil.sweeps.driver import resume_sweep

    outcome = resume_sweep(
        args.sweep,
        address=args.address,
        tracking_uri=args.tracking_uri,
        storage_root=args.storage,
        retry_failed=args.retry_failed,
        quiet=args.quiet,
    )
    return _finish(outcome, args)


def _finish(outcome, args: argparse.Namespace) -> int:
    from veil.sweeps.results import format_report

    out = sys.stderr if args.json else sys.stdout
    print("", file=out)
    print(format_report(outcome.results), file=out)
    print(
        f"took {outcome.seconds:.1f} s; MLflow parent run {outcome.parent_run_id} at {outcome.tracking_uri}", file=out
    )
    t = getattr(outcome, "timings", None) or {}
    if t:
        print(
            f"time: Ray start {t['ray_start']:.1f} s, trials {t['tune']:.1f} s ({t['trials']:.1f} s of trial "
            f"work, {t.get('ask', 0.0):.1f} s of sampler asks), report {t['finish']:.1f} s; orchestration "
            f"{100 * t['orchestration']:.0f}% of the wall time",
            file=out,
        )
    _print_files(outcome.files, out)
    if args.json:
        print(
            json.dumps(
                {
                    **outcome.results.summary(),
                    "seconds": outcome.seconds,
                    "timings": getattr(outcome, "timings", {}),
                    "files": {k: str(v) for k, v in outcome.files.items()},
                },
                default=str,
            ),
            flush=True,
        )
    if outcome.incomplete:
        print(
            f"error: the sweep was interrupted before every trial ran; continue it with `veil resume {outcome.name}`",
            file=sys.stderr,
        )
        return 1
    if outcome.stopped_for_failures:
        print("error: the sweep stopped: too many failed trials (max_failures)", file=sys.stderr)
        return 1
    if outcome.results.counts["finished"] == 0:
        print("error: no trial finished", file=sys.stderr)
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from veil.sweeps.report import report
    from veil.sweeps.results import format_report

    results, files = report(args.sweep, tracking_uri=args.tracking_uri, out_dir=args.out, storage_root=args.storage)
    out = sys.stderr if args.json else sys.stdout
    print(format_report(results), file=out)
    _print_files(files, out)
    if args.json:
        print(
            json.dumps({**results.summary(), "files": {k: str(v) for k, v in files.items()}}, default=str), flush=True
        )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    from veil.sweeps.sweepspec import DEFAULT_ROOT

    common = argparse.ArgumentParser(add_help=False)
    add_tracking_uri(common)
    common.add_argument(
        "--storage",
        default=str(DEFAULT_ROOT),
        type=Path,
        help=f"where Tune keeps sweeps (default {DEFAULT_ROOT}/<name>)",
    )
    common.add_argument("--json", action="store_true", help="print one JSON summary as the last stdout line")

    sw = sub.add_parser(
        "sweep",
        parents=[common],
        help="run a multi-objective sweep from a YAML spec (Ray Tune + Optuna)",
        description="Run a sweep: Ray Tune runs the trials, Optuna suggests them, MLflow records one "
        "parent run and one child run per trial; prints the Pareto front at the end.",
    )
    sw.add_argument("spec", help="sweep spec (YAML), e.g. sweeps/quickstart.yaml")
    sw.add_argument("--address", help="Ray cluster to join (e.g. 'auto' on a head node); default: a fresh local Ray")
    sw.add_argument("--trials", type=int, help="override the spec's number of trials")
    sw.add_argument("--name", help="sweep name (default <spec>-<timestamp>); also the MLflow parent run's name")
    sw.add_argument("--quiet", "-q", action="store_true", help="no per-trial progress lines")
    sw.add_argument("--check", action="store_true", help="validate the spec, then stop (starts no Ray, no MLflow run)")
    sw.set_defaults(func=cmd_sweep)

    rs = sub.add_parser(
        "resume",
        parents=[common],
        help="continue a sweep whose driver was killed",
        description="Continue a sweep from its Tune storage: finished trials are kept, trials in "
        "flight run again and supersede their earlier MLflow child runs.",
    )
    rs.add_argument("sweep", help="sweep name, its Tune directory, its MLflow parent run id, or a spec name (latest)")
    rs.add_argument("--address", help="Ray cluster to join; default: a fresh local Ray")
    rs.add_argument(
        "--retry-failed",
        dest="retry_failed",
        action="store_true",
        help="also re-run trials that had crashed (default: keep them as failed)",
    )
    rs.add_argument("--quiet", "-q", action="store_true", help="no per-trial progress lines")
    rs.set_defaults(func=cmd_resume)

    rp = sub.add_parser(
        "report",
        parents=[common],
        help="print a sweep's Pareto front and write its tables and plots",
        description="Read a sweep back from MLflow: print the front, write trials as Parquet and CSV, "
        "the front as CSV, PNG and a self-contained HTML plot.",
    )
    rp.add_argument("sweep", help="sweep name, its MLflow parent run id, or a spec name (latest sweep of it)")
    rp.add_argument("--out", type=Path, help="output directory (default <storage>/<name>/report)")
    rp.set_defaults(func=cmd_report)
