"""Helpers shared by the real-data loaders: raw file paths, one-hot encoding, train-only standardisation,
and assembling a Dataset from a given (not random) train/test split."""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from veil.datasets.base import Dataset, Split, encode_labels, split_indices
from veil.datasets.registry import register_dataset
from veil.errors import DataError


def raw_file(dataset: str, fname: str) -> Path:
    """Path of fetched file `fname` of `dataset` (DataError with the fetch command when not fetched)."""
    from veil.datasets.fetch import require_fetched

    p = require_fetched(dataset) / fname
    if not p.is_file():
        raise DataError(f"dataset '{dataset}': fetched folder {p.parent} lacks {fname}; "
                        f"run `veil datasets fetch {dataset} --force`")
    return p


def register_real(name: str, params_cls: type, description: str) -> Callable:
    """register_dataset with kind='real' and the fetched files' digest in the cache key."""
    from veil.datasets.fetch import fingerprint

    return register_dataset(name, params_cls, description, kind="real", fingerprint=partial(fingerprint, name))


def onehot(values: pd.Series | np.ndarray, categories: Sequence[Any], column: str, where: str) -> tuple[np.ndarray, list[str]]:
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


def assemble(
    name: str,
    x: np.ndarray,
    utility: Mapping[str, np.ndarray],
    sensitive: Mapping[str, np.ndarray],
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    *,
    extra: Mapping[str, np.ndarray] | None = None,
    feature_names: Sequence[str] = (),
    standardize: Sequence[int] = (),
    params: Mapping[str, Any] | None = None,
) -> Dataset:
    """A Dataset from full arrays and a given split. Labels are coded 0..C-1 over all rows (as make_dataset
    does); the `standardize` columns are scaled to zero mean, unit variance with TRAIN statistics only."""
    x = np.asarray(x, dtype=np.float32)
    if len(train_idx) == 0 or len(test_idx) == 0:
        raise DataError(f"dataset '{name}': the split leaves {len(train_idx)} train and {len(test_idx)} test rows")
    if standardize:
        cols = np.asarray(list(standardize), dtype=np.int64)
        mu = x[train_idx][:, cols].mean(axis=0)
        sd = x[train_idx][:, cols].std(axis=0)
        sd[sd == 0] = 1.0
        x[:, cols] = (x[:, cols] - mu) / sd
    if not np.all(np.isfinite(x)):
        bad = np.argwhere(~np.isfinite(x))[0]
        col = feature_names[bad[1]] if len(feature_names) > bad[1] else bad[1]
        raise DataError(f"dataset '{name}': non-finite feature value at row {bad[0]}, column {col}")
    coded, num_classes = encode_labels(name, {**utility, **sensitive})
    extra = {k: np.asarray(v) for k, v in (extra or {}).items()}

    def side(idx: np.ndarray) -> Split:
        return Split(x[idx], {k: coded[k][idx] for k in utility}, {k: coded[k][idx] for k in sensitive},
                     {k: v[idx] for k, v in extra.items()})

    return Dataset(name, side(np.asarray(train_idx)), side(np.asarray(test_idx)), num_classes, dict(params or {}),
                   tuple(str(f) for f in feature_names))
