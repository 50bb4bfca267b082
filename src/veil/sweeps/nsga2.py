"""Optuna's NSGA-II sampler, made picklable.

Tune pickles its searcher, and with it the sampler, into the experiment directory when the Tuner is built and
whenever it saves the search for `veil resume`. Optuna 5.1's genetic samplers (`BaseGASampler`) keep a
`threading.Lock` and define no `__getstate__`, so they cannot be pickled. The lock only guards a per-process
cache, so a copy gets a fresh lock. On Optuna releases without the lock this class behaves exactly like its
parent."""

from __future__ import annotations

import threading
from typing import Any

import optuna

_LOCK = "_thread_lock"


class NSGAIISampler(optuna.samplers.NSGAIISampler):
    """`optuna.samplers.NSGAIISampler` that pickles: its lock is left out and made anew on unpickling."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if _LOCK in state:
            state[_LOCK] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if _LOCK in state:
            setattr(self, _LOCK, threading.Lock())
