"""Write the coverage tables of docs/certificates.md from benchmarks/results/coverage.json.

The summary (one row per statistic), the full table (one row per cell and statistic) and the line that names the
commands come from the record alone, which `python benchmarks/coverage.py` writes; nothing is measured here.

python tools/coverage_doc.py [--check]   (or `make docs`)"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from doc_file import parser, write_or_check

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "coverage.json"
PAGE = ROOT / "docs" / "certificates.md"
BEGIN = "<!-- coverage tables: written by `python tools/coverage_doc.py` from benchmarks/results/coverage.json -->"
END = "<!-- end of coverage tables -->"
STATISTICS = {
    "bootstrap-max": ("before: bootstrap of the maximum of five folded gaps", "audit probe + suite (5)"),
    "max-t": ("max-t simultaneous", "audit probe + suite (5)"),
    "split-test": ("choose on half the test rows", "audit probe + suite (5)"),
    "selected": ("only the fold's choice", "suite (4)"),
    "max-one-sided": ("**now: the largest one-sided bound**", "suite (4)"),
}
"""Each statistic the benchmark records: its row label and the adversaries it attacks with."""
NOMINAL = 0.95
EXAMPLE = {"kind": "null", "rows": 1000, "share": 0.1}
"""The cell the summary's last column quotes: a null release at 1,000 test rows and a 10% minority."""


def summary(records: list[dict[str, Any]]) -> str:
    """One row per statistic: its lowest coverage, the cells under 95% (and how many of those hold 95% inside
    their Wilson interval), its slack over the null cells, and its upper end on the example cell."""
    lines = [
        f"| statistic | adversaries | lowest coverage over the {len(records) // len(STATISTICS)} cells | cells "
        "under 0.95 (of those, with 0.95 inside their 95% interval) | slack / limit on the null release "
        f"({sum(r['kind'] == 'null' for r in records) // len(STATISTICS)} cells) | at 1,000 rows, 10% minority |",
        "|---|---|---|---|---|---|",
    ]
    for stat, (label, adversaries) in STATISTICS.items():
        rows = [r for r in records if r["statistic"] == stat]
        under = [r for r in rows if r["coverage"] < NOMINAL]
        within = sum(r["coverage_high"] >= NOMINAL for r in under)
        null = [r["slack_ratio"] for r in rows if r["kind"] == "null"]
        (ex,) = [r for r in rows if all(r[k] == v for k, v in EXAMPLE.items())]
        lines.append(
            f"| {label} | {adversaries} | {min(r['coverage'] for r in rows):.3f} | {len(under)} ({within} within) | "
            f"{min(null):.2f}-{max(null):.2f} | upper end {ex['median_slack']:.3f} ({ex['slack_ratio']:.2f}x) |"
        )
    return "\n".join(lines)


def cells(records: list[dict[str, Any]]) -> str:
    """Every cell and statistic: coverage with its Wilson lower end, median slack, slack / limit."""
    lines = [
        "| release | minority | test rows | statistic | coverage [95% low] | median slack | slack / limit |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['kind']} (five {r['truth_all']:.3f}, suite {r['truth_suite']:.3f}, Bayes "
            f"{r['truth_bayes']:.3f}) | {r['share']:.0%} | {r['rows']} | {r['statistic']} | "
            f"{r['coverage']:.3f} [{r['coverage_low']:.3f}] | {r['median_slack']:.4f} | {r['slack_ratio']:.2f} |"
        )
    return "\n".join(lines)


def provenance(data: dict[str, Any]) -> str:
    """The commands that recorded the file, with their commit, machine and durations."""
    commands = "; ".join(f"`{c}`" for c in data["commands"])
    seconds = " and ".join(f"{s} s" for s in data["seconds"])
    merged = ", their records merged into `benchmarks/results/coverage.json`" if len(data["commands"]) > 1 else ""
    r = data["records"][0]
    return (
        f"Commands (run side by side{merged}): {commands}; commit {data['commit']}; {data['machine']}; {seconds}. "
        f"The suite is fitted {r['fits']} times per release on {data['train_rows']:,} fresh training rows "
        f"({r['reps'] // r['fits']} test splits per fit and size), and each split is scored with {data['boot']} "
        "bootstrap resamples (the certificate takes 1,000)."
    )


def block(data: dict[str, Any]) -> str:
    records = data["records"]
    return "\n\n".join(
        [
            BEGIN,
            summary(records),
            f"Every cell ({records[0]['reps']} test splits each; coverage with the lower end of its 95% Wilson "
            "interval):",
            "<details><summary>the full table</summary>",
            cells(records),
            "</details>",
            provenance(data),
            END,
        ]
    )


def rewritten(data: dict[str, Any]) -> dict[Path, str]:
    text = PAGE.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return {PAGE: text[:start] + block(data) + text[end:]}


def load() -> dict[str, Any]:
    return json.loads(RESULTS.read_text())


def main(argv: list[str] | None = None) -> int:
    """Rewrite the coverage block; with --check, only say whether it is current (exit 1 if not)."""
    args = parser(__doc__).parse_args(argv)
    return write_or_check(rewritten(load()), check=args.check, command="python tools/coverage_doc.py")


if __name__ == "__main__":
    sys.exit(main())
