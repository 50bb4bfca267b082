"""The `veil` command: one module per command (run | methods | datasets | sweep, resume, report | release |
nightly | sync | ui), each with its `add_parser`; `main` wires them and turns a VeilError into exit 2."""

from __future__ import annotations

import argparse
import atexit
import faulthandler
import gc
import os
import sys
from typing import Sequence

from veil.errors import VeilError


def build_parser() -> argparse.ArgumentParser:
    from veil import __version__
    from veil.cli import datasets, methods, nightly, release, run, sweep, sync, ui

    parser = argparse.ArgumentParser(
        prog="veil", description="Private representation learning on Ray, tracked in MLflow."
    )
    parser.add_argument("--version", action="version", version=f"veil {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (run, methods, ui, datasets, sweep, nightly, sync, release):
        command.add_parser(sub)
    return parser


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    """`--verbose` on the parser and on every subcommand under it, wherever the user types it."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,  # a subcommand's default must not reset a value parsed before it
        help="also show Ray's and MLflow's messages below warnings (log lines, progress bars)",
    )
    for action in parser._actions:  # noqa: SLF001 (argparse has no public accessor for subparsers)
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases repeat a parser
                add_verbose_flag(sub)


def report_crashes() -> None:
    """A crash in native code prints every thread's Python stack on stderr, for the bug report (unless a
    handler is on already, or stderr has no file descriptor, as under a test's capture)."""
    if faulthandler.is_enabled():
        return
    try:
        faulthandler.enable()
    except (AttributeError, ValueError, OSError):
        pass


def entry() -> int:
    """The `veil` script and `python -m veil.cli`: `main`, then a prompt exit. Python's last garbage collection
    at exit walks every object Ray, MLflow, pandas and torch left (over a second after a sweep or a run), only
    to free memory the process is about to return; freezing them first, after every other exit handler, skips
    that walk. Not in `main`: a caller's process that goes on (a test session) must keep collecting."""
    atexit.register(gc.freeze)  # registered first, so it runs last
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    from veil import process_env, signals
    from veil.console import set_verbose

    report_crashes()
    parser = build_parser()
    add_verbose_flag(parser)
    args = parser.parse_args(argv)
    process_env.settle()  # first, on this thread: see process_env
    set_verbose(getattr(args, "verbose", False))
    signals.install()
    try:
        return signals.exit_code(int(args.func(args) or 0))
    except VeilError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"interrupted{f' ({e})' if str(e) else ''}", file=sys.stderr)
        return signals.exit_code(130)
    except BrokenPipeError:  # `veil methods | head`: the reader has gone; end quietly, as `ls | head` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's exit flush must not fail again
        return 141  # 128 + SIGPIPE, what a shell reports for a command its pipe's reader left
