"""The certificate's bootstrap against the test split's size: wall time and peak RSS of one adversary's 1,000
resampled AUCs at 10k, 100k and 1M test rows, each point a fresh process:

- `streamed`: the certificate's `Resamples` (drawn once and held where they fit in `BLOCK_CELLS` counts, as at 10k
  rows; beyond that drawn again a block at a time at each read);
- `full`: the whole (resamples x rows) count matrix held at once, as the certificate held it before `Resamples`;
- `loop`: what a user would write instead, a loop of index resamples scored by scikit-learn's `roc_auc_score`.

    python benchmarks/bootstrap_rows.py                       # all points; results/bootstrap_rows.{json,png}
    python benchmarks/bootstrap_rows.py --rows 10000 100000   # fewer points
    python benchmarks/bootstrap_rows.py --draws 200

`loop` runs only where it finishes in minutes (`LOOP_MAX_ROWS`); the machine's load is recorded beside each
point, as is the command."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "bootstrap_rows.json"
PLOT = RESULTS.with_suffix(".png")
VARIANTS = ("streamed", "full", "loop")
#: the naive loop is skipped above this many rows (it would take most of an hour)
LOOP_MAX_ROWS = 100_000


def point(variant: str, rows: int, draws: int) -> dict[str, float]:
    """One measurement in this process: (seconds, peak RSS in MiB, mean of the resampled AUCs)."""
    import numpy as np

    from veil.certify.intervals import Resamples, resample_counts, weighted_aucs

    rng = np.random.default_rng(0)
    y = rng.random(rows) < 0.1
    score = rng.normal(size=rows) + 0.5 * y
    t0 = time.perf_counter()
    if variant == "streamed":
        aucs = weighted_aucs(score, y, Resamples(rows, draws, 7))
    elif variant == "full":
        aucs = weighted_aucs(score, y, resample_counts(rows, draws, 7))
    else:
        from sklearn.metrics import roc_auc_score

        aucs = np.array([roc_auc_score(y[i], score[i]) for i in (rng.integers(0, rows, rows) for _ in range(draws))])
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": round(seconds, 2), "peak_rss_mib": round(rss, 1), "mean_auc": round(float(np.mean(aucs)), 4)}


def measure(variant: str, rows: int, draws: int) -> dict[str, float]:
    """`point` in a fresh process (its peak RSS is its own)."""
    code = f"import json, sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import bootstrap_rows as b; "
    code += f"print(json.dumps(b.point({variant!r}, {rows}, {draws})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def plot(data: dict) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.6))
    for i, (key, label) in enumerate((("seconds", "wall time (s)"), ("peak_rss_mib", "peak RSS (MiB)"))):
        ax = fig.add_subplot(1, 2, i + 1)
        for variant in VARIANTS:
            pts = sorted((p["rows"], p[key]) for p in data["points"] if p["variant"] == variant)
            if pts:
                ax.plot([r for r, _ in pts], [v for _, v in pts], marker="o", label=variant)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("test rows")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle(f"one adversary's {data['draws']} bootstrap AUCs", fontsize=10)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", nargs="*", type=int, default=[10_000, 100_000, 1_000_000])
    p.add_argument("--draws", type=int, default=1000)
    args = p.parse_args(argv)
    points = []
    for rows in args.rows:
        for variant in VARIANTS:
            if variant == "loop" and rows > LOOP_MAX_ROWS:
                continue
            load = os.getloadavg()[0]
            rec = {
                "variant": variant,
                "rows": rows,
                "load_before": round(load, 2),
                **measure(variant, rows, args.draws),
            }
            points.append(rec)
            print(json.dumps(rec), flush=True)
    data = {
        "command": "python benchmarks/bootstrap_rows.py " + shlex.join(sys.argv[1:] if argv is None else argv),
        "draws": args.draws,
        "machine": f"{os.cpu_count()} CPU, {platform.machine()}, Python {platform.python_version()}",
        "date": date.today().isoformat(),
        "points": points,
    }
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    plot(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
