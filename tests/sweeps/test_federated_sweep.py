"""A small federated sweep over K and phi (D-EIGAN, in-process nodes) on a real local Ray, real Optuna and
a real MLflow store: every trial lands as a child run with its federation figures, and a front comes out."""

from __future__ import annotations

import pytest

from veil.sweeps.results import TAG_TRIAL, search_child_runs
from veil.sweeps.spec import sweep_from_mapping

pytestmark = pytest.mark.ray

FED = {
    "method": "d-eigan",
    "dataset": "gaussian-nodes",
    "dataset_params": {"n": 800, "nodes": 4},
    "partition": "iid",
    "runtime": "in-process",
    "params": {"epochs": 3, "d_z": 2, "encoder_hidden": [16], "head_hidden": [8], "alpha": 0.5, "lr_encoder": 0.01},
    "audit": {"epochs": 2, "hidden": [16]},
    "space": {"K": {"type": "int", "low": 2, "high": 4}, "phi": {"type": "float", "low": 0.3, "high": 1.0}},
    "objectives": [
        {"metric": "utility_auc", "direction": "max"},
        {"metric": "privacy_gap", "direction": "min"},
        {"metric": "bytes_up_total", "direction": "min"},
    ],
    "reference": {"utility_auc": 0.5, "privacy_gap": 0.5, "bytes_up_total": 1.0e8},
    "sampler": "random",
    "sampler_seed": 5,
    "trials": 3,
    "seeds": 1,
    "concurrency": 2,
    "resources": {"cpus": 1},
}


def test_federated_sweep_over_k_and_phi(ray_local, tmp_path):
    from mlflow.tracking import MlflowClient

    from veil.sweeps.runner import run_sweep

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    outcome = run_sweep(
        sweep_from_mapping(FED, where="fed.yaml"), name="fed", tracking_uri=uri, storage_root=tmp_path / "sweeps"
    )
    kids = search_child_runs(uri, outcome.parent_run_id)
    assert len({k.data.tags[TAG_TRIAL] for k in kids}) == 3
    for k in kids:
        assert k.info.status == "FINISHED", k.data.tags.get("error")
        assert 2 <= int(k.data.params["method.K"]) <= 4 and 0.3 <= float(k.data.params["method.phi"]) <= 1.0
        assert k.data.metrics["bytes_up_total"] > 0 and k.data.metrics["utility_auc"] > 0.6, k.data.metrics
    assert outcome.results.hypervolume > 0 and outcome.results.counts["front"] >= 1
    assert MlflowClient(uri).get_run(outcome.parent_run_id).info.status == "FINISHED"
