"""The quickstart sweep, recorded: runs `veil sweep sweeps/quickstart.yaml` (what `make quickstart` runs) in a
fresh directory with a fresh MLflow store, writes its figures to benchmarks/quickstart.json, and writes the
sentence that quotes them into the marked blocks of README.md, docs/sweeps.md and benchmarks/RESULTS.md, and the
quickstart's duration wherever it is said in passing (README.md, docs/sweeps.md, sweeps/quickstart.yaml).
`tests/test_docs_commands.py` checks that those blocks say what the JSON holds, so no figure is typed by hand.

    python benchmarks/quickstart.py               # run the sweep twice, record it, rewrite the quoting blocks
    python benchmarks/quickstart.py --runs 1 --no-record   # run once and print only
    python benchmarks/quickstart.py --quote       # rewrite the quoting blocks from the recorded JSON
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORD = Path(__file__).with_name("quickstart.json")
QUOTED_IN = ("README.md", "docs/sweeps.md", "benchmarks/RESULTS.md")
BEGIN = "<!-- quickstart figures: written by `python benchmarks/quickstart.py` from benchmarks/quickstart.json -->"
END = "<!-- end of quickstart figures -->"
COMMAND = "veil sweep sweeps/quickstart.yaml"


def run_sweep() -> dict[str, Any]:
    """Run the quickstart as a user would (`veil` from this environment, in a directory of its own)."""
    veil = str(Path(sys.executable).with_name("veil"))
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    with tempfile.TemporaryDirectory() as work:
        shutil.copytree(ROOT / "sweeps", Path(work) / "sweeps")
        load = os.getloadavg()[0]
        t0 = time.time()
        proc = subprocess.run(
            [veil, *COMMAND.split()[1:], "--json", "--quiet"], cwd=work, env=env, capture_output=True, text=True
        )
        wall = time.time() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{COMMAND} failed:\n{proc.stderr[-3000:]}")
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        with open(summary["files"]["front.csv"]) as f:
            front = list(csv.DictReader(f))
    cols = ("beta", "utility_auc", "privacy_gap", "adversary_auc")
    return {
        "command": COMMAND,
        "recorded_by": "python benchmarks/quickstart.py",
        "date": date.today().isoformat(),
        "machine": f"{os.cpu_count()} CPU, {platform.machine()}, load average {max(load, os.getloadavg()[0]):.1f}",
        "wall_seconds": round(wall, 1),
        "sweep_seconds": round(summary["seconds"], 1),
        "trials": summary["trials"],
        "finished": summary["finished"],
        "reference": dict(zip((o["metric"] for o in summary["objectives"]), summary["reference"])),
        "hypervolume": summary["hypervolume"],
        "chull_auc": summary["chull_auc"],
        "chull_leakage": summary["chull_leakage"],
        "chull_origin": summary["chull_origin"],
        "front": sorted(({c: float(row[c]) for c in cols} for row in front), key=lambda p: p["utility_auc"]),
    }


def record_runs(n: int) -> dict[str, Any]:
    """The first run in full, and the figures of all `n`: GPP's release noise is fresh at every audit, so
    repeated runs differ a little and the record says by how much."""
    runs = [run_sweep() for _ in range(n)]
    keys = ("hypervolume", "chull_auc", "sweep_seconds")
    return {**runs[0], "runs": [{k: r[k] for k in keys} | {"front_points": len(r["front"])} for r in runs]}


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


DURATION_IN = ("README.md", "docs/sweeps.md", "sweeps/quickstart.yaml")
"""Where the quickstart's duration is said in passing; each says `duration(record)`, rewritten with the blocks."""
DURATION = re.compile(r"about [\d.]+ minutes? on 2 cores \(recorded\)")


def duration(r: dict[str, Any]) -> str:
    """The whole command's recorded wall time in half minutes: 'about 2.5 minutes on 2 cores (recorded)'."""
    minutes = max(0.5, round(r["wall_seconds"] / 30) / 2)
    return f"about {minutes:g} minute{'' if minutes == 1 else 's'} on 2 cores (recorded)"


def rewrite_quotes(r: dict[str, Any]) -> None:
    for name in QUOTED_IN:
        path = ROOT / name
        text = path.read_text()
        start, end = text.index(BEGIN), text.index(END) + len(END)
        path.write_text(text[:start] + block(r) + text[end:])
    for name in DURATION_IN:
        path = ROOT / name
        path.write_text(DURATION.sub(duration(r), path.read_text()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-record", action="store_true", help="run and print; write nothing")
    ap.add_argument("--runs", type=int, default=2, help="how many times to run the sweep (default 2)")
    ap.add_argument("--quote", action="store_true", help="rewrite the quoting blocks from the recorded JSON only")
    args = ap.parse_args()
    if args.quote:
        rewrite_quotes(json.loads(RECORD.read_text()))
        return 0
    record = record_runs(args.runs)
    print(json.dumps(record, indent=2))
    print(quote(record))
    if not args.no_record:
        RECORD.write_text(json.dumps(record, indent=2) + "\n")
        rewrite_quotes(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
