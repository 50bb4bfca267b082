"""Fuzzing dataset cards and users' CSV / Parquet files: every case ends in a dataset the methods and the audit
can use (finite features, enough rows and classes on both sides of the split) or in a Veil error naming the
file; never another exception, a hang, or a partial file in the dataset cache (checked by conftest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from fuzzing import clean, mutated, values
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.datasets import load_dataset
from veil.datasets.card_files import (
    _COLUMN_KEYS,
    _FILE_KEYS,
    _LABEL_KEYS,
    _PREP_KEYS,
    _SCHEMA_KEYS,
    _SOURCE_KEYS,
    _SPLIT_KEYS,
    _TOP_OPTIONAL,
    _TOP_REQUIRED,
    read_card,
    validate_card,
)
from veil.datasets.dataset import Dataset
from veil.datasets.files import MIN_SIDE_ROWS
from veil.errors import VeilError

pytestmark = pytest.mark.timeout(120)  # a hang fails the test instead of stalling CI

REPO = Path(__file__).resolve().parents[2]
APPLICANTS = REPO / "examples" / "applicants.csv"
CARDS = {p.stem: yaml.safe_load(p.read_text()) for p in sorted((REPO / "datasets").glob("*.yaml"))}
CARD_KEYS: dict[tuple, list[str]] = {
    (): [*_TOP_REQUIRED, *_TOP_OPTIONAL],
    ("schema",): list(_SCHEMA_KEYS),
    ("labels",): ["utility", "sensitive"],
    ("preprocessing",): list(_PREP_KEYS),
    ("split",): list(_SPLIT_KEYS),
}


def card_keys(path: tuple) -> list[str]:
    """The keys a dataset card knows at `path`."""
    if path in CARD_KEYS:
        return CARD_KEYS[path]
    shape = tuple(
        p if isinstance(p, str) and p in ("files", "sources", "schema", "columns", "labels") else "*" for p in path
    )
    return {
        ("files", "*"): list(_FILE_KEYS),
        ("sources", "*"): list(_SOURCE_KEYS),
        ("schema", "columns", "*"): list(_COLUMN_KEYS),
        ("labels", "*", "*"): list(_LABEL_KEYS),
    }.get(shape, [])


@settings(max_examples=250)
@given(name=st.sampled_from(sorted(CARDS)), byo=st.booleans(), data=st.data())
def test_cards_validate_or_name_the_key(name, byo, data):
    raw = data.draw(mutated(CARDS[name], card_keys, edits=(1, 3)))
    clean(validate_card, raw, Path(f"{name}.yaml"), byo=byo)


@settings(max_examples=40)
@given(raw=st.binary(max_size=40) | values.map(lambda v: yaml.safe_dump(v).encode()))
def test_card_files_read_or_name_the_file(raw, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "fuzz-card.yaml"
    path.write_bytes(raw)
    err = clean(read_card, path, require_sources=False)
    assert not isinstance(err, VeilError) or str(path) in str(err)


APPLICANTS_CARD = {
    "name": "applicants",
    "schema": {
        "columns": [
            {"name": "age", "type": "integer"},
            {"name": "income", "type": "numeric"},
            {"name": "debt_ratio", "type": "numeric"},
            {"name": "region", "type": "categorical", "values": ["north", "south", "east", "west"]},
            {"name": "group", "type": "binary", "values": ["A", "B"]},
            {"name": "approved", "type": "binary", "values": ["yes", "no"]},
        ]
    },
    "labels": {"utility": {"approved": {"column": "approved"}}, "sensitive": {"group": {"column": "group"}}},
}


@settings(max_examples=80)
@given(card=mutated(APPLICANTS_CARD, card_keys, edits=(1, 2)))
def test_own_data_cards_load_or_name_the_problem(card, tmp_path_factory):
    """A card for examples/applicants.csv with random edits: the file loads with it or the error says why."""
    path = tmp_path_factory.getbasetemp() / "applicants-card.yaml"
    path.write_text(yaml.safe_dump(card, allow_unicode=True), encoding="utf-8")
    ds = clean(load_dataset, str(APPLICANTS), {"card": str(path)})
    if isinstance(ds, Dataset):
        usable(ds)


# ------------------------------------------------------------------------------------------ data files

ODD_CELLS = [np.nan, np.inf, -np.inf, 1e308, -1e300, 2**70, "", " ", "🙂", "名前", "inf", "1e999", None, True, "1,5"]
COLUMN_NAMES = ["a", "b", "y", "s", "🙂", "名前", "", " x ", "a.1", "Unnamed: 0", "1", "y"]


def column(kind: str, n: int, rng: np.random.Generator) -> np.ndarray | pd.Series:
    """A column of `kind`: the types a user's table holds."""
    return {
        "int": lambda: rng.integers(-5, 5, n),
        "float": lambda: rng.normal(size=n),
        "bool": lambda: rng.random(n) < 0.5,
        "text": lambda: rng.choice(["north", "south", "east"], n),
        "unicode": lambda: rng.choice(["é", "名前", "🙂", " "], n),
        "constant": lambda: np.full(n, 7),
        "binary": lambda: np.arange(n) % 2,
        "classes": lambda: np.arange(n) % 3,
        "id": lambda: np.arange(n),
        "whole-floats": lambda: (np.arange(n) % 3).astype(float),
        "huge": lambda: rng.normal(size=n) * 1e37,
        "nested": lambda: pd.Series([[i % 2, i] for i in range(n)], dtype=object),
    }[kind]()


KINDS = ["int", "float", "bool", "text", "unicode", "constant", "binary", "classes", "id", "whole-floats", "huge"]
KINDS += ["nested"]  # a Parquet list column


@st.composite
def tables(draw: st.DrawFn) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A table of 0 to 120 rows and 1 to 6 columns of mixed kinds with a few odd cells, and the params naming
    its labels (half the time two well-formed label columns, so that the accepting path is fuzzed too)."""
    n = draw(st.one_of(st.integers(0, 12), st.integers(36, 120), st.integers(40, 120)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    unique = draw(st.sampled_from([True] * 9 + [False]))  # a repeated column name now and then
    names = draw(st.lists(st.sampled_from(COLUMN_NAMES) | st.text(max_size=4), min_size=2, max_size=6, unique=unique))
    kinds = [draw(st.sampled_from(KINDS)) for _ in names]
    u = draw(st.integers(0, len(names) - 1))
    s = (u + draw(st.integers(1, len(names) - 1))) % len(names)
    if draw(st.booleans()):  # well-formed labels under names the params can spell (no comma, no edge spaces)
        kinds[u], kinds[s] = "binary", "classes"
        free = [c for c in ("y", "s", "名前", "🙂", "label") if c not in names]
        names[u], names[s] = free[0], free[1]
    frame = pd.DataFrame({i: column(k, n, rng) for i, k in enumerate(kinds)})
    for _ in range(draw(st.sampled_from([0, 0, 1, 2, 3])) if n else 0):
        col, row = draw(st.integers(0, len(names) - 1)), draw(st.integers(0, n - 1))
        frame[col] = frame[col].astype(object)
        frame.loc[row, col] = draw(st.sampled_from(ODD_CELLS))
    frame.columns = names
    other = st.sampled_from([*names, "nosuch"])
    pick = lambda i: names[i] if draw(st.integers(0, 4)) < 4 else draw(other)  # noqa: E731
    params: dict[str, Any] = {"utility": pick(u), "sensitive": pick(s)}
    if draw(st.booleans()):
        params["test_fraction"] = draw(st.sampled_from([0.5, 0.1, 0.9, 0.01]))
    if draw(st.booleans()):
        params["max_categories"] = draw(st.sampled_from([100, 5, 2]))
    if draw(st.booleans()):
        params[draw(st.sampled_from(["features", "extra", "categorical"]))] = draw(st.lists(other, max_size=2))
    if draw(st.booleans()):
        params["standardize"] = False
    return frame, params


def write(frame: pd.DataFrame, path: Path) -> Path:
    """The table as a CSV, or as Parquet where pyarrow can store it (unique text names, one type a column)."""
    if path.suffix == ".parquet":
        try:
            frame.to_parquet(path, index=False)
            return path
        except Exception:  # duplicate names, mixed-type columns: the user could not have made such a Parquet
            path = path.with_suffix(".csv")
    frame.to_csv(path, index=False)
    return path


def usable(ds: Dataset) -> None:
    """What a run needs of a dataset Veil accepted."""
    assert np.isfinite(ds.train.x).all() and np.isfinite(ds.test.x).all()
    assert len(ds.train) >= MIN_SIDE_ROWS and len(ds.test) >= MIN_SIDE_ROWS
    for side in (ds.train, ds.test):
        for name, y in side.labels().items():
            assert len(np.unique(y)) >= 2, name


@settings(max_examples=200)
@given(table=tables(), suffix=st.sampled_from([".csv", ".parquet"]))
def test_data_files_load_or_name_the_file(table, suffix, tmp_path_factory):
    frame, params = table
    path = write(frame, tmp_path_factory.getbasetemp() / f"fuzz-data{suffix}")
    ds = clean(load_dataset, str(path), params)
    if isinstance(ds, VeilError):
        assert str(path) in str(ds), ds
    else:
        usable(ds)
        again = load_dataset(str(path), params)  # from the cache now
        assert np.array_equal(again.train.x, ds.train.x) and again.num_classes == ds.num_classes


CSV_ALPHABET = ",,,\n\n\"'ab01.-e inf;🙂\r\t"


@settings(max_examples=100)
@given(
    header=st.sampled_from(["", "y,s\n", "a,y,s\n", "y,y,s\n", "a,b,y,s,\n"]),
    body=st.text(alphabet=CSV_ALPHABET, max_size=200),
    repeat=st.integers(1, 30),
)
def test_raw_csv_text_loads_or_names_the_file(header, body, repeat, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "fuzz-raw.csv"
    path.write_text(header + body * repeat, encoding="utf-8")
    ds = clean(load_dataset, str(path), {"utility": "y", "sensitive": "s"})
    if isinstance(ds, VeilError):
        assert str(path) in str(ds), ds
    else:
        usable(ds)
