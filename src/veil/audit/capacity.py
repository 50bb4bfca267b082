"""Adversary-capacity sweep: the stronger audit (METHODS.md, "What every run reports").

One fresh probe per (label, probe family, seed) is trained on the released train representation and
scored on the released test representation. Families range from a linear model to wide and deep
MLPs and tree ensembles, so a representation that fools one small probe but not a bigger one is
caught. Every (label, probe) is repeated with `repeats` probe seeds; its AUC is the mean over seeds.

Primary metrics (worst case for privacy = the strongest adversary):
  adversary_auc_max   max over sensitive labels, probes AND seeds of the ROC-AUC (the conservative
                      worst case: it is >= every single probe's score)
  adversary_acc_max   the same maximum for accuracy
  adversary_auc_mean  seed-mean AUC of the strongest (label, probe): the one with the highest seed-mean AUC
  adversary_auc_std   std over seeds of that (label, probe)'s AUC
  privacy_gap_max     max over sensitive labels, probes and seeds of the privacy gap |AUC - 0.5|
                      (folded per class for multi-class labels, `veil.audit.probes.auc_gap`)
  utility_auc_max     mean over utility labels of the best probe's seed-mean AUC (and utility_acc_max)
plus 'capacity/<role>_auc/<label>/<probe>' and '.../std' for every probe."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from veil.audit.families import PROBE_FAMILIES, ProbeBudget, get_probe, probe_names
from veil.audit.probes import label_tasks, prepare, probe_metrics
from veil.audit.vocabulary import PROBE_DEVICES
from veil.config import MAX_EPOCHS, as_params, param
from veil.datasets.dataset import Split

if TYPE_CHECKING:
    from veil.audit.settings import AuditConfig

#: Veil's own probe families, the sweep's default (plugins' families join when named)
PROBES: tuple[str, ...] = tuple(PROBE_FAMILIES)


@dataclass(frozen=True)
class CapacityConfig:
    """Which probe families the sweep trains and how."""

    probes: tuple[str, ...] = param(
        PROBES, "probe families, weakest to strongest (any registered family: veil.audit.families)", choices=probe_names
    )
    repeats: int = param(
        3,
        "probe seeds per (label, probe) for the seeded families (MLPs, random forest); "
        "mean and std over them are reported",
        ge=1,
    )
    epochs: int = param(30, "training epochs of each MLP probe", ge=1, le=MAX_EPOCHS)
    lr: float = param(1e-3, "Adam learning rate of the MLP probes", gt=0)
    batch_size: int = param(128, "MLP probe minibatch size", ge=1)
    trees: int = param(100, "trees of the random forest; boosting iterations of hist-gradient-boosting", ge=1)
    standardize: bool = param(True, "z-score each column of z with train statistics before probing")
    seed: int = param(0, "base seed of the probes", ge=0)
    device: str = param(
        "auto", "where the MLP probes train: auto (a CUDA GPU when one is visible), cpu or cuda", choices=PROBE_DEVICES
    )

    @classmethod
    def from_audit(cls, cfg: AuditConfig) -> CapacityConfig:
        """The probes trained as the run's audit trains its own: its epochs, lr, batch size, seed and device."""
        return cls(epochs=cfg.epochs, lr=cfg.lr, batch_size=cfg.batch_size, seed=cfg.seed, device=cfg.device)


@dataclass(frozen=True)
class ProbeScore:
    """One (label, probe) pair: accuracy, AUC and privacy gap per seed."""

    label: str
    role: str  # "utility" | "adversary"
    probe: str
    accuracies: tuple[float, ...]
    aucs: tuple[float, ...]
    gaps: tuple[float, ...]

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.accuracies))

    @property
    def auc(self) -> float:
        return float(np.mean(self.aucs))

    @property
    def auc_std(self) -> float:
        return float(np.std(self.aucs))


@dataclass
class CapacityReport:
    """Every (label, probe) score and the worst case over probes."""

    scores: list[ProbeScore]
    config: dict[str, Any] = field(default_factory=dict)

    def by_role(self, role: str) -> list[ProbeScore]:
        return [s for s in self.scores if s.role == role]

    def worst(self) -> ProbeScore | None:
        """The (sensitive label, probe) with the highest seed-mean AUC: the strongest adversary."""
        adv = [s for s in self.by_role("adversary") if np.isfinite(s.auc)]
        return max(adv, key=lambda s: s.auc) if adv else None

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.scores:
            out[f"capacity/{s.role}_auc/{s.label}/{s.probe}"] = s.auc
            out[f"capacity/{s.role}_auc/{s.label}/{s.probe}/std"] = s.auc_std
            out[f"capacity/{s.role}_acc/{s.label}/{s.probe}"] = s.accuracy
        adv = self.by_role("adversary")
        if adv:
            w = self.worst()
            aucs = [a for s in adv for a in s.aucs if np.isfinite(a)]
            out["adversary_auc_max"] = float(max(aucs)) if aucs else float("nan")
            out["adversary_acc_max"] = float(max(a for s in adv for a in s.accuracies))
            out["adversary_auc_mean"] = w.auc if w else float("nan")
            out["adversary_auc_std"] = w.auc_std if w else float("nan")
            gaps = [g for s in adv for g in s.gaps if np.isfinite(g)]
            out["privacy_gap_max"] = float(max(gaps)) if gaps else float("nan")
        util = self.by_role("utility")
        if util:
            names = sorted({s.label for s in util})
            out["utility_auc_max"] = float(np.mean([max(s.auc for s in util if s.label == n) for n in names]))
            out["utility_acc_max"] = float(np.mean([max(s.accuracy for s in util if s.label == n) for n in names]))
        return out

    def to_dict(self) -> dict[str, Any]:
        w = self.worst()
        return {
            "scores": [{**asdict(s), "accuracy": s.accuracy, "auc": s.auc, "auc_std": s.auc_std} for s in self.scores],
            "worst": None if w is None else {"label": w.label, "probe": w.probe},
            "metrics": self.metrics(),
            "config": self.config,
        }

    def to_markdown(self) -> str:
        lines = ["| label | role | probe | accuracy | ROC-AUC | AUC std |", "|---|---|---|---|---|---|"]
        for s in self.scores:
            lines.append(f"| {s.label} | {s.role} | {s.probe} | {s.accuracy:.3f} | {s.auc:.3f} | {s.auc_std:.3f} |")
        return "\n".join(lines)


def fit_predict(
    probe: str, z_tr: np.ndarray, y_tr: np.ndarray, z_te: np.ndarray, n_classes: int, cfg: CapacityConfig, seed: int
) -> np.ndarray:
    """Train probe family `probe` on (z_tr, y_tr) and return class probabilities on z_te (n x n_classes)."""
    budget = ProbeBudget(epochs=cfg.epochs, lr=cfg.lr, batch_size=cfg.batch_size, trees=cfg.trees, device=cfg.device)
    return get_probe(probe).fit_predict(z_tr, y_tr, z_te, n_classes, seed=seed, budget=budget)


def capacity_audit(
    z_train: np.ndarray,
    train: Split,
    z_test: np.ndarray,
    test: Split,
    num_classes: Mapping[str, int],
    config: CapacityConfig | None = None,
) -> CapacityReport:
    """Score every probe family, `repeats` seeds each, on every utility and sensitive label."""
    cfg = config or CapacityConfig()
    z_tr, z_te = prepare(z_train, z_test, cfg.standardize)
    scores = []
    for t in label_tasks(train, test, num_classes):
        for probe in cfg.probes:
            runs = [
                probe_metrics(
                    t.y_test,
                    fit_predict(probe, z_tr, t.y_train, z_te, t.n_classes, cfg, cfg.seed + 1000 * r + t.offset),
                    t.n_classes,
                )
                for r in range(cfg.repeats if get_probe(probe).seeded else 1)
            ]
            scores.append(
                ProbeScore(
                    t.name,
                    t.role,
                    probe,
                    tuple(m.accuracy for m in runs),
                    tuple(m.auc for m in runs),
                    tuple(m.gap for m in runs),
                )
            )
    return CapacityReport(scores, as_params(cfg))
