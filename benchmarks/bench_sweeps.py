"""The suite's sweep benchmarks: the quickstart sweep as separate trials and with populations, the quickstart
at each population size over seed pairs, a population of 16 quickstart-size GPP trials against the same trials one
by one, the quickstart as the plain Optuna loop a user would write against `veil sweep`, and a 32-trial GPP sweep
on Adult: wall time, hypervolume and where the time went."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bench_common import HERE, ROOT, Row, clean_env, load, timed, veil_cli

# -- the quickstart sweep with and without populations ---------------------------------------------------------
POPULATION = 3  # the quickstart's 6 TPE start-up trials / concurrency 2: one population per worker (the 8 trials
# after them are asked one at a time, as TPE adapts: docs/sweeps.md, Populations)
NO_POPULATION = "population not supported by this veil"


def quickstart_spec(work: Path, quick: bool, population: int | None, seed: int | None = None) -> Path:
    """sweeps/quickstart.yaml (smaller data and epochs with --quick), with `population` added when given, and
    `seed` as both its runs' seed and its sampler's when given."""
    import yaml

    spec = yaml.safe_load((ROOT / "sweeps" / "quickstart.yaml").read_text())
    if quick:
        spec["dataset_params"] = {**spec["dataset_params"], "n": 1000}
        spec["params"] = {**spec["params"], "epochs": 3}
        spec["audit"] = {"epochs": 5}
    if population:
        spec["population"] = population
    if seed is not None:
        spec["seeds"], spec["sampler_seed"] = [seed], seed
    path = work / f"quickstart{'-pop' if population else ''}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def veil_sweep(path: Path, cwd: str) -> dict[str, Any]:
    """`veil sweep PATH --json --quiet` in `cwd` (a fresh MLflow store there): wall time and peak RSS of the
    process tree, the sweep's own seconds, trials, hypervolume, and its `timings` (wall, Ray start, Tune, report,
    the trials' own seconds and the orchestration share 1 - (trial seconds / concurrency) / wall)."""
    r = timed([veil_cli(), "sweep", str(path), "--json", "--quiet"], cwd=cwd, env=clean_env())
    if r["rc"] != 0:
        raise RuntimeError(f"veil sweep {path.name} failed:\n{r['stderr'][-2000:]}")
    summary = json.loads(r["stdout"].strip().splitlines()[-1])
    return {
        "wall_s": r["wall_s"],
        "sweep_s": round(summary["seconds"], 2),
        "trials": summary["trials"],
        "hypervolume": summary["hypervolume"],
        "peak_rss_mb": r["peak_rss_mb"],
        "trials_per_hour": round(3600 * summary["trials"] / r["wall_s"], 1),
        "timings": {k: round(v, 3) for k, v in summary.get("timings", {}).items()},
    }


def run_quickstart(quick: bool) -> Row:
    """`veil sweep` of the quickstart spec as 14 separate trials, then with `population: POPULATION` (if this
    veil's spec validator takes the key): wall time, sweep seconds, hypervolume and peak RSS of each."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        plain, pop = quickstart_spec(work, quick, None), quickstart_spec(work, quick, POPULATION)
        check = subprocess.run(
            [veil_cli(), "sweep", str(pop), "--check"], capture_output=True, text=True, env=clean_env()
        )
        runs = {"separate": plain} if check.returncode else {"population": pop, "separate": plain}
        out: Row = {"spec": "sweeps/quickstart.yaml" + (" (n 1000, epochs 3, audit epochs 5)" if quick else "")}
        for label, path in runs.items():
            out[label] = veil_sweep(path, tmp)
    if check.returncode:
        last = (check.stderr.strip().splitlines() or ["(no message)"])[-1]
        reason = last.replace(f"{work}/", "").split(";")[0]  # the refusal, without the list of valid keys
        print(f"  quickstart: {NO_POPULATION} ({reason})", flush=True)
        out["skipped"] = f"{NO_POPULATION}: {reason}"
        return out
    out["ratio"] = round(out["separate"]["wall_s"] / out["population"]["wall_s"], 3)
    out["ratio_of"] = "wall of separate trials / wall with population"
    return out


POPULATION_SIZES = (1, 3)  # 1: separate trials; 3: the quickstart's 6 TPE start-up trials per worker (a larger P
# asks the same way: the start-up is split evenly over the workers, tests/sweeps/test_population_sweep.py)
SIZE_REPEATS = 6  # seed pairs in the full form (one in --quick): a front varies by ~0.025 hypervolume across seeds


def mean_interval(values: list[float], level: float = 0.95) -> list[float] | None:
    """Student-t interval for the mean of paired differences (rounded to 4 places); None below two values."""
    from scipy import stats

    if len(values) < 2:
        return None
    ci = stats.ttest_1samp(values, 0.0).confidence_interval(level)
    return [round(float(ci.low), 4), round(float(ci.high), 4)]


def run_population_sizes(quick: bool) -> Row:
    """The quickstart sweep at each population size of `POPULATION_SIZES`, in `SIZE_REPEATS` pairs, sizes
    alternating: pair r runs every size at run seed r and sampler seed r. Wall time and hypervolume per sweep,
    their medians and means, and each pair's hypervolume difference from separate trials. Whether a population
    keeps TPE's front (the issue: "their fronts are not worse than separate trials'") and what it saves.
    Seeds vary from pair to pair because a stacked member trains like its solo run only up to float rounding,
    which adversarial training amplifies: at one fixed seed every pair replays the same draw of that difference."""
    repeats = 1 if quick else SIZE_REPEATS
    sweeps: dict[str, list[dict[str, Any]]] = {str(p): [] for p in POPULATION_SIZES}
    for seed in range(repeats):
        for p in POPULATION_SIZES:
            with tempfile.TemporaryDirectory() as tmp:
                r = veil_sweep(quickstart_spec(Path(tmp), quick, p if p > 1 else None, seed), tmp)
            sweeps[str(p)].append({"seed": seed, **{k: r[k] for k in ("wall_s", "hypervolume", "trials")}})
            print(f"  seed {seed}, population {p}: {r['wall_s']} s, hypervolume {r['hypervolume']:.4f}", flush=True)
    base = [s["hypervolume"] for s in sweeps[str(POPULATION_SIZES[0])]]
    summary: dict[str, Any] = {}
    for size, runs in sweeps.items():
        summary[size] = {
            "wall_s_median": round(float(np.median([s["wall_s"] for s in runs])), 2),
            "hypervolume_mean": round(float(np.mean([s["hypervolume"] for s in runs])), 4),
            "hypervolumes": [round(s["hypervolume"], 4) for s in runs],
        }
        if size != str(POPULATION_SIZES[0]):
            diffs = [s["hypervolume"] - b for s, b in zip(runs, base)]
            summary[size]["difference_from_separate"] = [round(d, 4) for d in diffs]
            summary[size]["difference_mean"] = round(float(np.mean(diffs)), 4)
            summary[size]["difference_interval_95"] = mean_interval(diffs)
            summary[size]["lower_than_separate"] = f"{sum(d < 0 for d in diffs)} of {len(diffs)}"
    return {"sizes": list(POPULATION_SIZES), "repeats": repeats, "sweeps": sweeps, "summary": summary}


# -- a population of 16 quickstart-size GPP trials against the same 16 trained one by one --------------------------
def population_runs(uri: str, quick: bool, members: int = 16) -> list[Any]:
    """`members` quickstart-size GPP runs (sweeps/quickstart.yaml's fixed params, beta log-spaced over its range),
    validated; a fixed release_seed so both sides audit the same release stream."""
    import numpy as np
    import yaml

    from veil.pipeline.execute import RunSpec
    from veil.pipeline.validation import validate

    q = yaml.safe_load((ROOT / "sweeps" / "quickstart.yaml").read_text())
    params, data, audit = dict(q["params"]), dict(q["dataset_params"]), dict(q["audit"])
    if quick:
        params["epochs"], data["n"], audit["epochs"] = 3, 1000, 5
    return [
        validate(
            RunSpec(
                "gpp",
                q["dataset"],
                {**params, "beta": float(b), "release_seed": 0},
                data,
                audit,
                seed=0,
                executor="inline",
                tracking_uri=uri,
                run_name=f"beta={b:.4g}",
            )
        )
        for b in np.geomspace(0.04, 4, members)
    ]


def run_population(quick: bool) -> Row:
    """16 quickstart-size GPP trials as one population (`execute_population`) against the same 16 through
    `execute` one by one, in this process, one torch thread: trials/hour of each and how far members land."""
    from veil.pipeline.execute import execute, execute_population

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            uri = f"sqlite:///{tmp}/mlflow.db"
            runs = population_runs(uri, quick)
            execute(population_runs(uri, True, 1)[0])  # warm-up: imports and the store's schema
            t0 = time.perf_counter()
            solo = [execute(r) for r in runs]
            solo_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            pop = execute_population(runs)
            pop_s = time.perf_counter() - t0
    finally:
        torch.set_num_threads(threads)
    diffs = {
        m: round(max(abs(a.metrics[m] - b.metrics[m]) for a, b in zip(solo, pop)), 4)
        for m in ("utility_auc", "privacy_gap")
    }
    return {
        "members": len(runs),
        "separate_s": round(solo_s, 2),
        "population_s": round(pop_s, 2),
        "separate_train_s": round(sum(r.metrics["train_seconds"] for r in solo), 2),
        "population_train_s": round(sum(r.metrics["train_seconds"] for r in pop), 2),
        "trials_per_hour": {
            "separate": round(3600 * len(runs) / solo_s),
            "population": round(3600 * len(runs) / pop_s),
        },
        "ratio": round(solo_s / pop_s, 3),
        "ratio_of": "trials/hour of the population / of separate trials",
        "max_member_difference": diffs,
    }


# -- the quickstart as the plain Optuna loop a user would write, against `veil sweep` ------------------------------
def trial_hypervolume(points: list[list[float]], spec: dict[str, Any]) -> float:
    """Hypervolume of `points` (one row of objective values per finished trial) with the spec's directions and
    reference point, by the helper `veil sweep` uses for its own figure (veil.sweeps.pareto.hypervolume)."""
    from veil.sweeps.pareto import hypervolume

    objectives = spec["objectives"]
    directions = [o["direction"] for o in objectives]
    reference = [spec["reference"][o["metric"]] for o in objectives]
    return hypervolume(np.asarray(points, dtype=float).reshape(-1, len(objectives)), directions, reference)


def optuna_loop(path: Path, spec: dict[str, Any], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """benchmarks/optuna_loop.py on sweep spec `path` in `cwd`, timed as a subprocess: its figures."""
    cwd.mkdir()
    r = timed([sys.executable, str(HERE / "optuna_loop.py"), str(path)], cwd=str(cwd), env=env)
    if r["rc"] != 0:
        raise RuntimeError(f"benchmarks/optuna_loop.py failed:\n{r['stderr'][-2000:]}")
    got = json.loads(r["stdout"].strip().splitlines()[-1])
    done = [t["values"] for t in got["trials"] if t["state"] == "COMPLETE"]
    return {
        "wall_s": r["wall_s"],
        "trials": len(done),
        "hypervolume": trial_hypervolume(done, spec),
        "peak_rss_mb": r["peak_rss_mb"],
        "trials_per_hour": round(3600 * len(done) / r["wall_s"], 1),
        "import_s": got["import_s"],
        "loop_s": got["loop_s"],
        "trial_s": round(sum(got["trial_s"]), 2),
        "mean_trial_s": round(sum(got["trial_s"]) / max(1, len(got["trial_s"])), 2),
        "torch_threads": got["torch_threads"],
    }


def run_optuna_loop(quick: bool) -> Row:
    """sweeps/quickstart.yaml as the plain Optuna loop of benchmarks/optuna_loop.py (one study, the spec's TPE
    sampler and seed, trials one after another, each `veil.pipeline.execute.execute`) against `veil sweep` of the same spec;
    all timed as subprocesses from a fresh directory (fresh MLflow store), hypervolumes by the same helper. The
    loop runs as a user's script gets it (torch's default threads: all cores) and again on one thread
    (OMP_NUM_THREADS=1, what each of Veil's trials gets): the second separates the threads' share of the gap."""
    import yaml

    out: Row = {"spec": "sweeps/quickstart.yaml" + (" (n 1000, epochs 3, audit epochs 5)" if quick else "")}
    runs: dict[str, list[dict[str, Any]]] = {"veil": [], "optuna": [], "optuna_1thread": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = quickstart_spec(Path(tmp), quick, None)
        spec = yaml.safe_load(path.read_text())
        for rep in range(1 if quick else OPTUNA_REPEATS):  # the sides alternate, so a load change hits them all
            for side in runs:  # each in its own directory: its own MLflow store
                load_before = load()
                cwd = Path(tmp) / f"{side}-{rep}"
                if side == "veil":
                    cwd.mkdir()
                    got = veil_sweep(path, str(cwd))
                else:
                    env = {k: v for k, v in clean_env().items() if k != "OMP_NUM_THREADS"}  # a user's default
                    if side == "optuna_1thread":
                        env["OMP_NUM_THREADS"] = "1"
                    got = optuna_loop(path, spec, cwd, env)
                got["load_avg"] = max(load_before, load())
                runs[side].append(got)
    for side, got in runs.items():  # each side: its median-wall sweep, every sweep's wall and hypervolume
        out[side] = {
            **sorted(got, key=lambda r: r["wall_s"])[len(got) // 2],
            "walls": [r["wall_s"] for r in got],
            "hypervolumes": [r["hypervolume"] for r in got],
            "hypervolume_mean": round(float(np.mean([r["hypervolume"] for r in got])), 4),
        }
    out["ratio"] = round(out["optuna"]["wall_s"] / out["veil"]["wall_s"], 3)
    out["ratio_of"] = "wall of the plain Optuna loop (torch's default threads) / wall of veil sweep"
    out["ratio_1thread"] = round(out["optuna_1thread"]["wall_s"] / out["veil"]["wall_s"], 3)
    return out


OPTUNA_REPEATS = 3  # sweeps per side in the full form (one in --quick)


# -- a 32-trial GPP sweep on Adult --------------------------------------------------------------------------------
ADULT_SWEEP: dict[str, Any] = {
    "description": "GPP beta on Adult at GPP's defaults, 2 epochs (the benchmark suite's adult-sweep)",
    "method": "gpp",
    "dataset": "adult",
    "params": {"epochs": 2},
    "space": {"beta": {"type": "log", "low": 0.01, "high": 10}},
    "objectives": [
        {"metric": "utility_auc", "direction": "max"},
        {"metric": "privacy_gap", "direction": "min"},
    ],
    "reference": {"utility_auc": 0.5, "privacy_gap": 0.5},
    # no certificate: its 4-adversary suite with 1,000 bootstrap resamples on 15,060 test rows would double a
    # trial; the trial is GPP's training and the fresh-probe audit (2 probes, 30 epochs over 30,162 rows)
    "target": "none",
    "sampler": "tpe",
    "trials": 32,
    "seeds": 1,
    "concurrency": 2,
    "resources": {"cpus": 1, "gpu": 0},
    "audit": {},
    "executor": "inline",
    "max_failures": 3,
}


def run_adult_sweep(quick: bool) -> Row:
    """`veil sweep` of 32 GPP trials on Adult (the published split: 30,162 training rows), 2 epochs each and the
    default audit (`--quick`: 4 trials, 1 epoch, audit epochs 3): wall time and where it went."""
    import yaml

    spec = dict(ADULT_SWEEP)
    if quick:
        spec.update(trials=4, params={"epochs": 1}, audit={"epochs": 3})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "adult-gpp.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        sweep = veil_sweep(path, tmp)
    t = sweep["timings"]
    return {
        "spec": {
            k: spec[k] for k in ("method", "dataset", "params", "space", "target", "trials", "concurrency", "audit")
        },
        **sweep,
        "mean_trial_s": round(t["trials"] / max(1, sweep["trials"]), 2) if t else None,
        "orchestration": t.get("orchestration"),
    }
