"""Render the generated tables of docs/sweeps.md: the settings table from the SweepSpec fields, and the keys of a
searched parameter (by type), an objective, a constraint and the sampler options from their `param()` dataclasses,
so the documented defaults, ranges and meanings are the ones the parser applies and its errors say
(tests/sweeps/test_sweeps_doc.py checks the doc is current).

python tools/sweeps_doc.py [--check]   (rewrites the tables between the markers of docs/sweeps.md; or `make docs`)"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from doc_file import parser, write_or_check

from veil.config import REQUIRED, allowed_text, hints
from veil.sweeps.model import SweepSpec
from veil.sweeps.objectives import Constraint, Objective
from veil.sweeps.samplers import SAMPLERS, sampler_entry
from veil.sweeps.space import SPACE_TYPES, TYPE_ALIASES
from veil.sweeps.spec_keys import Resources, setting_accepts

BEGIN = "<!-- sweep settings: generated from veil.sweeps.sweepspec.SweepSpec by python tools/sweeps_doc.py -->"
END = "<!-- end of sweep settings -->"
KEYS_BEGIN = (
    "<!-- sweep keys: generated from veil.sweeps.space, veil.sweeps.objectives and veil.sweeps.samplers "
    "by python tools/sweeps_doc.py -->"
)
KEYS_END = "<!-- end of sweep keys -->"
DOC = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"
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


def _key_rows(cls: type, first: str) -> list[str]:
    """One row per field of a `param()` dataclass read by `build(strict=True)`: what its errors say it allows."""
    th, out = hints(cls), []
    for f in dataclasses.fields(cls):
        default = "required" if f.default is REQUIRED else "none" if f.default is None else f"`{f.default!r}`"
        allowed = allowed_text(f.metadata, th[f.name], plain=True).replace("|", "/")
        out.append(f"| {first} | `{f.name}` | {default} | {allowed} | {f.metadata['doc'].replace('|', '/')} |")
    return out


def render_keys() -> str:
    """The keys of a searched parameter by its type, of an objective, of a constraint and of Veil's own samplers'
    options, each with its default, allowed values and meaning."""
    spellings = {name: [name, *(a for a, n in TYPE_ALIASES.items() if n == name)] for name in SPACE_TYPES}
    rows = [f"`space.NAME`, `type: {' / '.join(spellings[name])}`" for name in SPACE_TYPES]
    options = [(name, sampler_entry(name).options_cls) for name in SAMPLERS]
    return "\n".join(
        [
            KEYS_BEGIN,
            "| where | key | default | allowed | meaning |",
            "|---|---|---|---|---|",
            *(r for row, cls in zip(rows, SPACE_TYPES.values()) for r in _key_rows(cls, row)),
            *_key_rows(Objective, "`objectives[i]`"),
            *_key_rows(Constraint, "`constraints[i]`: 'METRIC OP NUMBER'"),
            *(r for name, cls in options if cls is not None for r in _key_rows(cls, f"`sampler_options` ({name})")),
            KEYS_END,
        ]
    )


def _replace(text: str, begin: str, end: str, table: str) -> str:
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"docs/sweeps.md lacks the markers {begin!r} ... {end!r}")
    return head + table + tail


def updated(text: str) -> str:
    """`text` (docs/sweeps.md) with the tables between the markers replaced by the current ones."""
    return _replace(_replace(text, BEGIN, END, render_settings()), KEYS_BEGIN, KEYS_END, render_keys())


def main(argv: list[str] | None = None) -> int:
    """Rewrite docs/sweeps.md's tables; with --check, only say whether they are current (exit 1 if not)."""
    args = parser(__doc__).parse_args(argv)
    return write_or_check({DOC: updated(DOC.read_text())}, check=args.check, command="python tools/sweeps_doc.py")


if __name__ == "__main__":
    sys.exit(main())
