"""The Ray Train executor for real: a 2-worker data-parallel TorchTrainer on a local Ray, logging to a
real MLflow server on 127.0.0.1."""

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient

from veil.run import RunSpec, execute


@pytest.mark.ray
def test_ray_train_executor_matches_the_run_contract(ray_local, mlflow_server, tmp_path):
    spec = RunSpec(
        method="eigan",
        dataset="gaussian-quadrant",
        params={"epochs": 2, "d_z": 2},
        dataset_params={"n": 600},
        audit={"epochs": 2},
        executor="auto",
        num_workers=2,
        tracking_uri=mlflow_server,
        experiment="ray-train-test",
    )
    result = execute(spec, storage=tmp_path / "ray")
    assert result.params["executor"] == "ray-train" and result.params["num_workers"] == 2
    assert len(result.history) == 2
    client = MlflowClient(tracking_uri=mlflow_server)
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["veil.device"] == "cpu"
    # epoch rows were logged by rank 0 from inside the Ray Train worker
    assert [m.step for m in client.get_metric_history(result.run_id, "loss/encoder")] == [0, 1]
    path = client.download_artifacts(result.run_id, "model/state.pt", str(tmp_path))
    state = torch.load(path, weights_only=True)
    assert any(k.startswith("encoder.") for k in state)
    assert np.isfinite(result.metrics["adversary_auc"])
