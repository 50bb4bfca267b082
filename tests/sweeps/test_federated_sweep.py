"""A small federated sweep over K and phi (D-EIGAN, in-process nodes) on a real local Ray, real Optuna and
a real MLflow store: every trial lands as a child run with its federation figures, and a front comes out."""

from __future__ import annotations

import pytest

from veil.sweeps.results import TAG_TRIAL, search_child_runs
from veil.sweeps.sweepspec import sweep_from_mapping

pytestmark = pytest.mark.ray

FED = {
    "method": "d-eigan",
    "dataset": "gaussian-nodes",
    "dataset_params": {"n": 800, "nodes": 4},
    "partition": "iid",
    "runtime": "in-process",
    # release_seed: the default release noise, drawn alike in every run (the utility floor below is deterministic)
    "params": {
        "epochs": 3,
        "d_z": 2,
        "encoder_hidden": [16],
        "head_hidden": [8],
        "alpha": 0.5,
        "lr_encoder": 0.01,
        "release_seed": 0,
    },
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

    from veil.sweeps.driver import run_sweep

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    outcome = run_sweep(
        sweep_from_mapping(FED, where="fed.yaml"), name="fed", tracking_uri=uri, storage_root=tmp_path / "sweeps"
    )
    kids = search_child_runs(uri, outcome.parent_run_id)
    assert len({k.data.tags[TAG_TRIAL] for k in kids}) == 3
    for k in kids:
        assert k.info.status == "FINISHED", k.data.tags.get("error")
        assert 2 <= int(k.data.params["method.K"]) <= 4 and 0.3 <= float(k.data.params["method.phi"]) <= 1.0
        # trained, not chance: measured 0.624, 0.642, 0.640 for the three trials (3 epochs, noisy release)
        assert k.data.metrics["bytes_up_total"] > 0 and k.data.metrics["utility_auc"] > 0.57, k.data.metrics
    assert outcome.results.hypervolume > 0 and outcome.results.counts["front"] >= 1
    assert MlflowClient(uri).get_run(outcome.parent_run_id).info.status == "FINISHED"


@pytest.mark.slow  # ~25 s: a federation inside each trial's placement group
def test_federated_trials_run_their_actors_inside_the_trials_placement_group(ray_local, tmp_path):
    """runtime virtual, two trials at once on 2 CPUs, 1 CPU each: each trial's coordinator and node host run in
    the bundles Tune reserved for it (driver 0.1 + 2 x 0.45 CPU), so the two never compete for free CPUs and
    neither hangs PENDING; both finish and record where their actors ran."""
    from veil.sweeps.driver import run_sweep
    from veil.sweeps.trial import federation_bundles

    data = {**FED, "runtime": "virtual", "space": {"phi": {"type": "float", "low": 0.3, "high": 1.0}}}
    data["params"] = {**FED["params"], "K": 3}
    spec = sweep_from_mapping(data, where="fed-pg.yaml")
    assert federation_bundles(spec, {}) == [{"CPU": 0.1}, {"CPU": 0.45}, {"CPU": 0.45}]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    outcome = run_sweep(spec, name="fed-pg", tracking_uri=uri, storage_root=tmp_path / "sweeps", quiet=True)
    kids = search_child_runs(uri, outcome.parent_run_id)
    assert len(kids) == 3 and all(k.info.status == "FINISHED" for k in kids), [k.data.tags.get("error") for k in kids]
    for k in kids:
        assert (
            k.data.params["federation.placement"] == "trial"
            and float(k.data.params["federation.cpus_per_actor"]) == 0.45
        )
        assert int(k.data.params["federation.hosts"]) == 1


def test_a_federation_too_big_for_its_trial_is_refused_at_sweep_start(ray_local, tmp_path):
    from veil.errors import ConfigError
    from veil.sweeps.driver import run_sweep

    data = {**FED, "runtime": "ray-actors", "space": {"phi": {"type": "float", "low": 0.3, "high": 1.0}}}
    data["params"] = {**FED["params"], "K": 40}
    data["dataset_params"] = {"n": 2000, "nodes": 40}
    spec = sweep_from_mapping(data, where="fed-big.yaml")
    with pytest.raises(ConfigError, match=r"resources\.cpus.*40 node host actors \+ 1 coordinator"):
        run_sweep(spec, name="fed-big", tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", storage_root=tmp_path / "s")
