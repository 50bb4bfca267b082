"""Bring your own data: a .csv or .parquet path works wherever a dataset name does; every mistake in
the file is a DataError naming the file and the column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from veil.cli import main
from veil.datasets import dataset_params, get_dataset_entry, load_dataset
from veil.datasets.partition import partition
from veil.errors import DataError, UnknownNameError


def frame(n: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "income": rng.normal(50, 10, n).round(2),
            "city": rng.choice(["oslo", "lima", "pune"], n),
            "member": rng.random(n) < 0.5,
            "site": np.arange(n) % 4,
            "label": np.arange(n) % 2,
            "group": np.where(np.arange(n) % 3 == 0, "a", "b"),
        }
    )


@pytest.fixture
def csv_path(tmp_path, cache):
    p = tmp_path / "mydata.csv"
    frame().to_csv(p, index=False)
    return p


def test_csv_and_parquet_load_like_a_dataset(csv_path, tmp_path):
    ds = load_dataset(str(csv_path), {"utility": "label", "sensitive": "group", "extra": ["site"]})
    assert ds.name == str(csv_path)
    assert ds.utility_names == ("label",) and ds.sensitive_names == ("group",)
    assert len(ds.train) == 30 and len(ds.test) == 10
    assert set(ds.feature_names) == {"age", "income", "city=lima", "city=oslo", "city=pune", "member"}
    assert "site" in ds.train.extra
    assert abs(float(ds.train.x[:, ds.feature_names.index("age")].mean())) < 1e-5
    pq = tmp_path / "mydata.parquet"
    frame().to_parquet(pq)
    ds2 = load_dataset(str(pq), {"utility": "label", "sensitive": "group", "extra": "site"}, use_cache=False)
    assert np.allclose(ds.train.x, ds2.train.x)
    # cached on the file's content: same params, same rows back
    again = load_dataset(str(csv_path), {"utility": "label", "sensitive": "group", "extra": ["site"]})
    assert np.array_equal(again.train.x, ds.train.x)
    # usable wherever a name is: params, entries, partitioners (silo on the extra column)
    assert dataset_params(str(csv_path), {"utility": "label"}).utility == ("label",)
    assert get_dataset_entry(str(csv_path)).kind == "file"
    parts = partition(ds.train, "silo:site", 4, seed=0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(ds.train)))


def test_explicit_features_and_categorical(csv_path):
    ds = load_dataset(
        str(csv_path),
        {"utility": "label", "sensitive": "group", "features": ["age", "site"], "categorical": ["site"]},
        use_cache=False,
    )
    assert ds.feature_names == ("age", "site=0", "site=1", "site=2", "site=3")


@pytest.mark.parametrize(
    "values, match",
    [
        ({"utility": "lable", "sensitive": "group"}, r"utility column 'lable' not found"),
        ({"utility": "label", "sensitive": "label"}, r"\['label'\] named as both"),
        ({"utility": "label", "sensitive": "group", "features": ["age", "label"]}, r"listed as features and also"),
        ({"sensitive": "group"}, r"no utility label column named: add -p utility=COLUMN"),
    ],
)
def test_bad_column_choices(csv_path, values, match):
    with pytest.raises(DataError, match=match) as e:
        load_dataset(str(csv_path), values, use_cache=False)
    assert str(csv_path) in str(e.value)


def test_missing_values_wrong_types_and_ids(tmp_path, cache):
    f = frame()
    f.loc[7, "income"] = np.nan
    p = tmp_path / "nan.csv"
    f.to_csv(p, index=False)
    with pytest.raises(
        DataError, match=r"nan.csv: feature column 'income' has a missing value \(empty cell or NaN\) at data row 8,"
    ):
        load_dataset(str(p), {"utility": "label", "sensitive": "group"}, use_cache=False)

    f = frame()
    f["group"] = f["group"].astype(object)
    f.loc[3, "group"] = None
    p = tmp_path / "nanlabel.parquet"
    f.to_parquet(p)
    with pytest.raises(
        DataError, match=r"label column 'group' has a missing value \(empty cell or NaN\) at data row 4,"
    ):
        load_dataset(str(p), {"utility": "label", "sensitive": "group"}, use_cache=False)

    f = frame()
    f["age"] = f["age"].astype(str)
    f.loc[5, "age"] = "forty"
    p = tmp_path / "mixed.csv"
    f.to_csv(p, index=False)
    with pytest.raises(DataError, match=r"mixed.csv: column 'age' mixes numbers and text \(e.g. 'forty'\)"):
        load_dataset(str(p), {"utility": "label", "sensitive": "group"}, use_cache=False)

    f = frame(200)
    f["patient"] = [f"p{i}" for i in range(200)]
    p = tmp_path / "ids.csv"
    f.to_csv(p, index=False)
    with pytest.raises(DataError, match=r"text column 'patient' has 200 distinct values"):
        load_dataset(str(p), {"utility": "label", "sensitive": "group"}, use_cache=False)
    ok = load_dataset(str(p), {"utility": "label", "sensitive": "group", "extra": "patient"}, use_cache=False)
    assert "patient" in ok.train.extra

    f = frame()
    f["when"] = pd.Timestamp("2020-01-01")
    p = tmp_path / "dates.parquet"
    f.to_parquet(p)
    with pytest.raises(DataError, match=r"column 'when' has unsupported type"):
        load_dataset(str(p), {"utility": "label", "sensitive": "group"}, use_cache=False)


def test_unreadable_and_absent_files(tmp_path, cache):
    with pytest.raises(DataError, match="nothere.csv: no such file"):
        load_dataset(str(tmp_path / "nothere.csv"), {"utility": "a", "sensitive": "b"})
    p = tmp_path / "broken.parquet"
    p.write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="broken.parquet: cannot read as parquet"):
        load_dataset(str(p), {"utility": "a", "sensitive": "b"}, use_cache=False)
    with pytest.raises(UnknownNameError, match="PATH.csv"):
        load_dataset("no-such-dataset")


def test_a_directory_named_like_a_data_file_is_called_a_directory(tmp_path, cache, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir.csv").mkdir()
    with pytest.raises(DataError, match="adir.csv: is a directory, not a data file"):
        load_dataset(str(tmp_path / "adir.csv"), {"utility": "a", "sensitive": "b"})
    assert main(["run", "-m", "gpp", "-d", "adir.csv", "--check"]) == 2
    err = capsys.readouterr().err
    assert "adir.csv: is a directory" in err and "no such file" not in err and "Traceback" not in err
    assert [x.name for x in tmp_path.iterdir()] == ["adir.csv"]  # no store, no cache


def test_card_fixes_schema_and_default_labels(csv_path, tmp_path):
    card = {
        "name": "mine",
        "description": "my table",
        "schema": {
            "columns": [
                {"name": "age", "type": "integer"},
                {"name": "income", "type": "numeric"},
                {"name": "city", "type": "categorical", "values": ["oslo", "lima", "pune"]},
                {"name": "member", "type": "binary"},
                {"name": "site", "type": "id"},
                {"name": "label", "type": "binary", "values": [0, 1]},
                {"name": "group", "type": "categorical"},
            ]
        },
        "labels": {
            "utility": {"target": {"column": "label"}},
            "sensitive": {"grp": {"column": "group", "default": True}},
        },
    }
    cp = tmp_path / "mine.yaml"
    cp.write_text(yaml.safe_dump(card))
    ds = load_dataset(str(csv_path), {"card": str(cp), "extra": "site"}, use_cache=False)
    assert ds.utility_names == ("target",) and ds.sensitive_names == ("grp",)

    card["schema"]["columns"] = card["schema"]["columns"][:-2] + [{"name": "label", "type": "binary"}]
    cp.write_text(
        yaml.safe_dump(
            {**card, "labels": {"utility": {"t": {"column": "label"}}, "sensitive": {"s": {"column": "label"}}}}
        )
    )
    with pytest.raises(DataError, match=r"column 'group' is not in the card's schema"):
        load_dataset(str(csv_path), {"card": str(cp), "utility": "label", "sensitive": "group"}, use_cache=False)

    card["schema"]["columns"] = [c for c in card["schema"]["columns"] if c["name"] != "label"] + [
        {"name": "label", "type": "binary"},
        {"name": "group", "type": "numeric"},
    ]
    cp.write_text(yaml.safe_dump(card))
    with pytest.raises(DataError, match=r"column 'group' should be numeric"):
        load_dataset(str(csv_path), {"card": str(cp)}, use_cache=False)

    card["schema"]["columns"] += [{"name": "height", "type": "numeric"}]
    card["schema"]["columns"][-2] = {"name": "group", "type": "categorical"}
    cp.write_text(yaml.safe_dump(card))
    with pytest.raises(DataError, match=r"column 'height' required by the card is missing"):
        load_dataset(str(csv_path), {"card": str(cp)}, use_cache=False)
