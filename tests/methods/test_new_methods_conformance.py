"""ldp-frl, adjustable-ae and linear-arl behind the common Method interface: build from raw values,
fit, encode, and a state round trip (through torch.save / weights_only load) that reproduces z at the same
release_seed and call order."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from veil.datasets import load_dataset
from veil.methods import METHODS, create_method

SMALL = {
    "ldp-frl": {"epochs": 2, "d_z": 2, "eps": 4.0},
    "adjustable-ae": {"epochs": 2, "noise": 10.0, "lam": -5.0},
    "linear-arl": {"d_z": 3, "lambda_arl": 0.5, "negative_only": False},
}


@pytest.fixture(scope="module")
def ds():
    return load_dataset("gaussian-correlated", {"n": 300, "rho": 0.5, "seed": 0}, use_cache=False)


def test_registered() -> None:
    assert set(SMALL) <= set(METHODS)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_fit_encode_and_state_round_trip(name: str, ds) -> None:
    m = create_method(name, {**SMALL[name], "seed": 3, "release_seed": 1}, ds.task())
    m.fit(ds.train)
    z = m.encode(ds.test.x)
    width = ds.d_in if name == "adjustable-ae" else m.config.d_z  # adjustable-ae releases x'
    assert z.shape == (len(ds.test), width) and z.dtype == np.float32 and np.all(np.isfinite(z))
    stochastic = name != "linear-arl"  # ldp-frl's Laplace noise, adjustable-ae's f noise
    assert np.array_equal(z, m.encode(ds.test.x))  # permanent randomization: the same rows, the same z

    buf = io.BytesIO()
    torch.save(m.state(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    fresh = create_method(name, {**SMALL[name], "seed": 3, "release_seed": 1}, ds.task())
    fresh.load_state(state)
    np.testing.assert_array_equal(fresh.encode(ds.test.x), z)
    other = create_method(name, {**SMALL[name], "seed": 3, "release_seed": 2}, ds.task())  # another key
    other.load_state(state)
    assert np.array_equal(other.encode(ds.test.x), z) != stochastic
    assert set(fresh.params()) >= {"d_z", "epochs", "seed"}


def test_run_validation_accepts_inf_and_refuses_bad_ranges() -> None:
    from veil.errors import ConfigError
    from veil.pipeline.execute import RunSpec
    from veil.pipeline.validation import validate

    v = validate(RunSpec(method="ldp-frl", dataset="gaussian-correlated", params={"eps": "inf"}))
    assert v.method_config.eps == float("inf")
    for method, params in (
        ("ldp-frl", {"eps": 0}),
        ("adjustable-ae", {"noise": -1}),
        ("linear-arl", {"lambda_arl": 2}),
    ):
        with pytest.raises(ConfigError):
            validate(RunSpec(method=method, dataset="gaussian-correlated", params=params))
