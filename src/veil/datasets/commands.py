"""`veil datasets ...` subcommands (wired into veil.cli)."""
from __future__ import annotations

import argparse

from veil.config import field_table
from veil.datasets.registry import DATASETS, _ensure_loaded


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `veil datasets` and its subcommands on the top-level parser."""
    p = sub.add_parser("datasets", help="list datasets and their parameters")
    p.set_defaults(func=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    _ensure_loaded()
    for name, entry in sorted(DATASETS.items()):
        print(f"{name}  [{entry.kind}]  {entry.description}")
        for row in field_table(entry.params_cls):
            print(f"    {row['name']:<16} {row['type']:<10} default {row['default']:<8} {row['doc']}")
    return 0
