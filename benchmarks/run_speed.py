"""Speed benchmark of `veil run`: wall time, peak RSS and audit figures of one CLI run, appended to
benchmarks/RESULTS.md with the exact command that produced them.

    python benchmarks/run_speed.py                      # GPP, 20,000 rows, paper defaults
    python benchmarks/run_speed.py -- --method eigan --dataset gaussian-quadrant --set n=20000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

DEFAULT = ["--method", "gpp", "--dataset", "gaussian-correlated", "--set", "n=20000"]
RESULTS = Path(__file__).with_name("RESULTS.md")
SECTION = "## veil run speed"
TABLE = "| date | command | time | peak RSS | audit | machine |\n|---|---|---|---|---|---|"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to RESULTS.md")
    ap.add_argument("veil_args", nargs="*", help="arguments for `veil run` (after --)")
    args = ap.parse_args()
    veil_args = args.veil_args or DEFAULT
    veil = str(Path(sys.executable).with_name("veil"))
    cmd = [veil, "run", *veil_args, "--quiet", "--json"]
    with tempfile.TemporaryDirectory() as work:
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        wall = time.time() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        return proc.returncode
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    m = out["metrics"]
    line = (
        f"| {date.today()} | `veil run {shlex.join(veil_args)}` | {wall:.1f} s wall "
        f"(train {m['train_seconds']:.1f} s) | {rss_mb:.0f} MB | utility_auc {m['utility_auc']:.3f}, "
        f"adversary_auc {m['adversary_auc']:.3f} | {os.cpu_count()} CPU, {platform.machine()}, torch threads default |"
    )
    print(line)
    if not args.no_record:
        text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
        if SECTION not in text:
            text += f"\n{SECTION}\n\n{TABLE}\n"
        RESULTS.write_text(text.replace(TABLE, f"{TABLE}\n{line}", 1))  # newest row first
    return 0


if __name__ == "__main__":
    sys.exit(main())
