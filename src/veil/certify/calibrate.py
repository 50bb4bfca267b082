"""Calibration: the most useful setting of a method's privacy knob that meets a leakage target.

A run given a target (or the default one) and not its knob calibrates before it releases anything:

1. Candidates are scored on TRAINING rows they did not train on; the test split is not read (the certificate reads
   it once, afterwards). One validation split (`CalibrationConfig.validation`) costs one training per candidate.
   Where it would hold fewer than 300 rows of a sensitive label's smallest class, each candidate is cross-fitted
   instead (`CalibrationConfig.folds`, 3 by default): it trains once per fold and is scored on the fold it did not
   see, so every training row scores it and the figures are averaged over folds; fold 0's model is released.
2. Stage 1: `grid` knob values spread over the knob's range (`PrivacyKnob`) train on the fit rows, as one
   vectorised population where the method has a population form (`veil.methods.population`), else one by one.
   Each is scored on the scored rows: the utility AUC of the audit's probe, and the worst leakage of the
   audit's probe and the certificate's suite less its widest MLP over the sensitive labels (the certificate's
   statistic: signed gap AUC - 0.5, or its excess over the utility labels' baseline), with its bootstrap spread.
   A candidate whose certificate checks other views of the same rows is scored on each, and its figure per bound
   is its worst view's (`worst_view`): a D-GPP candidate's federation records the aggregator's linked view (each
   row's sampled-round audit releases beside its final release, `veil.certify.wire`), which its certificate's
   `wire/linked/...` check reads.
3. Refinement stages (bracketing): `refine` values between the feasible value nearest the useful end and the
   infeasible one beyond it, wherever they lie (the private end included), at most `rounds` times, and only while
   the bracket is expected to keep `min_gain` more utility than its feasible edge (`expected_gain`): each stage
   trains a population, about as long as a plain run, with its values straddling where the bound is expected to be
   crossed (`refine_points`), so one stage usually lands on both sides of it.
4. Every candidate is judged together (`assess`): leakage grows with the knob, so each figure is fitted by an
   increasing isotonic regression over the knob from its least leaking candidate on, pooling the noise of
   neighbouring candidates. A candidate is feasible when its certificate will be met with probability
   `assurance` (`margin_of`): the fitted figure, plus what the certificate's one-sided bound adds on the test
   split, plus `z(assurance)` standard deviations of the difference between the validation figure and the
   certificate's, all from the candidate's own bootstrap spread (a release that keeps u, judged against an
   excess bound, varies far less than an independent one). The feasible value nearest the knob's useful end wins
   (utility grows with the knob as leakage does; one candidate's validation utility is too noisy near the private
   end to rank them).

A centralized run releases the winning candidate itself (the model that was validated is the model that is
certified). A federation is trained again on every training row with the winning value: its clients release
their rows during the federation, so a finished candidate cannot release the test rows afterwards. A table with
more training rows than `CalibrationConfig.max_rows` is calibrated on a random sample of that many (each candidate
costs about a plain run's training on the rows it sees), and its winning candidate, trained on the sample's fit
rows, is released for every row: trained again on the whole table, the same value is another model (with the
method's epochs it takes more steps; with fewer epochs, the same steps over rows seen once) whose leakage the
validation did not measure and can differ either way.

When no value is feasible the run goes on with the least leaking one by its own validation figures
(`least_leaking`); its certificate decides met or not."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np

from veil.audit.probes import label_tasks, prepare
from veil.audit.settings import AuditConfig
from veil.audit.step import stacked_audit
from veil.certify.knob_search import CalibrationConfig
from veil.certify.resolution import Z_CERTIFICATE, margin_of, null_margin
from veil.certify.target import MI_PREFIX, Target
from veil.config import build
from veil.datasets.dataset import Dataset, split_indices
from veil.datasets.loading import subsample
from veil.errors import ConfigError, DataError
from veil.methods.builtin import get_method
from veil.methods.configs.method_card import PrivacyKnob
from veil.methods.method import Method
from veil.randomness import derive_seed

if TYPE_CHECKING:
    from veil.certify.intervals import Resamples

Note = Callable[[str], None]
EpochHook = Callable[[int, dict[str, float]], None]
#: the certificate's adversaries calibration leaves out: the audit's own MLP probe stands in for the widest MLP,
#: whose training per candidate and fold would dominate calibration's scoring
CALIBRATION_SKIPS = ("mlp-512-256-128",)


def calibration_probes(cfg: AuditConfig) -> tuple[str, ...]:
    """The adversaries that score candidates besides the audit's own probe: the certificate's suite (so that a
    candidate's spread is the spread its certificate will see) less `CALIBRATION_SKIPS`."""
    return tuple(p for p in cfg.suite if p not in CALIBRATION_SKIPS)


#: exit code of a run whose calibration could not meet its target (documented in README, `veil run --help`)
EXIT_NOT_MET = 3
#: a bracket narrower than this (in knob positions) is not refined further
MIN_BRACKET = 0.005
#: a validation utility this much above the feasible edge's marks where the trade-off turns (`bracket`)
UTILITY_STEP = 0.03
#: the least share of a bracket a refinement stage spreads its values over (`refine_points`)
REFINE_MIN_SHARE = 0.25
#: bootstrap resamples of the validation rows that give each candidate's spread
VALIDATION_DRAWS = 200
#: most fit rows each candidate's fresh probes train on (every validation row is still scored): their cost grows
#: with the rows, what they read of a candidate levels off well before, and there is one pair per candidate
PROBE_ROWS = 10_000


def calibration_audit(cfg: AuditConfig) -> AuditConfig:
    """The audit that scores candidates: the run's, without MI or the capacity sweep, its probes on at most
    `PROBE_ROWS` fit rows."""
    rows = PROBE_ROWS if cfg.max_rows <= 0 else min(cfg.max_rows, PROBE_ROWS)
    return dataclasses.replace(cfg, mi="none", capacity=False, max_rows=rows)


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
    """per bound, the pooled estimate feasibility is judged on (`assess`): the validation figure made monotone in
    the knob from the least leaking candidate on"""
    spread: dict[str, float] = field(default_factory=dict)
    """per gap, excess or AUC bound, the bootstrap standard deviation of the worst adversary's validation figure"""
    room: dict[str, float] = field(default_factory=dict)
    """per gap, excess or AUC bound, how far the certificate's upper end may land above the estimate (`margin_of`)"""
    upper: dict[str, float] = field(default_factory=dict)
    """per gap, excess or AUC bound, how far above each other adversary's point its bound would reach, worst first
    (the certificate takes the largest upper bound of its suite, not the largest point)"""
    error: dict[str, float] = field(default_factory=dict)
    """per gap, excess or AUC bound, the standard deviation of the validation figure as an estimate of the released
    model's: `spread` on one split; cross-fitted, the folds' pooled spread plus how much the fold models differ"""

    def needs(self, metric: str) -> float:
        """The tightest limit on `metric` this candidate would be feasible under: estimate plus room."""
        return self.estimate.get(metric, math.nan) + self.room.get(metric, 0.0)

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
    """the room the released candidate left to its (first gap, excess or AUC) bound (`margin_of`)"""
    fit_rows: int
    """the rows each candidate trained on"""
    validation_rows: int
    """the rows that scored each candidate (every training row when cross-fitted)"""
    seconds: float
    config: CalibrationConfig
    method: Method | None = None
    """the released candidate's trained method (None: a federation, whose run trains the value again on every
    training row)"""
    history: list[dict[str, float]] = field(default_factory=list)
    rows: int = 0
    """the training rows candidates were drawn from (the table's, or its sample)"""

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
            "assurance": self.config.assurance,
            "fit_rows": self.fit_rows,
            "validation_rows": self.validation_rows,
            "rows": self.rows,
            "seconds": round(self.seconds, 2),
            "trail": [c.to_dict() for c in sorted(self.trail, key=lambda c: c.position)],
            "front": self.front(),
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
            "calibration.rows": self.rows,
            "calibration.retrained": self.method is None,
            "calibration.folds": self.config.folds,
        }

    def table(self) -> str:
        """The trail as aligned text lines (the console's): each bound's validation figure, its pooled estimate
        (`assess`) in brackets, and the tightest limit the candidate would be feasible under."""
        names = list(self.trail[0].leakage) if self.trail else []
        head = f"  {self.knob.field:>10}  {'utility':>7}  " + "  ".join(f"{n + ' [pooled] needs':>34}" for n in names)
        rows = [head + "  feasible"]
        for c in sorted(self.trail, key=lambda c: c.position):
            mark = " <- released" if c is self.released else ""
            leak = "  ".join(
                f"{c.leakage[n]:>17.4f} [{c.estimate.get(n, math.nan):.4f}] {c.needs(n):>6.3f}" for n in names
            )
            rows.append(f"  {c.value:>10.4g}  {c.utility:>7.3f}  {leak}  {'yes' if c.feasible else 'no':>8}{mark}")
        return "\n".join(rows)

    def metric(self) -> str | None:
        """The bound the front is read on: the target's first gap, excess or AUC bound (None: it has none)."""
        return next((b.metric for b in self.target.bounds if b.interval_checked), None)

    def front(self) -> list[dict[str, float]]:
        """What each target would keep, read off the trail: the candidates no other beats on both the limit they
        need (`Candidate.needs`) and validation utility, from the most private on. A target at a row's `needs` is
        met with probability `assurance` by that row's setting, with its validation utility."""
        metric = self.metric()
        if metric is None:
            return []
        rows = sorted(
            ((c.needs(metric), c.utility, c.value) for c in self.trail if math.isfinite(c.needs(metric))),
            key=lambda r: (r[0], -r[1]),
        )
        out: list[dict[str, float]] = []
        for need, utility, value in rows:
            if not out or utility > out[-1]["utility"] + 1e-9:
                out.append({"needs": need, "utility": utility, "value": value})
        return out

    def plot(self, path: Any) -> None:
        """calibration.png: every candidate's validation utility against the limit it needs (`Candidate.needs`),
        the front, the target's bound and the released candidate."""
        from matplotlib.figure import Figure

        metric = self.metric()
        fig = Figure(figsize=(6.4, 4.2))
        ax = fig.add_subplot()
        if metric is not None:
            for feasible in (True, False):
                pts = [(c.needs(metric), c.utility) for c in self.trail if c.feasible is feasible]
                if pts:
                    ax.scatter(
                        [p[0] for p in pts],
                        [p[1] for p in pts],
                        s=28,
                        facecolors="#3366aa" if feasible else "none",
                        edgecolors="#3366aa" if feasible else "#999999",
                        label="feasible" if feasible else "infeasible",
                    )
            front = self.front()
            if front:
                ax.step([r["needs"] for r in front], [r["utility"] for r in front], where="post", color="#3366aa")
            bound = self.target.get(metric)
            if bound is not None:
                ax.axvline(bound.limit, color="#cc2222", linestyle="--", label=f"target {bound.text()}")
            r = self.released
            ax.scatter([r.needs(metric)], [r.utility], marker="*", s=160, color="#cc2222", label="released", zorder=3)
            ax.set_xlabel(f"{metric} the setting needs (met with probability {self.config.assurance:g})")
        ax.set_ylabel("validation utility AUC")
        ax.set_title(f"calibration of {self.knob.field}: what each target keeps", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        fig.savefig(path, dpi=110)

    def advice(self) -> list[str]:
        """'to keep utility AUC >= 0.9, accept excess_gap <= 0.21' lines: the front's rows that keep more utility
        than the released candidate."""
        metric = self.metric()
        if metric is None:
            return []
        out: list[str] = []
        kept = self.released.utility
        for row in self.front():
            if row["utility"] > kept + 0.01:
                kept = row["utility"]
                limit = math.ceil(round(row["needs"] * 100, 6)) / 100
                out.append(
                    f"to keep validation utility AUC {row['utility']:.2f}, accept --target {metric}={limit:g} "
                    f"({self.knob.field} {row['value']:.4g})"
                )
        return out


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
    return carve(ds, fit, val, f"calibration.validation={fraction:g}"), fit, val


def smallest_class(ds: Dataset, share: float) -> int:
    """How many rows of the smallest class of any sensitive label a validation split of `share` of the training
    rows holds (in expectation)."""
    counts = [np.bincount(np.asarray(y)) for y in ds.train.sensitive.values()]
    return int(min((c[c > 0].min() for c in counts), default=len(ds.train)) * share)


def fold_splits(ds: Dataset, folds: int, seed: int) -> list[tuple[Dataset, np.ndarray, np.ndarray]]:
    """`folds` (dataset, fit rows, scored rows) that score every training row once, stratified by the sensitive
    labels together so that every fold holds its share of a minority."""
    n = len(ds.train)
    rng = np.random.default_rng(seed)
    key = np.zeros(n, dtype=np.int64)
    for name, y in ds.train.sensitive.items():
        key = key * int(ds.num_classes[name]) + np.asarray(y)
    fold = np.empty(n, dtype=np.int64)
    for k in np.unique(key):
        rows = rng.permutation(np.flatnonzero(key == k))
        fold[rows] = (np.arange(len(rows)) + rng.integers(folds)) % folds
    out = []
    for f in range(folds):
        fit, val = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        out.append((carve(ds, fit, val, f"calibration.folds={folds}"), fit, val))
    return out


def carve(ds: Dataset, fit: np.ndarray, val: np.ndarray, setting: str) -> Dataset:
    """The dataset whose train is the `fit` training rows and whose test is the `val` ones; every label keeps two
    classes on both sides, else a DataError names `setting` as one thing to change."""
    for side, rows in (("fit", fit), ("validation", val)):
        for name, y in ds.train.labels().items():
            if len(np.unique(np.asarray(y)[rows])) < 2:
                raise DataError(
                    f"calibration: the {side} rows ({len(rows)} of the {len(ds.train)} training rows, "
                    f"{setting}) hold one class of label '{name}'; give more rows, another {setting.split('=')[0]}, "
                    "or set the knob yourself"
                )
    return dataclasses.replace(ds, train=ds.train.take(fit), test=ds.train.take(val), transform=None)


def sample_rows(ds: Dataset, max_rows: int | None, seed: int) -> Dataset:
    """`ds` with its training rows cut to a random `max_rows` of them where it holds more; the test rows (the
    certificate's) are kept whole."""
    if max_rows is None or len(ds.train) <= max_rows:
        return ds
    return dataclasses.replace(ds, train=ds.train.take(subsample(len(ds.train), max_rows, seed)))


def calibration_splits(
    ds: Dataset, config: CalibrationConfig, seed: int
) -> list[tuple[Dataset, np.ndarray, np.ndarray]]:
    """Where candidates train and are scored: one validation split, or `config.folds` cross-fitting folds."""
    folds = config.folds or 1
    return fold_splits(ds, folds, seed) if folds > 1 else [validation_split(ds, config.validation, seed)]


@dataclass(frozen=True)
class Baseline:
    """What every candidate of one calibration is read against, the same for all of them: the resamples of the
    validation rows and, per sensitive label, the utility labels' baseline (point, draws) on them."""

    counts: Resamples
    labels: dict[str, tuple[np.ndarray, np.ndarray]]

    @classmethod
    def of(cls, ds_cal: Dataset, seed: int) -> Baseline:
        from veil.certify.baseline import baseline_probas
        from veil.certify.intervals import Resamples, class_auc_draws, signed_gap_draws

        counts = Resamples(len(ds_cal.test), VALIDATION_DRAWS, seed + 13)
        labels = {}
        for name, proba in baseline_probas(ds_cal.train, ds_cal.test, ds_cal.num_classes).items():
            y, k = np.asarray(ds_cal.test.sensitive[name]), int(ds_cal.num_classes[name])
            labels[name] = (
                signed_gap_draws(class_auc_draws(y, proba, k, None)),
                signed_gap_draws(class_auc_draws(y, proba, k, counts)),
            )
        return cls(counts, labels)


def leakage(
    z_fit: np.ndarray,
    z_val: np.ndarray,
    ds_cal: Dataset,
    report: Any,
    target: Target,
    cfg: AuditConfig,
    knob_value: float,
    knob: PrivacyKnob,
    base: Baseline,
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Each bound's figure on the validation rows, with (for gap, excess and AUC bounds) its bootstrap standard
    deviation and how far the adversaries' one-sided bounds reach above the worst point (`margin_of`'s `upper`).
    Gap and AUC figures are the certificate's: the worst signed gap AUC - 0.5 over the audit's probe and the
    calibration adversaries; excess figures pair each with the utility labels' baseline on the same resamples."""
    from veil.audit.capacity import CapacityConfig, fit_predict
    from veil.certify.baseline import excess_draws
    from veil.certify.intervals import class_auc_draws, signed_gap_draws

    figures: dict[str, float] = {}
    spreads: dict[str, float] = {}
    uppers: dict[str, float] = {}
    checked = [b.metric for b in target.bounds if b.interval_checked]
    if checked:
        z_tr, z_te = prepare(z_fit, z_val, cfg.standardize)
        ccfg = CapacityConfig.from_audit(cfg)
        counts = base.counts
        # per adversary and label: (point, draws) of the signed gap and of its excess
        gaps: list[tuple[float, np.ndarray]] = []
        excess: list[tuple[float, np.ndarray]] = []
        for t in label_tasks(ds_cal.train, ds_cal.test, ds_cal.num_classes):
            if t.role != "adversary":
                continue
            b_point, b_draws = base.labels[t.name]
            probas = [report.probas[t.name]] + [
                fit_predict(probe, z_tr, t.y_train, z_te, t.n_classes, ccfg, cfg.seed + 500 + t.offset)
                for probe in calibration_probes(cfg)
            ]
            for proba in probas:
                point = float(signed_gap_draws(class_auc_draws(t.y_test, proba, t.n_classes, None))[0])
                draws = signed_gap_draws(class_auc_draws(t.y_test, proba, t.n_classes, counts))
                gaps.append((point, draws))
                excess.append((float(excess_draws(np.array([point]), b_point)[0]), excess_draws(draws, b_draws)))
        for metric in checked:
            pairs = excess if metric == "excess_gap" else gaps
            worst = max(range(len(pairs)), key=lambda i: pairs[i][0])
            point = pairs[worst][0]
            sds = [float(np.nanstd(d)) for _, d in pairs]
            figures[metric] = point + (0.5 if metric == "adversary_auc_max" else 0.0)
            spreads[metric] = sds[worst]
            # how far the suite's largest one-sided bound reaches above the worst point, on these rows
            uppers[metric] = max(p + Z_CERTIFICATE * sd for (p, _), sd in zip(pairs, sds)) - point
    for b in target.bounds:
        if b.metric == "eps":
            figures[b.metric] = knob_value if knob.field == "eps" else math.nan
        elif b.metric.startswith(MI_PREFIX):
            from veil.audit.mi import estimate_mi

            _, est, label = b.metric.split("/")
            figures[b.metric] = estimate_mi(
                z_fit,
                np.asarray(ds_cal.train.sensitive[label]),
                z_val,
                np.asarray(ds_cal.test.sensitive[label]),
                est,
                seed=cfg.seed,
            ).value
    return figures, spreads, uppers


def assess(trail: Sequence[Candidate], target: Target, rooms: Callable[[Candidate, str], float]) -> None:
    """Judge every candidate tried so far together. Leakage grows with the knob's position (a more useful
    setting hides less), so each bound's validation figures are fitted by an increasing isotonic regression over
    positions: the noise of one candidate's small validation split is pooled with its neighbours'. The fit starts
    at the least leaking candidate (`monotone_from_least`): where a method leaks more at its private end than
    further on, those candidates keep their own figures. A candidate is feasible when every fitted figure plus the
    room its certificate needs (`rooms(candidate, metric)`: `margin_of` for gap, excess and AUC bounds) is within
    its bound; an eps bound on a knob that is not eps is left to the certificate's test (infeasible here)."""
    order = sorted(trail, key=lambda c: c.position)
    positions = np.array([c.position for c in order])
    for c in order:
        c.estimate, c.room, c.feasible = {}, {}, True
    for b in target.bounds:
        raw = np.array([c.leakage.get(b.metric, math.nan) for c in order])
        fitted = raw if np.isnan(raw).any() else monotone_from_least(positions, raw)
        for c, v in zip(order, fitted):
            room = rooms(c, b.metric) if b.interval_checked else 0.0
            c.estimate[b.metric], c.room[b.metric] = float(v), room
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


class Trained(NamedTuple):
    """One candidate trained on one fold: the method, its history, its release of the fit and scored rows with
    their audit report, and each other view of those rows its certificate checks, (z_fit, z_val, report) in row
    order (D-GPP: the aggregator's linked view, `veil.certify.wire.linked_rows`); its leakage is its worst view's."""

    method: Method
    history: list[dict[str, float]]
    z_fit: np.ndarray
    z_val: np.ndarray
    report: Any
    views: tuple[tuple[np.ndarray, np.ndarray, Any], ...] = ()


#: one federated candidate: the method config, trained as a federation on the dataset's train rows, its release and
#: its other views audited with the config given; the epoch hook hears its progress
Federate = Callable[[Any, Dataset, AuditConfig, EpochHook | None], Trained]


@dataclass(frozen=True)
class Subject:
    """What calibration needs of a run, handed down by the run pipeline (calibration knows no run spec, executor or
    platform)."""

    method: str
    """The method's registered name; its privacy knob is calibrated."""
    config: Any
    """The method's validated config: every candidate is it with another knob value."""
    audit: AuditConfig
    """The audit's settings (its probe scores every candidate)."""
    seed: int
    """The run's seed: splits, baselines and candidates' release noise derive from it."""
    device: str = "cpu"
    """Where centralized candidates train."""
    federate: Federate | None = None
    """How a federated method's candidate trains (one federation each); None for a centralized method."""


@dataclass(frozen=True)
class Fold:
    """One split candidates are scored on: the dataset whose train is the fit rows and whose test is the scored
    rows, and the utility labels' baseline on them."""

    ds: Dataset
    base: Baseline


class Trainer:
    """Trains and scores candidates of one run on its calibration folds (one validation split, or cross-fitting
    folds: each candidate then trains once per fold, and fold 0's model is the one released)."""

    def __init__(
        self,
        subject: Subject,
        folds: Sequence[Dataset],
        target: Target,
        rooms: Callable[[Candidate, str], float],
        note: Note,
        on_epoch: EpochHook | None,
    ) -> None:
        self.subject, self.target, self.rooms, self.note = subject, target, rooms, note
        self.on_epoch = on_epoch
        self.trail: list[Candidate] = []
        self.folds = [Fold(ds, Baseline.of(ds, subject.seed + f)) for f, ds in enumerate(folds)]
        self.knob = knob_of(subject.method)
        assert self.knob is not None
        self.cfg = calibration_audit(subject.audit)
        self.methods: dict[float, tuple[Method, list[dict[str, float]]]] = {}

    def configs(self, values: Sequence[float]) -> list[Any]:
        return [self.knob.apply(self.subject.config, v) for v in values]  # type: ignore[union-attr]

    def train(self, values: Sequence[float], ds: Dataset) -> list[Trained]:
        """Each value's method trained on `ds`'s train rows, its history, release of the fit and scored rows, audit
        report, and the other views its certificate checks, audited too."""
        from veil.methods.builtin import create_method
        from veil.methods.method import TrainContext
        from veil.methods.population import plan_population, population_form

        configs = self.configs(values)
        subject, name = self.subject, self.subject.method
        if subject.federate is not None:
            return [subject.federate(c, ds, self.cfg, self.on_epoch) for c in configs]
        fitted: list[tuple[Method, list[dict[str, float]]]]
        if population_form(name) is not None and len(plan_population(configs, name).groups) == 1:
            from veil.methods.population import fit_population

            fitted = fit_population(
                name, configs, ds.task(), ds.train, TrainContext(subject.device, on_epoch=self.on_epoch)
            )
        else:
            fitted = []
            for c in configs:
                m = create_method(name, c, ds.task())
                h = m.fit(ds.train, TrainContext(subject.device, on_epoch=self.on_epoch))
                fitted.append((m.to("cpu"), h))
        released = []
        for i, (m, _) in enumerate(fitted):
            with seeded_releases(m, derive_seed(subject.seed, 31, i)):
                released.append((m.encode(ds.train.x), m.encode(ds.test.x)))
        reports = stacked_audit(released, ds, self.cfg)
        return [Trained(m, h, a, b, r) for (m, h), (a, b), r in zip(fitted, released, reports)]

    def stage(self, positions: Sequence[float], stage: int) -> list[Candidate]:
        knob = self.knob
        assert knob is not None
        values = [knob.value_at(p) for p in positions]
        t0 = time.time()
        trained = [self.train(values, f.ds) for f in self.folds]
        out = []
        for i, (p, value) in enumerate(zip(positions, values)):
            scores = []
            for f, fold in zip(self.folds, trained):
                t = fold[i]
                leak, spread, upper = worst_view(
                    [
                        leakage(z_fit, z_val, f.ds, report, self.target, self.cfg, value, knob, f.base)
                        for z_fit, z_val, report in ((t.z_fit, t.z_val, t.report), *t.views)
                    ]
                )
                utility = float(np.mean([s.auc for s in t.report.scores if s.role == "utility"]))
                scores.append(FoldScore(utility, leak, spread, upper))
            c = pooled(value, float(p), stage, scores)
            self.methods[c.value] = (trained[0][i].method, trained[0][i].history)
            out.append(c)
        assess([*self.trail, *out], self.target, self.rooms)
        self.trail += out
        on_folds = f" on each of {len(self.folds)} folds" if len(self.folds) > 1 else ""
        views = max((len(t.views) for fold in trained for t in fold), default=0)
        scored = (
            f" (each on its release and the {views} other view{'s' * (views != 1)} its certificate checks, the "
            "worst counting)"
            if views
            else ""
        )
        self.note(
            f"calibration stage {stage}: {len(values)} value{'s' * (len(values) != 1)} of {knob.field} "
            f"({values_text(values)}) trained{on_folds} and scored{scored} in {time.time() - t0:.1f} s; "
            f"feasible: {sum(c.feasible for c in out)}"
        )
        return out


Figures = tuple[dict[str, float], dict[str, float], dict[str, float]]


def worst_view(scored: Sequence[Figures]) -> Figures:
    """`leakage`'s (figures, spreads, uppers) of several views of one candidate combined per bound as its
    certificate combines them (met only when every view is): the worst view's figure and spread, and the
    highest one-sided bound over every view's adversaries, measured from that figure."""
    figures, spreads, uppers = (dict(d) for d in scored[0])
    for fig, spread, upper in scored[1:]:
        for m, value in fig.items():
            reach = max(figures[m] + uppers.get(m, 0.0), value + upper.get(m, 0.0)) if m in upper else None
            if value > figures[m]:  # a nan figure (an eps bound on a knob that is not eps) never replaces one
                figures[m] = value
                if m in spread:
                    spreads[m] = spread[m]
            if reach is not None:
                uppers[m] = reach - figures[m]
    return figures, spreads, uppers


@dataclass(frozen=True)
class FoldScore:
    """A candidate's scores on one fold (`leakage`'s figures, spreads and uppers, and the utility AUC)."""

    utility: float
    leakage: dict[str, float]
    spread: dict[str, float]
    upper: dict[str, float]


def pooled(value: float, position: float, stage: int, scores: Sequence[FoldScore]) -> Candidate:
    """One candidate from its scores on every fold: figures, utility and uppers averaged; the spread of one fold
    (root mean square, what scales to the test split); and the error of the average as an estimate of fold 0's
    model (released): the folds' spread over sqrt(folds) plus the variance between the fold models, the part of
    the folds' differences their own spreads do not explain."""
    k = len(scores)
    leak = {m: float(np.mean([s.leakage[m] for s in scores])) for m in scores[0].leakage}
    spread, upper, error = {}, {}, {}
    for m in scores[0].spread:
        sd = math.sqrt(float(np.mean([s.spread[m] ** 2 for s in scores])))
        between = max(0.0, float(np.var([s.leakage[m] for s in scores], ddof=1)) - sd**2) if k > 1 else 0.0
        spread[m], upper[m] = sd, float(np.mean([s.upper[m] for s in scores]))
        error[m] = math.sqrt(sd**2 / k + between)
    utility = float(np.mean([s.utility for s in scores]))
    return Candidate(value, position, stage, utility, leak, spread=spread, upper=upper, error=error)


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
    subject: Subject,
    ds: Dataset,
    target: Target,
    config: CalibrationConfig,
    note: Note | None = None,
    on_epoch: EpochHook | None = None,
) -> Calibration:
    """Search `subject`'s privacy knob for the most useful value that meets `target` on a validation split of the
    training rows (module docstring); the test split is not read."""
    say = note or (lambda _: None)
    knob = knob_of(subject.method)
    if knob is None:
        raise ConfigError("method", subject.method, "a method with a privacy knob to calibrate (see `veil methods`)")
    federated = subject.federate is not None
    t0 = time.time()
    seed = subject.seed if config.seed is None else config.seed
    table_rows = len(ds.train)
    ds = sample_rows(ds, config.max_rows, seed + 104729)
    if len(ds.train) < table_rows:
        say(
            f"calibrating on a random {len(ds.train)} of the {table_rows} training rows (calibration.max_rows); the "
            + (
                "chosen value then trains again on all of them"
                if federated
                else "chosen candidate, trained on that sample, releases every row"
            )
        )
    config = config.resolved(federated, smallest_class(ds, config.validation))
    splits = calibration_splits(ds, config, seed + 7919)
    per_fold = len(splits[0][2])
    folds = len(splits)

    def rooms(c: Candidate, metric: str) -> float:
        if config.margin is not None:
            return float(config.margin)
        return margin_of(
            c.spread.get(metric, 0.0),
            c.upper.get(metric, 0.0),
            per_fold,
            len(ds.test),
            config.assurance,
            c.error.get(metric),
        )

    scored = (
        f"on {per_fold} validation rows held out of the {len(ds.train)} training rows"
        if folds == 1
        else f"cross-fitted over {folds} folds of the {len(ds.train)} training rows (each candidate trains on "
        f"{len(splits[0][1])} and is scored on the other {per_fold}, once per fold)"
    )
    say(
        f"calibrating {knob.field} for {target.text()} {scored} (the test split is read once, for the "
        f"certificate); a candidate is feasible when its certificate is met with probability {config.assurance:g} "
        "or more"
    )
    absolute = [b for b in target.bounds if b.metric in ("privacy_gap", "adversary_auc_max")]
    if absolute and config.margin is None:
        room0 = null_margin(ds, per_fold, subject.audit, config.assurance, seed, folds)
        for b in absolute:
            budget = b.limit - (0.5 if b.metric == "adversary_auc_max" else 0.0)
            if room0 >= 0.5 * budget:
                say(
                    f"calibration has little room: on {len(ds.test)} test rows even a release that reveals nothing "
                    f"about s needs {room0:.3f} of the {b.text()} budget to be met with probability "
                    f"{config.assurance:g}, so only settings that leak almost nothing can be feasible; an excess_gap "
                    "target (what the release reveals beyond the utility labels) or more test rows leave more"
                )
    trainer = Trainer(subject, [cal for cal, _, _ in splits], target, rooms, say, on_epoch)
    lo, hi = search_range(knob, target)
    grid, refine, rounds = int(config.grid or 0), int(config.refine or 0), int(config.rounds or 0)
    lattice = [float(p) for p in np.linspace(lo, hi, grid)]
    # a lattice of 4 or more scores its interior first: the ends are trained only if grid_ends asks for them
    trainer.stage(lattice[1:-1] if grid >= 4 else lattice, 1)
    ends = grid_ends(trainer.trail, lattice)
    if ends:
        trainer.stage(ends, 1)
    for stage in range(2, rounds + 2):
        upper = bracket(trainer.trail)
        if upper is None or not refine or upper[1] - upper[0] < MIN_BRACKET:
            break
        gain = expected_gain(trainer.trail, upper, target)
        if gain < config.min_gain:
            say(
                f"calibration stops refining: between {knob.field} {knob.value_at(upper[0]):.4g} and "
                f"{knob.value_at(upper[1]):.4g} the target is expected to admit {gain:.3f} more validation "
                f"utility AUC at most (under calibration.min_gain {config.min_gain:g})"
            )
            break
        trainer.stage(refine_points(trainer.trail, upper, target, refine), stage)
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
        max(released.room.values(), default=0.0),
        len(splits[0][1]),
        sum(len(val) for _, _, val in splits),
        time.time() - t0,
        config,
        None if federated else method,
        history,
        len(ds.train),
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
    for line in cal.advice():
        say(line)
    return cal


def grid_ends(trail: Sequence[Candidate], lattice: Sequence[float]) -> list[float]:
    """The ends of the first stage's lattice still in question once its interior is scored: the private end when no
    interior value is feasible (the last resort), the useful end when the most useful interior value is (it may be
    too). Elsewhere the bracket to refine lies inside, and two candidates are saved. An end already trained (a
    lattice too short to have an interior) is not asked for again."""
    ordered = sorted(trail, key=lambda c: c.position)
    ends = []
    if not any(c.feasible for c in ordered):
        ends.append(lattice[0])
    if ordered and ordered[-1].feasible:
        ends.append(lattice[-1])
    trained = {c.position for c in ordered}
    return [e for e in ends if e not in trained]


def values_text(values: Sequence[float]) -> str:
    """Knob values for a progress line: each of up to two, else their range."""
    if len(values) < 3:
        return ", ".join(f"{v:.4g}" for v in values)
    return f"{min(values):.4g} .. {max(values):.4g}"


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


def crossing_share(trail: Sequence[Candidate], bracket_: tuple[float, float], target: Target) -> float | None:
    """Where, as a share of `bracket_` from its feasible edge, the limit each end needs (`Candidate.needs`),
    interpolated linearly in position, first crosses a bound. None where that says nothing: a bound that is not
    interval-checked (eps, MI), an end without a finite figure, or candidates inside the bracket (the limit an
    excess bound needs does not always grow with the knob, so a feasible pocket may lie anywhere between them)."""
    lo, hi = bracket_
    if any(not b.interval_checked for b in target.bounds):
        return None
    if len([c for c in trail if lo < c.position <= hi]) > 1:
        return None
    edge = next(c for c in trail if c.position == lo)
    far = next(c for c in trail if c.position == hi)
    share = 1.0
    for b in target.bounds:
        below, above = edge.needs(b.metric), far.needs(b.metric)
        if not (math.isfinite(below) and math.isfinite(above)):
            return None
        if above > b.limit:
            share = min(share, max(0.0, (b.limit - below) / max(above - below, 1e-12)))
    return share


def expected_gain(trail: Sequence[Candidate], bracket_: tuple[float, float], target: Target) -> float:
    """How much more validation utility refining `bracket_` is expected to find than its feasible edge keeps: the
    utility interpolated where the bound is crossed (`crossing_share`) minus the edge's. With candidates inside the
    bracket, the most any of them (or its far end) keeps beyond the edge, as a feasible pocket may lie anywhere;
    infinite where the crossing cannot be placed (a bound that is not interval-checked, a figure missing)."""
    lo, hi = bracket_
    if any(not b.interval_checked for b in target.bounds):
        return math.inf
    edge = next(c for c in trail if c.position == lo)
    inside = [c for c in trail if lo < c.position <= hi]
    if len(inside) > 1:
        return max(c.utility for c in inside) - edge.utility
    share = crossing_share(trail, bracket_, target)
    if share is None:
        return math.inf
    far = next(c for c in trail if c.position == hi)
    return share * (far.utility - edge.utility)


def refine_points(trail: Sequence[Candidate], bracket_: tuple[float, float], target: Target, n: int) -> list[float]:
    """The `n` positions of a refinement stage: spread evenly over the part of `bracket_` from its feasible edge to
    twice the expected crossing (`crossing_share`; at least a quarter of the bracket), so the stage straddles the
    boundary instead of spending most of its values where the bound is expected to fail; the whole bracket where
    the crossing cannot be placed. A wrong guess still shrinks the bracket a further stage (`rounds`) refines."""
    lo, hi = bracket_
    share = crossing_share(trail, bracket_, target)
    width = 1.0 if share is None else min(1.0, max(2 * share, REFINE_MIN_SHARE))
    return [float(p) for p in np.linspace(lo, lo + width * (hi - lo), n + 2)[1:-1]]


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
