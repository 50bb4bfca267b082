"""`veil run` trains on one torch thread when the CPU is already busy, unless the user chose a thread count."""

from __future__ import annotations

import pytest

from veil.platform.cluster import busy_threads


@pytest.mark.parametrize(
    ("load", "cpus", "env", "want"),
    [
        (0.3, 2, {}, None),  # quiet: torch's default
        (1.9, 2, {}, None),  # below the core count
        (2.0, 2, {}, 1),  # every core busy
        (9.5, 2, {}, 1),
        (9.5, 2, {"OMP_NUM_THREADS": "2"}, None),  # the user's choice wins
        (9.5, 1, {}, None),  # one core: torch uses one thread anyway
        (40.0, 32, {}, 1),
        (20.0, 32, {}, None),
    ],
)
def test_one_thread_only_when_the_cores_are_busy(load: float, cpus: int, env: dict[str, str], want: int | None) -> None:
    assert busy_threads(load, cpus, env) == want
