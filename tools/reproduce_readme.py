"""Render README.md's reproduction block from what `veil nightly --suite benchmarks/reproduce/suite.yaml` wrote:
one short line per row (its verdicts, links to its section of RESULTS.md and to its front), the counts, and a link
to RESULTS.md. The figures and causes stay in RESULTS.md; this reads only results.json and fronts/ beside it
(tests/test_docs_commands.py checks that README.md is current).

python tools/reproduce_readme.py [--results benchmarks/reproduce] [--readme README.md] [--check]   (or `make docs`)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from doc_file import parser, write_or_check

from veil.reproduce.render import counts_line, relative, row_verdicts

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- reproduce:begin -->", "<!-- reproduce:end -->"


def _href(path: Path, base: Path) -> str:
    return relative(path, base) or str(path.resolve())


def render_block(results_dir: Path, readme: Path) -> str:
    """The text between the markers: the summary table of `results_dir/results.json`, links relative to `readme`."""
    records = json.loads((results_dir / "results.json").read_text())
    rows: dict[str, list[str]] = {}
    for r in records:  # in the suite's order, a row's figures together
        rows.setdefault(r["row"], []).append(r["verdict"])
    table = results_dir / "RESULTS.md"
    out = ["| row | verdicts | details |", "|---|---|---|"]
    for rid, verdicts in rows.items():
        links = [f"[figures and cause]({_href(table, readme.parent)}#{rid})"]
        front = results_dir / "fronts" / f"{rid}.png"
        if front.exists():
            links.append(f"[front]({_href(front, readme.parent)})")
        out.append(f"| **{rid}** | {row_verdicts(verdicts)} | {' · '.join(links)} |")
    every = [v for verdicts in rows.values() for v in verdicts]
    more = (
        "Each row's figures in full, their verdicts, the cause of every gap and the MLflow records behind them: "
        f"[{table.name}]({_href(table, readme.parent)})."
    )
    return "\n".join(out) + f"\n\n{counts_line(every, values=False)}\n\n{more}\n"


def rewrite(readme: Path, block: str) -> str:
    """`readme`'s text with the block between the markers replaced."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: no {BEGIN} ... {END} markers to write between")
    head, rest = text.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{block}{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "reproduce", help="where results.json is")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md", help="the Markdown file with the markers")
    args = ap.parse_args(argv)
    new = rewrite(args.readme, render_block(args.results, args.readme))
    return write_or_check({args.readme: new}, check=args.check, command="python tools/reproduce_readme.py")


if __name__ == "__main__":
    sys.exit(main())
