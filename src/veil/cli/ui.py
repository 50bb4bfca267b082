"""`veil ui`: the MLflow UI on the store Veil logged to."""

from __future__ import annotations

import argparse

from veil.cli.flags import add_tracking_uri


def cmd_ui(args: argparse.Namespace) -> int:
    from veil.sweeps.overview import latest_sweep_links
    from veil.tracking.server import serve

    return serve(args.tracking_uri, port=args.port, links=latest_sweep_links)


def add_parser(sub: argparse._SubParsersAction) -> None:
    ui = sub.add_parser(
        "ui",
        help="open the MLflow UI on the store Veil logged to; prints the latest sweep's links",
        description="A local store (default sqlite:///./mlflow.db) gets `mlflow server` on 127.0.0.1 until Ctrl-C; "
        "a tracking server ($MLFLOW_TRACKING_URI or --tracking-uri http://...) is only linked to. Prints the URL "
        "of the latest sweep's parent run (the front, linked) and of its trials' table. Never opens a browser.",
    )
    add_tracking_uri(ui)
    ui.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
    ui.set_defaults(func=cmd_ui)
