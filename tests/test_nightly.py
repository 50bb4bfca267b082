"""`veil nightly`: regression rules (pure logic) and two real nightlies against one MLflow store."""

import pytest
import yaml
from mlflow.tracking import MlflowClient

from veil.cli import main
from veil.errors import ConfigError, UnknownNameError
from veil.nightly import Tolerances, compare, load_suite

TOL = Tolerances(utility=0.02, leakage=0.02, throughput=0.5, hypervolume=0.05)


def statuses(current, previous):
    return {c.name: c.ok for c in compare(current, previous, TOL)}


def test_first_nightly_has_nothing_to_regress_against():
    assert all(statuses({"a/utility_auc": 0.9, "a/adversary_auc": 0.6}, None).values())


def test_utility_drop_and_leakage_rise_at_equal_utility_are_regressions():
    prev = {"a/utility_auc": 0.90, "a/adversary_auc": 0.60, "a/rows_per_second": 1000.0, "s/hypervolume": 0.40}
    assert all(statuses(prev, prev).values())
    s = statuses({**prev, "a/utility_auc": 0.85}, prev)
    assert s["a/utility_auc"] is False
    s = statuses({**prev, "a/adversary_auc": 0.65}, prev)
    assert s["a/adversary_auc"] is False
    # more leakage bought with as much more utility is a trade-off move, not a regression
    s = statuses({**prev, "a/adversary_auc": 0.65, "a/utility_auc": 0.95}, prev)
    assert s["a/adversary_auc"] is True
    assert statuses({**prev, "a/rows_per_second": 400.0}, prev)["a/rows_per_second"] is False
    assert statuses({**prev, "a/rows_per_second": 600.0}, prev)["a/rows_per_second"] is True
    assert statuses({**prev, "s/hypervolume": 0.37}, prev)["s/hypervolume"] is False


def test_suite_validation_names_the_problem(tmp_path):
    bad = tmp_path / "s.yaml"
    bad.write_text("experiment: x\nrunz: {}\n")
    with pytest.raises(UnknownNameError, match="runz"):
        load_suite(bad)
    bad.write_text("runs:\n  a: {method: gpp, dataset: gaussian-correlated, params: {beta: -1}}\n")
    with pytest.raises(ConfigError, match="'beta'"):
        load_suite(bad)


def test_two_nightlies_compare_against_each_other(in_tmp, capsys):
    suite = in_tmp / "suite.yaml"
    run = {
        "method": "autoencoder",
        "dataset": "gaussian-quadrant",
        "dataset_params": {"n": 300},
        "params": {"epochs": 2, "d_z": 2},
        "audit": {"epochs": 2},
    }
    suite.write_text(
        yaml.safe_dump({"experiment": "nightly-test", "runs": {"ae": run}, "tolerances": {"throughput": 1.0}})
    )
    assert main(["nightly", "--suite", str(suite)]) == 0
    first = capsys.readouterr().out
    assert "baseline: none" in first and "ae/utility_auc" in first
    assert main(["nightly", "--suite", str(suite)]) == 0  # same seeds, same figures
    second = capsys.readouterr().out
    assert "baseline: none" not in second and "REGRESSION" not in second
    client = MlflowClient(tracking_uri=f"sqlite:///{in_tmp / 'mlflow.db'}")
    exp = client.get_experiment_by_name("nightly-test")
    parents = client.search_runs([exp.experiment_id], "tags.`veil.nightly` = 'true'")
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents)
    assert {p.data.tags["veil.baseline"] for p in parents} - {"none"}  # the second names the first
