"""How much of each row survives the adjustable-privacy AE's release x' = D(g(C(v)) || f(R(v))) on Adult, by lam
and noise: distinct released rows and the within-income-class spread of x' against that of x. Evidence for the
adjustable-ae-adult row's cause (suite.yaml `why`).

    python studies/ae_release_spread.py [--epochs 5] [--seed 0]
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import torch

from veil.datasets.catalog import load_dataset
from veil.methods.builtin import create_method


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    ds = load_dataset("adult-onehot102")
    model = create_method("adjustable-ae", {"epochs": args.epochs, "seed": args.seed}, ds.task())
    model.fit(ds.train)
    x, (y,), (s,) = ds.test.x, ds.test.utility.values(), ds.test.sensitive.values()
    print(
        f"test rows {len(x)}; income majority {max(y.mean(), 1 - y.mean()):.3f}, gender majority "
        f"{max(s.mean(), 1 - s.mean()):.3f}; within-class std of x {spread(x, y):.4f}"
    )
    print("| lam | noise | distinct rows of x' | within-class std of x' |\n|---|---|---|---|")
    for lam in (-5000, -3000, -1000, -10, -3):
        for noise in (0.0, 200.0):
            # release knobs: the trained model is reused, as the paper's data providers do
            object.__setattr__(model, "config", dataclasses.replace(model.config, lam=lam, noise=noise))
            xp = model.release_with_labels(x, y)
            print(f"| {lam} | {noise:g} | {len(np.unique(xp.round(4), axis=0))} | {spread(xp, y):.4f} |")


def spread(x: np.ndarray, y: np.ndarray) -> float:
    """Mean over income classes of the mean per-feature standard deviation."""
    return float(np.mean([x[y == c].std(0).mean() for c in np.unique(y)]))


if __name__ == "__main__":
    main()
