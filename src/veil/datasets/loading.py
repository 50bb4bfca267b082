"""Helpers shared by the real-data loaders: raw file paths, registration with the fetched files' digest,
one-hot encoding and subsampling. The loaders build their Dataset with `veil.datasets.dataset.assemble` (from a
given, not random, train/test split, with train-only standardisation), next to make_dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from veil.datasets.dataset import split_indices
from veil.datasets.entries import register_dataset
from veil.datasets.fetch import fingerprint, require_fetched
from veil.errors import DataError


def raw_file(dataset: str, fname: str) -> Path:
    """Path of fetched file `fname` of `dataset` (DataError with the fetch command when not fetched)."""
    p = require_fetched(dataset) / fname
    if not p.is_file():
        raise DataError(
            f"dataset '{dataset}': fetched folder {p.parent} lacks {fname}; run `veil datasets fetch {dataset} --force`"
        )
    return p


def register_real(name: str, params_cls: type, description: str) -> Callable:
    """register_dataset with kind='real' and the fetched files' digest in the cache key."""
    return register_dataset(name, params_cls, description, kind="real", fingerprint=lambda _params: fingerprint(name))


def onehot(
    values: pd.Series | np.ndarray, categories: Sequence[Any], column: str, where: str
) -> tuple[np.ndarray, list[str]]:
    """One-hot columns of `values` over the fixed `categories`; an unknown value is an error naming it."""
    vals = pd.Series(np.asarray(values, dtype=object))
    cats = list(categories)
    index = {c: i for i, c in enumerate(cats)}
    codes = vals.map(index)
    if codes.isna().any():
        bad = vals[codes.isna()].iloc[0]
        raise DataError(f"{where}: column '{column}' has value {bad!r}, not one of {cats}")
    out = np.zeros((len(vals), len(cats)), dtype=np.float32)
    out[np.arange(len(vals)), codes.to_numpy(dtype=np.int64)] = 1.0
    return out, [f"{column}={c}" for c in cats]


def drop_constant_onehots(x: np.ndarray, names: list[str], onehot_cols: Sequence[int]) -> tuple[np.ndarray, list[str]]:
    """Remove one-hot columns that are all zero (a category that never occurs in the data)."""
    dead = [i for i in onehot_cols if not x[:, i].any()]
    if not dead:
        return x, names
    keep = [i for i in range(x.shape[1]) if i not in set(dead)]
    return x[:, keep], [names[i] for i in keep]


def random_split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The same seeded split make_dataset uses."""
    return split_indices(n, test_fraction, seed)


def subsample(n: int, max_rows: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded random subset of at most `max_rows` rows (all rows when 0)."""
    if max_rows <= 0 or max_rows >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed + 7919).choice(n, size=max_rows, replace=False))
