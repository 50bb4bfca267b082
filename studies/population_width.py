"""Whether a population pays at a sweep spec's network size: the spec's runs at a few values of one population knob
trained one by one (`veil.pipeline.execute.execute`) and as one population (`veil.pipeline.execute.execute_population`), on one torch thread,
for a few epochs, the audit cut to one small probe epoch (not what is compared). Prints one JSON line: each side's
training seconds (a population's `train_seconds` is its group's time over its size) and their ratio.

    python studies/population_width.py benchmarks/reproduce/specs/gpp_mnist_beta.yaml --knob beta --values 0.1 1 8
    python studies/population_width.py sweeps/quickstart.yaml --knob beta --values 0.1 0.3 1
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
import yaml

from veil.pipeline.execute import RunSpec, execute, execute_population
from veil.pipeline.validation import validate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", type=Path, help="a sweep spec: its method, dataset and fixed params are used")
    ap.add_argument("--knob", required=True, help="the population knob the members differ in (e.g. beta)")
    ap.add_argument("--values", type=float, nargs="+", required=True, help="one member per value")
    ap.add_argument("--epochs", type=int, default=1, help="training epochs of each run (default 1)")
    args = ap.parse_args()
    spec = yaml.safe_load(args.spec.read_text())
    params = {**spec.get("params", {}), "epochs": args.epochs, "release_seed": 0}
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"

        def runs() -> list:
            return [
                validate(
                    RunSpec(
                        spec["method"],
                        spec["dataset"],
                        {**params, args.knob: v},
                        spec.get("dataset_params", {}),
                        {"epochs": 1, "hidden": [16]},
                        seed=0,
                        executor="inline",
                        tracking_uri=uri,
                        target="none",
                    )
                )
                for v in args.values
            ]

        execute(runs()[0])  # warm-up: imports, the dataset cache and the store's schema
        t0 = time.perf_counter()
        solo = [execute(r) for r in runs()]
        solo_wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        pop = execute_population(runs())
        pop_wall = time.perf_counter() - t0
    solo_train = sum(r.metrics["train_seconds"] for r in solo)
    pop_train = sum(r.metrics["train_seconds"] for r in pop)
    print(
        json.dumps(
            {
                "spec": str(args.spec),
                "knob": args.knob,
                "values": args.values,
                "epochs": args.epochs,
                "separate_train_s": round(solo_train, 2),
                "population_train_s": round(pop_train, 2),
                "training_speedup": round(solo_train / pop_train, 3),
                "separate_wall_s": round(solo_wall, 2),
                "population_wall_s": round(pop_wall, 2),
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )
    )


if __name__ == "__main__":
    main()
