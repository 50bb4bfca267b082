"""A user's data file the split, the training or the audit cannot use is refused by `veil run` before the MLflow
run exists and before Ray starts: exit 2, a message naming the file, the column, the row or class and the
threshold (issue 11: such files ran to FINISHED with NaN metrics, or failed after the run was created)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest
import yaml

from veil.cli import main
from veil.datasets import load_dataset
from veil.datasets.dataset import split_indices
from veil.datasets.files import MIN_SIDE_ROWS, min_class_rows
from veil.errors import DataError


def table(n: int = 60, **cols: object) -> pd.DataFrame:
    """n rows: two numeric features, a binary utility label y and a three-class sensitive label s."""
    rng = np.random.default_rng(0)
    base = {"a": rng.normal(size=n).round(3), "b": rng.integers(0, 9, n), "y": np.arange(n) % 2, "s": np.arange(n) % 3}
    return pd.DataFrame({**base, **cols})


def with_value(col: str, row: int, value: object) -> Callable[[], pd.DataFrame]:
    def make() -> pd.DataFrame:
        f = table()
        f[col] = f[col].astype(object if isinstance(value, str) else float)
        f.loc[row, col] = value
        return f

    return make


CASES: dict[str, tuple[Callable[[], pd.DataFrame], list[str]]] = {
    "three-rows": (
        lambda: table(3),
        ["3 rows are too few", "leaves 2 train and 1 test rows", f"at least {MIN_SIDE_ROWS}", "at least 40 rows"],
    ),
    "inf-feature": (with_value("a", 9, np.inf), ["feature column 'a' has the non-finite value inf at data row 10,"]),
    "nan-feature": (
        with_value("b", 20, np.nan),
        ["feature column 'b' has a missing value (empty cell or NaN) at data row 21,", "after the header"],
    ),
    "empty-label-cell": (with_value("y", 4, np.nan), ["label column 'y' has a missing value", "at data row 5,"]),
    "every-bad-column": (  # one error names them all: a label, a missing feature cell, an infinite one
        lambda: with_value("y", 4, np.nan)().assign(
            a=with_value("a", 9, np.inf)()["a"], b=with_value("b", 2, np.nan)()["b"]
        ),
        [
            "3 columns hold values a model cannot take: label column 'y' has a missing value (empty cell or NaN) at "
            "data row 5; feature column 'a' has the non-finite value inf at data row 10; feature column 'b' has a "
            "missing value (empty cell or NaN) at data row 3, counting data rows from 1 after the header; fill, "
            "replace or drop those rows"
        ],
    ),
    "every-bad-kind": (  # one error for every kind of problem: a missing cell and numbers mixed with text
        lambda: with_value("b", 2, np.nan)().assign(c=[str(i) for i in range(59)] + ["sixty"]),
        [
            ": 2 problems:\n  - feature column 'b' has a missing value (empty cell or NaN) at data row 3, counting",
            "\n  - column 'c' mixes numbers and text (e.g. 'sixty'); fix the values or list it in 'categorical'",
        ],
    ),
    "continuous-label": (
        lambda: table(400, y=np.random.default_rng(1).normal(size=400)),
        ["label column 'y' looks continuous: 400 distinct values", "bin it into classes"],
    ),
    "thousand-classes": (
        lambda: table(3000, y=np.arange(3000) // 3),
        ["label column 'y' has 1000 distinct numbers (more than max_categories=100)", "bin it"],
    ),
    "rare-classes": (
        lambda: table(150, y=np.arange(150) // 3),
        ["label column 'y': class 0 has 3 rows (49 more classes", "every class needs at least 8"],
    ),
    "one-class": (lambda: table(s=np.zeros(60, int)), ["label column 's' has a single class 0 in all 60 rows"]),
    "huge-number": (with_value("a", 2, 1e300), ["column 'a' has the value 1e+300 at data row 3", "float32"]),
}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_file_is_refused_before_the_run_exists(case, suffix, in_tmp, capsys, mlflow_server):
    make, needles = CASES[case]
    path = in_tmp / f"{case}{suffix}"
    frame = make()
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path, index=False)
    experiment = f"bad-data-{case}-{suffix[1:]}"
    argv = ["run", "-m", "gpp", "-d", str(path), "-p", "utility=y", "-p", "sensitive=s", "--quiet"]
    assert main([*argv, "--tracking-uri", mlflow_server, "--experiment", experiment, "--set", "epochs=1"]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: " in err and "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    assert_nothing_started(mlflow_server, experiment, in_tmp)


def test_missing_and_duplicate_columns_files(in_tmp, capsys, mlflow_server):
    dup = in_tmp / "dup.csv"
    dup.write_text("a,a,y,s\n" + "".join(f"{i},{i},{i % 2},{i % 3}\n" for i in range(60)))
    empty = in_tmp / "empty.csv"
    empty.write_text("")
    for path, needle in (
        (dup, "column(s) ['a'] appear more than once"),
        (in_tmp / "nothere.csv", "no such file"),
        (empty, "the file is empty: no header row, no data rows"),
    ):
        args = ["run", "-m", "gpp", "-d", str(path), "-p", "utility=y", "-p", "sensitive=s", "--quiet"]
        assert main([*args, "--tracking-uri", mlflow_server, "--experiment", f"bad-{path.stem}"]) == 2
        err = capsys.readouterr().err
        assert f"error: {path}: {needle}" in err and "Traceback" not in err
        assert_nothing_started(mlflow_server, f"bad-{path.stem}", in_tmp)


@pytest.fixture(autouse=True)
def _ray_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether Ray ran in this process before the test (the session's `ray_local` may have started it)."""
    import ray

    monkeypatch.setattr(sys.modules[__name__], "RAY_WAS_UP", ray.is_initialized())


RAY_WAS_UP = False


def assert_nothing_started(uri: str, experiment: str, cwd: Path) -> None:
    """No MLflow run (not even the experiment) was created and Ray was not started (nor its storage made)."""
    import ray
    from mlflow.tracking import MlflowClient

    exp = MlflowClient(uri).get_experiment_by_name(experiment)
    assert exp is None or not MlflowClient(uri).search_runs([exp.experiment_id]), "a run was created"
    assert ray.is_initialized() == RAY_WAS_UP and not (cwd / ".veil" / "ray").exists()


def test_split_leaving_one_class_on_a_side(tmp_path, cache):
    """Classes big enough in the file can still miss a side of the random split: refused, naming seed and side."""
    n, rare = 48, min_class_rows(0.25)
    y = np.array(["common"] * n)
    seed = next(s for s in range(10_000) if len(set(split_indices(n, 0.25, s)[1]) & set(range(rare))) == 0)
    y[:rare] = "rare"
    p = tmp_path / "f.csv"
    table(n, y=y).to_csv(p, index=False)
    with pytest.raises(DataError, match=rf"label column 'y': the split \(seed={seed}, test_fraction=0.25\) leaves "):
        load_dataset(str(p), {"utility": "y", "sensitive": "s", "seed": seed}, use_cache=False)


def test_nested_parquet_cells_are_refused(tmp_path, cache):
    p = tmp_path / "nested.parquet"
    table(b=[[i, i + 1] for i in range(60)]).to_parquet(p)
    with pytest.raises(DataError, match=r"column 'b' holds ndarray values \(e.g. \[0, 1\] at data row 1 \(and 59"):
        load_dataset(str(p), {"utility": "y", "sensitive": "s"}, use_cache=False)


def test_thresholds_follow_the_test_fraction(tmp_path, cache):
    assert [min_class_rows(f) for f in (0.25, 0.5, 0.1, 0.9)] == [8, 4, 20, 20]
    p = tmp_path / "f.csv"
    table(60).to_csv(p, index=False)
    with pytest.raises(DataError, match=r"leaves 54 train and 6 test rows.*at least 100 rows"):
        load_dataset(str(p), {"utility": "y", "sensitive": "s", "test_fraction": 0.1}, use_cache=False)
    ok = load_dataset(str(p), {"utility": "y", "sensitive": "s", "test_fraction": 0.5}, use_cache=False)
    assert (len(ok.train), len(ok.test)) == (30, 30)


def test_cache_built_before_the_checks_is_not_reused(tmp_path, cache):
    """The file's cache key carries the checks' version, so a file cached by an older Veil is checked again."""
    from veil.datasets.files import CHECKS_VERSION, FileParams, file_entry

    p = tmp_path / "f.csv"
    table().to_csv(p, index=False)
    assert file_entry(str(p)).fingerprint(FileParams()).startswith(f"checks{CHECKS_VERSION}-")  # type: ignore[misc]


def test_large_finite_values_standardise_without_overflow(tmp_path, cache):
    p = tmp_path / "big.csv"
    table(a=np.linspace(-3e38, 3e38, 60)).to_csv(p, index=False)
    ds = load_dataset(str(p), {"utility": "y", "sensitive": "s"}, use_cache=False)
    assert np.isfinite(ds.train.x).all() and abs(float(ds.train.x[:, 0].std()) - 1) < 1e-3


def test_an_edited_card_is_checked_again_not_read_from_the_cache(tmp_path, cache):
    """Found by fuzzing: the card was not part of the cache key, so a card made wrong after a first load
    still gave the cached dataset."""
    p, card = tmp_path / "f.csv", tmp_path / "card.yaml"
    table().to_csv(p, index=False)
    columns = [{"name": c, "type": "numeric"} for c in "ab"] + [{"name": c, "type": "integer"} for c in "ys"]
    labels = {"utility": {"y": {"column": "y"}}, "sensitive": {"s": {"column": "s"}}}
    card.write_text(yaml.safe_dump({"schema": {"columns": columns}, "labels": labels}))
    assert load_dataset(str(p), {"card": str(card)}).utility_names == ("y",)
    columns[2]["values"] = [0]
    card.write_text(yaml.safe_dump({"schema": {"columns": columns}, "labels": labels}))
    with pytest.raises(DataError, match=r"column 'y' has value '1', not one of \['0'\]"):
        load_dataset(str(p), {"card": str(card)})


def test_sweep_on_a_bad_file_is_refused_before_the_parent_run(in_tmp, capsys, mlflow_server):
    """A sweep loads a user's file (every seed's split) before Ray and the parent run: one refusal, not a
    parent run whose every trial fails."""
    table(150, y=np.arange(150) // 3).to_csv(in_tmp / "rare.csv", index=False)
    spec = {
        "method": "gpp",
        "dataset": "rare.csv",
        "dataset_params": {"utility": "y", "sensitive": "s"},
        "experiment": "bad-data-sweep",
        "space": {"beta": {"type": "log", "low": 0.1, "high": 1}},
        "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
        "sampler": "random",
        "trials": 2,
    }
    (in_tmp / "s.yaml").write_text(yaml.safe_dump(spec))
    assert main(["sweep", "s.yaml", "--tracking-uri", mlflow_server, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "error: rare.csv: label column 'y': class 0 has 3 rows" in err and "Traceback" not in err
    assert_nothing_started(mlflow_server, "bad-data-sweep", in_tmp)
    assert not (in_tmp / ".veil").exists()


def test_feature_problems_names_every_bad_feature_column():
    """Each kind of column the encoder cannot take, found in one pass (unit test of `feature_problems`)."""
    from veil.datasets.files import feature_problems

    n = 150
    frame = table(n).assign(
        when=pd.date_range("2026-01-01", periods=n),
        big=np.r_[np.zeros(n - 1), 1e300],
        mixed=[str(i) for i in range(n - 1)] + ["many"],
        ident=[f"id-{i}" for i in range(n)],
        ok=["x", "y"] * (n // 2),
    )
    problems = feature_problems(frame, ["a", "when", "big", "mixed", "ident", "ok"], max_categories=100)
    assert [p.split("'")[1] for p in problems] == ["when", "big", "mixed", "ident"]
    assert "unsupported type datetime64" in problems[0] and f"at data row {n}" in problems[1]
    assert "(e.g. 'many')" in problems[2] and f"{n} distinct values (more than max_categories=100)" in problems[3]
    assert feature_problems(frame, ["ident"], categorical=["ident"], max_categories=n) == []
    assert feature_problems(frame, ["mixed"], categorical=["mixed"], max_categories=n) == []  # what the advice says
