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
