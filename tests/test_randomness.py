"""`derive_seeds` is `derive_seed` (numpy's SeedSequence) over arrays: the same seed for every part tuple."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.randomness import derive_seed, derive_seeds

WORD = st.integers(min_value=0, max_value=2**32 - 1)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(WORD, min_size=1, max_size=7))
def test_one_tuple_equals_seed_sequence(parts: list[int]) -> None:
    """Tuples of 1-7 words (the pool of four, and past it) hash as SeedSequence hashes them."""
    assert int(derive_seeds(*parts)) == derive_seed(*parts)


def test_a_column_of_node_ids_equals_one_call_per_node() -> None:
    ids = np.arange(5000)
    assert derive_seeds(3, ids, 17, 20).tolist() == [derive_seed(3, int(k), 17, 20) for k in ids]


def test_parts_past_one_word_fall_back_to_seed_sequence() -> None:
    assert derive_seeds(2**40, np.array([1, 2]), 3).tolist() == [derive_seed(2**40, 1, 3), derive_seed(2**40, 2, 3)]
    with pytest.raises(ValueError):
        derive_seeds(-1, np.array([1, 2]))  # as SeedSequence refuses a negative entropy word
