"""Adult, Adult-102, COMPAS, Titanic and MIMIC loaders on small files in the published formats."""

from __future__ import annotations

import numpy as np
import pytest

from veil.cli import main
from veil.datasets import dataset_params, load_dataset
from veil.errors import ConfigError, DataError


def test_adult_standard_split_onehot_and_labels(install_raw, fakes):
    install_raw("adult", {"adult.data": fakes.adult_text(30, 1), "adult.test": fakes.adult_text(12, 2, test=True)})
    ds = load_dataset("adult", use_cache=False)
    # rows with '?' are dropped: 2 of every 10 template rows
    assert len(ds.train) == 24 and len(ds.test) == 10
    assert ds.utility_names == ("income",) and ds.sensitive_names == ("sex",)
    assert ds.num_classes == {"income": 2, "sex": 2}
    names = ds.feature_names
    assert not any(n.startswith(("sex=", "income")) for n in names)  # label columns are not features
    assert "race=White" in names and "relationship=Husband" in names
    assert ds.d_in == len(names)
    # numeric columns are standardised with train statistics: mean 0 on train
    age = names.index("age")
    assert abs(float(ds.train.x[:, age].mean())) < 1e-5
    # the test file's trailing '.' is stripped: income has 2 classes, not 4, on both sides
    assert set(np.unique(ds.test.utility["income"])) <= {0, 1}
    # one-hot blocks sum to one per row
    race = [i for i, n in enumerate(names) if n.startswith("race=")]
    assert np.allclose(ds.train.x[:, race].sum(axis=1), 1)


def test_adult_extra_sensitive_labels_leave_x(install_raw, fakes):
    install_raw("adult", {"adult.data": fakes.adult_text(30, 1), "adult.test": fakes.adult_text(12, 2, test=True)})
    ds = load_dataset("adult", {"sensitive": ["sex", "race", "relationship"]}, use_cache=False)
    assert ds.sensitive_names == ("sex", "race", "relationship")
    assert not any(n.startswith(("race=", "relationship=")) for n in ds.feature_names)
    keep = load_dataset("adult", {"drop_missing": False, "split": "random", "test_fraction": 0.5}, use_cache=False)
    assert len(keep.train) + len(keep.test) == 42
    assert "workclass=?" in keep.feature_names


def test_adult_malformed_row_names_the_file(install_raw, fakes):
    bad = fakes.adult_text(10, 1).replace("39, State-gov", "39", 1)
    install_raw("adult", {"adult.data": bad, "adult.test": fakes.adult_text(5, 2, test=True)})
    with pytest.raises(DataError, match="adult.data"):
        load_dataset("adult", use_cache=False)


def test_adult_onehot102_pools_and_splits_80_20(install_raw, fakes):
    install_raw("adult", {"adult.data": fakes.adult_text(30, 1), "adult.test": fakes.adult_text(20, 2, test=True)})
    ds = load_dataset("adult-onehot102", use_cache=False)
    assert len(ds.train) + len(ds.test) == 40 and len(ds.test) == 8
    assert ds.sensitive_names == ("sex",)
    assert not any(n.startswith("sex=") for n in ds.feature_names)
    # no all-zero one-hot columns survive (categories never seen are dropped)
    hot = [i for i, n in enumerate(ds.feature_names) if "=" in n]
    assert (np.vstack([ds.train.x, ds.test.x])[:, hot].sum(axis=0) > 0).all()


def test_compas_propublica_filter_and_race_binary(install_raw, fakes):
    install_raw("compas", {"compas-scores-two-years.csv": fakes.compas_text(40)})
    ds = load_dataset("compas", use_cache=False)
    # 40 rows, 12 removed by the filter, then only African-American and Caucasian: 14 rows
    assert len(ds.train) + len(ds.test) == 14
    assert ds.num_classes == {"two_year_recid": 2, "race": 2}
    assert "priors_count" in ds.feature_names
    rest = load_dataset("compas", {"race": "aa-vs-rest", "sensitive": ["race", "priors"]}, use_cache=False)
    assert len(rest.train) + len(rest.test) == 28
    assert rest.sensitive_names == ("race", "priors")
    assert "priors_count" not in rest.feature_names
    assert rest.num_classes["priors"] == 3  # 0 | 1-3 | >3


@pytest.mark.parametrize("bins", ["[]", "[3,1]", "[1,1]", "[-1,3]"])
def test_compas_priors_bins_are_refused_before_the_data_are_read(cache, in_tmp, capsys, bins):
    """An empty list crashed the loader (IndexError); the data need not be fetched for the refusal."""
    assert main(["run", "-m", "gpp", "-d", "compas", "-p", f"priors_bins={bins}", "--check"]) == 2
    err = capsys.readouterr().err
    assert "dataset 'compas': invalid value for 'priors_bins'" in err and "Traceback" not in err
    assert "strictly increasing list of integers >= 0" in err or "tuple[int, ...] >= 0" in err
    assert list(in_tmp.iterdir()) == []  # no store, no cache
    assert dataset_params("compas", {"priors_bins": [0, 3]}).priors_bins == (0, 3)
    with pytest.raises(ConfigError, match=r"'priors_bins': \[\] \(allowed: a non-empty, strictly increasing"):
        dataset_params("compas", {"priors_bins": []})


def test_adult_and_celeba_sensitive_must_name_one_of_their_labels(cache):
    """`-p sensitive=[]` said "dataset 'adult' declares no sensitive label", naming neither field nor labels."""
    with pytest.raises(ConfigError, match=r"'sensitive': \[\] \(allowed: one or more of the 40 attributes"):
        dataset_params("celeba", {"sensitive": []})
    with pytest.raises(ConfigError, match=r"'sensitive': \[\] \(allowed: one or more of sex \| race \| relationship"):
        dataset_params("adult", {"sensitive": []})


def test_compas_missing_column_is_named(install_raw, fakes):
    text = fakes.compas_text(10).replace("two_year_recid", "recid2", 1)
    install_raw("compas", {"compas-scores-two-years.csv": text})
    with pytest.raises(DataError, match="two_year_recid"):
        load_dataset("compas", use_cache=False)


def test_titanic_sex_and_class_sensitive(install_raw, fakes):
    install_raw("titanic", {"Titanicp.csv": fakes.titanic_csv(60)})
    ds = load_dataset("titanic", use_cache=False)
    assert ds.sensitive_names == ("sex", "pclass") and ds.utility_names == ("survived",)
    assert ds.num_classes == {"survived": 2, "sex": 2, "pclass": 3}
    assert ds.feature_names == ("age", "age_missing", "sibsp", "parch")
    assert np.isfinite(ds.train.x).all()
    only_sex = load_dataset("titanic", {"sensitive": "sex"}, use_cache=False)
    assert "pclass=1st" in only_sex.feature_names


def test_mimic_user_csv(install_raw):
    rng = np.random.default_rng(0)
    n = 40
    rows = ["subject_id,survival,gender,ethnicity,age,heart_rate,admission_type"]
    eth = ["WHITE", "BLACK/AFRICAN AMERICAN", "HISPANIC OR LATINO", "WHITE - RUSSIAN", "ASIAN"]
    for i in range(n):
        rows.append(
            f"{100 + i},{i % 2},{'MF'[(i // 2) % 2]},{eth[i % 5]},{rng.integers(20, 90)},{rng.normal(80, 10):.1f},"
            f"{['EMERGENCY', 'ELECTIVE'][i % 2]}"
        )
    install_raw("mimic-extract", {"mimic.csv": "\n".join(rows) + "\n"})
    ds = load_dataset("mimic-extract", use_cache=False)
    assert ds.num_classes == {"survival": 2, "gender": 2, "race": 3}
    assert "subject_id" not in ds.feature_names and "subject_id" in ds.train.extra
    assert "admission_type=ELECTIVE" in ds.feature_names
    g = load_dataset("mimic-extract", {"sensitive": "gender"}, use_cache=False)
    assert any(f.startswith("race=") for f in g.feature_names)


def test_real_dataset_not_fetched_says_how(cache):
    with pytest.raises(DataError, match=r"veil datasets fetch adult"):
        load_dataset("adult")
    with pytest.raises(DataError, match=r"veil datasets fetch mnist"):  # mnist-two-digit reads mnist's files
        load_dataset("mnist-two-digit")


def test_refetch_invalidates_the_parquet_cache(install_raw, fakes):
    install_raw("titanic", {"Titanicp.csv": fakes.titanic_csv(60)})
    a = load_dataset("titanic")
    install_raw("titanic", {"Titanicp.csv": fakes.titanic_csv(80, seed=3)})
    b = load_dataset("titanic")
    assert len(a.train) + len(a.test) == 60 and len(b.train) + len(b.test) == 80
