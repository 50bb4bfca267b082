"""Bring your own data: a .csv or .parquet file used wherever a registered dataset name is.

    load_dataset("./mydata.parquet", {"utility": "label", "sensitive": "group"})
    veil datasets partition ./mydata.csv -p utility=label -p sensitive=group --scheme iid --nodes 4

Every column that is not a label (or listed in `extra`) is a feature, unless `features` names them:
numbers are standardised with the train rows' mean and deviation, booleans become 0/1, text and
categorical columns are one-hot encoded. An optional card (the same YAML as datasets/*.yaml; only
`schema` and `labels` are required) fixes the expected columns and their types and supplies default
labels. Missing or unexpected columns, a wrong type, a missing value: a DataError naming file and column.

Before anything trains the table is checked (`check_table`): enough rows for the split and the audit's probes
(`MIN_SIDE_ROWS` on each side), every used value finite (row numbers in errors are 1-based data rows: the header
is not counted), labels that are classes rather than continuous numbers (`MAX_FLOAT_CLASSES`), and enough rows
of every class (`min_class_rows`) for both sides of the split. docs/datasets.md lists the checks.
"""

from __future__ import annotations

import csv
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from veil.config import param
from veil.datasets.card_files import read_card
from veil.datasets.dataset import Dataset, assemble, split_indices
from veil.datasets.entries import DatasetEntry
from veil.datasets.problems import FLOAT32_MAX, data_rows, refuse
from veil.datasets.transform import Column
from veil.errors import DataError

ANY_COLUMN = "*"
"""A schema column named '*' in a card allows further columns of its type (e.g. numeric features)."""

MIN_SIDE_ROWS = 10
"""Rows each side of the train/test split needs at least: the audit trains fresh probes on the train side and
scores their accuracy and AUC on the test side; with fewer rows those metrics are noise or undefined (NaN)."""

MIN_CLASS_TEST_ROWS = 2
"""Test rows a class should get on average: a class needs ceil(2 / test_fraction) rows (8 at 0.25), else the
random split often leaves it no test row and its one-vs-rest AUC cannot be scored."""

MAX_FLOAT_CLASSES = 20
"""A label of non-integer numbers with more distinct values than this looks continuous (bin it first)."""

CHECKS_VERSION = 4
"""Part of a file's cache key: raise it when `check_table`'s checks or what a cached file keeps change (4: label
class names), so that a file cached before is checked again instead of read back from the cache."""


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


def require_file(path: str | Path) -> Path:
    """The user's data file at `path`; a directory or a missing file is a DataError saying which."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise DataError(f"{path}: is a directory, not a data file (give a .csv or .parquet file)")
    if not p.is_file():
        raise DataError(f"{path}: no such file")
    return p


def file_entry(path: str) -> DatasetEntry:
    """A registry entry for the user's file at `path` (not added to DATASETS)."""

    def fingerprint(params: FileParams) -> str:
        """The file's digest, and its card's: a card edited since the last load rebuilds the dataset."""
        p = require_file(path)
        card = Path(params.card).expanduser() if params.card else None
        card_digest = f"-card-{file_sha256(card)[:16]}" if card is not None and card.is_file() else ""
        return f"checks{CHECKS_VERSION}-{file_sha256(p)[:16]}{card_digest}"

    return DatasetEntry(path, FileParams, lambda p: load_file(path, p), f"user file {path}", "file", fingerprint)


def read_table(path: str | Path) -> pd.DataFrame:
    """A .csv or .parquet file as a DataFrame; unreadable files give a DataError naming the file."""
    p = require_file(path)
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
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty: no header row, no data rows") from None
    except Exception as e:  # pandas/pyarrow raise many kinds
        raise DataError(f"{path}: cannot read as {suffix[1:]} ({type(e).__name__}: {e})") from None
    if frame.empty:
        raise DataError(f"{path}: the file holds no rows")
    header = _csv_header(p) if suffix == ".csv" else [str(c) for c in frame.columns]
    dup = sorted({c for c in header if header.count(c) > 1})
    if not dup:
        dup = frame.columns[frame.columns.duplicated()].tolist()
    if dup:
        raise DataError(f"{path}: column(s) {dup} appear more than once")
    frame.columns = [str(c) for c in frame.columns]
    return frame


def _csv_header(path: Path) -> list[str]:
    """The names on a CSV's header line as written (pandas renames a repeated 'a' to 'a.1')."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        return next(csv.reader(f), [])


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


def finite_problem(frame: pd.DataFrame, groups: Mapping[str, Sequence[str]]) -> str | None:
    """What is wrong if a column of `groups` (kind -> columns, e.g. "label", then "feature") holds a missing
    (empty, NaN) or infinite value: one sentence naming every such column, each with its first 1-based data row
    (the header is not counted); None when nothing is."""
    problems, missing, infinite = [], False, False
    for what, cols in groups.items():
        for c in cols:
            s = frame[c]
            na = s.isna().to_numpy()
            if na.any():
                missing = True
                problems.append(
                    f"{what} column '{c}' has a missing value (empty cell or NaN) at {data_rows(np.flatnonzero(na))}"
                )
                continue
            if pd.api.types.is_float_dtype(s):
                inf = np.flatnonzero(np.isinf(s.to_numpy(dtype=np.float64)))
                if len(inf):
                    infinite = True
                    problems.append(
                        f"{what} column '{c}' has the non-finite value {s.iloc[inf[0]]} at {data_rows(inf)}"
                    )
    if not problems:
        return None
    advice = "fill, replace or drop" if missing and infinite else "fill or drop" if missing else "replace or drop"
    head = f"{len(problems)} columns hold values a model cannot take: " if len(problems) > 1 else ""
    return f"{head}{'; '.join(problems)}, counting data rows from 1 after the header; {advice} those rows"


def _plain(v: Any) -> Any:
    """A numpy scalar as the Python value (for messages: 3, not np.int64(3))."""
    return v.item() if isinstance(v, np.generic) else v


def check_scalar(frame: pd.DataFrame, cols: Sequence[str], source: str) -> None:
    """One value per cell: a Parquet list, struct or map column is refused, not one-hot encoded as text."""
    for c in cols:
        s = frame[c]
        if s.dtype != object:
            continue
        nested = np.flatnonzero([isinstance(v, (list, tuple, dict, set, np.ndarray)) for v in s.to_numpy()])
        if len(nested):
            v = s.iloc[int(nested[0])]
            raise DataError(
                f"{source}: column '{c}' holds {type(v).__name__} values (e.g. {_short(v)} at {data_rows(nested)}); "
                "Veil reads one number or text per cell: spread it over columns, or convert it to text"
            )


def _short(v: Any) -> str:
    text = repr(v.tolist() if isinstance(v, np.ndarray) else v)
    return text if len(text) <= 40 else text[:37] + "..."


def min_class_rows(test_fraction: float) -> int:
    """Rows every class of a label needs: about `MIN_CLASS_TEST_ROWS` of them on the smaller side of the split."""
    return math.ceil(MIN_CLASS_TEST_ROWS / min(test_fraction, 1 - test_fraction) - 1e-9)


def check_label(frame: pd.DataFrame, c: str, source: str, *, test_fraction: float, max_categories: int) -> None:
    """A label column must hold classes: not continuous numbers, not an id, at least two classes and enough
    rows of each for both sides of the split."""
    s = frame[c]
    counts = s.astype(str).value_counts() if s.dtype == object else s.value_counts()
    hint = "bin it into classes first (e.g. pandas.cut), or use it as a feature and name another label"
    if pd.api.types.is_float_dtype(s):
        v = s.to_numpy(dtype=np.float64)
        fractional = np.flatnonzero(v != np.round(v))
        if len(fractional) and len(counts) > MAX_FLOAT_CLASSES:
            raise DataError(
                f"{source}: label column '{c}' looks continuous: {len(counts)} distinct values, non-integer ones "
                f"such as {float(v[fractional[0]])!r} at {data_rows(fractional)} (a label of fractions may have at most "
                f"{MAX_FLOAT_CLASSES} distinct values); {hint}"
            )
    if len(counts) > max_categories:
        kind = "numbers" if pd.api.types.is_numeric_dtype(s) else "values"
        raise DataError(
            f"{source}: label column '{c}' has {len(counts)} distinct {kind} (more than max_categories="
            f"{max_categories}): too many classes, likely a continuous value or an id; {hint}"
        )
    if len(counts) < 2:
        raise DataError(
            f"{source}: label column '{c}' has a single class {_plain(counts.index[0])!r} in all {len(s)} rows: "
            "nothing to predict or to hide; name a label with at least two classes"
        )
    need = min_class_rows(test_fraction)
    small = counts[counts < need]
    if len(small):
        cls, n = _plain(small.index[0]), int(small.iloc[0])
        also = f" ({len(small) - 1} more classes have fewer than {need} too)" if len(small) > 1 else ""
        raise DataError(
            f"{source}: label column '{c}': class {cls!r} has {n} row{'s' * (n != 1)}{also}; every class needs "
            f"at least {need} so that the random split (test_fraction={test_fraction:g}) leaves it about "
            f"{MIN_CLASS_TEST_ROWS} test rows to score the audit's per-class AUC on; merge rare classes or "
            "drop their rows"
        )


def check_split_sizes(n: int, n_train: int, n_test: int, test_fraction: float, source: str) -> None:
    """Each side of the split needs `MIN_SIDE_ROWS` rows (the probes train on one side, are scored on the other)."""
    if n_train >= MIN_SIDE_ROWS and n_test >= MIN_SIDE_ROWS:
        return
    need = math.ceil(max(MIN_SIDE_ROWS / test_fraction, MIN_SIDE_ROWS / (1 - test_fraction)) - 1e-9)
    raise DataError(
        f"{source}: {n} row{'s are' if n != 1 else ' is'} too few: the train/test split (test_fraction={test_fraction:g}) "
        f"leaves {n_train} train and {n_test} test rows, and each side needs at least {MIN_SIDE_ROWS} (the audit "
        f"trains fresh probes on the train rows and scores accuracy and AUC on the test rows); at this "
        f"test_fraction the file needs at least {need} rows"
    )


def check_split_classes(
    labels: Mapping[str, np.ndarray],
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    source: str,
    seed: int,
    test_fraction: float,
) -> None:
    """Every label keeps two classes on both sides of the split (else its probe or AUC is undefined)."""
    for c, y in labels.items():
        for side, idx in (("train", train_idx), ("test", test_idx)):
            present = pd.unique(y[idx])
            if len(present) < 2:
                raise DataError(
                    f"{source}: label column '{c}': the split (seed={seed}, test_fraction={test_fraction:g}) leaves "
                    f"only class {_plain(present[0])!r} among the {len(idx)} {side} rows, so the audit cannot score it; "
                    "add rows of the other classes, or change seed or test_fraction"
                )


def _as_numbers(s: pd.Series, c: str, categorical: Sequence[str]) -> pd.Series:
    """Column `c` as numbers where pandas kept numbers as text (e.g. integers beyond int64), else as it is."""
    if pd.api.types.is_object_dtype(s) and c not in categorical:
        num = pd.to_numeric(s, errors="coerce")
        if num.notna().all():
            return num
    return s


def feature_problems(
    frame: pd.DataFrame, cols: Sequence[str], *, categorical: Sequence[str] = (), max_categories: int = 100
) -> list[str]:
    """What keeps each feature column of `cols` from being encoded (a type Veil cannot read, a number beyond
    float32, numbers mixed with text, too many distinct texts): one sentence per bad column, with its fix."""
    problems = []
    for c in cols:
        s = frame[c]
        if pd.api.types.is_bool_dtype(s):
            continue
        if (
            pd.api.types.is_datetime64_any_dtype(s)
            or pd.api.types.is_timedelta64_dtype(s)
            or pd.api.types.is_complex_dtype(s)
        ):
            problems.append(f"column '{c}' has unsupported type {s.dtype}; convert it to numbers or text")
            continue
        if not pd.api.types.is_numeric_dtype(s):
            num = pd.to_numeric(s, errors="coerce")  # once: both the text-held numbers and the mixed check read it
            if pd.api.types.is_object_dtype(s) and c not in categorical and num.notna().all():
                s = num  # numbers pandas kept as text, e.g. integers beyond int64 (`_as_numbers`)
            elif c not in categorical:  # listed there, it is text by the user's choice
                known = s.notna().to_numpy()
                frac = float(num[known].notna().mean()) if known.any() else 0.0
                if 0.5 <= frac < 1.0:
                    bad = s[known][num[known].isna()].iloc[0]
                    problems.append(
                        f"column '{c}' mixes numbers and text (e.g. {bad!r}); fix the values or list it in "
                        "'categorical'"
                    )
                    continue
        if pd.api.types.is_numeric_dtype(s) and c not in categorical:
            v = s.to_numpy(dtype=np.float64)
            huge = np.flatnonzero(np.isfinite(v) & (np.abs(v) > FLOAT32_MAX))  # inf: finite_problem reports it
            if len(huge):
                problems.append(
                    f"column '{c}' has the value {v[huge[0]]:g} at {data_rows(huge)}, beyond the float32 range of "
                    f"features (about ±{FLOAT32_MAX:.1e}); rescale the column (e.g. log or divide)"
                )
            continue
        n_cats = len(set(s.astype(str).to_numpy()))
        if n_cats > max_categories:
            problems.append(
                f"text column '{c}' has {n_cats} distinct values (more than max_categories={max_categories}); if it "
                "is an id, list it in 'extra' or leave it out of 'features'"
            )
    return problems


def encode_features(
    frame: pd.DataFrame, cols: Sequence[str], *, source: str, categorical: Sequence[str] = ()
) -> tuple[np.ndarray, list[str], list[int], list[Column]]:
    """Feature matrix of `cols`: numbers as they are, booleans 0/1, text one-hot. Returns (x, names,
    indices of the numeric columns to standardise, how each source column was encoded). The columns are those
    `check_table` passed (`feature_problems` found nothing in them)."""
    blocks: list[np.ndarray] = []
    specs: list[Column] = []
    names: list[str] = []
    numeric_idx: list[int] = []
    width = 0
    for c in cols:
        s = frame[c]
        if pd.api.types.is_bool_dtype(s):
            blocks.append(s.to_numpy(dtype=np.float32)[:, None])
            specs.append(Column(c, "bool"))
            names.append(c)
            width += 1
            continue
        s = _as_numbers(s, c, categorical)
        if pd.api.types.is_numeric_dtype(s) and c not in categorical:
            v = s.to_numpy(dtype=np.float64)
            blocks.append(v.astype(np.float32)[:, None])
            specs.append(Column(c, "numeric"))
            names.append(c)
            numeric_idx.append(width)
            width += 1
            continue
        text = s.astype(str).to_numpy()
        cats = sorted(set(text))
        index = {v: i for i, v in enumerate(cats)}
        block = np.zeros((len(s), len(cats)), dtype=np.float32)
        block[np.arange(len(s)), [index[v] for v in text]] = 1.0
        blocks.append(block)
        specs.append(Column(c, "categorical", categories=tuple(cats)))
        names += [f"{c}={v}" for v in cats]
        width += len(cats)
    if not blocks:
        raise DataError(f"{source}: no feature columns left after removing labels and extras")
    return np.hstack(blocks), names, numeric_idx, specs


def check_table(
    frame: pd.DataFrame,
    labels: Sequence[str],
    features: Sequence[str],
    source: str,
    *,
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    test_fraction: float,
    max_categories: int,
    categorical: Sequence[str] = (),
) -> None:
    """Refuse a table the split, the training or the audit cannot use: too few rows, a missing or infinite
    value, a feature that cannot be encoded (every such column in one error), a label that is continuous, an id
    or a single class, a class too rare for the split."""
    check_split_sizes(len(frame), len(train_idx), len(test_idx), test_fraction, source)
    check_scalar(frame, [*labels, *features], source)
    finite = finite_problem(frame, {"label": labels, "feature": features})
    refuse(
        source,
        [
            *([finite] if finite else []),
            *feature_problems(frame, features, categorical=categorical, max_categories=max_categories),
        ],
    )
    for c in labels:
        check_label(frame, c, source, test_fraction=test_fraction, max_categories=max_categories)


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
    if train_idx is None or test_idx is None:
        train_idx, test_idx = split_indices(len(frame), test_fraction, seed)
    check_table(
        frame,
        labels,
        feats,
        source,
        train_idx=train_idx,
        test_idx=test_idx,
        test_fraction=test_fraction,
        max_categories=max_categories,
        categorical=categorical,
    )
    x, fnames, numeric_idx, specs = encode_features(frame, feats, source=source, categorical=categorical)

    def lab(c: str) -> np.ndarray:
        s = frame[c]
        return (
            s.to_numpy()
            if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s)
            else s.astype(str).to_numpy()
        )

    check_split_classes({c: lab(c) for c in labels}, train_idx, test_idx, source, seed, test_fraction)
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
        columns=specs,
        other=[*labels, *extra],
    )
