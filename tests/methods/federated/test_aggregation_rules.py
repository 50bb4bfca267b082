"""Aggregation rules by name: values on a small hand-checked example, and unknown names refused."""

from __future__ import annotations

import numpy as np
import pytest

from veil.errors import UnknownNameError
from veil.methods.federated.aggregation import AGGREGATION_RULES, aggregate

PREV = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
# node A (N=1) sends entries 0,1 = 2, 4; node B (N=3) sends entries 1,2 = 8, 8; entry 3 is sent by nobody
SPARSE = [
    (np.array([0, 1]), np.array([2.0, 4.0], np.float32), 1),
    (np.array([1, 2]), np.array([8.0, 8.0], np.float32), 3),
]


def test_registered_names():
    assert set(AGGREGATION_RULES) == {"paper", "masked-mean", "mean"}
    with pytest.raises(UnknownNameError) as e:
        aggregate("median", 4, PREV, SPARSE)
    assert e.value.valid == ["masked-mean", "mean", "paper"]


def test_paper_rule_counts_unsent_entries_as_zero():
    # sum_k N_k/N theta~_k with N = 4: entry 0 = 2/4, entry 1 = 4/4 + 3*8/4, entry 2 = 3*8/4, entry 3 = 0
    np.testing.assert_allclose(aggregate("paper", 4, PREV, SPARSE), [0.5, 7.0, 6.0, 0.0])


def test_masked_mean_averages_over_senders_and_keeps_unsent_entries():
    np.testing.assert_allclose(aggregate("masked-mean", 4, PREV, SPARSE), [2.0, (4 + 24) / 4, 8.0, 1.0])


def test_mean_is_fedavg_with_equal_weights():
    full = np.arange(4)
    ups = [(full, np.array([1, 2, 3, 4], np.float32), 10), (full, np.array([3, 2, 1, 0], np.float32), 1)]
    np.testing.assert_allclose(aggregate("mean", 4, PREV, ups), [2.0, 2.0, 2.0, 2.0])


@pytest.mark.parametrize("name", sorted(AGGREGATION_RULES))
def test_no_update_keeps_the_previous_state(name):
    out = aggregate(name, 4, PREV, [])
    np.testing.assert_array_equal(out, PREV)
    assert out is not PREV


def loop_rule(name: str, size: int, previous: np.ndarray, updates: list) -> np.ndarray:
    """The rules as one indexed float64 add per update: the definition the vectorised rules must equal bit for bit."""
    total = float(sum(n for _, _, n in updates))
    num, den = np.zeros(size), np.zeros(size)
    for idx, vals, n in updates:
        weight = {"paper": n / total, "masked-mean": n, "mean": 1}[name]
        num[idx] += weight * vals.astype(np.float64)
        den[idx] += n
    if name == "paper":
        return num.astype(np.float32)
    if name == "mean":
        return (num / len(updates)).astype(np.float32)
    out = previous.astype(np.float64).copy()
    out[den > 0] = num[den > 0] / den[den > 0]
    return out.astype(np.float32)


@pytest.mark.parametrize("name", ["paper", "masked-mean", "mean"])
def test_each_rule_equals_its_per_update_loop_bit_for_bit(name: str) -> None:
    """300 sparse uploads of random sizes and weights over 500 entries: the same float32 vector as the loop."""
    rng = np.random.default_rng(7)
    updates = []
    for _ in range(300):
        count = int(rng.integers(1, 500))
        idx = np.sort(rng.choice(500, count, replace=False))
        updates.append((idx, rng.standard_normal(count).astype(np.float32), int(rng.integers(1, 50))))
    previous = rng.standard_normal(500).astype(np.float32)
    assert np.array_equal(aggregate(name, 500, previous, updates), loop_rule(name, 500, previous, updates))


@pytest.mark.parametrize("name", ["paper", "masked-mean", "mean"])
def test_dense_uploads_equal_the_per_update_loop_bit_for_bit(name: str) -> None:
    """300 dense uploads (every index, as phi = 1 sends), which take the whole-vector path: the loop's vector."""
    rng = np.random.default_rng(8)
    every = np.arange(500)
    updates = [(every, rng.standard_normal(500).astype(np.float32), int(rng.integers(1, 50))) for _ in range(300)]
    previous = rng.standard_normal(500).astype(np.float32)
    assert np.array_equal(aggregate(name, 500, previous, updates), loop_rule(name, 500, previous, updates))
