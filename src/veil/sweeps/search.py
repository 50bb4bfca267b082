"""The Tune searcher of every sampled sweep: an Optuna study of its own, driven through public APIs only (Tune's
`Searcher`, Optuna's `Study.ask` / `Study.tell`), so neither library's internals are relied on.

Each Tune trial is one Optuna trial, or with `population: P` a population of them: up to P asked together
(never more than the sweep's `trials`) while the sampler still draws without looking at results (its
`independent` trials: TPE's start-up, NSGA-II's first generation, every trial of a random sampler), then one
at a time, so a population sweep gives the sampler as many adaptive rounds as separate trials would. The
members train as one vectorised model and each is told the objectives it reported."""

from __future__ import annotations

import math
import pickle
import time
from typing import Any, Mapping, cast

import optuna
from optuna.distributions import BaseDistribution
from optuna.study import StudyDirection
from optuna.trial import TrialState
from ray.tune.search import Searcher

from veil.sweeps.population_trials import MEMBER_RESULTS, MEMBERS, NUMBERS, member_values


class StudySearch(Searcher):
    """Suggests configurations from an Optuna study over `space` (Tune config key -> distribution) and tells it
    each trial's objectives (`metric`, in order, with `mode` 'max' or 'min' each)."""

    def __init__(
        self,
        space: Mapping[str, BaseDistribution],
        *,
        metric: list[str],
        mode: list[str],
        sampler: optuna.samplers.BaseSampler,
        population: int = 1,
        total: int,
        independent: int | None = None,
        concurrency: int = 1,
    ) -> None:
        super().__init__(metric=cast(Any, metric), mode=cast(Any, mode))  # lists: Tune's multi-objective form
        self._space = dict(space)
        self._population, self._total, self._asked = population, total, 0
        self._independent = total if independent is None else independent
        """How many of the first trials the sampler draws without results: asked in populations; later ones alone."""
        self._size = min(population, max(1, math.ceil(self._independent / max(1, concurrency))))
        """The populations' size: P, or less so that the independent trials spread evenly over the concurrent
        workers (one large population would hold its results back while the other workers ask on, and a sampler
        that has too few results keeps drawing at random)."""
        directions = [StudyDirection.MAXIMIZE if m == "max" else StudyDirection.MINIMIZE for m in mode]
        self._study = optuna.create_study(directions=directions, sampler=sampler)
        self._members: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        """Tune trial id -> (Optuna trial number, its params) of each member."""
        self._told: set[str] = set()
        self.ask_seconds: list[float] = []
        """The sampler's seconds per asked trial, in order (a population's ask shared by its members)."""

    @property
    def study(self) -> optuna.Study:
        """The Optuna study: every member's params and objectives, as told."""
        return self._study

    def next_size(self) -> int:
        """How many trials the next Tune trial holds: up to a population while the sampler's draws are
        independent of results, then one (0 once every trial is asked)."""
        left = self._total - self._asked
        independent_left = self._independent - self._asked
        return min(left, self._size, independent_left) if independent_left > 0 else min(left, 1)

    def plan(self) -> str:
        """How a population sweep asks its trials, in words (for the sweep's first lines)."""
        together = min(self._independent, self._total)
        alone = self._total - together
        text = f"populations: the first {together} trial(s) in populations of up to {self._size}"
        return text + (f", then {alone} asked one at a time as the sampler adapts" if alone else "")

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if trial_id not in self._members:
            n = self.next_size()
            if n <= 0:
                return cast(Any, Searcher.FINISHED)  # Tune's "no more trials" (its type hint leaves it out)
            t0 = time.perf_counter()
            asked = [self._study.ask(self._space) for _ in range(n)]
            self.ask_seconds += [(time.perf_counter() - t0) / n] * n
            self._members[trial_id] = [(t.number, dict(t.params)) for t in asked]
            self._asked += n
        params = [p for _, p in self._members[trial_id]]
        if self._population == 1:
            return dict(params[0])
        return {MEMBERS: params, NUMBERS: [number + 1 for number, _ in self._members[trial_id]]}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """Trials report once, at the end; multi-objective studies take no intermediate values anyway."""

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id in self._told or trial_id not in self._members:
            return
        keys = list(self.metric) if isinstance(self.metric, list) else [self.metric]
        reported: list[Any] = [] if error or result is None else result.get(MEMBER_RESULTS, [result])
        for i, (number, _) in enumerate(self._members[trial_id]):
            values = member_values(reported[i] if i < len(reported) else None, keys)
            if values is None:
                self._study.tell(number, state=TrialState.FAIL)
            else:
                self._study.tell(number, values if len(values) > 1 else values[0])
        self._told.add(trial_id)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__dict__.copy(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))  # noqa: S301 (Tune's own experiment checkpoint, written by save)
