"""Render README.md's reproduction block from what `veil nightly --suite benchmarks/reproduce/suite.yaml` wrote:
one short line per row (its name linking to its section of RESULTS.md, its first figure as the paper reports it
and as Veil measures it at `preset: paper`, its verdicts), the counts, and a link to RESULTS.md. Every figure, the
causes and the fronts stay in RESULTS.md; this reads only results.json (tests/test_docs_commands.py checks that
README.md is current).

python tools/reproduce_readme.py [--results benchmarks/reproduce] [--readme README.md] [--check]   (or `make docs`)"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from doc_file import parser, write_or_check

from veil.reproduce.render import counts_line, relative, row_verdicts

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- reproduce:begin -->", "<!-- reproduce:end -->"


def _href(path: Path, base: Path) -> str:
    return relative(path, base) or str(path.resolve())


HEADLINE_METRICS = 2  # a row's first two metrics: the README line stays under 200 characters
SAME_AS = re.compile(r"^= (\S+) \(Veil ([-\d.]+)")  # a paper claim of equality with another entry, as Veil read it


def headline(record: dict) -> str:
    """A row's first figure in a few words: the entry and its setting, then each metric as 'paper -> Veil'."""
    at = " ".join(f"{k} {v}" for k, v in record["at"].items())
    figures = []
    for metric, paper in list(record["paper"].items())[:HEADLINE_METRICS]:
        same = SAME_AS.match(paper)
        claim = f"={same[1]} {same[2]}" if same else paper
        figures.append(f"{metric} {claim} → {record['veil_paper'][metric][0]:.3f}")
    return f"{record['entry']}{' ' + at if at else ''}: {', '.join(figures)}"


def render_block(results_dir: Path, readme: Path) -> str:
    """The text between the markers: the summary table of `results_dir/results.json`, links relative to `readme`."""
    records = json.loads((results_dir / "results.json").read_text())
    rows: dict[str, list[dict]] = {}
    for r in records:  # in the suite's order, a row's figures together
        rows.setdefault(r["row"], []).append(r)
    table = results_dir / "RESULTS.md"
    out = ["| row | first figure: paper → Veil at `preset: paper` | verdicts |", "|---|---|---|"]
    for rid, mine in rows.items():
        verdicts = row_verdicts([r["verdict"] for r in mine])
        out.append(f"| [{rid}]({_href(table, readme.parent)}#{rid}) | {headline(mine[0])} | {verdicts} |")
    every = [r["verdict"] for mine in rows.values() for r in mine]
    more = (
        "Each row's figures in full, their verdicts, the cause of every gap, the fronts and the MLflow records behind "
        "them: "
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
