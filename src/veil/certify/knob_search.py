"""How calibration searches a method's privacy knob (`veil.certify.calibrate`): its settings, torch-free, as a run
spec and `veil run --check` read them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from veil.config import param

#: the share of the training rows calibration scores candidates on by default (`CalibrationConfig.validation`)
VALIDATION_SHARE = 0.3
#: the probability with which calibration wants a feasible candidate's certificate met (`CalibrationConfig`)
ASSURANCE = 0.95

#: a centralized run cross-fits its candidates by default (`CalibrationConfig.folds`) when one validation split would
#: hold fewer rows than this of some sensitive label's smallest class: a gap read on 300 minority rows has a standard
#: deviation near 0.017, a third of the default target's budget
CROSS_FIT_BELOW = 300
#: the folds of that default
CROSS_FIT_FOLDS = 3
#: the default of `CalibrationConfig.max_rows`: each of calibration's candidates costs about a plain run's training
#: on the rows it sees, and a validation split of this many rows already holds 15,000 to score them on
MAX_ROWS = 50_000


@dataclass(frozen=True)
class CalibrationConfig:
    """How a run searches its privacy knob for the most useful value that meets the target."""

    validation: float = param(
        VALIDATION_SHARE,
        "fraction of the training rows held out to score the candidates when folds is 1 (the test split is never read)",
        gt=0,
        lt=0.9,
    )
    folds: int | None = param(
        None,
        "cross-fitting: each candidate trains once per fold of the training rows and is scored on the fold it did not "
        f"see, so every training row scores it (unset: {CROSS_FIT_FOLDS} for a centralized run whose validation split "
        f"would hold fewer than {CROSS_FIT_BELOW} rows of a sensitive label's smallest class, else 1: one split)",
        ge=1,
        le=10,
    )
    grid: int | None = param(
        None,
        "knob values spread over the knob's range, its ends included (unset: 6; 4 for a federated method): the first "
        "stage trains the values inside, and an end only where they leave it in question (from 4 values up)",
        ge=2,
        le=64,
    )
    refine: int | None = param(
        None,
        "knob values of each refinement stage, straddling where the target is expected to start failing (unset: 3; 2 "
        "for a federated method)",
        ge=0,
        le=64,
    )
    rounds: int | None = param(
        None,
        "refinement stages after the first, each within the bracket the one before leaves (unset: 2; each stage is "
        "one population, and for a federated method each value is a federation)",
        ge=0,
        le=8,
    )
    min_gain: float = param(
        0.02,
        "a refinement stage trains only where the target is expected to admit at least this much more validation "
        "utility AUC than the feasible setting already found (0: refine while a bracket remains)",
        ge=0,
        le=1,
    )
    assurance: float = param(
        ASSURANCE,
        "probability with which a feasible candidate's certificate is to be met: its margin follows from its own "
        "validation spread (`veil.certify.calibrate.margin_of`)",
        ge=0.5,
        lt=1,
    )
    margin: float | None = param(
        None,
        "fixed room every gap, excess or AUC bound must leave on validation instead (unset: from each candidate's "
        "spread and `assurance`)",
        ge=0,
    )
    max_rows: int | None = param(
        MAX_ROWS,
        "training rows candidates are drawn from: a table with more trains and scores them on a random sample of this "
        "many and releases the chosen candidate for every row (a federation trains it again; null: every row)",
        ge=1000,
    )
    seed: int | None = param(None, "seed of the validation split and of the sample (unset: the run's seed)", ge=0)

    def resolved(self, federated: bool, smallest: int | None = None) -> CalibrationConfig:
        """The search with its unset sizes filled: fewer values for a federation, where each is a whole run, and
        (once the data say how many rows of its smallest sensitive class a validation split holds, `smallest`)
        cross-fitting where one validation split would hold too few of them to tell candidates apart."""
        sizes = (4, 2, 2) if federated else (6, 3, 2)
        given = (self.grid, self.refine, self.rounds)
        grid, refine, rounds = (g if g is not None else d for g, d in zip(given, sizes))
        folds = self.folds
        if folds is None and smallest is not None:
            folds = CROSS_FIT_FOLDS if not federated and smallest < CROSS_FIT_BELOW else 1
        return dataclasses.replace(self, grid=grid, refine=refine, rounds=rounds, folds=folds)
