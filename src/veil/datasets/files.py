"""Bring your own data: a .csv or .parquet file used wherever a registered dataset name is.

    load_dataset("./mydata.parquet", {"utility": "label", "sensitive": "group"})
    veil datasets partition ./mydata.csv -p utility=label -p sensitive=group --scheme iid --nodes 4

Every column that is not a label (or listed in `extra`) is a feature, unless `features` names them:
numbers are standardised with the train rows' mean and deviation, booleans become 0/1, text and
categorical columns are one-hot encoded. An optional card (the same YAML as datasets/*.yaml; only
`schema` and `labels` are required) fixes the expected columns and their types and supplies default
labels. Missing or unexpected columns, a wrong type, a missing value: a DataError naming file and column.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from veil.config import param
from veil.datasets.base import Dataset, assemble, split_indices
from veil.datasets.cards import read_card
from veil.datasets.entries import DatasetEntry
from veil.errors import DataError

ANY_COLUMN = "*"
"""A schema column named '*' in a card allows further columns of its type (e.g. numeric features)."""


@dataclass(frozen=True)
class FileParams:
    """How to read a user's .csv / .parquet file as a dataset."""

    utility: tuple[str, ...] = param((), "utility label column(s) (default: the card's utility labels)")
    sensitive: tuple[str, ...] = param((), "sensitive label column(s) (default: the card's sensitive labels)")
    features: tuple[str, ...] = param((), "feature columns (empty: every column that is not a label or extra)")
    extra: tuple[str, ...] = param(
        (), "columns kept per row but not used as features (e.g. a site id for silo partitioning)"
    )
    categorical: tuple[str, ...] = param((), "numeric columns to one-hot encode anyway (text columns always are)")
    test_fraction: float = param(0.25, "fraction of rows held out for the audit", gt=0, lt=1)
    seed: int = param(0, "seed of the train/test split", ge=0)
    standardize: bool = param(True, "scale numeric features to zero mean, unit variance (train statistics)")
    max_categories: int = param(
        100, "most distinct values a text column may have (more is an error: likely an id)", ge=2
    )
    card: str = param("", "path to a YAML card describing the file (schema and labels); empty for none")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_entry(path: str) -> DatasetEntry:
    """A registry entry for the user's file at `path` (not added to DATASETS)."""

    def fingerprint() -> str:
        p = Path(path).expanduser()
        if not p.is_file():
            raise DataError(f"{path}: no such file")
        return file_sha256(p)[:16]

    return DatasetEntry(path, FileParams, lambda p: load_file(path, p), f"user file {path}", "file", fingerprint)


def read_table(path: str | Path) -> pd.DataFrame:
    """A .csv or .parquet file as a DataFrame; unreadable files give a DataError naming the file."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise DataError(f"{path}: no such file")
    suffix = p.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(p)
        elif suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(p)
        else:
            raise DataError(f"{path}: unsupported file type {suffix!r} (use .csv or .parquet)")
    except DataError:
        raise
    except Exception as e:  # pandas/pyarrow raise many kinds
        raise DataError(f"{path}: cannot read as {suffix[1:]} ({type(e).__name__}: {e})") from None
    if frame.empty:
        raise DataError(f"{path}: the file holds no rows")
    dup = frame.columns[frame.columns.duplicated()].tolist()
    if dup:
        raise DataError(f"{path}: column(s) {dup} appear more than once")
    frame.columns = [str(c) for c in frame.columns]
    return frame


def load_file(path: str, p: FileParams) -> Dataset:
    frame = read_table(path)
    schema = None
    utility, sensitive = list(p.utility), list(p.sensitive)
    label_names: dict[str, str] = {}
    if p.card:
        card = read_card(p.card, require_sources=False)
        schema = card.columns
        if not utility:
            utility = [s["column"] for s in card.utility_labels.values() if s.get("default", True)]
            label_names.update({s["column"]: k for k, s in card.utility_labels.items()})
        if not sensitive:
            marked = {k: s for k, s in card.sensitive_labels.items() if s.get("default")}
            chosen = marked or card.sensitive_labels
            sensitive = [s["column"] for s in chosen.values()]
            label_names.update({s["column"]: k for k, s in card.sensitive_labels.items()})
    for role, named in (("utility", utility), ("sensitive", sensitive)):
        if not named:
            raise DataError(
                f"{path}: no {role} label column named: add -p {role}=COLUMN on the command line "
                f"(dataset_params: {{{role}: COLUMN}} in a run file or sweep spec); columns: {', '.join(frame.columns)}"
            )
    return table_to_dataset(
        frame,
        source=path,
        name=path,
        utility=utility,
        sensitive=sensitive,
        features=p.features,
        extra=p.extra,
        categorical=p.categorical,
        test_fraction=p.test_fraction,
        seed=p.seed,
        standardize=p.standardize,
        max_categories=p.max_categories,
        schema=schema,
        label_names=label_names,
    )


def check_schema(frame: pd.DataFrame, schema: Sequence[Mapping[str, Any]], source: str) -> None:
    """The file's columns must be exactly the card's (a '*' column allows more of its type)."""
    declared = {c["name"]: c for c in schema if c["name"] != ANY_COLUMN}
    wildcard = next((c for c in schema if c["name"] == ANY_COLUMN), None)
    missing = [c for c in declared if c not in frame.columns]
    if missing:
        raise DataError(
            f"{source}: column '{missing[0]}' required by the card is missing"
            + (f" (also {missing[1:]})" if len(missing) > 1 else "")
        )
    for col in frame.columns:
        spec = declared.get(col, wildcard)
        if spec is None:
            raise DataError(f"{source}: column '{col}' is not in the card's schema (declared: {', '.join(declared)})")
        typ = spec["type"]
        s = frame[col]
        if typ in ("numeric", "integer") and not (
            pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        ):
            bad = _first_non_numeric(s)
            raise DataError(
                f"{source}: column '{col}' should be {typ} but holds {s.dtype}"
                + (f" (e.g. {bad!r})" if bad is not None else "")
            )
        if typ == "integer" and pd.api.types.is_float_dtype(s) and not np.all(np.isnan(s) | (s == np.round(s))):
            raise DataError(f"{source}: column '{col}' should be integer but holds fractions")
        if "values" in spec:
            allowed = {str(v) for v in spec["values"]}
            seen = set(s.dropna().astype(str))
            extra = sorted(seen - allowed)
            if extra:
                raise DataError(f"{source}: column '{col}' has value {extra[0]!r}, not one of {sorted(allowed)}")


def _first_non_numeric(s: pd.Series) -> Any:
    vals = s.dropna()
    num = pd.to_numeric(vals, errors="coerce")
    bad = vals[num.isna()]
    return bad.iloc[0] if len(bad) else None


def _check_missing(frame: pd.DataFrame, cols: Sequence[str], source: str, what: str) -> None:
    for c in cols:
        na = frame[c].isna().to_numpy()
        if na.any():
            rows = np.flatnonzero(na)
            raise DataError(
                f"{source}: {what} column '{c}' has a missing value at row {rows[0]}"
                + (f" (and {len(rows) - 1} more)" if len(rows) > 1 else "")
                + "; fill or drop those rows"
            )


def encode_features(
    frame: pd.DataFrame, cols: Sequence[str], *, source: str, categorical: Sequence[str] = (), max_categories: int = 100
) -> tuple[np.ndarray, list[str], list[int]]:
    """Feature matrix of `cols`: numbers as they are, booleans 0/1, text one-hot. Returns (x, names,
    indices of the numeric columns to standardise)."""
    blocks: list[np.ndarray] = []
    names: list[str] = []
    numeric_idx: list[int] = []
    width = 0
    for c in cols:
        s = frame[c]
        if pd.api.types.is_bool_dtype(s):
            blocks.append(s.to_numpy(dtype=np.float32)[:, None])
            names.append(c)
            width += 1
            continue
        if (
            pd.api.types.is_datetime64_any_dtype(s)
            or pd.api.types.is_timedelta64_dtype(s)
            or pd.api.types.is_complex_dtype(s)
        ):
            raise DataError(f"{source}: column '{c}' has unsupported type {s.dtype}; convert it to numbers or text")
        if pd.api.types.is_numeric_dtype(s) and c not in categorical:
            blocks.append(s.to_numpy(dtype=np.float32)[:, None])
            names.append(c)
            numeric_idx.append(width)
            width += 1
            continue
        if not pd.api.types.is_numeric_dtype(s):
            vals = s.dropna()
            num = pd.to_numeric(vals, errors="coerce")
            frac = float(num.notna().mean()) if len(vals) else 0.0
            if 0.5 <= frac < 1.0:
                bad = vals[num.isna()].iloc[0]
                raise DataError(
                    f"{source}: column '{c}' mixes numbers and text (e.g. {bad!r}); "
                    f"fix the values or list it in 'categorical'"
                )
        text = s.astype(str).to_numpy()
        cats = sorted(set(text))
        if len(cats) > max_categories:
            raise DataError(
                f"{source}: text column '{c}' has {len(cats)} distinct values (more than max_categories="
                f"{max_categories}); if it is an id, list it in 'extra' or leave it out of 'features'"
            )
        index = {v: i for i, v in enumerate(cats)}
        block = np.zeros((len(s), len(cats)), dtype=np.float32)
        block[np.arange(len(s)), [index[v] for v in text]] = 1.0
        blocks.append(block)
        names += [f"{c}={v}" for v in cats]
        width += len(cats)
    if not blocks:
        raise DataError(f"{source}: no feature columns left after removing labels and extras")
    return np.hstack(blocks), names, numeric_idx


def table_to_dataset(
    frame: pd.DataFrame,
    *,
    source: str,
    name: str,
    utility: Sequence[str],
    sensitive: Sequence[str],
    features: Sequence[str] = (),
    extra: Sequence[str] = (),
    categorical: Sequence[str] = (),
    test_fraction: float = 0.25,
    seed: int = 0,
    standardize: bool = True,
    max_categories: int = 100,
    schema: Sequence[Mapping[str, Any]] | None = None,
    label_names: Mapping[str, str] | None = None,
    train_idx: np.ndarray | None = None,
    test_idx: np.ndarray | None = None,
) -> Dataset:
    """A Dataset from a table: labels, features (encoded) and extras by column name; a seeded split
    unless `train_idx`/`test_idx` are given."""
    if schema is not None:
        check_schema(frame, schema, source)
    label_names = dict(label_names or {})
    for group, cols in (
        ("utility", utility),
        ("sensitive", sensitive),
        ("features", features),
        ("extra", extra),
        ("categorical", categorical),
    ):
        for c in cols:
            if c not in frame.columns:
                raise DataError(f"{source}: {group} column '{c}' not found (columns: {', '.join(frame.columns)})")
    labels = list(utility) + list(sensitive)
    dup = sorted({c for c in labels if labels.count(c) > 1})
    if dup:
        raise DataError(f"{source}: column(s) {dup} named as both utility and sensitive (or twice)")
    clash = sorted(set(features) & (set(labels) | set(extra)))
    if clash:
        raise DataError(f"{source}: column(s) {clash} are listed as features and also as labels or extra")
    feats = list(features) or [c for c in frame.columns if c not in set(labels) | set(extra)]
    _check_missing(frame, labels, source, "label")
    _check_missing(frame, feats, source, "feature")
    x, fnames, numeric_idx = encode_features(
        frame, feats, source=source, categorical=categorical, max_categories=max_categories
    )

    def lab(c: str) -> np.ndarray:
        s = frame[c]
        return (
            s.to_numpy()
            if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s)
            else s.astype(str).to_numpy()
        )

    if train_idx is None or test_idx is None:
        train_idx, test_idx = split_indices(len(frame), test_fraction, seed)
    return assemble(
        name,
        x,
        {label_names.get(c, c): lab(c) for c in utility},
        {label_names.get(c, c): lab(c) for c in sensitive},
        train_idx,
        test_idx,
        extra={c: frame[c].to_numpy() for c in extra},
        feature_names=fnames,
        standardize=numeric_idx if standardize else (),
    )
