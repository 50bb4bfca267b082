"""Why EIGAN and D-EIGAN default to 5 adversary steps and release_noise 0.1 where the papers have 1 and 0
(`preset: paper` restores both): the runs behind the two defaults.

    python studies/eigan_defaults.py schedule   # EIGAN with 1 and with 5 adversary steps per encoder step
    python studies/eigan_defaults.py noise      # EIGAN and D-EIGAN per release_noise level and seed (--levels, --seeds)

Every run is a real `veil run` process started as benchmarks/targets.py starts its cases (one thread, a throw-away
MLflow store). Results accumulate in studies/results/eigan_defaults.json, each with the command behind it; a run
already recorded is skipped unless --redo. `make docs` (`python tools/eigan_defaults_doc.py`) renders
docs/eigan-defaults.md from that file alone."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))  # targets.py: its `veil` processes and their summaries
import targets  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "eigan_defaults.json"


def load() -> dict[str, Any]:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {"meta": {}}


def save(data: dict[str, Any]) -> None:
    targets.save(data, RESULTS)


#: EIGAN's adversary schedule, measured where calibration first failed: 1 (Alg. A1) vs 5 adversary steps, at the
#: alpha calibration used to end at and at the one it ends at now
SCHEDULE_CASES = ("applicants.csv", "gaussian-correlated n=12000")
SCHEDULE_ALPHAS = (0.01, 0.001)
SCHEDULE_STEPS = (1, 5)
SCHEDULE_SEEDS = (0, 1, 2)


def schedule(redo: bool = False) -> None:
    """EIGAN at fixed alphas with Alg. A1's one adversary step per encoder step and with Veil's default 5, run
    seeds 0-2 on the same rows, each release certified against the default target: what the default buys. The
    release is E(x) itself (release_noise 0), so the schedule is all that differs. Runs already recorded are kept
    unless `redo`."""
    data = load()
    runs = [] if redo else list(data.get("schedule", []))
    done = {(r["data"], r["alpha"], r["adversary_steps"], r["seed"]) for r in runs}
    with tempfile.TemporaryDirectory() as tmp:
        for label in SCHEDULE_CASES:
            for alpha in SCHEDULE_ALPHAS:
                for k in SCHEDULE_STEPS:
                    for seed in SCHEDULE_SEEDS:
                        if (label, alpha, k, seed) in done:
                            continue
                        args = ["run", "-m", "eigan", *targets.DATASETS[label], "--set", f"alpha={alpha}"]
                        args += ["--set", f"adversary_steps={k}", "--set", f"seed={seed}"]
                        args += ["--set", "release_noise=0", "--json", "--quiet"]
                        raw = targets.veil(args, Path(tmp))
                        runs.append(
                            {
                                "data": label,
                                "alpha": alpha,
                                "adversary_steps": k,
                                "seed": seed,
                                "command": "veil " + shlex.join(args),
                                **targets.summary(raw),
                            }
                        )
                        data["schedule"] = runs
                        save(data)
                        print(label, alpha, k, seed, raw["exit"], (runs[-1].get("privacy_gap") or {}).get("high"))


#: EIGAN's and D-EIGAN's release noise, measured on the cases their deterministic release did not meet: each
#: case at every level (0 = the paper's deterministic release) over training seeds
NOISE_LEVELS = (0.0, 0.02, 0.05, 0.1)
NOISE_SEEDS = (0, 1, 2)
NOISE_METHODS = ("eigan", "d-eigan")
NOISE_CASES = ("adult", "applicants.csv", "gaussian-correlated n=12000")


def noise(levels: list[float], seeds: list[int], redo: bool = False) -> None:
    """EIGAN and D-EIGAN with `release_noise` set to each level and `seed` to each training seed, nothing else
    (alpha calibrated to the default target, as in the cases). Recorded per case under 'LEVEL/SEED'; kept unless
    `redo`."""
    data = load()
    runs = data.setdefault("noise", {})
    for level in levels:
        for seed in seeds:
            for method in NOISE_METHODS:
                for label in NOISE_CASES:
                    key, at = f"{method}/{label}", f"{level:g}/{seed}"
                    if at in runs.get(key, {}) and not redo:
                        continue
                    args = ["run", "-m", method, *targets.DATASETS[label], "--set", f"release_noise={level:g}"]
                    args += ["--set", f"seed={seed}", "--json", "--quiet"]
                    with tempfile.TemporaryDirectory() as tmp:
                        raw = targets.veil(args, Path(tmp))
                    runs.setdefault(key, {})[at] = {"command": "veil " + shlex.join(args), **targets.summary(raw)}
                    save(data)
                    print(
                        f"{key} {at}: exit {raw['exit']} in {raw['seconds']} s {runs[key][at].get('met', '')}",
                        flush=True,
                    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=("schedule", "noise"))
    p.add_argument("--redo", action="store_true", help="run what is already recorded again")
    p.add_argument("--levels", nargs="*", type=float, default=[], help="release_noise levels (noise)")
    p.add_argument("--seeds", nargs="*", type=int, default=[], help="training seeds (noise)")
    args = p.parse_args(argv)
    parts = {
        "schedule": lambda: schedule(args.redo),
        "noise": lambda: noise(args.levels or list(NOISE_LEVELS), args.seeds or list(NOISE_SEEDS), args.redo),
    }
    parts[args.part]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
