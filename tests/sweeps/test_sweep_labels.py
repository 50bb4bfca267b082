"""An objective or constraint on a per-label metric whose label the dataset lacks is refused when `veil sweep`
starts, before Ray, MLflow or any trial, naming the labels that exist (it used to fail every trial)."""

from __future__ import annotations

import pytest
import yaml

from veil.cli import main
from veil.sweeps.metrics import metric_label

SPEC = {
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "dataset_params": {"n": 400},
    "params": {"epochs": 1},
    "audit": {"epochs": 1},
    "space": {"beta": {"type": "log", "low": 0.1, "high": 2}},
    "trials": 2,
}


@pytest.mark.parametrize(
    "objectives,constraints,needle",
    [
        (
            ["utility_auc: max", "privacy_gap/nolabel: min"],
            None,
            "'objectives[1].metric': 'privacy_gap/nolabel' (allowed: a sensitive label of dataset "
            "'gaussian-correlated': privacy_gap/s (utility labels: u; sensitive labels: s))",
        ),
        (
            ["utility_auc: max", "adversary_auc/nolabel: min"],
            None,
            "'objectives[1].metric': 'adversary_auc/nolabel' (allowed: a sensitive label",
        ),
        (
            ["utility_auc/s: max", "privacy_gap: min"],
            None,
            "'objectives[0].metric': 'utility_auc/s' (allowed: a utility label of dataset 'gaussian-correlated': "
            "utility_auc/u",
        ),
        (
            ["utility_auc: max", "privacy_gap: min"],
            ["utility_acc/nolabel >= 0.6"],
            "'constraints[0]': 'utility_acc/nolabel' (allowed: a utility label",
        ),
    ],
)
def test_unknown_label_is_refused_before_any_trial(in_tmp, capsys, objectives, constraints, needle):
    (in_tmp / "s.yaml").write_text(yaml.safe_dump({**SPEC, "objectives": objectives, "constraints": constraints}))
    assert main(["sweep", "s.yaml"]) == 2
    assert needle in capsys.readouterr().err
    assert not (in_tmp / "mlflow.db").exists() and not (in_tmp / ".veil").exists()


def test_metric_label_reads_role_and_label():
    assert metric_label("privacy_gap/s") == ("sensitive", "s")
    assert metric_label("utility_auc/u") == ("utility", "u")
    assert metric_label("majority/s") == ("any", "s")
    assert metric_label("mi/ksg/u") == ("any", "u")
    assert metric_label("capacity/adversary_auc/s/mlp") == ("sensitive", "s")
    assert metric_label("utility_auc") is None and metric_label("per_node/utility_auc_min") is None


def test_unknown_label_is_refused_when_the_space_searches_the_data(in_tmp, capsys):
    """A space over a dataset parameter preloads nothing, so the check loads the data itself and still refuses."""
    spec = {
        **SPEC,
        "space": {**SPEC["space"], "dataset.rho": {"type": "float", "low": 0.1, "high": 0.9}},
        "objectives": ["utility_auc: max", "privacy_gap/nolabel: min"],
    }
    (in_tmp / "s.yaml").write_text(yaml.safe_dump(spec))
    assert main(["sweep", "s.yaml"]) == 2
    assert "'objectives[1].metric': 'privacy_gap/nolabel' (allowed: a sensitive label" in capsys.readouterr().err
    assert not (in_tmp / "mlflow.db").exists() and not (in_tmp / ".veil").exists()
