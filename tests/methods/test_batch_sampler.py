"""`BatchSampler.sample()`, the fresh minibatches GPP's adversaries and utility heads train on: distinct rows, every
row equally often, a seeded stream."""

import numpy as np
import torch

from veil.datasets.dataset import Split
from veil.methods.method import BatchSampler


def sampler(n: int, batch: int, seed: int = 0) -> BatchSampler:
    split = Split(np.arange(n, dtype=np.float32)[:, None], {"u": np.zeros(n, np.int64)}, {"s": np.zeros(n, np.int64)})
    return BatchSampler(split, batch, torch.device("cpu"), seed)


def rows(b: BatchSampler) -> list[int]:
    return b.sample().x[:, 0].long().tolist()


def test_each_draw_holds_distinct_rows_and_a_pass_covers_every_row_once() -> None:
    b = sampler(1000, 64)
    drawn = [rows(b) for _ in range(15)]  # 15 x 64 = 960 rows of the first shuffled order
    assert all(len(d) == 64 == len(set(d)) for d in drawn)
    flat = [r for d in drawn for r in d]
    assert len(set(flat)) == 960  # no row twice before the order is used up
    assert len(set(rows(b))) == 64  # the 16th draw would run past the order: a new one, a full batch


def test_rows_are_drawn_equally_often_and_the_stream_is_seeded() -> None:
    """2,000 draws of 10 from 50 rows are 400 passes over a shuffled order: every row exactly 400 times."""
    b = sampler(50, 10, seed=3)
    counts = np.bincount([r for _ in range(2000) for r in rows(b)], minlength=50)
    assert (counts == 400).all(), counts
    assert rows(sampler(50, 10, seed=3)) == rows(sampler(50, 10, seed=3))
    assert rows(sampler(50, 10, seed=3)) != rows(sampler(50, 10, seed=4))
