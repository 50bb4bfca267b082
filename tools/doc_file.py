"""What every generator under tools/ does with the text it made: write it, or (--check) only say whether the file
already holds it, so `make docs` and the tests share one definition of "current"."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path


def write_or_check(texts: Mapping[Path, str], *, check: bool, command: str) -> int:
    """Write each file's new text where it differs; with `check`, write nothing and name each file that differs
    with `command`, the one that brings it up to date. Returns the exit status: 1 for a stale file under check."""
    stale = [path for path, text in texts.items() if path.read_text() != text]
    if check:
        for path in stale:
            print(f"{path} is not current: run {command}", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(texts[path])
        print(f"wrote {path}")
    return 0


def parser(doc: str) -> argparse.ArgumentParser:
    """A generator's command line: its module docstring's first paragraph as the description, and --check."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if what it writes is not current; write nothing")
    return ap
