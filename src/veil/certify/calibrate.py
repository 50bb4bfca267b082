"""Calibration: the most useful setting of a method's privacy knob that meets a leakage target.

A run given a target (or the default one) and not its knob calibrates before it releases anything:

1. A validation split is carved from the TRAINING rows (`CalibrationConfig.validation`); the test split is not
   read (the certificate reads it once, afterwards).
2. Stage 1: `grid` knob values spread over the knob's range (`PrivacyKnob`) train on the remaining rows, as one
   vectorised population where the method has a population form (`veil.methods.population`), else one by one.
   Each is scored on the validation rows: the utility AUC of the audit's probe, and the worst leakage of the
   audit's probe, a logistic regression and gradient boosting over the sensitive labels.
3. Refinement stages (bracketing): `refine` values between the feasible value nearest the useful end and the
   infeasible one beyond it, `rounds` times.
4. Every candidate is judged together (`assess`): leakage grows with the knob, so each figure, with the finite
   validation split's noise taken out, is fitted by an increasing isotonic regression over the knob from its least
   leaking candidate on, pooling the noise of neighbouring candidates. A candidate is feasible when the fitted
   figure leaves `margin` to the bound: what the certificate's interval adds on the test split, plus room for
   both splits' noise (`margin_for`). The feasible value nearest the knob's useful end wins (utility grows with
   the knob as leakage does; one candidate's validation utility is too noisy near the private end to rank them).

A centralized run releases the winning candidate itself (the model that was validated is the model that is
certified). A federation is trained again on every training row with the winning value: its clients release
their rows during the federation, so a finished candidate cannot release the test rows afterwards.

When no value is feasible the run goes on with the least leaking one by its own validation figures
(`least_leaking`); its certificate decides met or not."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from veil.audit.probes import AuditConfig, label_tasks, prepare, probe_metrics
from veil.audit.step import stacked_audit
from veil.certify.resolution import certificate_floor, resolution
from veil.certify.search import CalibrationConfig
from veil.certify.target import MI_PREFIX, Target
from veil.config import build
from veil.datasets.base import Dataset, split_indices
from veil.errors import ConfigError, DataError
from veil.methods.base import Method, PrivacyKnob
from veil.methods.registry import get_method
from veil.randomness import derive_seed

if TYPE_CHECKING:
    from veil.runspec import ValidatedRun

Note = Callable[[str], None]
EpochHook = Callable[[int, dict[str, float]], None]
#: adversaries that score candidates besides the audit's own probe (cheap, and strong on tabular z)
CALIBRATION_PROBES = ("logistic", "hist-gradient-boosting")
#: exit code of a run whose calibration could not meet its target (documented in README, `veil run --help`)
EXIT_NOT_MET = 3
#: a bracket narrower than this (in knob positions) is not refined further
MIN_BRACKET = 0.005
#: a validation utility this much above the feasible edge's marks where the trade-off turns (`bracket`)
UTILITY_STEP = 0.03


@dataclass
class Candidate:
    """One knob value tried: where, its validation scores, and whether it met the target there."""

    value: float
    position: float
    """0 = the knob's private end, 1 = its useful end"""
    stage: int
    utility: float
    """mean utility AUC of the audit's probe on the validation rows"""
    leakage: dict[str, float]
    """per bound of the target, the figure on the validation rows (worst over the calibration's adversaries)"""
    feasible: bool = False
    estimate: dict[str, float] = field(default_factory=dict)
    """per bound, the pooled estimate feasibility is judged on (`assess`): the validation figure with the noise
    of a finite validation split taken out, made monotone in the knob from the least leaking candidate on"""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Calibration:
    """The search and its outcome: every candidate, the winner (None: none was feasible) and what is released."""

    knob: PrivacyKnob
    target: Target
    trail: list[Candidate]
    chosen: Candidate | None
    released: Candidate
    """the winner, or the least leaking candidate when none was feasible"""
    margin: float
    noise: float
    """the validation split's noise level taken out of every gap (`validation_noise`)"""
    fit_rows: int
    validation_rows: int
    seconds: float
    config: CalibrationConfig
    method: Method | None = None
    """centralized runs: the released candidate's trained method"""
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return self.chosen is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "knob": self.knob.field,
            "range": [self.knob.low, self.knob.high],
            "scale": self.knob.scale,
            "target": self.target.to_dict(),
            "met_on_validation": self.met,
            "value": self.released.value,
            "margin": self.margin,
            "validation_noise": self.noise,
            "fit_rows": self.fit_rows,
            "validation_rows": self.validation_rows,
            "seconds": round(self.seconds, 2),
            "trail": [c.to_dict() for c in sorted(self.trail, key=lambda c: c.position)],
            "settings": dataclasses.asdict(self.config),
        }

    def params(self) -> dict[str, Any]:
        """MLflow params of the calibration (calibration.*)."""
        return {
            "calibration.knob": self.knob.field,
            "calibration.value": self.released.value,
            "calibration.met_on_validation": self.met,
            "calibration.candidates": len(self.trail),
            "calibration.margin": round(self.margin, 5),
            "calibration.fit_rows": self.fit_rows,
            "calibration.validation_rows": self.validation_rows,
        }

    def table(self) -> str:
        """The trail as aligned text lines (the console's): each bound's validation figure, then its pooled
        estimate (`assess`) in brackets."""
        names = list(self.trail[0].leakage) if self.trail else []
        head = f"  {self.knob.field:>10}  {'utility':>7}  " + "  ".join(f"{n + ' [pooled]':>26}" for n in names)
        rows = [head + "  feasible"]
        for c in sorted(self.trail, key=lambda c: c.position):
            mark = " <- released" if c is self.released else ""
            leak = "  ".join(f"{c.leakage[n]:>17.4f} [{c.estimate.get(n, math.nan):.4f}]" for n in names)
            rows.append(f"  {c.value:>10.4g}  {c.utility:>7.3f}  {leak}  {'yes' if c.feasible else 'no':>8}{mark}")
        return "\n".join(rows)


@contextlib.contextmanager
def seeded_releases(method: Method, seed: int) -> Iterator[None]:
    """Inside: `method` releases with noise from `seed` (a candidate's scores are reproducible from the run's
    seed); its own config, release counter and OS-entropy releases come back on exit. These releases never leave
    calibration."""
    config, calls = method.config, method.release_calls
    method.config = dataclasses.replace(config, release_seed=seed)
    try:
        yield
    finally:
        method.config, method.release_calls = config, calls


def knob_of(method: str) -> PrivacyKnob | None:
    """The privacy knob of method `method` (None: it has none)."""
    return get_method(method).privacy_knob


def validation_split(ds: Dataset, fraction: float, seed: int) -> tuple[Dataset, np.ndarray, np.ndarray]:
    """(the dataset whose train is the fit rows and whose test is the validation rows, fit rows, validation rows);
    every label keeps two classes on both sides, else a DataError says what to change."""
    fit, val = split_indices(len(ds.train), fraction, seed)
    for side, rows in (("fit", fit), ("validation", val)):
        for name, y in ds.train.labels().items():
            if len(np.unique(np.asarray(y)[rows])) < 2:
                raise DataError(
                    f"calibration: the {side} rows ({len(rows)} of the {len(ds.train)} training rows, "
                    f"calibration.validation={fraction:g}) hold one class of label '{name}'; give more rows, "
                    "another calibration.validation, or set the knob yourself"
                )
    cal = dataclasses.replace(ds, train=ds.train.take(fit), test=ds.train.take(val), transform=None)
    return cal, fit, val


def margin_for(
    ds: Dataset, ds_cal: Dataset, target: Target, config: CalibrationConfig, cfg: AuditConfig, seed: int
) -> float:
    """The room gap and AUC bounds must leave on validation: the configured margin, else the certificate's floor on
    the test split (`certificate_floor`: what its upper end adds to a release that leaks nothing) plus room for the
    two splits' noise (the typical worst point gap of an independent release on the validation rows against the
    calibration's adversaries and on the test rows against the certificate's chosen one, added in quadrature), so that the
    candidate released passes the certificate most of the time rather than half of it."""
    if config.margin is not None:
        return float(config.margin)
    if not any(b.interval_checked for b in target.bounds):
        return 0.0
    floor = certificate_floor(ds, cfg, "privacy_gap", seed)[0]
    # the certificate's point is one adversary's, chosen on other rows: it carries one adversary's noise
    test_noise = max(r.noise for r in resolution(ds.train, ds.num_classes, len(ds.test), 1, seed))
    return floor + math.hypot(validation_noise(ds_cal, seed), test_noise)


def leakage(
    z_fit: np.ndarray,
    z_val: np.ndarray,
    ds_cal: Dataset,
    report: Any,
    target: Target,
    cfg: AuditConfig,
    knob_value: float,
    knob: PrivacyKnob,
) -> dict[str, float]:
    """Each bound's figure on the validation rows: the worst gap / AUC over the audit's probe and the calibration
    adversaries, an MI estimate, or the knob's eps."""
    from veil.audit.capacity import CapacityConfig, fit_predict

    gaps, aucs = [], []
    z_tr, z_te = prepare(z_fit, z_val, cfg.standardize)
    ccfg = CapacityConfig.from_audit(cfg)
    for s in report.scores:
        if s.role == "adversary":
            gaps.append(s.privacy_gap)
            aucs.append(s.auc)
    if any(b.interval_checked for b in target.bounds):
        for t in label_tasks(ds_cal.train, ds_cal.test, ds_cal.num_classes):
            if t.role != "adversary":
                continue
            for probe in CALIBRATION_PROBES:
                m = probe_metrics(
                    t.y_test,
                    fit_predict(probe, z_tr, t.y_train, z_te, t.n_classes, ccfg, cfg.seed + 500 + t.offset),
                    t.n_classes,
                )
                gaps.append(m.gap)
                aucs.append(m.auc)
    out: dict[str, float] = {}
    for b in target.bounds:
        if b.metric == "privacy_gap":
            out[b.metric] = float(np.nanmax(gaps))
        elif b.metric == "adversary_auc_max":
            out[b.metric] = float(np.nanmax(aucs))
        elif b.metric == "eps":
            out[b.metric] = knob_value if knob.field == "eps" else math.nan
        elif b.metric.startswith(MI_PREFIX):
            from veil.audit.mi import estimate_mi

            _, est, label = b.metric.split("/")
            out[b.metric] = estimate_mi(
                z_fit,
                np.asarray(ds_cal.train.sensitive[label]),
                z_val,
                np.asarray(ds_cal.test.sensitive[label]),
                est,
                seed=cfg.seed,
            ).value
    return out


def validation_noise(ds_cal: Dataset, seed: int = 0) -> float:
    """The worst point gap an independent release typically shows on the validation rows against the calibration's
    adversaries (the largest over the sensitive labels): what a finite split adds to every measured gap."""
    res = resolution(ds_cal.train, ds_cal.num_classes, len(ds_cal.test), 1 + len(CALIBRATION_PROBES), seed)
    return max(r.noise for r in res)


def debiased(metric: str, value: float, noise: float) -> float:
    """A validation gap (or AUC) with the finite split's noise taken out in quadrature: an independent release
    (gap ~ noise) maps to ~0, a clear leak (gap >> noise) stays nearly as measured."""
    if math.isnan(value):
        return value
    if metric == "privacy_gap":
        return math.sqrt(max(value * value - noise * noise, 0.0))
    if metric == "adversary_auc_max":
        excess = value - 0.5
        return 0.5 + math.copysign(math.sqrt(max(excess * excess - noise * noise, 0.0)), excess)
    return value


def assess(trail: Sequence[Candidate], target: Target, margin: float, noise: float) -> None:
    """Judge every candidate tried so far together. Leakage grows with the knob's position (a more useful
    setting hides less), so each bound's validation figures, debiased (`debiased`), are fitted by an increasing
    isotonic regression over positions: the noise of one candidate's small validation split is pooled with its
    neighbours'. The fit starts at the least leaking candidate (`monotone_from_least`): where a method leaks more
    at its private end than further on, those candidates keep their own figures. A candidate is feasible when every
    fitted figure is within its bound, gap and AUC bounds with `margin` to spare; an eps bound on a knob that is not
    eps is left to the certificate's test (infeasible here)."""
    order = sorted(trail, key=lambda c: c.position)
    positions = np.array([c.position for c in order])
    for c in order:
        c.estimate, c.feasible = {}, True
    for b in target.bounds:
        raw = np.array([debiased(b.metric, c.leakage.get(b.metric, math.nan), noise) for c in order])
        fitted = raw if np.isnan(raw).any() else monotone_from_least(positions, raw)
        room = margin if b.interval_checked else 0.0
        for c, v in zip(order, fitted):
            c.estimate[b.metric] = float(v)
            c.feasible = c.feasible and bool(v + room <= b.limit)


def monotone_from_least(positions: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """`raw` (ordered by position) fitted by an increasing isotonic regression from its least value (the first
    among equals) to the useful end; the candidates before it keep their own figures. Pooling over the whole
    trail would assume leakage grows from the private end, and where it does not (EIGAN on its quadrant data
    leaks 0.28 at alpha 0.001 and 0.04-0.05 from 0.09 up, its training adversary fooled and a fresh one not) the
    private end's leak would be pooled into every estimate and make nothing feasible even under a loose bound."""
    from sklearn.isotonic import IsotonicRegression

    start = int(np.argmin(raw))
    fitted = raw.astype(float).copy()
    if len(raw) - start > 1:
        fitted[start:] = IsotonicRegression(increasing=True).fit_transform(positions[start:], raw[start:])
    return fitted


@dataclass(frozen=True)
class Runner:
    """Where calibration's candidates train, handed down by the run pipeline (calibration knows no platform): the
    device of centralized candidates and the executors by name (a federated candidate is one federation)."""

    device: str
    executor: Callable[[str], Any]


class Trainer:
    """Trains and scores candidates of one run on the calibration split."""

    def __init__(
        self,
        v: ValidatedRun,
        ds_cal: Dataset,
        target: Target,
        margin: float,
        note: Note,
        on_epoch: EpochHook | None,
        runner: Runner,
    ) -> None:
        self.v, self.ds_cal, self.target, self.margin, self.note = v, ds_cal, target, margin, note
        self.runner = runner
        self.on_epoch = on_epoch
        self.trail: list[Candidate] = []
        self.noise = validation_noise(ds_cal)
        self.knob = knob_of(v.spec.method)
        assert self.knob is not None
        self.cfg = dataclasses.replace(v.audit_config, mi="none", capacity=False)
        self.device = runner.device if v.executor != "federated" else "cpu"
        self.methods: dict[float, tuple[Method, list[dict[str, float]]]] = {}

    def configs(self, values: Sequence[float]) -> list[Any]:
        return [self.knob.apply(self.v.method_config, v) for v in values]  # type: ignore[union-attr]

    def train(
        self, values: Sequence[float]
    ) -> list[tuple[Method, list[dict[str, float]], np.ndarray, np.ndarray, Any]]:
        """Each value's trained method, history, release of the fit and validation rows, and audit report."""
        from veil.methods.base import TrainContext
        from veil.methods.population import plan_population, population_form
        from veil.methods.registry import create_method

        configs = self.configs(values)
        name, ds = self.v.spec.method, self.ds_cal
        if self.v.executor == "federated":
            return [self._federated(c) for c in configs]
        fitted: list[tuple[Method, list[dict[str, float]]]]
        if population_form(name) is not None and len(plan_population(configs, name).groups) == 1:
            from veil.methods.population import fit_population

            fitted = fit_population(
                name, configs, ds.task(), ds.train, TrainContext(self.device, on_epoch=self.on_epoch)
            )
        else:
            fitted = []
            for c in configs:
                m = create_method(name, c, ds.task())
                h = m.fit(ds.train, TrainContext(self.device, on_epoch=self.on_epoch))
                fitted.append((m.to("cpu"), h))
        released = []
        for i, (m, _) in enumerate(fitted):
            with seeded_releases(m, derive_seed(self.v.spec.seed, 31, i)):
                released.append((m.encode(ds.train.x), m.encode(ds.test.x)))
        reports = stacked_audit(released, ds, self.cfg)
        return [(m, h, a, b, r) for (m, h), (a, b), r in zip(fitted, released, reports)]

    def _federated(self, config: Any) -> tuple[Method, list[dict[str, float]], np.ndarray, np.ndarray, Any]:
        """One federation of the candidate on the fit rows, in process, scored on the validation rows."""
        from pathlib import Path

        from veil.audit.step import audit_release

        assert self.v.federation is not None
        fed = dataclasses.replace(self.v.federation, per_node_audit=False, audit_every=0)
        vc = dataclasses.replace(self.v, method_config=config, runtime="in-process", federation=fed)
        job = self.runner.executor("federated")(vc, self.ds_cal, Path(".veil") / "ray")
        outcome = job.train(self.on_epoch, None, None)
        out = audit_release(outcome.method, self.ds_cal, self.cfg, federation=job.federation)
        return outcome.method, outcome.history, out.z_train, out.z_test, out.report

    def stage(self, positions: Sequence[float], stage: int) -> list[Candidate]:
        knob = self.knob
        assert knob is not None
        values = [knob.value_at(p) for p in positions]
        t0 = time.time()
        trained = self.train(values)
        out = []
        for p, value, (m, h, z_fit, z_val, report) in zip(positions, values, trained):
            leak = leakage(z_fit, z_val, self.ds_cal, report, self.target, self.cfg, value, knob)
            utility = float(np.mean([s.auc for s in report.scores if s.role == "utility"]))
            c = Candidate(value, float(p), stage, utility, leak)
            self.methods[c.value] = (m, h)
            out.append(c)
        assess([*self.trail, *out], self.target, self.margin, self.noise)
        self.trail += out
        self.note(
            f"calibration stage {stage}: {len(values)} values of {knob.field} ({min(values):.4g} .. {max(values):.4g}) "
            f"trained and scored in {time.time() - t0:.1f} s; feasible: {sum(c.feasible for c in out)}"
        )
        return out


def search_range(knob: PrivacyKnob, target: Target) -> tuple[float, float]:
    """Positions searched: the whole range, capped at an eps bound when the knob is the mechanism's eps."""
    top = 1.0
    eps = target.get("eps")
    if eps is not None and knob.field == "eps":
        if eps.limit < knob.low:
            raise ConfigError("target.eps", eps.limit, f"a bound >= {knob.low:g}, the smallest eps calibration tries")
        top = min(1.0, knob.position_of(eps.limit))
    return 0.0, top


def calibrate(
    v: ValidatedRun,
    ds: Dataset,
    target: Target,
    config: CalibrationConfig,
    runner: Runner,
    note: Note | None = None,
    on_epoch: EpochHook | None = None,
) -> Calibration:
    """Search `v`'s privacy knob for the most useful value that meets `target` on a validation split of the training
    rows (module docstring); the test split is not read. `runner` says where candidates train (the pipeline's)."""
    say = note or (lambda _: None)
    knob = knob_of(v.spec.method)
    if knob is None:
        raise ConfigError("method", v.spec.method, "a method with a privacy knob to calibrate (see `veil methods`)")
    t0 = time.time()
    seed = v.spec.seed if config.seed is None else config.seed
    ds_cal, fit, val = validation_split(ds, config.validation, seed + 7919)
    margin = margin_for(ds, ds_cal, target, config, v.audit_config, seed)
    say(
        f"calibrating {knob.field} for {target.text()} on {len(val)} validation rows held out of the "
        f"{len(ds.train)} training rows (the test split is read once, for the certificate); margin {margin:.3f}"
    )
    tight = [
        b
        for b in target.bounds
        if b.interval_checked and margin >= (b.limit - (0.5 if b.metric != "privacy_gap" else 0.0))
    ]
    for b in tight:
        room = b.limit - (0.5 if b.metric != "privacy_gap" else 0.0)
        need = math.ceil(len(ds.test) * (margin / (0.5 * room)) ** 2)
        say(
            f"calibration has no room: on {len(ds.test)} test rows the certificate's interval and the two splits' "
            f"noise take {margin:.3f} of the {b.text()} budget, so only a setting that leaks nothing can be judged "
            f"safe: calibration will release the most private one it finds (its utility near chance). With about "
            f"{need} test rows half the budget would be left for a useful release; or loosen the target"
        )
    trainer = Trainer(v, ds_cal, target, margin, say, on_epoch, runner)
    lo, hi = search_range(knob, target)
    sizes = config.resolved(v.executor == "federated")
    grid, refine, rounds = int(sizes.grid or 0), int(sizes.refine or 0), int(sizes.rounds or 0)
    trainer.stage(list(np.linspace(lo, hi, grid)), 1)
    for stage in range(2, rounds + 2):
        upper = bracket(trainer.trail)
        if upper is None or not refine or upper[1] - upper[0] < MIN_BRACKET:
            break
        trainer.stage(list(np.linspace(upper[0], upper[1], refine + 2)[1:-1]), stage)
    trail = trainer.trail
    feasible_ones = [c for c in trail if c.feasible]
    # utility grows with the position as leakage does; one validation split's utility is noise near the private
    # end, so the feasible candidate nearest the useful end is the most useful one (not the best-looking score)
    chosen = max(feasible_ones, key=lambda c: c.position) if feasible_ones else None
    # nothing feasible: the least leaking by its own validation figures, the private end among equals
    released = chosen or least_leaking(trail, target)
    method, history = trainer.methods[released.value]
    cal = Calibration(
        knob,
        target,
        trail,
        chosen,
        released,
        margin,
        trainer.noise,
        len(fit),
        len(val),
        time.time() - t0,
        config,
        method if v.executor != "federated" else None,
        history,
    )
    say(
        f"calibrated {knob.field} = {released.value:.4g} in {cal.seconds:.1f} s ({len(trail)} candidates; validation "
        f"utility AUC {released.utility:.3f}):\n{cal.table()}"
    )
    if chosen is None:
        say(
            f"calibration found no value of {knob.field} in [{knob.low:g}, {knob.high:g}] that meets {target.text()} "
            f"on validation; releasing the least leaking one ({released.value:.4g}) for the certificate to judge"
        )
    return cal


def bracket(trail: Sequence[Candidate]) -> tuple[float, float] | None:
    """The positions to refine between: the feasible candidate nearest the knob's useful end and the nearest
    infeasible one beyond it, where the trade-off turns (by position, not by validation utility, which is noise
    near the private end). None when nothing is feasible (the private end already fails: nothing nearer to it is
    tried) or when the candidate at the useful end is feasible."""
    ordered = sorted(trail, key=lambda c: c.position)
    feasible_ones = [c for c in ordered if c.feasible]
    if not feasible_ones:
        return None
    edge = feasible_ones[-1]
    above = [c for c in ordered if c.position > edge.position]
    if not above:
        return None
    # an infeasible neighbour no more useful than the edge says nothing about where utility turns: widen the
    # bracket to the first candidate that keeps clearly more utility, where the trade-off is
    upper = next((c for c in above if c.utility > edge.utility + UTILITY_STEP), above[-1])
    return edge.position, upper.position


def worst_excess(c: Candidate, target: Target) -> float:
    """How far a candidate's worst validation figure lies beyond its bound (relative)."""
    excess = [(c.leakage.get(b.metric, math.inf) - b.limit) / b.limit for b in target.bounds]
    return max(excess) if excess else 0.0


def least_leaking(trail: Sequence[Candidate], target: Target) -> Candidate:
    """The candidate released when none is feasible: the least leaking by its own validation figures, the private
    end among equals. Not by the fitted estimates: each bound's fit starts at its own least leaking candidate and
    pools its neighbours into it, so across bounds the estimates tie more often than the figures do."""
    return min(trail, key=lambda c: (worst_excess(c, target), c.position))


def build_config(values: Any, where: str | None = None) -> CalibrationConfig:
    """A CalibrationConfig from a run file's `calibration:` mapping."""
    return build(CalibrationConfig, dict(values or {}), where=where or "calibration")
