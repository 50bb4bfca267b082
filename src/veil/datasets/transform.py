"""How a table's columns become a method's input features, recorded so that new rows can be released later.

A file dataset (`veil.datasets.files`) encodes each feature column by its kind: numbers standardised with the
train rows' mean and deviation, booleans as 0/1, text one-hot over the categories the file held. The run logs this
as `model/features.json`; `veil release` applies it to a new table of the same schema, refusing what does not fit
(a missing or unexpected column, a wrong type, an unseen category, a missing value) by name. Datasets built by a
loader (synthetic data, Adult, MNIST, ...) record only their feature names: new rows come as those columns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from veil.datasets.problems import FLOAT32_MAX, data_rows, refuse
from veil.errors import DataError

Kind = Literal["numeric", "bool", "categorical"]


@dataclass(frozen=True)
class Column:
    """One source column and how it is encoded."""

    name: str
    kind: Kind
    mean: float = 0.0
    """numeric: subtracted (train mean when standardised, else 0)"""
    scale: float = 1.0
    """numeric: divided by (train deviation when standardised, else 1)"""
    categories: tuple[str, ...] = ()
    """categorical: the one-hot columns, in order"""

    @property
    def width(self) -> int:
        return len(self.categories) if self.kind == "categorical" else 1


@dataclass(frozen=True)
class FeatureTransform:
    """The source columns of the features, and the other columns (labels, extras) a new table may carry."""

    columns: tuple[Column, ...]
    other: tuple[str, ...] = ()
    """label and extra columns of the source table: allowed in new rows, never used or released"""
    encoded: bool = True
    """False for a loader's dataset: the columns are its feature names, taken as numbers as they are"""

    @property
    def width(self) -> int:
        return sum(c.width for c in self.columns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": [{**asdict(c), "categories": list(c.categories)} for c in self.columns],
            "other": list(self.other),
            "encoded": self.encoded,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeatureTransform:
        cols = tuple(Column(**{**c, "categories": tuple(c.get("categories", ()))}) for c in data["columns"])
        return cls(cols, tuple(data.get("other", ())), bool(data.get("encoded", True)))

    @classmethod
    def of_features(cls, names: Sequence[str], other: Sequence[str] = ()) -> FeatureTransform:
        """A loader's dataset: new rows carry its feature columns, numbers taken as they are (`other`: its label
        columns, allowed and ignored)."""
        return cls(tuple(Column(str(n), "numeric") for n in names), tuple(str(o) for o in other), False)

    def apply(self, frame: pd.DataFrame, source: str) -> np.ndarray:
        """The feature matrix of a new table of the recorded schema; anything that does not fit is a DataError
        naming every such column (with its first 1-based data row) and what was expected."""
        names = [c.name for c in self.columns]
        missing = [n for n in names if n not in frame.columns]
        unexpected = [str(c) for c in frame.columns if c not in names and c not in self.other]
        problems = [f"column '{n}' of the run's schema is missing" for n in missing]
        problems += [f"column '{c}' is not in the run's schema" for c in unexpected]
        if problems:
            allowed = f"; also allowed and ignored: {', '.join(self.other)}" if self.other else ""
            raise DataError(f"{source}: {'; '.join(problems)} (the run's feature columns: {', '.join(names)}{allowed})")
        encoded = [_encode(c, frame[c.name]) for c in self.columns]
        refuse(source, [e for e in encoded if isinstance(e, str)])
        blocks = [e for e in encoded if isinstance(e, np.ndarray)]
        return np.hstack(blocks).astype(np.float32) if blocks else np.zeros((len(frame), 0), np.float32)


def _encode(col: Column, s: pd.Series) -> np.ndarray | str:
    """Column `col` of new rows, encoded as the run encoded it; or what is wrong with it."""
    na = np.flatnonzero(s.isna().to_numpy())
    if len(na):
        return f"column '{col.name}' has a missing value (empty cell or NaN) at {data_rows(na)}"
    if col.kind == "categorical":
        text = s.astype(str).to_numpy()
        index = {v: i for i, v in enumerate(col.categories)}
        unseen = np.flatnonzero([v not in index for v in text])
        if len(unseen):
            return (
                f"column '{col.name}' has the value {text[unseen[0]]!r} at {data_rows(unseen)}, which the run never "
                f"saw (its categories: {', '.join(col.categories)})"
            )
        block = np.zeros((len(s), len(col.categories)), dtype=np.float32)
        block[np.arange(len(s)), [index[v] for v in text]] = 1.0
        return block
    if col.kind == "bool":
        if pd.api.types.is_bool_dtype(s):
            return s.to_numpy(dtype=np.float32)[:, None]
        return f"column '{col.name}' should be true/false (as in the run's data) but holds {s.dtype}"
    num = pd.to_numeric(s, errors="coerce")
    bad = np.flatnonzero(num.isna().to_numpy())
    if len(bad) or pd.api.types.is_bool_dtype(s):
        rows = bad if len(bad) else np.arange(len(s))
        return (
            f"column '{col.name}' should hold numbers (as in the run's data) but holds {s.iloc[int(rows[0])]!r} "
            f"at {data_rows(rows)}"
        )
    v = num.to_numpy(dtype=np.float64)
    inf = np.flatnonzero(~np.isfinite(v))
    if len(inf):
        return f"column '{col.name}' has the non-finite value {v[inf[0]]} at {data_rows(inf)}"
    huge = np.flatnonzero(np.abs(v) > FLOAT32_MAX)
    if len(huge):
        return f"column '{col.name}' has the value {v[huge[0]]:g} at {data_rows(huge)}, beyond the float32 range"
    # rounded to float32 first, as `encode_features` stores the training rows before standardising: a value that
    # differs in its last bit is another row to the release key, with noise of its own
    v = v.astype(np.float32).astype(np.float64)
    return ((v - col.mean) / col.scale).astype(np.float32)[:, None]
