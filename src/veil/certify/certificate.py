"""The certificate of a release: what the suite's adversaries reach on held-out rows, with a one-sided bound.

After the audit, every sensitive label is attacked by the suite of adversaries (`AuditConfig.suite`: logistic
regression, MLPs narrower and wider than the audit's probe, gradient boosting), each trained on the released train
rows less a selection fold (`SELECTION_SHARE` of them) and scored on the test rows, read once here: its gap
AUC - 0.5 with one-sided 95% bootstrap bounds over the test rows (`veil.certify.intervals`). A label's upper end is
the largest of its adversaries' upper bounds, which covers the truly strongest adversary's gap whenever that one's
own bound does (95% or more, with no correction for the number of adversaries); its point estimate is the gap of
the adversary strongest on the selection fold, chosen on rows the test never reads, so it carries no bias from
taking a maximum (`judge`). The gap is one-sided because the adversary is trained to predict s (one below chance
failed). The worst label decides; a gap or AUC bound is met only when its upper end is within it. The coverage of
these bounds, measured where the truth is known, against the earlier bootstrap of the maximum of five folded gaps,
is in docs/certificates.md. eps-LDP releases add the empirical epsilon test of their mechanism
(`veil.audit.dp_test`), which must not find more epsilon than claimed.

A certificate is empirical and says so: it bounds what the suite's adversaries reach on held-out rows, not what
every conceivable adversary could; only the eps of an LDP mechanism is a formal bound, and the test checks it."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from veil.audit.probes import AuditReport, label_tasks, prepare
from veil.audit.settings import AuditConfig
from veil.certify.baseline import baseline_probas, excess_draws
from veil.certify.intervals import (
    Interval,
    Resamples,
    auc_draws,
    class_auc_draws,
    gap_draws,
    interval,
    one_sided,
    signed_gap_draws,
)
from veil.certify.knob_search import ASSURANCE
from veil.certify.target import INTERVAL_CHECKED, MI_PREFIX, Target
from veil.datasets.dataset import Dataset

CONFIDENCE = 0.95
#: confidence of the empirical epsilon test: a correctly scaled mechanism fails it less than once in 1,000 runs
EPS_TEST_CONFIDENCE = 0.999
SCOPE = (
    "empirical: the adversaries of the suite, trained on the released train rows and scored on held-out test rows "
    "(one-sided 95% bootstrap bounds over those rows); not a bound on every conceivable adversary"
)


@dataclass(frozen=True)
class Adversary:
    """One adversary (probe family) on one sensitive label: its gap AUC - 0.5 on the selection fold of the train
    rows, and its test AUC, gap and excess over the utility labels' baseline with one-sided 95% bounds."""

    label: str
    probe: str
    auc: Interval
    gap: Interval
    selection: float
    """its gap on the selection fold: the strongest adversary of each label is chosen by it, never by test rows"""
    chosen: bool = False
    """the strongest of its label on the selection fold: the certificate's point estimate is its test gap"""
    excess: Interval | None = None
    """its gap less the utility labels' (floored at 0), paired on the same resamples of the test rows"""

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "probe": self.probe,
            "auc": self.auc.to_dict(),
            "privacy_gap": self.gap.to_dict(),
            "excess_gap": self.excess.to_dict() if self.excess is not None else None,
            "selection_gap": self.selection,
            "chosen": self.chosen,
        }


def judge(selection: Sequence[float], gaps: Sequence[Interval]) -> tuple[int, Interval]:
    """One label's gap over its adversaries, from each one's gap on the selection fold (`selection`) and its test gap
    with one-sided bounds (`gaps`). The upper end is the largest of the adversaries' upper bounds: it covers the truly
    strongest adversary's gap whenever that one's own bound does, so at the bounds' confidence or more, with no
    correction for the number of adversaries. The point and the lower end are those of the adversary strongest on
    the selection fold (returned first; NaN counts as no gap, the first among equals): chosen on rows the test never
    reads, its point carries no bias from taking a maximum."""
    fold = np.where(np.isfinite(np.asarray(selection, dtype=float)), selection, -np.inf)
    chosen = int(np.argmax(fold))
    return chosen, Interval(gaps[chosen].point, gaps[chosen].low, max(g.high for g in gaps))


def judged(adversaries: Sequence[Adversary]) -> tuple[list[Adversary], dict[str, Interval], dict[str, Interval]]:
    """`adversaries` with the strongest of each label on the selection fold marked `chosen`, and each label's gap
    and excess (`judge`, the same adversary chosen for both)."""
    out, gaps, excess = list(adversaries), {}, {}
    for label in dict.fromkeys(a.label for a in adversaries):
        idx = [i for i, a in enumerate(adversaries) if a.label == label]
        selection = [adversaries[i].selection for i in idx]
        chosen, gaps[label] = judge(selection, [adversaries[i].gap for i in idx])
        ex = [adversaries[i].excess for i in idx]
        excess[label] = judge(selection, [e if e is not None else adversaries[i].gap for i, e in zip(idx, ex)])[1]
        out[idx[chosen]] = replace(adversaries[idx[chosen]], chosen=True)
    return out, gaps, excess


@dataclass(frozen=True)
class Check:
    """One bound of the target, checked."""

    metric: str
    limit: float
    value: float
    """the point estimate (the worst case over the suite for gap and AUC bounds)"""
    checked: float
    """what was compared with the limit: the interval's upper end, the estimate, or the mechanism's epsilon"""
    how: str
    met: bool

    def text(self) -> str:
        verdict = "met" if self.met else "NOT met"
        return f"{self.metric} <= {self.limit:g}: {verdict} ({self.how} {self.checked:.4g})"


@dataclass
class Certificate:
    """Target, achieved values with intervals, the strongest adversary, the knob and how it was set, and `met`."""

    target: Target
    checks: list[Check]
    adversaries: list[Adversary]
    worst_gap: Interval
    worst_auc: Interval
    worst_excess: Interval
    """the worst label's excess over what the utility labels alone reveal (`excess_draws`)"""
    strongest: str
    """'<label> / <probe>' of the adversary whose upper bound is the certificate's (the worst label's largest)"""
    utility: Interval
    """mean utility AUC of the audit's probe over the utility labels"""
    utility_labels: dict[str, Interval]
    test_rows: int
    bootstrap: int
    suite: tuple[str, ...]
    knob: dict[str, Any] | None = None
    """{'field', 'value', 'set_by': 'calibration' | 'run' | 'default' | 'preset paper'}"""
    calibration: dict[str, Any] | None = None
    ldp: list[dict[str, Any]] = field(default_factory=list)
    reference: dict[str, float] = field(default_factory=dict)
    """per sensitive label, the gap of predicting it from the utility labels alone (what keeping u costs)"""
    notes: list[str] = field(default_factory=list)
    wire: dict[str, Any] | None = None
    """federated runs: the aggregator's view, certified round by round (`veil.certify.wire.WireSection.to_dict`);
    for D-GPP its `wire/*` checks are among `checks`"""

    @property
    def met(self) -> bool:
        return bool(self.checks) and all(c.met for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "met": self.met,
            "target": self.target.to_dict(),
            "target_source": "default" if self.target.default else "run",
            "checks": [asdict(c) for c in self.checks],
            "certifies_instead": certified_instead(self.checks),
            "privacy_gap": self.worst_gap.to_dict(),
            "excess_gap": self.worst_excess.to_dict(),
            "adversary_auc_max": self.worst_auc.to_dict(),
            "strongest_adversary": self.strongest,
            "utility_auc": self.utility.to_dict(),
            "utility_by_label": {k: v.to_dict() for k, v in self.utility_labels.items()},
            "adversaries": [a.to_dict() for a in self.adversaries],
            "knob": self.knob,
            "calibration": self.calibration,
            "ldp_epsilon_tests": self.ldp,
            "utility_labels_reveal": self.reference,
            "test_rows": self.test_rows,
            "bootstrap_resamples": self.bootstrap,
            "confidence": CONFIDENCE,
            "suite": list(self.suite),
            "scope": SCOPE,
            "notes": list(self.notes),
            "wire": self.wire,
        }

    def metrics(self) -> dict[str, float]:
        """Figures logged as MLflow metrics (certificate/*)."""
        out = {
            "certificate/met": float(self.met),
            "certificate/privacy_gap": self.worst_gap.point,
            "certificate/privacy_gap_high": self.worst_gap.high,
            "certificate/excess_gap": self.worst_excess.point,
            "certificate/excess_gap_high": self.worst_excess.high,
            "certificate/adversary_auc_max": self.worst_auc.point,
            "certificate/adversary_auc_max_high": self.worst_auc.high,
            "certificate/utility_auc": self.utility.point,
            "certificate/utility_auc_low": self.utility.low,
        }
        if self.ldp:
            out["certificate/eps_lower_bound"] = max(float(t["lower_bound"]) for t in self.ldp)
        return out

    def headline(self) -> str:
        """One line: met or not, against what, with the worst gap and the utility."""
        verdict = "MET" if self.met else "NOT MET"
        return (
            f"certificate {verdict}: target {self.target.text()}; worst privacy gap {self.worst_gap.text()} "
            f"({self.strongest}), {self.worst_excess.text()} beyond what the utility labels reveal; utility AUC "
            f"{self.utility.text()}; one-sided 95% bounds over {self.test_rows} test rows"
        )

    def to_markdown(self) -> str:
        """The certificate as Markdown (the run's MLflow description and certificate.md)."""
        lines = [
            f"### Release certificate: {'met' if self.met else '**NOT met**'}",
            "",
            f"Target: {self.target.text()}.",
        ]
        if self.knob:
            lines.append(f"Knob: `{self.knob['field']} = {self.knob['value']:.4g}` (set by {self.knob['set_by']}).")
        lines += ["", "| bound | value | checked | met |", "|---|---|---|---|"]
        for c in self.checks:
            lines.append(
                f"| {c.metric} <= {c.limit:g} | {c.value:.4f} | {c.how} {c.checked:.4f} | {'yes' if c.met else 'NO'} |"
            )
        instead = certified_instead(self.checks)
        if instead:
            lines += ["", f"What this release does certify: {' and '.join(instead)} (95% upper end, rounded up)."]
        lines += [
            "",
            f"Worst privacy gap {self.worst_gap.text()} ({self.strongest}); beyond what the utility labels alone "
            f"reveal (excess gap) {self.worst_excess.text()}; utility AUC {self.utility.text()}; "
            f"each end of [low, high] a one-sided 95% bootstrap bound over {self.test_rows} test rows "
            f"({self.bootstrap} resamples). A label's upper end is its adversaries' largest; its point is the gap of "
            "the adversary strongest on a selection fold of the train rows (never the test rows).",
            "",
            "| sensitive label | adversary | selection-fold gap | test AUC [95% bounds] | privacy gap [95% bounds] | "
            "excess gap [95% bounds] |",
            "|---|---|---|---|---|---|",
        ]
        for a in self.adversaries:
            name = f"**{a.probe}** (chosen)" if a.chosen else a.probe
            ex = a.excess.text() if a.excess is not None else "-"
            lines.append(f"| {a.label} | {name} | {a.selection:.3f} | {a.auc.text()} | {a.gap.text()} | {ex} |")
        for t in self.ldp:
            lines.append(
                f"\nEmpirical epsilon ({t['pair']} pair, L1 {t['l1']:.3g}): >= {t['lower_bound']:.3f} at "
                f"{t['confidence']:.1%} (claimed {t['claimed']:g}): {'consistent' if t['consistent'] else 'VIOLATED'}."
            )
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        lines += front_table(self.calibration)
        if self.wire is not None:
            w = self.wire
            state = {None: "not checked", True: "met", False: "**NOT met**"}[w["met"]]
            lines += ["", f"#### The aggregator's view (wire): {state}", "", f"Receives: {w['receives']}.", ""]
            lines += [f"Can learn: {w['can_learn']}.", "", "| round | nodes | test rows | privacy gap [95%] | met |"]
            lines.append("|---|---|---|---|---|")
            views = [(str(r["round"]), r) for r in w["rounds"]]
            if w.get("linked"):
                rounds = "+".join(str(x) for x in w["linked"]["rounds"])
                views.append((f"{rounds} + final, joined by row id", w["linked"]))
            for label, r in views:
                g, ok = r["privacy_gap"], {None: "-", True: "yes", False: "NO"}[r["met"]]
                gap = f"{g['value']:.3f} [{g['low']:.3f}, {g['high']:.3f}]"
                lines.append(f"| {label} | {len(r['nodes'])} | {r['test_rows']} | {gap} | {ok} |")
            if w["worst_round"] is not None:
                lines += ["", f"Worst sampled round {w['worst_round']} of {w['rounds_total']}."]
            if not w["decides_certificate"]:
                lines.append("Reported only: it does not decide this certificate's `met`.")
            lines += [f"- {n}" for n in w["notes"]]
        lines += ["", f"Scope: {SCOPE}."]
        return "\n".join(lines)


def front_table(calibration: Mapping[str, Any] | None) -> list[str]:
    """Markdown lines of calibration's front: which target each setting it tried would meet (with the calibration's
    assurance) and the validation utility it keeps; empty without a calibration or a front."""
    front = (calibration or {}).get("front") or []
    if not front:
        return []
    metric = next((m for m in (calibration or {}).get("target", {}) if m in INTERVAL_CHECKED), "bound")
    knob = (calibration or {}).get("knob", "knob")
    lines = [
        "",
        f"#### What each target would keep (calibration's front, validation rows; met with probability "
        f"{(calibration or {}).get('assurance', ASSURANCE):g})",
        "",
        f"| --target {metric}= | validation utility AUC | {knob} |",
        "|---|---|---|",
    ]
    for row in front:
        limit = math.ceil(round(row["needs"] * 100, 6)) / 100
        lines.append(f"| {limit:g} | {row['utility']:.3f} | {row['value']:.4g} |")
    return lines


#: share of the released train rows held out of the adversaries' training to choose the strongest one on
SELECTION_SHARE = 0.25


@dataclass(frozen=True)
class Fitted:
    """One suite adversary on one sensitive label, trained on the released train rows less the selection fold:
    its class probabilities on the selection fold and on the test rows."""

    label: str
    probe: str
    n_classes: int
    selection: np.ndarray
    test: np.ndarray


def selection_fold(n: int, seed: int) -> np.ndarray:
    """Boolean mask of the train rows held out to choose the strongest adversary (`SELECTION_SHARE` of them)."""
    return np.random.default_rng(seed).permutation(n) < max(1, round(n * SELECTION_SHARE))


def fit_suite(z_tr: np.ndarray, z_te: np.ndarray, ds: Dataset, cfg: AuditConfig) -> list[Fitted]:
    """Every suite adversary on every sensitive label, fitted on the train rows outside the selection fold."""
    from veil.audit.capacity import CapacityConfig, fit_predict

    ccfg = CapacityConfig.from_audit(cfg)
    fold = selection_fold(len(z_tr), cfg.seed + 11)
    out = []
    for t in label_tasks(ds.train, ds.test, ds.num_classes):
        if t.role != "adversary":
            continue
        for probe in cfg.suite:
            proba = fit_predict(
                probe,
                z_tr[~fold],
                t.y_train[~fold],
                np.concatenate([z_tr[fold], z_te]),
                t.n_classes,
                ccfg,
                cfg.seed + 500 + t.offset,
            )
            out.append(Fitted(t.name, probe, t.n_classes, proba[: fold.sum()], proba[fold.sum() :]))
    return out


def certify(
    z_train: np.ndarray,
    z_test: np.ndarray,
    ds: Dataset,
    report: AuditReport,
    target: Target,
    cfg: AuditConfig,
    *,
    ldp: Any = None,
    knob: Mapping[str, Any] | None = None,
    calibration: Mapping[str, Any] | None = None,
) -> Certificate:
    """The certificate of the release (z_train, z_test) of `ds` against `target`. `report` is the audit's (its
    probes' test probabilities are reused); `ldp` a `veil.methods.method.LDPRelease` for eps-LDP releases."""
    z_tr, z_te = prepare(z_train, z_test, cfg.standardize)
    n = len(ds.test)
    counts = Resamples(n, cfg.bootstrap, cfg.seed + 7)
    fold = selection_fold(len(z_tr), cfg.seed + 11)
    baseline, reveals = {}, {}  # the utility labels' predictor of each s: paired draws, and its (folded) gap
    for name, proba in baseline_probas(ds.train, ds.test, ds.num_classes).items():
        y, k = np.asarray(ds.test.sensitive[name]), int(ds.num_classes[name])
        aucs = class_auc_draws(y, proba, k, None)
        baseline[name] = (signed_gap_draws(aucs)[0], signed_gap_draws(class_auc_draws(y, proba, k, counts)))
        reveals[name] = float(gap_draws(aucs)[0])
    adversaries: list[Adversary] = []
    for f in fit_suite(z_tr, z_te, ds, cfg):
        y = np.asarray(ds.test.sensitive[f.label])
        y_fold = np.asarray(ds.train.sensitive[f.label])[fold]
        chosen_on = signed_gap_draws(class_auc_draws(y_fold, f.selection, f.n_classes, None))
        draws = signed_gap_draws(class_auc_draws(y, f.test, f.n_classes, counts))
        point = float(signed_gap_draws(class_auc_draws(y, f.test, f.n_classes, None))[0])
        gap = one_sided(point, draws)
        b_point, b_draws = baseline[f.label]
        excess = one_sided(float(excess_draws(np.array([point]), np.array([b_point]))[0]), excess_draws(draws, b_draws))
        auc = Interval(0.5 + gap.point, 0.5 + gap.low, 0.5 + gap.high)
        adversaries.append(Adversary(f.label, f.probe, auc, gap, float(chosen_on[0]), excess=excess))
    adversaries, gaps, excesses = judged(adversaries)
    worst_label = max(gaps, key=lambda k: (gaps[k].high, gaps[k].point))
    worst_gap = gaps[worst_label]
    worst_excess = excesses[max(excesses, key=lambda k: (excesses[k].high, excesses[k].point))]
    worst_auc = Interval(0.5 + worst_gap.point, 0.5 + worst_gap.low, 0.5 + worst_gap.high)
    strongest = max((a for a in adversaries if a.label == worst_label), key=lambda a: (a.gap.high, a.gap.point))
    util_labels: dict[str, Interval] = {}
    util_draws: list[np.ndarray] = []
    for name, y in ds.test.utility.items():
        k = int(ds.num_classes[name])
        u_draws = auc_draws(class_auc_draws(np.asarray(y), report.probas[name], k, counts))
        util_labels[name] = interval(
            float(auc_draws(class_auc_draws(np.asarray(y), report.probas[name], k, None))[0]), u_draws
        )
        util_draws.append(u_draws)
    utility = interval(float(np.mean([u.point for u in util_labels.values()])), np.mean(np.stack(util_draws), axis=0))
    cert = Certificate(
        target,
        [],
        adversaries,
        worst_gap,
        worst_auc,
        worst_excess,
        f"{strongest.label} / {strongest.probe}",
        utility,
        util_labels,
        n,
        cfg.bootstrap,
        tuple(cfg.suite),
        dict(knob) if knob else None,
        dict(calibration) if calibration else None,
        reference=reveals,
    )
    if ldp is not None:
        from veil.audit.dp_test import epsilon_tests

        tests = epsilon_tests(
            ldp.mechanism, ldp.bounded, ldp.bound, ldp.width, ds.test.x, seed=cfg.seed, confidence=EPS_TEST_CONFIDENCE
        )
        cert.ldp = [t.to_dict() for t in tests]
    cert.checks = [check(b.metric, b.limit, cert, z_train, z_test, ds, cfg) for b in target.bounds]
    if cert.ldp and not all(t["consistent"] for t in cert.ldp):
        worst = max(cert.ldp, key=lambda t: t["lower_bound"])
        cert.checks.append(
            Check(
                "ldp_epsilon_test",
                worst["claimed"],
                worst["lower_bound"],
                worst["lower_bound"],
                "empirical eps >=",
                False,
            )
        )
    cert.notes = notes(cert)
    return cert


def certified_instead(checks: Sequence[Check]) -> list[str]:
    """For each unmet leakage bound, the bound this release does meet: what was checked rounded UP to two
    significant digits ('privacy_gap <= 0.079'). Bounds no looser limit would meet (the LDP distinguishing test, a
    mechanism whose eps is infinite) give none."""
    out = []
    for c in checks:
        if c.met or c.metric == "ldp_epsilon_test" or not math.isfinite(c.checked) or c.checked <= 0:
            continue
        step = 10.0 ** (math.floor(math.log10(c.checked)) - 1)
        out.append(f"{c.metric} <= {math.ceil(round(c.checked / step, 9)) * step:.2g}")
    return out


def check(
    metric: str, limit: float, cert: Certificate, z_train: np.ndarray, z_test: np.ndarray, ds: Dataset, cfg: AuditConfig
) -> Check:
    """One bound of the target against the certificate's figures."""
    if metric in ("privacy_gap", "excess_gap"):
        iv = cert.worst_gap if metric == "privacy_gap" else cert.worst_excess
        return Check(metric, limit, iv.point, iv.high, "95% upper end", bool(iv.high <= limit))
    if metric == "adversary_auc_max":
        iv = cert.worst_auc
        return Check(metric, limit, iv.point, iv.high, "95% upper end", bool(iv.high <= limit))
    if metric == "eps":
        eps = min((float(t["claimed"]) for t in cert.ldp), default=math.inf) if cert.ldp else math.inf
        return Check(metric, limit, eps, eps, "the mechanism's epsilon", bool(eps <= limit))
    if metric.startswith(MI_PREFIX):
        from veil.audit.mi import estimate_mi

        _, est, label = metric.split("/")
        y_tr, y_te = np.asarray(ds.train.sensitive[label]), np.asarray(ds.test.sensitive[label])
        value = estimate_mi(z_train, y_tr, z_test, y_te, est, seed=cfg.seed).value
        return Check(metric, limit, value, value, "estimate (no interval)", bool(value <= limit))
    raise ValueError(f"unknown target metric {metric!r}")  # parse_target refuses it before


def notes(cert: Certificate) -> list[str]:
    """Plain-language lines a reviewer needs beside the figures."""
    out = []
    for c in cert.checks:
        if c.metric in ("privacy_gap", "excess_gap") and not c.met and c.value <= c.limit:
            what = "gap" if c.metric == "privacy_gap" else "excess gap"
            out.append(
                f"the worst {what}'s point estimate ({c.value:.3f}) is within the target but its 95% upper bound reaches "
                f"{c.checked:.3f}: {cert.test_rows} test rows cannot show it below {c.limit:g}"
            )
    if cert.utility.low <= 0.5:
        out.append(
            f"the release keeps no utility these test rows can tell from chance (utility AUC {cert.utility.text()}): "
            "at this target the method hides the utility labels too"
        )
    revealing = {k: v for k, v in cert.reference.items() if v > 0.05}
    for name, gap in revealing.items():
        out.append(
            f"the utility labels alone reveal '{name}' with a privacy gap of {gap:.3f} on the test rows: a release "
            "that keeps them fully cannot hide it further, so a privacy_gap target below it costs utility (an "
            "excess_gap target bounds only what the release reveals beyond them)"
        )
    return out
