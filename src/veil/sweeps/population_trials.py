"""Population sweeps (`population: P`): each Tune trial trains up to P of the sweep's trials as one vectorised
model (`veil.pipeline.execute.execute_population`), and each member is still one Optuna trial and one MLflow trial run.

`veil.sweeps.search.StudySearch` asks Optuna for a population at once (`study.ask` up to P times) while the
sampler draws without looking at results (its `independent` trials), then one trial at a time, and tells each
member its own objectives; a grid sweep hands out its points in chunks of P instead."""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

MEMBERS = "_members"
"""A population trial's config key: the searched values of each of its members, in order."""
NUMBERS = "_numbers"
"""A sampled population trial's config key: each member's trial number (its Optuna trial number + 1)."""
MEMBER_RESULTS = "members"
"""A population trial's result key: what each member reports (None for a member that failed)."""


def member_values(reported: Mapping[str, Any] | None, keys: Sequence[str]) -> list[float] | None:
    """A member's objective values in `keys` order, None when it failed or left one out."""
    if reported is None:
        return None
    values = [reported.get(k) for k in keys]
    return [float(v) for v in values if v is not None] if all(v is not None for v in values) else None


def member_numbers(config: Mapping[str, Any], number: int | None, population: int) -> list[int | None]:
    """Trial numbers of a population trial's members: those the searcher gave (`NUMBERS`), or for a grid's
    chunks of `population`, (number - 1) * population + 1 ... from the Tune trial's `number`, so trials keep one
    numbering whatever the population size."""
    given = config.get(NUMBERS)
    if given is not None:
        return [int(n) for n in given]
    size = len(config.get(MEMBERS) or [])
    return [None if number is None else (number - 1) * population + i + 1 for i in range(size)]


def grid_chunks(points: Sequence[Mapping[str, Any]], population: int) -> list[list[dict[str, Any]]]:
    """A grid's points in populations of `population`, in order (the last one may be smaller)."""
    return [list(map(dict, points[i : i + population])) for i in range(0, len(points), population)]


def product_points(axes: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every point of the grid spanned by `axes` (name -> values), the first axis varying slowest."""
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]
