"""cluster.yaml is valid input for `ray up` (Ray's own schema and config preparation)."""

from pathlib import Path

import yaml


def test_cluster_yaml_passes_ray_launcher_validation():
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((Path(__file__).parents[1] / "cluster.yaml").read_text())
    validate_config(config)
    prepared = prepare_config(config)
    validate_config(prepared)
    assert prepared["cluster_name"] == "veil"
    assert any("pip install" in c and "-e" in c for c in prepared["setup_commands"])
