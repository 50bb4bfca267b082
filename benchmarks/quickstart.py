"""The quickstart sweep, recorded: runs `veil sweep sweeps/quickstart.yaml` (what `make quickstart` runs) in a
fresh directory with a fresh MLflow store and writes its figures to benchmarks/quickstart.json. `make docs`
(`python tools/quickstart_quote.py`) then writes the sentence that quotes them into the marked blocks of README.md,
docs/sweeps.md and benchmarks/RESULTS.md, and the quickstart's duration wherever it is said in passing;
`tests/test_docs_commands.py` checks that those blocks say what the JSON holds, so no figure is typed by hand.

    python benchmarks/quickstart.py               # run the sweep twice and record it
    python benchmarks/quickstart.py --runs 1 --no-record   # run once and print only
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-record", action="store_true", help="run and print; write nothing")
    ap.add_argument("--runs", type=int, default=2, help="how many times to run the sweep (default 2)")
    args = ap.parse_args()
    record = record_runs(args.runs)
    print(json.dumps(record, indent=2))
    if not args.no_record:
        RECORD.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {RECORD}; `make docs` (python tools/quickstart_quote.py) rewrites the quoting blocks from it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
