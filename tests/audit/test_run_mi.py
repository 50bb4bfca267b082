"""MI estimates inside a run: named by estimator, refused before training where the estimator cannot cope."""

import pytest

from veil.errors import ConfigError
from veil.pipeline.execute import RunSpec, execute
from veil.pipeline.validation import validate
from veil.sweeps.sweepspec import sweep_from_mapping


def test_run_logs_mi_per_label_named_by_estimator(in_tmp):
    spec = RunSpec(
        method="pca",
        dataset="gaussian-correlated",
        params={"d_z": 4},
        dataset_params={"n": 600},
        audit={"epochs": 2, "mi": "ksg"},
    )
    m = execute(spec).metrics
    assert m["mi/ksg/u"] > 0.1 and m["mi/ksg/s"] > 0.1  # PCA keeps both signals


def test_knn_mi_on_a_wide_release_is_refused_before_training():
    with pytest.raises(ConfigError, match="audit.mi.*16 columns"):
        validate(RunSpec(method="gpp", dataset="gaussian-correlated", params={"d_z": 32}, audit={"mi": "ksg"}))


def test_sweep_objective_on_mi_needs_the_estimator():
    base = {
        "method": "gpp",
        "dataset": "gaussian-correlated",
        "space": {"beta": {"type": "log", "low": 0.1, "high": 4}},
        "objectives": [
            {"metric": "utility_auc", "direction": "max"},
            {"metric": "mi/variational/s", "direction": "min"},
        ],
        "reference": {"utility_auc": 0.5, "mi/variational/s": 1.0},
    }
    with pytest.raises(ConfigError, match="mi/variational/s"):
        sweep_from_mapping(base, where="s.yaml")
    spec = sweep_from_mapping({**base, "audit": {"mi": "variational"}}, where="s.yaml")
    assert spec.audit == {"mi": "variational"} and [o.metric for o in spec.objectives] == [
        "utility_auc",
        "mi/variational/s",
    ]
    assert spec.reference == (0.5, 1.0)
