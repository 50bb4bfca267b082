"""Time what a population's MLflow writes cost: 16 quickstart-size GPP members trained as one population, each
audited, certified and logged as its own run (`veil.pipeline.execute.execute_population`), against a tracking store of your
choice. Prints one JSON line: the population's wall seconds (after a warm-up population) and the store.

Side by side with the code before MLflow calls moved off the training thread (a worktree of that commit):

    python studies/tracking_writes.py --tracking-uri http://127.0.0.1:5077
    PYTHONPATH=/path/to/before/src python studies/tracking_writes.py --tracking-uri http://127.0.0.1:5077
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch


def members(uri: str, size: int, seed: int) -> list:
    from veil.pipeline.runspec import RunSpec
    from veil.pipeline.validation import validate

    betas = np.geomspace(0.01, 4.0, size)
    return [
        validate(
            RunSpec(
                method="gpp",
                dataset="gaussian-correlated",
                dataset_params={"n": 3000, "rho": 0.5},
                params=dict(epochs=15, lr=1e-3, k=5, d_z=8, encoder_hidden=[64, 64], head_hidden=[32], beta=float(b)),
                target={"privacy_gap": 0.1},
                tracking_uri=uri,
                experiment="tracking-writes",
                seed=seed,
            )
        )
        for b in betas
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracking-uri", required=True, help="where the runs go (sqlite:///... or http://127.0.0.1:PORT)")
    ap.add_argument("--size", type=int, default=16, help="members in the population")
    ap.add_argument("--repeats", type=int, default=2, help="timed populations after the warm-up one")
    a = ap.parse_args()
    torch.set_num_threads(1)
    from veil.pipeline.execute import execute_population

    execute_population(members(a.tracking_uri, a.size, 0))  # warm-up: imports, the dataset's cache, the store
    walls = []
    for r in range(a.repeats):
        runs = members(a.tracking_uri, a.size, r + 1)
        t0 = time.perf_counter()
        execute_population(runs)
        walls.append(time.perf_counter() - t0)
    print(
        json.dumps(
            {
                "benchmark": "tracking-writes",
                "store": a.tracking_uri.split(":", 1)[0],
                "size": a.size,
                "walls_s": [round(w, 2) for w in walls],
                "pythonpath": os.environ.get("PYTHONPATH", ""),
            }
        )
    )


if __name__ == "__main__":
    main()
