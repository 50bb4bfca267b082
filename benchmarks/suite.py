"""Veil's benchmark suite: every benchmark of issue 13 against a paper-style baseline and the hardware limit,
one row per benchmark appended to benchmarks/results/suite.jsonl. `make docs` (`python tools/bench_targets_block.py`)
then rewrites the Targets block of benchmarks/README.md from that file. benchmarks/README.md says what each benchmark
measures and against what.

    python benchmarks/suite.py                 # the whole suite (tens of minutes on 2 cores)
    python benchmarks/suite.py --quick         # small rows and epochs: a few minutes
    python benchmarks/suite.py --quick --only gpp eigan
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the bench_* modules beside this file; paper_loops, federation_rounds

from bench_cli import run_cli  # noqa: E402
from bench_common import Row, load, machine  # noqa: E402
from bench_sweeps import (  # noqa: E402
    run_adult_sweep,
    run_optuna_loop,
    run_population,
    run_population_sizes,
    run_quickstart,
)
from bench_training import CENTRALIZED, run_audit, run_centralized, run_d_eigan, run_k1000  # noqa: E402

RESULTS = HERE / "results" / "suite.jsonl"


# -- the suite -----------------------------------------------------------------------------------------------------
BENCHMARKS: dict[str, Callable[[bool], Row]] = {
    **{name: (lambda quick, name=name: run_centralized(name, quick)) for name in CENTRALIZED},
    "d-eigan": run_d_eigan,
    "k1000": run_k1000,
    "quickstart": run_quickstart,
    "population": run_population,
    "population-sizes": run_population_sizes,
    "optuna-loop": run_optuna_loop,
    "adult-sweep": run_adult_sweep,
    "audit": run_audit,
    "cli": run_cli,
}


def run_benchmark(name: str, quick: bool, command: str) -> Row:
    """One benchmark as one results row: what it measured, on what, when and under what load."""
    load_before = load()
    t0 = time.time()
    measured = BENCHMARKS[name](quick)
    return {
        "benchmark": name,
        "quick": quick,
        "command": command,
        "machine": machine(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_avg": max(load_before, load()),
        "seconds": round(time.time() - t0, 1),
        **measured,
    }


def append(row: Row, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small rows, epochs and K: minutes on 2 cores")
    ap.add_argument("--only", nargs="+", choices=list(BENCHMARKS), help="run only these benchmarks")
    ap.add_argument("--results", type=Path, default=RESULTS, help="JSON-lines file the rows are appended to")
    args = ap.parse_args(argv)
    command = "python benchmarks/suite.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    failed = []
    for name in args.only or list(BENCHMARKS):
        print(f"{name} ...", flush=True)
        try:
            row = run_benchmark(name, args.quick, command.strip())
        except Exception as e:  # one broken benchmark must not cost the others' rows
            print(f"{name} failed: {e}", file=sys.stderr, flush=True)
            failed.append(name)
            continue
        append(row, args.results)
        print(json.dumps({k: v for k, v in row.items() if k not in ("machine", "command")}), flush=True)
    print(
        f"rows appended to {args.results}; `make docs` rewrites the Targets block of benchmarks/README.md", flush=True
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
