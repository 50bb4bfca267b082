"""A sweep spec (sweeps/quickstart.yaml by default) as the plain multi-objective Optuna loop a user would write
without `veil sweep`: one study with the spec's directions and its TPE sampler seeded with its sampler_seed,
trials run one after another in this process, each one `veil.pipeline.execute.execute` of the spec's run with the trial's
searched values. Prints one JSON line: every trial's searched values and objective values, and where the time
went (imports, the loop, each trial). The benchmark suite (`optuna-loop`) times this script as a subprocess
against `veil sweep` of the same spec, so both pay Python start-up and imports.

    python benchmarks/optuna_loop.py sweeps/quickstart.yaml
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import argparse  # noqa: E402  (timed: the imports are part of what a user's script pays)
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import optuna  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

from veil.pipeline.execute import RunSpec, execute  # noqa: E402

IMPORT_S = time.perf_counter() - T0


def suggest(trial: optuna.Trial, name: str, p: dict[str, Any]) -> Any:
    """The trial's value of searched parameter `name` (the spec's space entry `p`)."""
    kind = p.get("type", "float")
    if kind in ("log", "log-float", "loguniform"):
        return trial.suggest_float(name, p["low"], p["high"], log=True)
    if kind in ("float", "uniform"):
        return trial.suggest_float(name, p["low"], p["high"])
    if kind in ("int", "integer"):
        return trial.suggest_int(name, p["low"], p["high"])
    if kind in ("categorical", "choice"):
        return trial.suggest_categorical(name, p["values"])
    raise SystemExit(f"space entry {name}: type {kind!r} is not handled by this loop")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", type=Path, help="a sweep spec with sampler: tpe and one seed")
    args = ap.parse_args()
    spec = yaml.safe_load(args.spec.read_text())
    if spec.get("sampler", "tpe") != "tpe":
        raise SystemExit("this loop runs TPE only")
    objectives = spec["objectives"]
    dparams = dict(spec.get("dataset_params") or {})
    seeds = spec.get("seeds", 1)
    seed = 0 if isinstance(seeds, int) else int(seeds[0])  # one seed: `seeds: 1` is seed 0
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        directions=["maximize" if o["direction"] == "max" else "minimize" for o in objectives],
        sampler=optuna.samplers.TPESampler(seed=spec.get("sampler_seed", 0), **(spec.get("sampler_options") or {})),
    )
    trial_s: list[float] = []

    def objective(trial: optuna.Trial) -> tuple[float, ...]:
        t0 = time.perf_counter()
        params, data = dict(spec.get("params") or {}), dict(dparams)
        for name, p in spec["space"].items():
            (data if name in dparams else params)[name] = suggest(trial, name, p)
        run = RunSpec(
            method=spec["method"],
            dataset=spec["dataset"],
            params=params,
            dataset_params=data,
            audit=dict(spec.get("audit") or {}),
            seed=seed,
            executor=spec.get("executor", "inline"),
            run_name=f"trial {trial.number}",
            target=spec.get("target"),
            calibrate=False,  # as sweep trials: the search explores the knob
        )
        metrics = execute(run).metrics
        trial_s.append(time.perf_counter() - t0)
        return tuple(float(metrics[o["metric"]]) for o in objectives)

    t_loop = time.perf_counter()
    study.optimize(objective, n_trials=int(spec["trials"]))
    loop_s = time.perf_counter() - t_loop
    print(
        json.dumps(
            {
                "trials": [{"params": t.params, "values": t.values, "state": t.state.name} for t in study.trials],
                "metrics": [o["metric"] for o in objectives],
                "import_s": round(IMPORT_S, 3),
                "loop_s": round(loop_s, 3),
                "trial_s": [round(s, 3) for s in trial_s],
                "seconds": round(time.perf_counter() - T0, 3),
                "torch_threads": torch.get_num_threads(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
