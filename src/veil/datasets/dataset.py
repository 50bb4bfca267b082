"""The dataset type every method, audit and partitioner consumes, and its Parquet form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from veil.datasets.transform import Column, FeatureTransform
from veil.errors import DataError

UTILITY_PREFIX = "u:"
SENSITIVE_PREFIX = "s:"
EXTRA_PREFIX = "e:"
FEATURE_PREFIX = "x:"


@dataclass(frozen=True)
class Split:
    """One side of a train/test split: features and integer-coded labels."""

    x: np.ndarray
    """Features, float32, shape (n, d)."""
    utility: Mapping[str, np.ndarray]
    """Utility (ally) labels by name, int64 class indices of shape (n,)."""
    sensitive: Mapping[str, np.ndarray]
    """Sensitive (adversary) labels by name, int64 class indices of shape (n,)."""
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Other per-row columns (e.g. a node index or subject id) that are neither features nor targets."""

    def __post_init__(self) -> None:
        n = len(self.x)
        if self.x.ndim != 2:
            raise DataError(f"features must be 2-D (rows, columns), got shape {self.x.shape}")
        for kind, cols in (("utility", self.utility), ("sensitive", self.sensitive), ("extra", self.extra)):
            for name, col in cols.items():
                if len(col) != n:
                    raise DataError(f"{kind} label '{name}' has {len(col)} rows but features have {n}")

    def __len__(self) -> int:
        return len(self.x)

    def take(self, idx: np.ndarray) -> "Split":
        """Rows `idx` of this split, as a new split."""
        pick = lambda d: {k: v[idx] for k, v in d.items()}  # noqa: E731
        return Split(self.x[idx], pick(self.utility), pick(self.sensitive), pick(self.extra))

    def labels(self) -> dict[str, np.ndarray]:
        """Utility and sensitive labels in one dict (names are unique across both)."""
        return {**self.utility, **self.sensitive}


@dataclass(frozen=True)
class Dataset:
    """Features X, named utility and sensitive labels, and a seeded train/test split."""

    name: str
    """Registry name or file path the data came from."""
    train: Split
    """Rows the methods train on."""
    test: Split
    """Held-out rows the audit scores on."""
    num_classes: Mapping[str, int]
    """Number of classes of every utility and sensitive label."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Parameters the dataset was built with (size, dimension, seed, ...)."""
    feature_names: tuple[str, ...] = ()
    """Column names of X, if known."""
    transform: FeatureTransform | None = None
    """How the source table's columns became X (`veil release` applies it to new rows); None if unknown."""
    class_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Each label's class names in code order (code 0 first), where known (a table's values, e.g. 'no', 'yes')."""

    def class_name(self, label: str, code: int) -> str:
        """The name of class `code` of `label`, or the code itself when the names are not known."""
        names = self.class_names.get(label, ())
        return names[code] if 0 <= code < len(names) else str(code)

    def __post_init__(self) -> None:
        if not self.train.utility:
            raise DataError(f"dataset '{self.name}' declares no utility label")
        if not self.train.sensitive:
            raise DataError(f"dataset '{self.name}' declares no sensitive label")
        overlap = set(self.train.utility) & set(self.train.sensitive)
        if overlap:
            raise DataError(f"dataset '{self.name}': labels {sorted(overlap)} are both utility and sensitive")
        if self.train.x.shape[1] != self.test.x.shape[1]:
            raise DataError(
                f"dataset '{self.name}': train has {self.train.x.shape[1]} features, test {self.test.x.shape[1]}"
            )
        for name in self.label_names:
            if name not in self.num_classes:
                raise DataError(f"dataset '{self.name}': no class count for label '{name}'")

    @property
    def d_in(self) -> int:
        """Number of input features."""
        return int(self.train.x.shape[1])

    @property
    def utility_names(self) -> tuple[str, ...]:
        return tuple(self.train.utility)

    @property
    def sensitive_names(self) -> tuple[str, ...]:
        return tuple(self.train.sensitive)

    @property
    def label_names(self) -> tuple[str, ...]:
        return self.utility_names + self.sensitive_names

    def task(self) -> "TaskSpec":
        """What a method needs to size its networks."""
        return TaskSpec(
            d_in=self.d_in,
            utility={k: int(self.num_classes[k]) for k in self.utility_names},
            sensitive={k: int(self.num_classes[k]) for k in self.sensitive_names},
        )


@dataclass(frozen=True)
class TaskSpec:
    """Input width and the class counts of every utility and sensitive label."""

    d_in: int
    """Number of input features."""
    utility: Mapping[str, int]
    """Utility label name -> number of classes."""
    sensitive: Mapping[str, int]
    """Sensitive label name -> number of classes."""


def split_indices(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random train/test split of `n` rows."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    n_test = int(round(n * test_fraction))
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def encode_labels(
    name: str, labels: Mapping[str, Any]
) -> tuple[dict[str, np.ndarray], dict[str, int], dict[str, tuple[str, ...]]]:
    """Labels as int64 class codes 0..C-1 (sorted class order), their class counts and class names; missing
    values and single-class labels are refused, naming the dataset and the label."""
    coded: dict[str, np.ndarray] = {}
    num_classes: dict[str, int] = {}
    names: dict[str, tuple[str, ...]] = {}
    for lab, col in labels.items():
        col = np.asarray(col)
        if pd.isna(col).any():
            raise DataError(f"dataset '{name}': label '{lab}' has missing values")
        classes, codes = np.unique(col, return_inverse=True)
        if len(classes) < 2:
            raise DataError(f"dataset '{name}': label '{lab}' has a single class {classes.tolist()}")
        coded[lab] = codes.astype(np.int64)
        num_classes[lab] = int(len(classes))
        names[lab] = tuple(str(c) for c in classes.tolist())
    return coded, num_classes, names


def make_dataset(
    name: str,
    x: np.ndarray,
    utility: Mapping[str, np.ndarray],
    sensitive: Mapping[str, np.ndarray],
    *,
    test_fraction: float,
    seed: int,
    params: Mapping[str, Any] | None = None,
    extra: Mapping[str, np.ndarray] | None = None,
    feature_names: tuple[str, ...] = (),
) -> Dataset:
    """Build a Dataset from full arrays, encoding labels as 0..C-1 and splitting with `seed`."""
    train_idx, test_idx = split_indices(len(x), test_fraction, seed)
    return assemble(
        name, x, utility, sensitive, train_idx, test_idx, extra=extra, feature_names=feature_names, params=params
    )


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
    columns: Sequence[Column] | None = None,
    other: Sequence[str] = (),
) -> Dataset:
    """A Dataset from full arrays and a given split. Labels are coded 0..C-1 over all rows (as make_dataset
    does); the `standardize` columns are scaled to zero mean, unit variance with TRAIN statistics only.
    `columns`: the source columns behind x (a table's), recorded with those statistics as the dataset's
    `transform` (`other`: the table's label and extra columns); without them the transform names the features."""
    x = np.asarray(x, dtype=np.float32)
    if len(train_idx) == 0 or len(test_idx) == 0:
        raise DataError(f"dataset '{name}': the split leaves {len(train_idx)} train and {len(test_idx)} test rows")
    stats: dict[int, tuple[float, float]] = {}
    if standardize:
        cols = np.asarray(list(standardize), dtype=np.int64)
        # float64 statistics: float32 sums and squares overflow for values beyond ~1e19
        train = x[train_idx][:, cols].astype(np.float64)
        mu, sd = train.mean(axis=0), train.std(axis=0)
        sd[sd == 0] = 1.0
        x[:, cols] = ((x[:, cols] - mu) / sd).astype(np.float32)
        stats = {int(c): (float(m), float(s)) for c, m, s in zip(cols, mu, sd)}
    if not np.all(np.isfinite(x)):
        bad = np.argwhere(~np.isfinite(x))[0]
        col = feature_names[bad[1]] if len(feature_names) > bad[1] else bad[1]
        raise DataError(f"dataset '{name}': non-finite feature value at row {bad[0]}, column {col}")
    coded, num_classes, class_names = encode_labels(name, {**utility, **sensitive})
    extra = {k: np.asarray(v) for k, v in (extra or {}).items()}

    def side(idx: np.ndarray) -> Split:
        return Split(
            x[idx],
            {k: coded[k][idx] for k in utility},
            {k: coded[k][idx] for k in sensitive},
            {k: v[idx] for k, v in extra.items()},
        )

    return Dataset(
        name,
        side(np.asarray(train_idx)),
        side(np.asarray(test_idx)),
        num_classes,
        dict(params or {}),
        tuple(str(f) for f in feature_names),
        record_transform(columns, stats, other, feature_names, x.shape[1]),
        class_names,
    )


def record_transform(
    columns: Sequence[Column] | None,
    stats: Mapping[int, tuple[float, float]],
    other: Sequence[str],
    feature_names: Sequence[str],
    width: int,
) -> FeatureTransform | None:
    """The transform a dataset records: its source columns with the standardisation each numeric one got
    (`stats`: feature position -> (mean, deviation)), or its feature names; None when neither is known."""
    if columns is None:
        return FeatureTransform.of_features(feature_names) if len(feature_names) == width else None
    out, pos = [], 0
    for c in columns:
        if c.kind == "numeric" and pos in stats:
            c = Column(c.name, c.kind, *stats[pos])
        out.append(c)
        pos += c.width
    return FeatureTransform(tuple(out), tuple(other))


def to_frame(ds: Dataset) -> pd.DataFrame:
    """The dataset as one table: x:* features, u:* / s:* / e:* columns and a 'split' column."""
    parts = []
    for split_name, sp in (("train", ds.train), ("test", ds.test)):
        cols: dict[str, Any] = {f"{FEATURE_PREFIX}{i}": sp.x[:, i] for i in range(sp.x.shape[1])}
        cols.update({f"{UTILITY_PREFIX}{k}": v for k, v in sp.utility.items()})
        cols.update({f"{SENSITIVE_PREFIX}{k}": v for k, v in sp.sensitive.items()})
        cols.update({f"{EXTRA_PREFIX}{k}": v for k, v in sp.extra.items()})
        frame = pd.DataFrame(cols)
        frame["split"] = split_name
        parts.append(frame)
    return pd.concat(parts, ignore_index=True)


def from_frame(
    frame: pd.DataFrame,
    name: str,
    num_classes: Mapping[str, int],
    params: Mapping[str, Any] | None = None,
    feature_names: tuple[str, ...] = (),
    transform: FeatureTransform | None = None,
    class_names: Mapping[str, Sequence[str]] | None = None,
) -> Dataset:
    """Inverse of `to_frame`."""
    fcols = [c for c in frame.columns if c.startswith(FEATURE_PREFIX)]

    def side(which: str) -> Split:
        f = frame[frame["split"] == which]
        pick = lambda p: {c[len(p) :]: f[c].to_numpy() for c in frame.columns if c.startswith(p)}  # noqa: E731
        return Split(
            f[fcols].to_numpy(dtype=np.float32),
            {k: v.astype(np.int64) for k, v in pick(UTILITY_PREFIX).items()},
            {k: v.astype(np.int64) for k, v in pick(SENSITIVE_PREFIX).items()},
            pick(EXTRA_PREFIX),
        )

    names = {k: tuple(v) for k, v in (class_names or {}).items()}
    return Dataset(
        name, side("train"), side("test"), dict(num_classes), dict(params or {}), feature_names, transform, names
    )
