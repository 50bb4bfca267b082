"""Population sweeps (`population: P`): each Tune trial trains up to P of the sweep's trials as one vectorised
model (`veil.run.execute_population`), and each member is still one Optuna trial and one MLflow trial run.

`PopulationSearch` is Tune's OptunaSearch asking Optuna for a population at once (`study.ask` P times) and
telling each member its own objectives; a grid sweep hands out its points in chunks of P instead."""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from optuna.trial import TrialState
from ray.tune.search.optuna import OptunaSearch

MEMBERS = "_members"
"""A population trial's config key: the searched values of each of its members, in order."""
MEMBER_RESULTS = "members"
"""A population trial's result key: what each member reports (None for a member that failed)."""


class PopulationSearch(OptunaSearch):
    """OptunaSearch whose every suggestion is a population: up to `population` Optuna trials asked together
    (never more than `total` over the sweep), each told the objectives its member reported."""

    def __init__(self, space: Any, *, population: int, total: int, **kwargs: Any) -> None:
        super().__init__(space, **kwargs)
        self._population, self._total, self._asked = population, total, 0

    def suggest(self, trial_id: str) -> dict | None:
        if trial_id not in self._ot_trials:
            n = min(self._population, self._total - self._asked)
            if n <= 0:
                return None
            study = self._ot_study
            assert study is not None  # set up by OptunaSearch once it has a space and metrics
            self._ot_trials[trial_id] = [study.ask(fixed_distributions=self._space) for _ in range(n)]
            self._asked += n
        return {MEMBERS: [dict(t.params) for t in self._ot_trials[trial_id]]}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """Multi-objective studies take no intermediate values."""

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id in self._completed_trials or trial_id not in self._ot_trials:
            return
        reported = (result or {}).get(MEMBER_RESULTS) or []
        keys = self.metric if isinstance(self.metric, list) else [self.metric]
        study = self._ot_study
        assert study is not None
        for i, ot_trial in enumerate(self._ot_trials[trial_id]):
            values = member_values(reported[i] if i < len(reported) else None, keys)
            if values is None:
                study.tell(ot_trial, None, state=TrialState.FAIL)
            else:
                study.tell(ot_trial, values if len(values) > 1 else values[0])
        self._completed_trials.add(trial_id)


def member_values(reported: Mapping[str, Any] | None, keys: Sequence[str]) -> list[float] | None:
    """A member's objective values in `keys` order, None when it failed or left one out."""
    if reported is None:
        return None
    values = [reported.get(k) for k in keys]
    return [float(v) for v in values if v is not None] if all(v is not None for v in values) else None


def grid_chunks(points: Sequence[Mapping[str, Any]], population: int) -> list[list[dict[str, Any]]]:
    """A grid's points in populations of `population`, in order (the last one may be smaller)."""
    return [list(map(dict, points[i : i + population])) for i in range(0, len(points), population)]


def grid_points(axes: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every point of the grid spanned by `axes` (name -> values), the first axis varying slowest."""
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]
