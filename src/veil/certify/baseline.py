"""What the utility labels alone reveal of each sensitive label: the baseline an excess target is judged against.

The baseline is the best predictor of s from the utility labels (`baseline_probas`); a release's excess over it
is read on the same resamples of the same rows (`excess_draws`), so the two are paired."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def baseline_probas(train: Any, test: Any, num_classes: Mapping[str, int]) -> dict[str, np.ndarray]:
    """For each sensitive label, the best predictor of it from the utility labels alone: the class frequencies of s
    per utility-label combination on the `train` rows (+1 smoothing), as class probabilities on the `test` rows.
    A release that keeps every utility label reveals at least what this predictor does."""

    def key(split: Any) -> np.ndarray:
        cols = [np.asarray(v) for v in split.utility.values()]
        return np.stack(cols, axis=1) if cols else np.zeros((len(split), 1), np.int64)

    ktr, kte = key(train), key(test)
    combos, tr_idx = np.unique(ktr, axis=0, return_inverse=True)
    lookup = {tuple(c): i for i, c in enumerate(combos)}
    te_idx = np.array([lookup.get(tuple(r), -1) for r in kte])
    out = {}
    for name, y_tr in train.sensitive.items():
        k = int(num_classes[name])
        table = np.ones((len(combos) + 1, k))  # the last row: a combination unseen in train
        np.add.at(table, (tr_idx.ravel(), np.asarray(y_tr)), 1.0)
        out[name] = (table / table.sum(axis=1, keepdims=True))[te_idx]
    return out


def excess_draws(gap: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """An adversary's signed gap beyond the utility labels' baseline, per draw: gap - max(baseline gap, 0), both
    read on the same resample of the test rows (paired: where the release keeps u, the two rankings move together
    and the difference varies far less than either). The baseline is floored at 0 because labels that reveal
    nothing about s cannot excuse a leak: there the excess is the gap itself."""
    return gap - np.maximum(baseline, 0.0)
