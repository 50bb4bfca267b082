"""Flags several commands share."""

from __future__ import annotations

import argparse


def add_tracking_uri(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """`--tracking-uri`, as every command that reads or writes runs takes it."""
    parser.add_argument(
        "--tracking-uri",
        dest="tracking_uri",
        help=help or "MLflow tracking URI (default $MLFLOW_TRACKING_URI or sqlite:///./mlflow.db)",
    )
