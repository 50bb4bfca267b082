"""cluster.yaml (on-premise) and deploy/cluster-aws.yaml (a cloud with CPU and GPU worker types) are valid
input for `ray up` (Ray's own schema and config preparation), and bring the whole platform up: the head starts
Ray with its dashboard on localhost and the tracking server from mlflow/, GPU nodes get CUDA torch."""

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]


def prepared(path: Path) -> dict:
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load(path.read_text())
    validate_config(config)
    out = prepare_config(config)
    validate_config(out)
    return out


@pytest.mark.parametrize("path", ["cluster.yaml", "deploy/cluster-aws.yaml"])
def test_cluster_files_pass_ray_launcher_validation_and_start_the_platform(path):
    config = prepared(ROOT / path)
    head = " ".join(config["head_start_ray_commands"])
    assert "ray start --head" in head and "--dashboard-host=127.0.0.1" in head
    assert "bash mlflow/start-server.sh" in head and (ROOT / "mlflow" / "start-server.sh").is_file()
    assert "MLFLOW_HOST=$(hostname -I" in head  # the private address: trials on workers log to it
    assert any("ray start --address=$RAY_HEAD_IP:6379" in c for c in config["worker_start_ray_commands"])


def test_on_premise_nodes_pick_their_torch_build():
    setup = " ".join(prepared(ROOT / "cluster.yaml")["setup_commands"])
    assert "if command -v nvidia-smi" in setup and '-c constraints-cpu.txt -e ".[dev]"' in setup


def test_cloud_example_has_cpu_and_gpu_worker_types():
    types = prepared(ROOT / "deploy" / "cluster-aws.yaml")["available_node_types"]
    assert {"head", "cpu_worker", "gpu_worker"} <= set(types)
    assert "constraints-cpu" in " ".join(types["cpu_worker"]["worker_setup_commands"])
    assert "constraints-cpu" not in " ".join(types["gpu_worker"]["worker_setup_commands"])
