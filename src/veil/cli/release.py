"""`veil release RUN --data FILE -o OUT`: a certified run's encoder applied to new rows."""

from __future__ import annotations

import argparse
from typing import Any

from veil.cli.flags import add_tracking_uri
from veil.console import warn


def cmd_release(args: argparse.Namespace) -> int:
    from veil.apply_encoder import release

    info = release(
        args.run,
        args.data,
        args.output,
        tracking_uri=args.tracking_uri,
        allow_unmet=args.allow_unmet,
        keep=tuple(args.keep or ()),
        key_file=args.key,
    )
    verdict = "met" if info["certificate_met"] else "NOT met (released with --allow-unmet)"
    print(
        f"released {info['rows']} rows of {args.data} as z ({info['width']} columns) with run {args.run} "
        f"({info['method']}): {info['output']}; certificate {verdict}: {info['certificate']}"
    )
    if not info["certificate_met"]:
        warn("this release does not meet its run's certificate")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "release",
        help="apply a certified run's encoder to new rows (permanent keyed noise); writes z and its certificate",
        description="Release z for new rows of the run's schema with the run's trained encoder, its noise derived "
        "from the run's secret release key and each row: releasing the same rows again gives the same z. Refuses "
        "a run without a met certificate unless --allow-unmet, and a missing key unless --key names it.",
    )
    p.add_argument("run", metavar="RUN", help="MLflow run id of a `veil run` (printed at its end, and in --json)")
    p.add_argument("--data", required=True, help="CSV or Parquet file of new rows with the run's feature columns")
    p.add_argument("--output", "-o", required=True, help="where to write z (.parquet); the certificate goes beside it")
    p.add_argument("--keep", action="append", metavar="COLUMN", help="copy this column (an id) into the output")
    p.add_argument(
        "--key",
        metavar="FILE",
        help="the run's release key (default: <key dir>/RUN.key, the key dir $VEIL_KEY_DIR or .veil/keys beside "
        "the store)",
    )
    p.add_argument(
        "--allow-unmet", dest="allow_unmet", action="store_true", help="release even without a met certificate"
    )
    add_tracking_uri(p)
    p.set_defaults(func=cmd_release)
