"""The fresh-probe audit (GPP's protocol, seed 001 Sec. VI): after training, NEW probes are trained on the
released train representation and scored on the released test representation, for every utility and
sensitive label. The training-time adversary never grades itself."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Mapping, NamedTuple, Sequence

import numpy as np
from scipy.stats import rankdata

from veil.audit.settings import AuditConfig
from veil.audit.train import Classifier, Standardizer, train_classifier, train_predict_stacked
from veil.config import as_params
from veil.datasets.dataset import Split
from veil.datasets.loading import subsample
from veil.errors import DataError

__all__ = [
    "AuditReport",
    "LabelScore",
    "LabelTask",
    "ROLE_OFFSETS",
    "ProbeMetrics",
    "accuracy_auc",
    "audit",
    "audit_many",
    "auc_gap",
    "auc_score",
    "class_aucs",
    "folded_gap",
    "label_tasks",
    "log_loss",
    "prepare",
    "probe_metrics",
    "probe_score",
    "proba_score",
    "roc_auc",
    "score_label",
    "standardize",
]


@dataclass(frozen=True)
class LabelScore:
    """A fresh probe's score on one label of the released test representation."""

    label: str
    role: str  # "utility" | "adversary"
    accuracy: float
    auc: float
    privacy_gap: float
    """`auc_gap`: |AUC - 0.5|, folded per class for multi-class labels."""
    majority: float
    n_classes: int
    logloss: float
    """`log_loss`: the probe's test cross-entropy (nats per row)."""


@dataclass
class AuditReport:
    """Every label's score plus the primary metrics derived from them."""

    scores: list[LabelScore]
    config: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """Lines shown above the table (e.g. a release reproducible from the run's params)."""
    probas: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    """Each label's probe's class probabilities on the test rows (not recorded: the certificate's bootstrap
    reads them)."""

    def by_role(self, role: str) -> list[LabelScore]:
        return [s for s in self.scores if s.role == role]

    def metrics(self) -> dict[str, float]:
        """Primary metrics plus '<metric>/<label>' per label.

        utility_* is the mean over utility labels; adversary_* and privacy_gap are the WORST case
        (max) over sensitive labels, so one well-hidden label cannot mask a leaking one. privacy_gap is the
        leakage figure to minimise: an inverted probe (AUC 0.2) scores a low adversary_auc yet leaks as
        much as one at 0.8, and privacy_gap counts both as 0.3 (`auc_gap`). 'logloss/<label>' is each probe's
        test cross-entropy; adversary_logloss is its worst case, the MIN over sensitive labels (the most
        confident adversary), utility_logloss the mean over utility labels."""
        out: dict[str, float] = {}
        for s in self.scores:
            out[f"{s.role}_acc/{s.label}"] = s.accuracy
            out[f"{s.role}_auc/{s.label}"] = s.auc
            out[f"majority/{s.label}"] = s.majority
            out[f"logloss/{s.label}"] = s.logloss
            if s.role == "adversary":
                out[f"privacy_gap/{s.label}"] = s.privacy_gap
        u, a = self.by_role("utility"), self.by_role("adversary")
        if u:
            out["utility_acc"] = float(np.mean([s.accuracy for s in u]))
            out["utility_auc"] = float(np.mean([s.auc for s in u]))
            out["utility_logloss"] = float(np.mean([s.logloss for s in u]))
        if a:
            out["adversary_acc"] = float(max(s.accuracy for s in a))
            out["adversary_auc"] = float(max(s.auc for s in a))
            out["privacy_gap"] = float(max(s.privacy_gap for s in a))
            out["adversary_logloss"] = float(min(s.logloss for s in a))
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {"scores": [asdict(s) for s in self.scores], "metrics": self.metrics(), "config": self.config}
        return {**out, "warnings": list(self.warnings)} if self.warnings else out

    def to_markdown(self) -> str:
        lines = [f"> **WARNING**: {w}" for w in self.warnings] + ([""] if self.warnings else [])
        lines += [
            "| label | role | classes | accuracy | majority | ROC-AUC | privacy gap | log-loss |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for s in self.scores:
            gap = f"{s.privacy_gap:.3f}" if s.role == "adversary" else ""
            lines.append(
                f"| {s.label} | {s.role} | {s.n_classes} | {s.accuracy:.3f} | {s.majority:.3f} | {s.auc:.3f} | {gap} "
                f"| {s.logloss:.4f} |"
            )
        return "\n".join(lines)


def class_aucs(y: np.ndarray, proba: np.ndarray, n_classes: int) -> list[float]:
    """ROC-AUC per class: [AUC of P(class 1)] for binary; the one-vs-rest AUC of every class present in y for
    multi-class. Empty when y holds fewer than two classes (no AUC is defined)."""
    present = np.unique(y)
    if len(present) < 2:
        return []
    if n_classes == 2:
        return [roc_auc(y == 1, proba[:, 1])]
    return [roc_auc(y == c, proba[:, c]) for c in range(n_classes) if c in present]


def roc_auc(positive: np.ndarray, score: np.ndarray) -> float:
    """ROC-AUC of `score` for the boolean labels `positive` (both present), as the Mann-Whitney statistic: the
    chance a positive outscores a negative, ties counting half. Equals sklearn's roc_auc_score, whose input
    validation costs ~2 ms a call (4 s of the 2,000 probes of a K=1000 per-node audit)."""
    ranks = rankdata(score)
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _mean_or_nan(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def auc_score(y: np.ndarray, proba: np.ndarray, n_classes: int) -> float:
    """ROC-AUC: binary on P(class 1); one-vs-rest macro for multi-class (classes absent from y are skipped)."""
    return _mean_or_nan(class_aucs(y, proba, n_classes))


def folded_gap(aucs: list[float]) -> float:
    """Mean over classes of |AUC_c - 0.5| (NaN for no class)."""
    return _mean_or_nan([abs(a - 0.5) for a in aucs])


def auc_gap(y: np.ndarray, proba: np.ndarray, n_classes: int) -> float:
    """The privacy gap: how far the probe is from chance, whichever side. Binary: |AUC - 0.5|. Multi-class:
    |AUC_c - 0.5| of each class's one-vs-rest AUC, averaged over the classes present in y, so a class the
    probe ranks inverted (AUC_c < 0.5, as informative as 1 - AUC_c) cannot cancel one above chance the way it
    does in |macro AUC - 0.5|. 0 = chance for every class, 0.5 = every class perfectly separated."""
    return folded_gap(class_aucs(y, proba, n_classes))


def log_loss(y: np.ndarray, proba: np.ndarray) -> float:
    """Mean natural-log cross-entropy -log p(y) over rows, with `proba` clipped to [eps, 1 - eps] for eps the
    machine epsilon of its dtype, as sklearn.metrics.log_loss does (NaN for no rows); computed in float64."""
    p = np.asarray(proba)
    if len(p) == 0:
        return float("nan")
    eps = float(np.finfo(p.dtype if np.issubdtype(p.dtype, np.floating) else np.float64).eps)
    picked = p[np.arange(len(p)), np.asarray(y, dtype=np.int64)].astype(np.float64)
    return float(-np.log(np.clip(picked, eps, 1 - eps)).mean())


class ProbeMetrics(NamedTuple):
    """A probe's scores on one label: argmax accuracy, ROC-AUC (`auc_score`), privacy gap (`auc_gap`) and
    test log-loss (`log_loss`)."""

    accuracy: float
    auc: float
    gap: float
    logloss: float


def probe_metrics(y: np.ndarray, proba: np.ndarray, n_classes: int) -> ProbeMetrics:
    """Accuracy, ROC-AUC, privacy gap and log-loss of class probabilities `proba` (rows x n_classes) against
    labels y."""
    aucs = class_aucs(y, proba, n_classes)
    return ProbeMetrics(float((proba.argmax(1) == y).mean()), _mean_or_nan(aucs), folded_gap(aucs), log_loss(y, proba))


def probe_metrics_many(ys: Sequence[np.ndarray], probas: Sequence[np.ndarray], n_classes: int) -> list[ProbeMetrics]:
    """`[probe_metrics(ys[i], probas[i], n_classes) ...]` (equal up to floating-point order) computed over all
    members at once: a federation's per-node audit scores ten thousand probes of a few rows each, where one call
    apiece costs more than training them."""
    sizes = np.array([len(y) for y in ys], dtype=np.int64)
    members = len(sizes)
    if members == 0:
        return []
    seg = np.repeat(np.arange(members), sizes)
    y = np.concatenate([np.asarray(v, dtype=np.int64) for v in ys])
    p = np.concatenate([np.asarray(v) for v in probas]).reshape(len(y), n_classes)
    count = np.bincount(seg, minlength=members).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(seg, (p.argmax(1) == y).astype(np.float64), minlength=members) / count
        eps = float(np.finfo(p.dtype if np.issubdtype(p.dtype, np.floating) else np.float64).eps)
        picked = np.clip(p[np.arange(len(y)), y].astype(np.float64), eps, 1 - eps)
        logloss = np.bincount(seg, -np.log(picked), minlength=members) / count
    per_class = np.bincount(seg * n_classes + y, minlength=members * n_classes).reshape(members, n_classes)
    defined = (per_class > 0).sum(1) >= 2  # an AUC needs both classes of some one-vs-rest split
    classes = [1] if n_classes == 2 else list(range(n_classes))
    aucs = np.full((members, len(classes)), np.nan)
    for col, c in enumerate(classes):
        keep = defined & (per_class[:, c] > 0)
        aucs[keep, col] = _segment_aucs(seg, y == c, p[:, c], members)[keep]
    out = []
    for i in range(members):
        row = [float(a) for a in aucs[i] if not np.isnan(a)]
        out.append(ProbeMetrics(float(accuracy[i]), _mean_or_nan(row), folded_gap(row), float(logloss[i])))
    return out


def _segment_aucs(seg: np.ndarray, positive: np.ndarray, score: np.ndarray, members: int) -> np.ndarray:
    """`roc_auc(positive[seg == i], score[seg == i])` for every segment i (NaN where a class is missing): average
    ranks within each segment from one sort of (segment, score)."""
    order = np.lexsort((score, seg))
    g, v = seg[order], score[order]
    first = np.ones(len(g), dtype=bool)
    first[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])  # the first position of each run of tied scores
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], len(g)) - 1
    tie = np.cumsum(first) - 1
    seg_start = np.searchsorted(g, np.arange(members))
    rank = (starts[tie] + ends[tie]) / 2.0 + 1.0 - seg_start[g]
    pos = positive[order].astype(np.float64)
    n_pos = np.bincount(g, pos, minlength=members)
    n_neg = np.bincount(g, minlength=members) - n_pos
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (np.bincount(g, rank * pos, minlength=members) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    auc[np.bincount(g, np.isnan(v), minlength=members) > 0] = np.nan  # as rankdata: a NaN score has no rank
    return auc


def accuracy_auc(y: np.ndarray, proba: np.ndarray, n_classes: int) -> tuple[float, float]:
    """(accuracy of the argmax, ROC-AUC) of class probabilities `proba` (rows x n_classes) against labels y."""
    m = probe_metrics(y, proba, n_classes)
    return m.accuracy, m.auc


def score_label(
    label: str,
    role: str,
    z_tr: np.ndarray,
    y_tr: np.ndarray,
    z_te: np.ndarray,
    y_te: np.ndarray,
    n_classes: int,
    cfg: AuditConfig,
    seed: int,
) -> LabelScore:
    """Train a fresh probe for one label and score it on the test representation."""
    probe = train_classifier(z_tr, y_tr, n_classes, seed=seed, **cfg.probe_settings())
    return probe_score(label, role, probe, z_te, y_te, n_classes)


def probe_score(
    label: str, role: str, probe: Classifier, z_te: np.ndarray, y_te: np.ndarray, n_classes: int
) -> LabelScore:
    """A trained probe's score on one label of the test representation."""
    return proba_score(label, role, probe.predict_proba(z_te), y_te, n_classes)


def proba_score(label: str, role: str, proba: np.ndarray, y_te: np.ndarray, n_classes: int) -> LabelScore:
    """The score of class probabilities `proba` (test rows x classes) on one label."""
    return metrics_score(label, role, probe_metrics(y_te, proba, n_classes), y_te, n_classes)


def metrics_score(label: str, role: str, m: ProbeMetrics, y_te: np.ndarray, n_classes: int) -> LabelScore:
    """The score of one label from its probe's metrics `m` on test labels `y_te` (adding their majority rate)."""
    majority = float(np.bincount(y_te, minlength=n_classes).max() / len(y_te))
    return LabelScore(label, role, m.accuracy, m.auc, m.gap, majority, n_classes, m.logloss)


def standardize(z_tr: np.ndarray, z_te: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """z_tr and z_te z-scored with the statistics of z_tr."""
    scaler = Standardizer.fit(z_tr)
    return scaler(z_tr), scaler(z_te)


#: seed offset of the first label of each role; the j-th label of a role adds j
ROLE_OFFSETS: dict[str, int] = {"utility": 0, "adversary": 100}


class LabelTask(NamedTuple):
    """One label to audit: its role, name, class count, train and test labels, and its probe seed offset."""

    role: str  # "utility" | "adversary"
    name: str
    n_classes: int
    y_train: np.ndarray
    y_test: np.ndarray
    offset: int

    @property
    def position(self) -> int:
        """Position of the label among the labels of its role."""
        return self.offset - ROLE_OFFSETS[self.role]


def label_tasks(train: Split, test: Split, num_classes: Mapping[str, int]) -> Iterator[LabelTask]:
    """Every utility then every sensitive label, with seed offsets from `ROLE_OFFSETS`."""
    for role, labels_tr, labels_te in [
        ("utility", train.utility, test.utility),
        ("adversary", train.sensitive, test.sensitive),
    ]:
        for j, name in enumerate(labels_tr):
            yield LabelTask(
                role,
                name,
                int(num_classes[name]),
                np.asarray(labels_tr[name]),
                np.asarray(labels_te[name]),
                ROLE_OFFSETS[role] + j,
            )


def prepare(z_train: np.ndarray, z_test: np.ndarray, do_standardize: bool) -> tuple[np.ndarray, np.ndarray]:
    """float32 copies of the released representations, z-scored with train statistics if asked. A release with
    NaN or inf values (training diverged) is refused: no probe can score it."""
    z_tr, z_te = np.asarray(z_train, np.float32), np.asarray(z_test, np.float32)
    for name, z in (("train", z_tr), ("test", z_te)):
        bad = int((~np.isfinite(z)).any(axis=1).sum()) if z.ndim == 2 else int((~np.isfinite(z)).sum())
        if bad:
            raise DataError(
                f"the released z of the {name} rows holds NaN or inf values in {bad} of {len(z)} rows: training "
                "diverged (try a smaller lr or fewer epochs)"
            )
    return standardize(z_tr, z_te) if do_standardize else (z_tr, z_te)


def audit(
    z_train: np.ndarray,
    train: Split,
    z_test: np.ndarray,
    test: Split,
    num_classes: Mapping[str, int],
    config: AuditConfig | None = None,
) -> AuditReport:
    """Score fresh probes for every utility and sensitive label on the released representation: one probe per label
    (seed cfg.seed + the label's offset), the labels' probes trained together as one stacked model (`audit_many`),
    each as it would train alone, on torch's thread setting."""
    return audit_many([z_train], [train], [z_test], [test], num_classes, config, num_threads=None)[0]


def audit_many(
    z_trains: Sequence[np.ndarray],
    trains: Sequence[Split],
    z_tests: Sequence[np.ndarray],
    tests: Sequence[Split],
    num_classes: Mapping[str, int],
    config: AuditConfig | None = None,
    *,
    num_threads: int | None = 1,
) -> list[AuditReport]:
    """`[audit(z_trains[i], trains[i], z_tests[i], tests[i], num_classes, config) ...]` (equal up to floating-point
    order), with the probes of all members trained as stacked models.

    Probes that share a class count train together (`train_classifiers_stacked`), whatever their label or role:
    each keeps the seed `audit` gives it (cfg.seed + its label's offset), so members may name different labels.
    Like `audit`, this trains probes only: cfg.mi and cfg.capacity are the run's extra audits (`extra_audits`).
    `num_threads`: torch intra-op threads while training (None: torch's setting). One by default: a trial or a
    population gets one core, and threads that wait for each other at every small operation lose their time
    slices on busy shared cores (benchmarks/README.md, "Threads for a standalone run"). `cfg.device` says where they train (`probe_device`)."""
    cfg = config or AuditConfig()
    count = len(z_trains)
    if not len(trains) == len(z_tests) == len(tests) == count:
        raise DataError(
            f"audit_many: {count} z_trains, {len(trains)} trains, {len(z_tests)} z_tests and {len(tests)} tests; "
            "every member needs all four"
        )
    totals = [len(t) for t in trains]
    sampled = [probe_rows(n, cfg) for n in totals]
    z_trains = [z if keep is None else z[keep] for z, keep in zip(z_trains, sampled)]
    trains = [t if keep is None else t.take(keep) for t, keep in zip(trains, sampled)]
    prepared = [prepare(z_trains[i], z_tests[i], cfg.standardize) for i in range(count)]
    tasks = [list(label_tasks(trains[i], tests[i], num_classes)) for i in range(count)]
    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for i, member_tasks in enumerate(tasks):
        for j, t in enumerate(member_tasks):
            groups.setdefault((prepared[i][0].shape[1], t.n_classes), []).append((i, j))
    scores: dict[tuple[int, int], LabelScore] = {}
    probas: dict[tuple[int, int], np.ndarray] = {}
    for (_, n_classes), keys in groups.items():
        predicted = train_predict_stacked(
            [prepared[i][0] for i, _ in keys],
            [tasks[i][j].y_train for i, j in keys],
            [prepared[i][1] for i, _ in keys],
            n_classes,
            seed=[cfg.seed + tasks[i][j].offset for i, j in keys],
            num_threads=num_threads,
            **cfg.probe_settings(),
        )
        metrics = probe_metrics_many([tasks[i][j].y_test for i, j in keys], predicted, n_classes)
        for (i, j), proba, m in zip(keys, predicted, metrics):
            t = tasks[i][j]
            probas[i, j] = proba
            scores[i, j] = metrics_score(t.name, t.role, m, t.y_test, n_classes)
    return [
        AuditReport(
            [scores[i, j] for j in range(len(tasks[i]))],
            as_params(cfg),
            warnings=[] if keep is None else [sampled_note(len(keep), total)],
            probas={tasks[i][j].name: probas[i, j] for j in range(len(tasks[i]))},
        )
        for i, (keep, total) in enumerate(zip(sampled, totals))
    ]


def probe_rows(n: int, cfg: AuditConfig) -> np.ndarray | None:
    """The training rows the probes train on when a split of `n` holds more than `cfg.max_rows` (None: all)."""
    if cfg.max_rows <= 0 or n <= cfg.max_rows:
        return None
    return subsample(n, cfg.max_rows, cfg.seed)


def sampled_note(used: int, total: int) -> str:
    return (
        f"the fresh probes trained on a random {used:,} of the {total:,} training rows (audit.max_rows); "
        "every test row is scored"
    )
