"""Write the quickstart's quoted figures (README.md, docs/sweeps.md, benchmarks/RESULTS.md) from quickstart.json.

The sentence in each marked block, and the duration said in passing (README.md, docs/sweeps.md,
sweeps/quickstart.yaml), come from benchmarks/quickstart.json alone (what benchmarks/quickstart.py records); nothing
is measured here (tests/test_docs_commands.py checks the docs say what the JSON holds, so no figure is typed by
hand).

python tools/quickstart_quote.py [--check]   (or `make docs`)"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from doc_file import parser, write_or_check

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "quickstart.json"
QUOTED_IN = ("README.md", "docs/sweeps.md", "benchmarks/RESULTS.md")
BEGIN = "<!-- quickstart figures: written by `python tools/quickstart_quote.py` from benchmarks/quickstart.json -->"
END = "<!-- end of quickstart figures -->"
DURATION_IN = ("README.md", "docs/sweeps.md", "sweeps/quickstart.yaml")
"""Where the quickstart's duration is said in passing; each says `duration(record)`, rewritten with the blocks."""
DURATION = re.compile(r"about [\d.]+ (?:minutes?|seconds) on 2 cores \(recorded\)")


def _spread(r: dict[str, Any], key: str) -> str:
    values = [run[key] for run in r["runs"]]
    return f"{min(values):.4f}-{max(values):.4f}"


def quote(r: dict[str, Any]) -> str:
    """The sentence the docs show, made from the record alone."""
    lo, hi = r["front"][0], r["front"][-1]
    point = lambda p: f"(beta {p['beta']:.3g}: utility AUC {p['utility_auc']:.3f}, privacy gap {p['privacy_gap']:.3f})"  # noqa: E731
    ref = ", ".join(f"{m} {v:g}" for m, v in r["reference"].items())
    return (
        f"Recorded {r['date']} by `{r['recorded_by']}` into `benchmarks/quickstart.json` ({r['machine']}): "
        f"`{r['command']}` finished {r['finished']} of {r['trials']} trials in {r['sweep_seconds']:.0f} s "
        f"({r['wall_seconds']:.0f} s for the whole command). Front of {len(r['front'])} points from {point(lo)} "
        f"to {point(hi)}; hypervolume {r['hypervolume']:.4f} against ({ref}); convex-hull AUC {r['chull_auc']:.4f} "
        f"(utility_auc over {r['chull_leakage']}, origin {r['chull_origin']}). Over {len(r['runs'])} runs of the "
        f"same command (GPP draws fresh release noise at every audit): hypervolume {_spread(r, 'hypervolume')}, "
        f"convex-hull AUC {_spread(r, 'chull_auc')}."
    )


def block(r: dict[str, Any]) -> str:
    return f"{BEGIN}\n{quote(r)}\n{END}"


def duration(r: dict[str, Any]) -> str:
    """The whole command's recorded wall time: under 90 s to 5 seconds ('about 45 seconds on 2 cores (recorded)'),
    else in half minutes ('about 2.5 minutes on 2 cores (recorded)')."""
    if r["wall_seconds"] < 90:
        return f"about {max(5, 5 * round(r['wall_seconds'] / 5))} seconds on 2 cores (recorded)"
    minutes = round(r["wall_seconds"] / 30) / 2
    return f"about {minutes:g} minute{'' if minutes == 1 else 's'} on 2 cores (recorded)"


def rewritten(r: dict[str, Any]) -> dict[Path, str]:
    """Each file that quotes the record, with its block and its durations made from `r`."""
    out: dict[Path, str] = {}
    for name in QUOTED_IN:
        path = ROOT / name
        text = path.read_text()
        start, end = text.index(BEGIN), text.index(END) + len(END)
        out[path] = text[:start] + block(r) + text[end:]
    for name in DURATION_IN:
        path = ROOT / name
        out[path] = DURATION.sub(duration(r), out.get(path) or path.read_text())
    return out


def main(argv: list[str] | None = None) -> int:
    """Rewrite the quoting blocks; with --check, only say whether they are current (exit 1 if not)."""
    ap = parser(__doc__)
    args = ap.parse_args(argv)
    texts = rewritten(json.loads(RECORD.read_text()))
    return write_or_check(texts, check=args.check, command="python tools/quickstart_quote.py")


if __name__ == "__main__":
    sys.exit(main())
