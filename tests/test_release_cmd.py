"""`veil release RUN --data FILE -o z.parquet`: a certified run's encoder on new rows of the same schema, with
permanent release noise (from the run's secret key, kept outside MLflow, and each row: the same rows, the same z)
and the certificate beside z; refused for an unmet certificate (unless asked), a missing key (unless --key names
it), a changed schema, a run that does not exist, and a D-GPP run (its encoders stay on the clients)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from veil.cli import main
from veil.datasets.transform import Column, FeatureTransform
from veil.errors import DataError

SMALL = ["--set", "encoder_hidden=[16]", "--set", "head_hidden=[8]", "--set", "epochs=2", "--set", "audit.epochs=3"]


def table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    group = rng.choice(["A", "B"], n)
    income = rng.normal(50, 10, n) + np.where(group == "B", 3.0, 0.0)
    debt = rng.uniform(0, 0.6, n)
    region = rng.choice(["north", "south", "east"], n)
    approved = np.where((income - 52) / 10 - 3 * (debt - 0.3) + rng.normal(0, 0.7, n) > 0, "yes", "no")
    return pd.DataFrame(
        {"income": income.round(1), "debt_ratio": debt.round(3), "region": region, "group": group, "approved": approved}
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two GPP runs on a user's CSV: one whose certificate is met (calibrated to a loose target), one that is
    not (beta set high, strict target). Returns (directory, met run id, unmet run id)."""
    import os

    d = tmp_path_factory.mktemp("release")
    cwd = os.getcwd()
    os.chdir(d)
    try:
        table(6000, 0).to_csv("train.csv", index=False)
        ids = []
        for extra in (
            ["--target", "privacy_gap=0.1", "--set", "calibration.grid=3", "--set", "calibration.rounds=0"],
            ["--set", "beta=30", "--set", "lr=1e-2", "--target", "privacy_gap=0.05"],
        ):
            argv = [
                "run",
                "-q",
                "-m",
                "gpp",
                "-d",
                "train.csv",
                "-p",
                "utility=approved",
                "-p",
                "sensitive=group",
                *SMALL,
                *extra,
            ]
            code = main([*argv, "--run-name", "r", "--json"])
            assert code == 0
            ids.append(latest_run_id(d))
        return d, ids[0], ids[1]
    finally:
        os.chdir(cwd)


def latest_run_id(d: Path) -> str:
    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{d / 'mlflow.db'}")
    exp = c.get_experiment_by_name("veil")
    return c.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"], max_results=1)[0].info.run_id


def test_a_met_run_releases_new_rows_with_permanent_noise(runs, monkeypatch, capsys) -> None:
    d, met, _ = runs
    monkeypatch.chdir(d)
    new = table(500, 7).drop(columns=["approved"])  # the sensitive column may come along: it is ignored
    new.insert(0, "applicant_id", np.arange(500))
    new.to_csv("new.csv", index=False)
    assert main(["release", met, "--data", "new.csv", "-o", "out/z.parquet", "--keep", "applicant_id"]) == 0
    z = pq.read_table("out/z.parquet")
    assert z.num_rows == 500 and z.column_names == [*(f"z{i}" for i in range(8)), "applicant_id"]
    assert "group" not in z.column_names and "income" not in z.column_names
    stamp = json.loads(z.schema.metadata[b"veil.release"])
    assert stamp["run_id"] == met and stamp["certificate_met"] is True and stamp["rows"] == 500
    cert = json.loads(Path("out/z.parquet.certificate.json").read_text())
    assert cert["met"] is True and cert["release"]["source_sha256"] == stamp["source_sha256"]
    # GPP releases a draw, keyed by the run's release key and the row: releasing the same rows again (here in
    # another order) gives the same z, so averaging releases gains nothing
    new.iloc[::-1].to_csv("new_reversed.csv", index=False)
    assert main(["release", met, "--data", "new_reversed.csv", "-o", "out/z2.parquet", "--keep", "applicant_id"]) == 0
    a = z.to_pandas().set_index("applicant_id").sort_index().to_numpy()
    b = pq.read_table("out/z2.parquet").to_pandas().set_index("applicant_id").sort_index().to_numpy()
    np.testing.assert_array_equal(a, b)
    assert a.std(0).min() > 0  # a release, not a constant
    again = json.loads(pq.read_table("out/z2.parquet").schema.metadata[b"veil.release"])
    assert stamp["release_key_id"] == again["release_key_id"] and "permanent" in stamp["release_noise"]
    assert stamp["eps"] is None and stamp["eps_spent"] is None  # GPP is no eps-LDP release
    assert "certificate met" in capsys.readouterr().out


def test_the_key_is_kept_owner_only_and_never_enters_mlflow(runs, monkeypatch) -> None:
    """The run's key sits in .veil/keys beside the store (directory 0700, file 0600), and neither its hex nor its
    bytes appear in the run's params, tags or any of its artifacts."""
    import stat

    from mlflow.tracking import MlflowClient

    d, met, _ = runs
    monkeypatch.chdir(d)
    key_file = d / ".veil" / "keys" / f"{met}.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    hexkey = key_file.read_text().strip()
    assert len(hexkey) == 64
    raw = bytes.fromhex(hexkey)
    c = MlflowClient(f"sqlite:///{d / 'mlflow.db'}")
    run = c.get_run(met)
    words = json.dumps([run.data.params, run.data.tags], default=str).lower()
    assert hexkey not in words
    files = list(Path(c.download_artifacts(met, "", str(d / "artifacts_of_met"))).rglob("*"))
    blobs = [f.read_bytes() for f in files if f.is_file()]
    assert len(blobs) >= 4 and not any(hexkey.encode() in b or raw in b for b in blobs)


def test_a_missing_key_is_an_error_never_a_new_key(runs, monkeypatch, capsys) -> None:
    """Without its key file a stochastic release is refused with the path and --key named; --key FILE releases
    the same z as the key store's key did."""
    d, met, _ = runs
    monkeypatch.chdir(d)
    table(30, 12).to_csv("m.csv", index=False)
    assert main(["release", met, "--data", "m.csv", "-o", "m1.parquet"]) == 0
    key_file = d / ".veil" / "keys" / f"{met}.key"
    moved = d / "elsewhere.key"
    key_file.rename(moved)
    try:
        assert main(["release", met, "--data", "m.csv", "-o", "m2.parquet"]) == 2
        err = capsys.readouterr().err
        assert "release key is missing" in err and str(key_file) in err and "--key" in err
        assert not Path("m2.parquet").exists() and not key_file.exists()
        assert main(["release", met, "--data", "m.csv", "-o", "m2.parquet", "--key", str(moved)]) == 0
    finally:
        moved.rename(key_file)
    np.testing.assert_array_equal(pq.read_table("m1.parquet").to_pandas(), pq.read_table("m2.parquet").to_pandas())


def test_an_unmet_certificate_is_refused_unless_asked(runs, monkeypatch, capsys) -> None:
    d, _, unmet = runs
    monkeypatch.chdir(d)
    table(50, 8).to_csv("few.csv", index=False)
    assert main(["release", unmet, "--data", "few.csv", "-o", "u.parquet"]) == 2
    assert "certificate is not met" in capsys.readouterr().err and not Path("u.parquet").exists()
    assert main(["release", unmet, "--data", "few.csv", "-o", "u.parquet", "--allow-unmet"]) == 0
    stamp = json.loads(pq.read_table("u.parquet").schema.metadata[b"veil.release"])
    assert stamp["released_despite_unmet_certificate"] is True
    assert "does not meet" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f.drop(columns=["income"]), "column 'income' of the run's schema is missing"),
        (lambda f: f.assign(extra=1), "column 'extra' is not in the run's schema"),
        (  # a missing column and two strangers, named together
            lambda f: f.drop(columns=["debt_ratio"]).assign(foo=1, bar=2),
            "bad.csv: column 'debt_ratio' of the run's schema is missing; column 'foo' is not in the run's schema; "
            "column 'bar' is not in the run's schema (the run's feature columns: income, debt_ratio, region; also "
            "allowed and ignored: approved, group)",
        ),
        (lambda f: f.assign(region="mars"), "'mars' at data row 1 (and 19 more), which the run never saw"),
        (lambda f: f.assign(income="high"), "column 'income' should hold numbers"),
        (  # every column that does not fit, in one error
            lambda f: f.assign(region=["mars"] + list(f["region"][1:]), income=[None] * 3 + list(f["income"][3:])),
            "bad.csv: 2 problems:\n  - column 'income' has a missing value (empty cell or NaN) at data row 1 (and 2 "
            "more)\n  - column 'region' has the value 'mars' at data row 1, which the run never saw",
        ),
    ],
)
def test_a_different_schema_is_refused_by_column(runs, monkeypatch, capsys, edit, message) -> None:
    d, met, _ = runs
    monkeypatch.chdir(d)
    edit(table(20, 9)).to_csv("bad.csv", index=False)
    assert main(["release", met, "--data", "bad.csv", "-o", "bad.parquet"]) == 2
    assert message in capsys.readouterr().err and not Path("bad.parquet").exists()


def test_keep_refuses_a_feature_and_an_unknown_run_is_named(runs, monkeypatch, capsys) -> None:
    d, met, _ = runs
    monkeypatch.chdir(d)
    table(20, 10).to_csv("k.csv", index=False)
    assert main(["release", met, "--data", "k.csv", "-o", "k.parquet", "--keep", "income"]) == 2
    assert "released unprotected" in capsys.readouterr().err
    assert main(["release", "0123456789abcdef", "--data", "k.csv", "-o", "k.parquet"]) == 2
    err = capsys.readouterr().err
    assert f"the store at sqlite:///{d / 'mlflow.db'} has no run '0123456789abcdef'" in err
    assert "veil ui --tracking-uri" in err and "Exception" not in err  # how to list runs, not a class name


def test_a_release_from_another_directory_says_where_it_looked_and_creates_nothing(runs, tmp_path, capsys) -> None:
    """Run from a directory without the store `veil run` wrote: refused, naming where it looked and how to point it
    there, with no empty store left behind; pointed there with --tracking-uri, it releases."""
    import os

    d, met, _ = runs
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    table(20, 10).to_csv(elsewhere / "new.csv", index=False)
    cwd = os.getcwd()
    os.chdir(elsewhere)
    try:
        assert main(["release", met, "--data", "new.csv", "-o", "z.parquet"]) == 2
        err = capsys.readouterr().err
        assert f"there is no MLflow store at {elsewhere / 'mlflow.db'}" in err and "--tracking-uri" in err
        assert sorted(p.name for p in elsewhere.iterdir()) == ["new.csv"]  # no mlflow.db, no lock file
        (elsewhere / "mlflow.db").touch()  # an empty file where the store would be: not made into one
        assert main(["release", met, "--data", "new.csv", "-o", "z.parquet"]) == 2
        assert f"{elsewhere / 'mlflow.db'} is an empty file, not an MLflow store" in capsys.readouterr().err
        assert (elsewhere / "mlflow.db").stat().st_size == 0 and not (elsewhere / "mlflow.db.lock").exists()
        (elsewhere / "mlflow.db").unlink()
        uri = f"sqlite:///{d / 'mlflow.db'}"
        assert main(["release", met, "--data", "new.csv", "-o", "z.parquet", "--tracking-uri", uri]) == 0
        assert (elsewhere / "z.parquet").exists()
    finally:
        os.chdir(cwd)


def test_the_transform_reproduces_the_training_features_and_survives_the_cache(in_tmp) -> None:
    """The recorded transform applied to the training file gives back the dataset's own feature matrix, bit for
    bit: the release key draws a row's noise from its bytes, so a value one float32 step off would be another row
    with noise of its own (here values with up to 7 decimals, which float32 rounds)."""
    from veil.datasets.catalog import dataset_params, load_dataset

    t = table(400, 11)
    t["income"] = np.random.default_rng(3).normal(50, 10, 400).round(7)
    t.to_csv("t.csv", index=False)
    ds = load_dataset("t.csv", dataset_params("t.csv", {"utility": "approved", "sensitive": "group"}))
    again = load_dataset("t.csv", dataset_params("t.csv", {"utility": "approved", "sensitive": "group"}))  # cached
    assert ds.transform is not None and again.transform == ds.transform
    kinds = {c.name: c.kind for c in ds.transform.columns}
    assert kinds == {"income": "numeric", "debt_ratio": "numeric", "region": "categorical"}
    x = ds.transform.apply(pd.read_csv("t.csv"), "t.csv")
    from veil.datasets.dataset import split_indices

    train_idx, test_idx = split_indices(400, 0.25, 0)
    np.testing.assert_array_equal(x[train_idx].view(np.uint32), ds.train.x.view(np.uint32))
    np.testing.assert_array_equal(x[test_idx].view(np.uint32), ds.test.x.view(np.uint32))
    t = FeatureTransform((Column("b", "bool"),))
    with pytest.raises(DataError, match="true/false"):
        t.apply(pd.DataFrame({"b": [1, 0]}), "b.csv")
    assert FeatureTransform.from_dict(ds.transform.to_dict()) == ds.transform


def test_a_d_gpp_run_cannot_release_new_rows(in_tmp, capsys) -> None:
    argv = ["run", "-q", "-m", "d-gpp", "-d", "gaussian-correlated", "-p", "n=600", "--set", "K=2", "--set", "epochs=1"]
    argv += ["--set", "encoder_hidden=[8]", "--set", "head_hidden=[8]", "--set", "audit.epochs=2", "--target", "none"]
    assert main([*argv, "--runtime", "in-process"]) == 0
    run = latest_run_id(in_tmp)
    pd.DataFrame(np.zeros((3, 10)), columns=[f"x{i}" for i in range(10)]).to_csv("x.csv", index=False)
    assert main(["release", run, "--data", "x.csv", "-o", "x.parquet", "--allow-unmet"]) == 2
    assert "encoder" in capsys.readouterr().err.lower() and not Path("x.parquet").exists()


def test_an_ldp_release_spends_eps_once_per_key(in_tmp, capsys) -> None:
    """Two eps-LDP runs (ldp-frl, eps 2), each with its own key. The first's rows released twice: the same z,
    eps_spent 2 (one key). The same rows released by the second run: other z, and the ledger says 2 keys spent 4
    (k * eps). The first run with the second's key file: refused (its fingerprint is not the run's)."""
    argv = ["run", "-q", "-m", "ldp-frl", "-d", "gaussian-correlated", "-p", "n=600", "--set", "eps=2"]
    argv += ["--set", "epochs=1", "--set", "encoder_hidden=[8]", "--set", "utility_hidden=[8]"]
    argv += ["--set", "side_hidden=[8]", "--set", "audit.epochs=2", "--target", "none"]
    runs = []
    for _ in range(2):
        assert main(argv) == 0
        runs.append(latest_run_id(in_tmp))
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.normal(size=(40, 10)), columns=[f"x{i}" for i in range(10)]).to_csv("x.csv", index=False)
    stamps, zs = [], []
    for i, run in enumerate([runs[0], runs[0], runs[1]]):
        assert main(["release", run, "--data", "x.csv", "-o", f"z{i}.parquet", "--allow-unmet"]) == 0
        t = pq.read_table(f"z{i}.parquet")
        stamps.append(json.loads(t.schema.metadata[b"veil.release"]))
        zs.append(t.to_pandas().to_numpy())
    np.testing.assert_array_equal(zs[0], zs[1])
    assert not np.isclose(zs[0], zs[2]).any()
    assert [s["eps"] for s in stamps] == [2.0, 2.0, 2.0]
    assert [s["keys_used_on_source"] for s in stamps[:2]] == [1, 1] and stamps[0]["eps_spent"] == 2.0
    assert stamps[1]["eps_spent"] == 2.0 and "k * eps" in stamps[0]["eps_rule"]
    assert stamps[2]["release_key_id"] != stamps[0]["release_key_id"]
    assert stamps[2]["keys_used_on_source"] == 2 and stamps[2]["eps_spent"] == 4.0
    other = in_tmp / ".veil" / "keys" / f"{runs[1]}.key"
    capsys.readouterr()
    assert main(["release", runs[0], "--data", "x.csv", "-o", "z3.parquet", "--allow-unmet", "--key", str(other)]) == 2
    err = capsys.readouterr().err
    assert f"{other} holds the release key {stamps[2]['release_key_id']}, not run {runs[0]}'s" in err
    assert not Path("z3.parquet").exists()


def test_a_deterministic_release_is_stamped_as_one(in_tmp) -> None:
    """GPP releasing its mean draws no noise: the stamp says so, names no key, and the ledger counts nothing,
    although the run kept a key."""
    argv = ["run", "-q", "-m", "gpp", "-d", "gaussian-correlated", "-p", "n=600", "--set", "release=mean"]
    assert main([*argv, *SMALL, "--target", "none"]) == 0
    run = latest_run_id(in_tmp)
    assert (in_tmp / ".veil" / "keys" / f"{run}.key").exists()
    pd.DataFrame(np.ones((5, 10)), columns=[f"x{i}" for i in range(10)]).to_csv("x.csv", index=False)
    assert main(["release", run, "--data", "x.csv", "-o", "z.parquet", "--allow-unmet"]) == 0
    stamp = json.loads(pq.read_table("z.parquet").schema.metadata[b"veil.release"])
    assert stamp["release_noise"].startswith("none (a deterministic release")
    assert stamp["release_key_id"] is None and stamp["keys_used_on_source"] == 0
    assert not (in_tmp / ".veil" / "keys" / "ledger.json").exists()
