"""Leakage targets, measured: every privacy method run with no options on data where s correlates with u.

    python benchmarks/targets.py cases               # methods x datasets, no options: met, refused or exit 3
    python benchmarks/targets.py cost                # calibration's wall time against one plain run (quickstart data)
    python benchmarks/targets.py cost --dataset adult --repeats 1   # the same on Adult at the default target
    python benchmarks/targets.py sweep               # a calibrated GPP case against a 32-trial sweep's best feasible trial
    python benchmarks/targets.py recheck             # that sweep's best feasible beta run again with new seeds
    python benchmarks/targets.py reruns --only gpp/applicants.csv --seeds 0 1 2 3 4 5 6 7 8 9
                                                     # one case again per run seed: is its outcome a coin flip?
    python benchmarks/targets.py grid --only gpp/applicants.csv --points 10 --seeds 0 1 2
                                                     # brute force: the knob on a grid, per seed, certified
    python benchmarks/targets.py trail --only gpp/adult   # one case with refinement forced to the end: every candidate

Every case is a real `veil run` process (its own MLflow store in a temporary directory) with the environment's
thread settings pinned to one thread (OMP_NUM_THREADS=1: on 2 shared cores, oversubscribed threads slow torch and
scikit-learn tenfold). Results accumulate in benchmarks/results/targets.json, each with the command behind it; a
case already recorded is skipped unless --redo. --only METHOD or METHOD/DATASET limits the cases. `make docs`
(`python tools/targets_doc.py`) renders docs/targets.md from that file alone."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "targets.json"
METHODS = ("gpp", "eigan", "ldp-frl", "adjustable-ae", "d-eigan", "d-gpp")
#: dataset label -> the `veil run` arguments that name it (no method option ever)
DATASETS: dict[str, list[str]] = {
    "gaussian-correlated": ["-d", "gaussian-correlated"],
    "gaussian-correlated n=12000": ["-d", "gaussian-correlated", "-p", "n=12000"],
    "adult": ["-d", "adult"],
    "compas": ["-d", "compas"],
    "applicants.csv": ["-d", "examples/applicants.csv", "-p", "utility=approved", "-p", "sensitive=group"],
    "minority-4000.csv": ["-d", ".veil/bench/minority-4000.csv", "-p", "utility=approved", "-p", "sensitive=group"],
}
#: the generated table of the minority-4000.csv case (`minority_table`)
MINORITY = ROOT / ".veil" / "bench" / "minority-4000.csv"


def minority_table(path: Path = MINORITY, n: int = 4000, seed: int = 0) -> Path:
    """A 4,000-row table with a 10% minority whose utility label reveals it (P(approved | group) 0.7 against 0.4:
    a gap of 0.15): two features carry the utility label, one the group, two are noise. Deterministic."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    group = (rng.random(n) < 0.1).astype(int)
    approved = (rng.random(n) < np.where(group == 1, 0.7, 0.4)).astype(int)
    x = rng.standard_normal((n, 5))
    x[:, 0] += 1.5 * approved
    x[:, 1] += 1.0 * approved
    x[:, 2] += 1.0 * group
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)]).assign(approved=approved, group=group)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


#: the quickstart's data (sweeps/quickstart.yaml) and the tightest round target its 750 test rows can certify
QUICK = ["-d", "gaussian-correlated", "-p", "n=3000"]
QUICK_TARGET = "privacy_gap=0.1"
ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def veil(args: list[str], store: Path) -> dict[str, Any]:
    """One `veil` process from the repository root (the docs' relative paths hold) logging into `store`: exit code,
    wall seconds, the --json object when there is one, the error line if any."""
    exe = str(Path(sys.executable).with_name("veil"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}, **ENV}
    t0 = time.time()
    uri = ["--tracking-uri", f"sqlite:///{store}/mlflow.db"]
    proc = subprocess.run([exe, *args, *uri], cwd=ROOT, env=env, capture_output=True, text=True)
    out: dict[str, Any] = {"exit": proc.returncode, "seconds": round(time.time() - t0, 1)}
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if last.startswith("{"):
        out["result"] = json.loads(last)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    if errors:
        out["error"] = errors[-1][len("error: ") :]
    return out


def commit() -> str:
    """The checkout's commit, recorded beside every figure ('+changes' when src/ differs from it)."""
    proc = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "src"], cwd=ROOT, capture_output=True, text=True)
    return (proc.stdout.strip() or "unknown") + ("+changes" if dirty.stdout.strip() else "")


def summary(raw: dict[str, Any]) -> dict[str, Any]:
    """What the table shows of one `veil run`."""
    out: dict[str, Any] = {k: raw[k] for k in ("exit", "seconds", "error") if k in raw}
    out["commit"] = commit()
    res = raw.get("result")
    if not res:
        return out
    cert, p, m = res.get("certificate") or {}, res["params"], res["metrics"]
    out.update(
        {
            "met": cert.get("met"),
            "privacy_gap": cert.get("privacy_gap"),
            "excess_gap": cert.get("excess_gap"),
            "target": cert.get("target"),
            "utility_auc": cert.get("utility_auc"),
            "strongest": cert.get("strongest_adversary"),
            "knob": cert.get("knob"),
            "calibrated_on_validation": p.get("calibration.met_on_validation"),
            "candidates": p.get("calibration.candidates"),
            "test_rows": cert.get("test_rows"),
            "utility_reveals": cert.get("utility_labels_reveal"),
            "run_seconds": round(float(m.get("total_seconds", 0.0)), 1),
        }
    )
    return out


def load() -> dict[str, Any]:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {"cases": {}, "meta": {}}


def save(data: dict[str, Any], path: Path = RESULTS) -> None:
    """Write `data` to `path` stamped with this machine and today's date (studies/eigan_defaults.py writes its own
    results file with it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data["meta"] = {
        "machine": f"{os.cpu_count()} CPU, {platform.machine()}, Python {platform.python_version()}",
        "threads": "OMP_NUM_THREADS=1",
        "updated": date.today().isoformat(),
    }
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def record(keys: tuple[str, ...], value: Any) -> dict[str, Any]:
    """Set data[keys[0]][keys[1]]... = value in the results file, re-read under a lock: parts run side by side
    (one per core) each add their own records without losing the others'."""
    from filelock import FileLock

    with FileLock(str(RESULTS) + ".lock"):
        data = load()
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
        save(data)
    return data


def cases(only: list[str], redo: bool) -> None:
    minority_table()
    data = load()
    for method in METHODS:
        for label, dargs in DATASETS.items():
            key = f"{method}/{label}"
            if only and not any(key == o or key.startswith(o + "/") for o in only):
                continue
            if key in data["cases"] and not redo:
                continue
            args = ["run", "-m", method, *dargs, "--json", "--quiet"]
            with tempfile.TemporaryDirectory() as tmp:
                raw = veil(args, Path(tmp))
            data = record(("cases", key), {"command": "veil " + shlex.join(args), **summary(raw)})
            print(f"{key}: exit {raw['exit']} in {raw['seconds']} s {data['cases'][key].get('met', '')}", flush=True)


def reruns(only: list[str], seeds: list[int]) -> None:
    """Each case of `only` again per run seed (`--set seed=S`): recorded under data['reruns'][case][seed]."""
    minority_table()
    data = load()
    for key in only:
        method, label = key.split("/", 1)
        for seed in seeds:
            args = ["run", "-m", method, *DATASETS[label], "--set", f"seed={seed}", "--json", "--quiet"]
            with tempfile.TemporaryDirectory() as tmp:
                raw = veil(args, Path(tmp))
            data = record(("reruns", key, str(seed)), {"command": "veil " + shlex.join(args), **summary(raw)})
            rec = data["reruns"][key][str(seed)]
            print(f"{key} seed {seed}: exit {raw['exit']} in {raw['seconds']} s met {rec.get('met')}", flush=True)


def grid(only: list[str], points: int, seeds: list[int], span: list[float] | None = None) -> None:
    """Brute force: each case of `only` with its knob set to `points` values spread over the knob's range (as
    calibration spreads them, or over `span` = [low, high] of it) and each run seed, certified against the default
    target; recorded under
    data['grid'][case]. The best met utility per seed is what calibration should come within 0.03 of."""
    from veil.methods.cards import method_card

    minority_table()
    for key in only:
        method, label = key.split("/", 1)
        knob = method_card(method).privacy_knob
        assert knob is not None, method
        ends = (0.0, 1.0) if not span else (knob.position_of(span[0]), knob.position_of(span[1]))
        for value in [knob.value_at(p) for p in np.linspace(*ends, points)]:
            for seed in seeds:
                extra = ["--set", f"{knob.field}={value:.6g}", "--set", f"seed={seed}"]
                args = ["run", "-m", method, *DATASETS[label], *extra, "--json", "--quiet"]
                with tempfile.TemporaryDirectory() as tmp:
                    raw = veil(args, Path(tmp))
                rec = {"command": "veil " + shlex.join(args), "value": value, "seed": seed, **summary(raw)}
                record(("grid", key, f"{value:.6g}@{seed}"), rec)
                print(f"{key} {knob.field}={value:.4g} seed {seed}: met {rec.get('met')}", flush=True)


COST_REPEATS = 3  # commands per side, the sides alternating: a first process pays cold caches (measured 2x)


def cost(label: str | None = None, repeats: int = COST_REPEATS) -> None:
    """Calibration against one plain run (its knob set, certified) on the quickstart data (or the case data
    `label`, at the default target), same target: the median wall time of `repeats` commands a side, the sides
    taking turns; the certificate of each side's last run."""
    runs: dict[str, Any] = {}
    walls: dict[str, list[float]] = {"plain": [], "calibrated": []}
    where = [*QUICK, "--target", QUICK_TARGET] if label is None else DATASETS[label]
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            for name, extra in (("plain", ["--set", "beta=1"]), ("calibrated", [])):
                args = ["run", "-m", "gpp", *where, *extra, "--json", "--quiet"]
                raw = veil(args, Path(tmp))
                walls[name].append(raw["seconds"])
                runs[name] = {"command": "veil " + shlex.join(args), **summary(raw)}
                print(name, raw["seconds"], flush=True)
    for name, w in walls.items():
        runs[name].update(seconds=float(np.median(w)), walls=w)
    runs["ratio"] = round(runs["calibrated"]["seconds"] / runs["plain"]["seconds"], 2)
    record(("cost" if label is None else f"cost {label}",), runs)


#: the reference sweep: GPP's beta on the data of the "gaussian-correlated n=12000" case, every trial certified
#: against the default target; its best feasible trial is compared with that case's calibrated release
SWEEP_CASE = "gpp/gaussian-correlated n=12000"
SWEEP = """\
description: GPP beta on gaussian-correlated (rho 0.5, n 12000), every trial certified against the default target
method: gpp
dataset: gaussian-correlated
dataset_params: {n: 12000}
space: {beta: {type: log, low: 0.001, high: 30}}
objectives: [{metric: utility_auc, direction: max}, {metric: privacy_gap, direction: min}]
sampler: tpe
trials: 32
concurrency: 2
executor: inline
"""


def sweep() -> None:
    """The reference: a 32-trial sweep of GPP's beta (defaults otherwise), each trial certified against the same
    target; its best feasible trial (certificate met, highest test utility) against the calibrated run's utility."""
    from mlflow.tracking import MlflowClient

    data = load()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "reference.yaml"
        spec.write_text(SWEEP)
        raw = veil(["sweep", str(spec), "--name", "reference", "--quiet", "--storage", f"{tmp}/sweeps"], Path(tmp))
        client = MlflowClient(f"sqlite:///{tmp}/mlflow.db")
        exp = client.get_experiment_by_name("veil")
        runs = client.search_runs([exp.experiment_id], "tags.`veil.role` = 'trial'", max_results=500)
        trials = [
            {
                "beta": float(r.data.params["method.beta"]),
                **{
                    k: r.data.metrics.get(k)
                    for k in (
                        "utility_auc",
                        "certificate/met",
                        "certificate/privacy_gap_high",
                        "certificate/excess_gap_high",
                    )
                },
            }
            for r in runs
            if "method.beta" in r.data.params
        ]
    feasible = [t for t in trials if t["certificate/met"] == 1.0]
    best = max(feasible, key=lambda t: t["utility_auc"]) if feasible else None
    cal = data["cases"].get(SWEEP_CASE, {})
    data["sweep"] = {
        "spec": SWEEP,
        "commit": commit(),
        "exit": raw["exit"],
        "seconds": raw["seconds"],
        "trials": len(trials),
        "feasible": len(feasible),
        "best_feasible": best,
        "calibrated_utility": (cal.get("utility_auc") or {}).get("value"),
        "all": sorted(trials, key=lambda t: t["beta"]),
    }
    save(data)
    print(json.dumps({k: v for k, v in data["sweep"].items() if k != "all"}, indent=1))


RECHECK_SEEDS = (1, 2, 3)


def trail(only: list[str]) -> None:
    """A case's no-option run with refinement forced to the end (`--set calibration.min_gain=0`): every candidate
    calibration trains, with its validation utility, excess and the limit it needs, so where the target's utility
    lies is read off a measured trail rather than off the stop rule's interpolation."""
    for key in only:
        method, label = key.split("/", 1)
        args = ["run", "-m", method, *DATASETS[label], "--set", "calibration.min_gain=0", "--json", "--quiet"]
        with tempfile.TemporaryDirectory() as tmp:
            raw = veil(args, Path(tmp))
        cal = ((raw.get("result") or {}).get("certificate") or {}).get("calibration") or {}
        rows = [
            {
                "value": c["value"],
                "stage": c["stage"],
                "utility": c["utility"],
                "leakage": c["leakage"],
                "needs": {m: c["leakage"][m] + c["room"].get(m, 0.0) for m in c["leakage"]},
                "feasible": c["feasible"],
            }
            for c in cal.get("trail", [])
        ]
        entry = {"command": "veil " + shlex.join(args), **summary(raw), "trail": rows}
        record(("trail", key), entry)
        print(key, raw["exit"], len(rows), "candidates", flush=True)


def recheck() -> None:
    """The sweep's best feasible trial run again at its beta with new run seeds on the same data (`-p seed=0` keeps
    the rows and the split): how much of its test utility its beta keeps, and whether it still meets the target."""
    data = load()
    best = (data.get("sweep") or {}).get("best_feasible")
    if not best:
        raise SystemExit("no recorded sweep: run `python benchmarks/targets.py sweep` first")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in RECHECK_SEEDS:
            args = ["run", "-m", "gpp", *DATASETS[SWEEP_CASE.split("/", 1)[1]], "-p", "seed=0"]
            args += ["--set", f"beta={best['beta']!r}", "--set", f"seed={seed}", "--json", "--quiet"]
            raw = veil(args, Path(tmp))
            runs.append({"seed": seed, "command": "veil " + shlex.join(args), **summary(raw)})
            print(seed, raw["exit"], (runs[-1].get("utility_auc") or {}).get("value"), flush=True)
    data["sweep"]["best_rerun"] = runs
    save(data)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "part",
        choices=("cases", "reruns", "grid", "cost", "sweep", "recheck", "trail"),
    )
    p.add_argument("--only", nargs="*", default=[], help="METHOD or METHOD/DATASET (cases); METHOD/DATASET (trail)")
    p.add_argument("--redo", action="store_true", help="run cases already recorded again")
    p.add_argument("--dataset", choices=list(DATASETS), help="cost: a case's data at the default target")
    p.add_argument("--points", type=int, default=10, help="grid: knob values spread over its range")
    p.add_argument("--span", nargs=2, type=float, metavar=("LOW", "HIGH"), help="grid: only this part of the range")
    p.add_argument("--repeats", type=int, default=COST_REPEATS, help="cost: commands per side")
    p.add_argument("--seeds", nargs="*", type=int, default=[], help="run seeds (reruns, grid)")
    args = p.parse_args(argv)
    parts = {
        "cases": lambda: cases(args.only, args.redo),
        "reruns": lambda: reruns(args.only, args.seeds or list(range(10))),
        "grid": lambda: grid(args.only, args.points, args.seeds or [0, 1, 2], args.span),
        "cost": lambda: cost(args.dataset, args.repeats),
        "sweep": sweep,
        "recheck": recheck,
        "trail": lambda: trail(args.only),
    }
    parts[args.part]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
