"""The synthetic datasets of the papers: shapes, labels, seeds, correlation and the Parquet cache."""

import numpy as np
import pytest

from veil.datasets import DATASETS, load_dataset
from veil.datasets.cache import read_parquet, write_parquet
from veil.errors import ConfigError, UnknownNameError

SYNTHETIC = [
    "gaussian-quadrant",
    "gaussian-circles",
    "gaussian-octant",
    "gaussian-two-allies",
    "gaussian-nodes",
    "gaussian-correlated",
]
EXPECTED_LABELS = {
    "gaussian-quadrant": (1, 1),
    "gaussian-circles": (1, 1),
    "gaussian-octant": (1, 2),
    "gaussian-two-allies": (2, 1),
    "gaussian-nodes": (1, 1),
    "gaussian-correlated": (1, 1),
}


@pytest.mark.parametrize("name", SYNTHETIC)
def test_shapes_labels_and_seed(name):
    assert name in DATASETS
    ds = load_dataset(name, {"n": 400, "seed": 3}, use_cache=False)
    assert len(ds.train) + len(ds.test) == 400 and len(ds.test) == 100
    assert (len(ds.utility_names), len(ds.sensitive_names)) == EXPECTED_LABELS[name]
    assert ds.train.x.dtype == np.float32 and np.isfinite(ds.train.x).all()
    again = load_dataset(name, {"n": 400, "seed": 3}, use_cache=False)
    np.testing.assert_array_equal(ds.train.x, again.train.x)
    other = load_dataset(name, {"n": 400, "seed": 4}, use_cache=False)
    assert not np.array_equal(ds.train.x, other.train.x)


def test_dimension_parameter_pads_noise_columns():
    assert load_dataset("gaussian-quadrant", {"n": 100, "dim": 7}).d_in == 7
    assert load_dataset("gaussian-correlated", {"n": 100, "dim": 12}).d_in == 12


@pytest.mark.parametrize("rho", [0.0, 0.5, 1.0])
def test_correlated_pair_has_the_asked_correlation(rho):
    ds = load_dataset("gaussian-correlated", {"n": 20000, "rho": rho})
    r = np.corrcoef(ds.train.utility["u"], ds.train.sensitive["s"])[0, 1] if rho < 1 else 1.0
    assert abs(r - rho) < 0.03


def test_gaussian_nodes_variance_grows_with_node():
    ds = load_dataset("gaussian-nodes", {"n": 8000, "nodes": 4})
    node = ds.train.extra["node"]
    centre = 1.0 + np.stack([ds.train.utility["ally"], ds.train.sensitive["adversary"]], 1)
    spread = [np.var(ds.train.x[node == k] - centre[node == k]) for k in range(4)]
    np.testing.assert_allclose(spread, [0.1, 0.2, 0.3, 0.4], rtol=0.15)


def test_parquet_round_trip(tmp_path):
    ds = load_dataset("gaussian-nodes", {"n": 200})
    back = read_parquet(write_parquet(ds, tmp_path / "d.parquet"))
    np.testing.assert_array_equal(back.train.x, ds.train.x)
    np.testing.assert_array_equal(back.test.sensitive["adversary"], ds.test.sensitive["adversary"])
    np.testing.assert_array_equal(back.train.extra["node"], ds.train.extra["node"])
    assert dict(back.num_classes) == dict(ds.num_classes) and back.params == ds.params


def test_bad_dataset_input():
    with pytest.raises(UnknownNameError, match="gaussian-quadrant"):
        load_dataset("gaussian-square")
    with pytest.raises(ConfigError, match="'rho'"):
        load_dataset("gaussian-correlated", {"rho": 1.5})
    with pytest.raises(UnknownNameError, match="'size'"):
        load_dataset("gaussian-quadrant", {"size": 10})
