"""Render the settings table of docs/sweeps.md from the SweepSpec fields, so the documented defaults, ranges and
meanings are the ones the parser applies (tests/sweeps/test_sweeps_doc.py checks the doc is current).

python -m veil.sweeps.docs   (rewrites the table between the markers in docs/sweeps.md)"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from veil.sweeps.model import SweepSpec
from veil.sweeps.samplers import SAMPLERS
from veil.sweeps.settings import Resources, setting_accepts

BEGIN = "<!-- sweep settings: generated from veil.sweeps.spec.SweepSpec by python -m veil.sweeps.docs -->"
END = "<!-- end of sweep settings -->"
DOC = Path(__file__).resolve().parents[3] / "docs" / "sweeps.md"
OWN_NAMES = {"sampler": SAMPLERS}
"""Settings whose choices plugins extend: the doc lists Veil's own (its meaning says a plugin may add one), so it
reads the same whichever plugins are installed."""


def _rows(cls: type, prefix: str = "") -> list[str]:
    out = []
    for f in dataclasses.fields(cls):
        if "doc" not in f.metadata:
            continue
        default = "none" if f.default is None else f"`{f.default!r}`"
        own = OWN_NAMES.get(f"{prefix}{f.name}")
        allowed = " / ".join(own) if own else (setting_accepts(cls, f.name) or "").replace("|", "/")
        out.append(f"| `{prefix}{f.name}` | {default} | {allowed} | {f.metadata['doc'].replace('|', '/')} |")
    return out


def render_settings() -> str:
    """The settings table: every scalar key a sweep spec may set, with its default, allowed values and meaning."""
    return "\n".join(
        [
            BEGIN,
            "| key | default | allowed | meaning |",
            "|---|---|---|---|",
            *_rows(SweepSpec),
            *_rows(Resources, "resources."),
            END,
        ]
    )


def updated(text: str) -> str:
    """`text` (docs/sweeps.md) with the table between the markers replaced by the current one."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"docs/sweeps.md lacks the markers {BEGIN!r} ... {END!r}")
    return head + render_settings() + tail


def main() -> int:
    DOC.write_text(updated(DOC.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
