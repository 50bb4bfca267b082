"""One conformance test over every registered method: fit, encode, audit, state round-trip."""

import numpy as np
import pytest

from veil.audit import AuditConfig, audit
from veil.datasets import load_dataset
from veil.methods import METHODS, create_method
from veil.methods.base import MethodConfig

SMALL = {"epochs": 2, "d_z": 3, "batch_size": 32, "release_seed": 0}  # reproducible releases: the round trip compares z


@pytest.fixture(scope="module")
def data():
    return load_dataset("gaussian-octant", {"n": 300})


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_conformance(name, data):
    cls = METHODS[name]
    assert cls.name == name and name == name.lower() and " " not in name
    assert issubclass(cls.Config, MethodConfig) and cls.description
    m = create_method(name, SMALL, data.task())
    history = m.fit(data.train)
    assert isinstance(history, list)
    if m.iterative:
        assert len(history) == SMALL["epochs"] and all(np.isfinite(v) for row in history for v in row.values())
    z_train, z_test = m.encode(data.train.x), m.encode(data.test.x)
    assert z_test.shape[0] == len(data.test) and z_test.ndim == 2 and np.isfinite(z_test).all()
    again = create_method(name, SMALL, data.task())
    again.load_state(m.state())
    np.testing.assert_allclose(again.encode(data.train.x), z_train, atol=1e-6)  # first release of each
    report = audit(z_train, data.train, z_test, data.test, data.num_classes, AuditConfig(epochs=2, hidden=(16,)))
    metrics = report.metrics()
    for key in (
        "utility_acc",
        "utility_auc",
        "adversary_acc",
        "adversary_auc",
        "privacy_gap",
        "adversary_auc/adversary_1",
        "adversary_auc/adversary_2",
        "utility_auc/ally",
    ):
        assert key in metrics
    assert isinstance(m.params(), dict) and "d_z" in m.params()
