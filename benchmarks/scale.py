"""How Veil's cost grows with the work: trials of a sweep, nodes of a federation, rows of a table. Each point is
a fresh process (`veil sweep` / `veil run` as a user types it), timed with the peak RSS of its process tree (Ray
included) and of the driver alone, the machine's 1-minute load recorded before and after. Records go to
benchmarks/results/scale.json (one entry per axis and point, with the command that produced it); `plot` draws
benchmarks/results/scale_<axis>.png from them.

    python benchmarks/scale.py trials --points 10 100 1000    # tiny GPP trials, concurrency 2, + a plain Optuna loop
    python benchmarks/scale.py nodes --points 100 1000 10000  # D-EIGAN and D-GPP, virtual runtime, 30 rows per node
    python benchmarks/scale.py nodes --methods d-gpp --set encoder_hidden=[64]   # a narrower encoder per client
    python benchmarks/scale.py rows --points 10000 100000 1000000   # `veil run -m gpp` with no options
    python benchmarks/scale.py plot
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "scale.json"
sys.path.insert(0, str(HERE))
from bench_common import clean_env, load, machine, timed, veil_cli  # noqa: E402

TINY: dict[str, Any] = {
    "description": "scale benchmark: tiny GPP trials (1 epoch, 1-epoch audit, no target)",
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "dataset_params": {"n": 1000},
    "params": {"epochs": 1, "d_z": 4, "encoder_hidden": [16], "head_hidden": [8]},
    "space": {"beta": {"type": "log", "low": 0.01, "high": 4}},
    "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
    "target": "none",
    "sampler": "tpe",
    "seeds": 1,
    "concurrency": 2,
    "resources": {"cpus": 1, "gpu": 0},
    "audit": {"epochs": 1},
    "executor": "inline",
}
"""The trials axis's sweep: each trial's own work is a fraction of a second, so what grows is Veil's."""
WINDOW = 10
"""Trials per window when the overhead per trial is read at the start and at the end of a sweep."""
ROWS_PER_NODE = 40  # 30 training rows per node after the 25% test split
FED_METHODS = ("d-eigan", "d-gpp")


# -- records ---------------------------------------------------------------------------------------------------
def read() -> dict[str, Any]:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def record(axis: str, key: str, value: dict[str, Any]) -> None:
    """Set the point `key` of `axis` in the results file, re-read under a lock (axes can run side by side)."""
    from filelock import FileLock

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(RESULTS) + ".lock"):
        data = read()
        data.setdefault(axis, {})[key] = value
        RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def settle(below: float, most_s: float = 120.0) -> float:
    """Wait, at most `most_s`, until the 1-minute load is under `below` (0: do not wait). Each point then starts
    without the load its predecessor left behind: a run that starts at a load of 2 or more on 2 cores trains and
    audits on one thread (`veil.platform.cluster.busy_threads`). Returns the seconds waited."""
    t0 = time.monotonic()
    while below > 0 and load() >= below and time.monotonic() - t0 < most_s:
        time.sleep(5)
    return round(time.monotonic() - t0, 1)


def stamp(command: str, load_before: float) -> dict[str, Any]:
    """What every point records beside its figures."""
    return {
        "command": command,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_before": load_before,
        "load_after": load(),
    }


def run_json(args: list[str], cwd: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """`veil ARGS --json` in `cwd` (its own MLflow store and Ray): the timing and the JSON summary line. Exit 3 (a
    release recorded with its certificate not met) is an outcome, not a failure."""
    r = timed([veil_cli(), *args, "--json"], cwd=str(cwd), env=clean_env())
    if r["rc"] not in (0, 3):
        raise RuntimeError(f"veil {shlex.join(args)} failed ({r['rc']}):\n{r['stderr'][-3000:]}")
    return r, json.loads(r["stdout"].strip().splitlines()[-1])


# -- trials ----------------------------------------------------------------------------------------------------
def window_overheads(trials: Any, asks: list[float], concurrency: int) -> list[dict[str, float]]:
    """Per window of WINDOW trials in start order (the first trial, which warms its worker, left out): each trial's
    share of a worker slot (concurrency x the time between window starts / WINDOW) and what it went on: the
    trial's own work in its run (`run_s`: training, audit, MLflow writes), the trial's lookups before it
    (`pre_s`: the tracking store, an earlier attempt), the sampler's ask (`ask_s`) and the rest (`scheduling_s`:
    Tune's loop, result handling, snapshots, the worker's hand-over)."""
    t = trials.sort_values("started").reset_index(drop=True)
    starts = (t["started"] - t["started"].iloc[0]).dt.total_seconds().to_numpy()
    out = []
    for a in range(1, len(t) - WINDOW, WINDOW):
        b = a + WINDOW
        slot = concurrency * (starts[b] - starts[a]) / WINDOW
        rows = t.iloc[a:b]
        run_s = float(rows["total_seconds"].mean())
        pre_s = float((rows["seconds"] - rows["total_seconds"]).mean())
        numbers = [int(n) - 1 for n in rows["trial"]]
        ask_s = sum(asks[i] for i in numbers if 0 <= i < len(asks)) / WINDOW
        out.append(
            {
                "trial": int(rows["trial"].iloc[-1]),
                "slot_s": round(slot, 4),
                "run_s": round(run_s, 4),
                "pre_s": round(pre_s, 4),
                "ask_s": round(ask_s, 4),
                "scheduling_s": round(slot - run_s - pre_s - ask_s, 4),
                "overhead_s": round(slot - run_s, 4),
            }
        )
    return out


def ask_history(uri: str, run_id: str) -> list[float]:
    """The sweep's `ask_seconds` metric, in trial order."""
    from mlflow.tracking import MlflowClient

    hist = MlflowClient(uri).get_metric_history(run_id, "ask_seconds")
    return [m.value for m in sorted(hist, key=lambda m: m.step)]


def ui_requests(db: Path, experiment_id: str, parent_run_id: str, sweep: str) -> dict[str, float]:
    """Seconds of the REST requests behind the MLflow UI pages `veil ui` links a sweep to, against a real
    `mlflow server` on 127.0.0.1 over the sweep's store: the parent run's page (`runs/get`), the sweep's runs table
    (its saved view's filter, the UI's first page of 100 rows) and, as the worst case, every child run of the
    parent in one request (the nested table expanded, or an export). The browser's rendering is not timed."""
    from veil.tracking.server import HOST, free_port, start_server, stop_server, wait_ready

    port = free_port()
    base = f"http://{HOST}:{port}"
    log = db.parent / "mlflow-server.log"
    server = start_server(f"sqlite:///{db}", port, log)
    try:
        wait_ready(base, server, log)

        def call(path: str, body: dict[str, Any] | None = None) -> float:
            data = json.dumps(body).encode() if body is not None else None
            req = urllib.request.Request(f"{base}/ajax-api/2.0/mlflow/{path}", data=data)
            req.add_header("Content-Type", "application/json")
            t0 = time.perf_counter()
            urllib.request.urlopen(req, timeout=300).read()
            return time.perf_counter() - t0

        call(f"runs/get?run_id={parent_run_id}")  # warm the server's connection pool and caches
        table = {
            "experiment_ids": [experiment_id],
            "filter": f"tags.`veil.sweep` = '{sweep}' and tags.`veil.role` = 'trial'",
            "order_by": ["metrics.`utility_auc` DESC"],
            "max_results": 100,
        }
        children = {
            "experiment_ids": [experiment_id],
            "filter": f"tags.mlflow.parentRunId = '{parent_run_id}'",
            "max_results": 1000,
        }
        figures = {
            "parent_page_s": call(f"runs/get?run_id={parent_run_id}"),
            "sweep_table_s": call("runs/search", table),
            "all_children_s": call("runs/search", children),
        }
        return {k: round(v, 3) for k, v in figures.items()}
    finally:
        stop_server(server)


def trials_point(n: int, work: Path) -> dict[str, Any]:
    """A sweep of `n` tiny trials, then `veil report` and `veil resume` on it, the UI's requests for its parent
    run, and the same trials as the plain Optuna loop of benchmarks/optuna_loop.py."""
    import pandas as pd

    spec_path = work / f"tiny-{n}.yaml"
    spec_path.write_text(yaml.safe_dump({**TINY, "trials": n}, sort_keys=False))
    name = f"scale-{n}"
    sweep, summary = run_json(["sweep", str(spec_path), "--quiet", "--name", name], work)
    trials = pd.read_parquet(summary["files"]["trials.parquet"])
    asks = ask_history(summary["tracking_uri"], summary["parent_run_id"])
    windows = window_overheads(trials, asks, TINY["concurrency"])
    report, _ = run_json(["report", name], work)
    resume, _ = run_json(["resume", name, "--quiet"], work)
    from mlflow.tracking import MlflowClient

    exp_id = MlflowClient(summary["tracking_uri"]).get_run(summary["parent_run_id"]).info.experiment_id
    ui = ui_requests(work / "mlflow.db", exp_id, summary["parent_run_id"], name)
    loop_dir = work / "loop"
    loop_dir.mkdir()
    loop = timed([sys.executable, str(HERE / "optuna_loop.py"), str(spec_path)], cwd=str(loop_dir), env=clean_env())
    if loop["rc"] != 0:
        raise RuntimeError(f"optuna_loop.py failed:\n{loop['stderr'][-3000:]}")
    loop_out = json.loads(loop["stdout"].strip().splitlines()[-1])
    t = summary["timings"]
    return {
        "trials": summary["trials"],
        "finished": summary["finished"],
        "wall_s": sweep["wall_s"],
        "peak_rss_mb": sweep["peak_rss_mb"],
        "driver_peak_rss_mb": sweep["driver_peak_rss_mb"],
        "timings": {k: round(v, 3) for k, v in t.items()},
        "orchestration_share": round(t["orchestration"], 3),
        "hypervolume": round(summary["hypervolume"], 5),
        "ask_s": {"first": round(sum(asks[:WINDOW]) / WINDOW, 4), "last": round(sum(asks[-WINDOW:]) / WINDOW, 4)},
        "windows": windows,
        "overhead_start_s": windows[0]["overhead_s"] if windows else None,
        "overhead_end_s": windows[-1]["overhead_s"] if windows else None,
        "report_s": report["wall_s"],
        "resume_s": resume["wall_s"],
        "ui": ui,
        "optuna_loop": {
            "wall_s": loop["wall_s"],
            "peak_rss_mb": loop["peak_rss_mb"],
            "trial_s_mean": round(sum(loop_out["trial_s"]) / len(loop_out["trial_s"]), 4),
        },
        "sweep_over_loop": round(sweep["wall_s"] / loop["wall_s"], 2),
    }


# -- nodes -----------------------------------------------------------------------------------------------------
def nodes_args(method: str, k: int, sets: tuple[str, ...] = ()) -> list[str]:
    return (
        f"run -m {method} -d gaussian-nodes --runtime virtual --set K={k} --set n={ROWS_PER_NODE * k} "
        "--target none --quiet"
    ).split() + [a for kv in sets for a in ("--set", kv)]


def nodes_label(method: str, sets: tuple[str, ...]) -> str:
    """The series a nodes point belongs to: the method, and the fields set away from its defaults."""
    return f"{method} ({', '.join(sets)})" if sets else method


def nodes_point(method: str, k: int, work: Path, sets: tuple[str, ...] = ()) -> dict[str, Any]:
    """One federated `veil run` at K virtual nodes (defaults otherwise, or `sets`; no target: the federation's own
    cost)."""
    r, out = run_json(nodes_args(method, k, sets), work)
    m = out["metrics"]
    rounds = float(m.get("rounds") or 0)
    return {
        "wall_s": r["wall_s"],
        "peak_rss_mb": r["peak_rss_mb"],
        "driver_peak_rss_mb": r["driver_peak_rss_mb"],
        "rounds": rounds,
        "round_s": round(float(m["federation_seconds"]) / rounds, 4) if rounds else None,
        "startup_s": round(float(m.get("startup_seconds", 0.0)), 2),
        "train_s": round(float(m["train_seconds"]), 2),
        "audit_s": round(float(m.get("audit_seconds", 0.0)), 2),
        "run_s": round(float(m["total_seconds"]), 2),
    }


# -- rows ------------------------------------------------------------------------------------------------------
STAGES = ("calibration_seconds", "audit_seconds", "certificate_seconds")


def rows_args(n: int) -> list[str]:
    return f"run -m gpp -d gaussian-correlated --set n={n} --quiet".split()


def rows_point(n: int, work: Path) -> dict[str, Any]:
    """`veil run -m gpp` with no options on `n` generated rows: the default target, its calibration and
    certificate; the time by stage (calibration trains the released candidate, past `calibration.max_rows` on a
    sample of the rows; `other`: the process's start, the data, MLflow)."""
    r, out = run_json(rows_args(n), work)
    m = out["metrics"]
    stages = {k.removesuffix("_seconds"): round(float(m.get(k, 0.0)), 2) for k in STAGES}
    total = float(m["total_seconds"])  # the tracked run: after calibration, which trained the released candidate
    stages["other"] = round(r["wall_s"] - sum(stages.values()), 2)  # start-up, data, the run's MLflow writes
    cert = out.get("certificate") or {}
    return {
        "wall_s": r["wall_s"],
        "peak_rss_mb": r["peak_rss_mb"],
        "driver_peak_rss_mb": r["driver_peak_rss_mb"],
        "run_s": round(total, 2),
        "stages_s": stages,
        "us_per_row": round(1e6 * r["wall_s"] / n, 2),
        "exit": r["rc"],
        "met": cert.get("met"),
        "excess_upper": (cert.get("excess_gap") or {}).get("high"),
        "calibrated_value": out["params"].get("calibration.value"),
        "candidates": out["params"].get("calibration.candidates"),
        "calibration_rows": out["params"].get("calibration.rows"),
        "retrained": out["params"].get("calibration.retrained"),
        "utility_auc": cert.get("utility_auc"),
    }


# -- plots -----------------------------------------------------------------------------------------------------
def plot(data: dict[str, Any]) -> list[Path]:
    """One PNG per measured axis: wall time and peak RSS against the axis (log-log), plus the trials axis's
    overhead per trial along its largest sweep."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    paths = []
    for axis, points in data.items():
        series: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for key, p in points.items():
            label, _, x = key.rpartition("/")
            series.setdefault(label or axis, []).append((int(x), p))
        extra = axis == "trials"
        fig = Figure(figsize=(12 if extra else 8, 4))
        axes = fig.subplots(1, 3 if extra else 2)
        for i, (label, pts) in enumerate(sorted(series.items())):
            pts.sort(key=lambda xp: xp[0])
            xs = [x for x, _ in pts]
            c = f"C{i}"  # one colour per series in every panel
            axes[0].plot(xs, [p["wall_s"] for _, p in pts], c=c, marker="o", label=f"{label} (veil)")
            axes[1].plot(xs, [p["peak_rss_mb"] for _, p in pts], c=c, marker="o", label=f"{label} (process tree)")
            axes[1].plot(
                xs, [p["driver_peak_rss_mb"] for _, p in pts], c=c, marker=".", ls="--", label=f"{label} (driver)"
            )
            if extra:
                axes[0].plot(xs, [p["optuna_loop"]["wall_s"] for _, p in pts], marker="s", label="plain Optuna loop")
                big = pts[-1][1]["windows"]
                for key, name in (("slot_s", "slot per trial"), ("run_s", "trial's run"), ("ask_s", "sampler ask")):
                    axes[2].plot([w["trial"] for w in big], [w[key] for w in big], label=name)
                axes[2].set(xlabel=f"trial (sweep of {xs[-1]})", ylabel="seconds", title="per trial, windows of 10")
                axes[2].legend(fontsize=7)
        for ax, ylabel in zip(axes[:2], ("wall time (s)", "peak RSS (MB)")):
            ax.set(xscale="log", yscale="log", xlabel=axis, ylabel=ylabel)
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"Veil scale: {axis} ({os.cpu_count()} CPU, recorded in benchmarks/results/scale.json)")
        fig.tight_layout()
        path = HERE / "results" / f"scale_{axis}.png"
        fig.savefig(path, dpi=100)
        paths.append(path)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("axis", choices=["trials", "nodes", "rows", "plot"])
    ap.add_argument("--points", type=int, nargs="+", help="the axis's points (default: the issue's three)")
    ap.add_argument("--methods", nargs="+", default=list(FED_METHODS), help="nodes: the federated methods")
    ap.add_argument(
        "--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="nodes: a method field"
    )
    ap.add_argument(
        "--settle", type=float, default=1.5, help="before each point, wait up to 120 s for the load to fall below this"
    )
    args = ap.parse_args()
    if args.axis == "plot":
        for path in plot(read()):
            print(path.relative_to(ROOT))
        return 0
    defaults = {"trials": [10, 100, 1000], "nodes": [100, 1000, 10000], "rows": [10000, 100000, 1000000]}
    points = args.points or defaults[args.axis]
    cmdline = "python benchmarks/scale.py " + shlex.join(sys.argv[1:])
    sets = tuple(args.sets)
    for x in points:
        jobs = [(m, f"{nodes_label(m, sets)}/{x}") for m in args.methods] if args.axis == "nodes" else [(None, str(x))]
        for method, key in jobs:
            waited = settle(args.settle)
            before = load()
            with tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                if args.axis == "trials":
                    figures = trials_point(x, work)
                elif args.axis == "nodes":
                    figures = nodes_point(str(method), x, work, sets)
                else:
                    figures = rows_point(x, work)
            record(args.axis, key, {**figures, **stamp(cmdline, before), "settled_s": waited})
            print(f"{args.axis} {key}: {figures['wall_s']} s, {figures['peak_rss_mb']} MB", flush=True)
    plot(read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
