"""D-EIGAN's server rule against hand computations ('paper' and 'masked-mean', N_k weights, masks), the
sparse wire format, and FedAvg's uniform average."""

from __future__ import annotations

import numpy as np
import pytest

from veil.datasets import load_dataset
from veil.methods import create_method
from veil.methods.federated.aggregation import aggregate
from veil.methods.federated.core import ClientUpdate, index_set, sparse_count


def test_paper_rule_by_hand():
    # 5 entries; node A (N=30) sent entries 0,1,3; node B (N=10) sent 1,2,3.
    prev = np.array([9, 9, 9, 9, 9], np.float32)
    a = (np.array([0, 1, 3]), np.array([1.0, 2.0, 4.0], np.float32), 30)
    b = (np.array([1, 2, 3]), np.array([10.0, 20.0, 40.0], np.float32), 10)
    out = aggregate("paper", 5, prev, [a, b])
    # theta = 0.75 * [1, 2, 0, 4, 0] + 0.25 * [0, 10, 20, 40, 0]  (unsent entries count as 0)
    np.testing.assert_allclose(out, [0.75, 4.0, 5.0, 13.0, 0.0], rtol=0, atol=1e-6)


def test_masked_mean_by_hand():
    prev = np.array([9, 9, 9, 9, 9], np.float32)
    a = (np.array([0, 1, 3]), np.array([1.0, 2.0, 4.0], np.float32), 30)
    b = (np.array([1, 2, 3]), np.array([10.0, 20.0, 40.0], np.float32), 10)
    out = aggregate("masked-mean", 5, prev, [a, b])
    # entry 0: only A -> 1; entry 1: (30*2 + 10*10)/40 = 4; entry 2: only B -> 20;
    # entry 3: (30*4 + 10*40)/40 = 13; entry 4: nobody -> previous 9
    np.testing.assert_allclose(out, [1.0, 4.0, 20.0, 13.0, 9.0], rtol=0, atol=1e-6)


def test_full_upload_is_the_weighted_average():
    rng = np.random.default_rng(0)
    thetas = [rng.normal(size=7).astype(np.float32) for _ in range(3)]
    ns = [5, 10, 25]
    ups = [(np.arange(7), t, n) for t, n in zip(thetas, ns)]
    want = sum(n / 40 * t for t, n in zip(thetas, ns))
    for mode in ("paper", "masked-mean"):
        np.testing.assert_allclose(aggregate(mode, 7, np.zeros(7, np.float32), ups), want, atol=1e-6)


def test_no_update_keeps_the_global_state():
    prev = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(aggregate("paper", 4, prev, []), prev)


def test_index_sets_are_regenerated_from_the_seed():
    assert sparse_count(0.8, 1000) == 800 and sparse_count(1e-9, 10) == 1 and sparse_count(1.0, 10) == 10
    idx = index_set(1234, 1000, 800)
    assert len(idx) == 800 == len(np.unique(idx)) and np.all(np.diff(idx) > 0)
    np.testing.assert_array_equal(idx, index_set(1234, 1000, 800))
    assert not np.array_equal(idx, index_set(1235, 1000, 800))
    np.testing.assert_array_equal(index_set(5, 10, 10), np.arange(10))


@pytest.fixture(scope="module")
def task():
    return load_dataset("gaussian-quadrant", {"n": 200}).task()


@pytest.mark.parametrize("mode", ["paper", "masked-mean"])
def test_server_aggregates_wire_messages_like_the_hand_rule(task, mode):
    m = create_method("d-eigan", {"K": 2, "phi": 0.5, "aggregation": mode, "d_z": 2}, task)
    m.server_start({0: 30, 1: 10})
    size = m.theta.size
    prev = m.theta.copy()
    rng = np.random.default_rng(1)
    ups, hand = [], []
    for node, (seed, n) in enumerate([(11, 30), (12, 10)]):
        idx = index_set(seed, size, sparse_count(0.5, size))
        vals = rng.normal(size=len(idx)).astype(np.float32)
        ups.append(ClientUpdate(node, 1, n, {"seed": seed, "values": vals}))
        hand.append((idx, vals, n))
    m.aggregate(1, ups, [])
    np.testing.assert_allclose(m.theta, aggregate(mode, size, prev, hand), atol=1e-7)
    z = m.encode(np.zeros((3, task.d_in), np.float32))  # the released encoder is the aggregate
    assert z.shape == (3, 2)
    # the downlink for the next round carries the aggregate on the server's index set
    down = m.configure(2, [0, 1])[0]
    np.testing.assert_array_equal(down["values"], m.theta[index_set(down["seed"], size, len(down["values"]))])


def test_fedavg_is_the_uniform_mean(task):
    m = create_method("ldp-fedavg", {"K": 3, "d_z": 2}, task)
    m.server_start({0: 1, 1: 100, 2: 5})
    rng = np.random.default_rng(2)
    omegas = [rng.normal(size=m.omega.size).astype(np.float32) for _ in range(3)]
    m.aggregate(1, [ClientUpdate(k, 1, n, {"omega": w}) for k, (w, n) in enumerate(zip(omegas, (1, 100, 5)))], [])
    np.testing.assert_allclose(m.omega, np.mean(omegas, axis=0), atol=1e-6)  # 1/K, not N_k-weighted
