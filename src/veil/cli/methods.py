"""`veil methods [NAME]`: every method, its privacy knob and parameters; with a name, where the defaults
depart from the paper."""

from __future__ import annotations

import argparse
from typing import Any

from veil.errors import UnknownNameError


def cmd_methods(args: argparse.Namespace) -> int:
    from veil.config import field_table
    from veil.methods.cards import knob_text, method_card, method_config, method_names
    from veil.methods.configs.method_card import show

    names = method_names()  # plugins included: their classes are their cards
    if args.name and args.name not in names:
        raise UnknownNameError("method", args.name, list(names))
    shown = {name: method_card(name) for name in sorted(names) if not args.name or name == args.name}
    tables = {name: field_table(cls.Config) for name, cls in shown.items()}
    every_row = [row for rows in tables.values() for row in rows]
    width = max(len(r["name"]) for r in every_row)  # one width for the whole listing, so columns line up
    dwidth = max(len(r["default"]) for r in every_row)
    for name, cls in shown.items():
        print(f"{name}  —  {cls.description}" + (f"  [source: {cls.paper}]" if cls.paper else ""))
        print(f"    privacy knob: {knob_text(cls).replace('`', '')}")
        for row in tables[name]:
            allowed = f" ({row['allowed']})" if row["allowed"] else ""
            paper = cls.paper_values.get(row["name"])
            also = f" [paper: {show(paper.value)}]" if paper else ""
            print(f"    {row['name']:<{width}}  default {row['default']:<{dwidth}}  {row['doc']}{allowed}{also}")
        if args.name:
            print_departures(cls, method_config(name, {}))
    return 0


def print_departures(cls: Any, defaults: Any) -> None:
    """What `veil methods NAME` adds: the fields `preset: paper` changes and the defaults' recorded deviations."""
    if cls.paper_values:
        print("\n  Where the default differs from `--set preset=paper` (why):")
        width = max(len(key) for key in cls.paper_values) + 1
        for key, default, paper, why in cls.preset_differences(defaults):
            print(f"    {key + ':':<{width}} {default} -> paper {paper}: {why}")
    recorded = cls.recorded_deviations(defaults)
    print("\n  Recorded as method.deviation.* at the defaults:" + ("" if recorded else " none"))
    width = max((len(key) for key in recorded), default=0) + 1
    for key, text in recorded.items():
        print(f"    {key + ':':<{width}} {text}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    methods = sub.add_parser("methods", help="list methods and their parameters")
    methods.add_argument("name", nargs="?", help="show one method only")
    methods.set_defaults(func=cmd_methods)
