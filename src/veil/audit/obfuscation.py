"""The adjustable-privacy autoencoder's threat model (seed 003, Sec. 2 and 3.1), for methods that
release an obfuscated record x' in the input's format (z has the columns of x).

  weak adversary    trained on ORIGINAL train data x (it has no obfuscator), applied to released test z
  strong adversary  trained on released train z (it can run the obfuscator), applied to released test z
  utility provider  trained on released train z, applied to ORIGINAL test x
  original_*        reference probes trained and tested on original x (the no-privacy accuracy)

Every probe is a fresh MLP (`AuditConfig`); when `standardize` is set its z-scoring is fitted on the
probe's own training inputs and applied unchanged to its test inputs, as a deployed model would be.
The weak adversary and the original_adversary are the same trained probe, scored on z and on x.
Probe seeds: cfg.seed + j for the j-th sensitive label's adversary trained on x, + 100 + j for the
utility provider trained on x, + 200 + j and + 300 + j for those trained on z.
Adversary metrics are the worst case (max) over sensitive labels, utility the mean over utility labels."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np

from veil.audit.probes import accuracy_auc, label_tasks
from veil.audit.settings import AuditConfig
from veil.audit.train import Classifier, train_classifier
from veil.config import as_params
from veil.datasets.dataset import Split
from veil.errors import DataError

#: (metric prefix, role, train input, test input)
SCENARIOS: tuple[tuple[str, str, str, str], ...] = (
    ("weak_adversary", "adversary", "x", "z"),
    ("strong_adversary", "adversary", "z", "z"),
    ("original_adversary", "adversary", "x", "x"),
    ("provider_utility", "utility", "z", "x"),
    ("original_utility", "utility", "x", "x"),
)


@dataclass(frozen=True)
class ScenarioScore:
    scenario: str
    label: str
    accuracy: float
    auc: float


@dataclass
class ObfuscationReport:
    scores: list[ScenarioScore]
    config: dict[str, Any] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """'<scenario>_acc' / '<scenario>_auc' (max over sensitive labels for adversaries, mean over utility
        labels for the provider) plus '<scenario>_acc/<label>' per label."""
        out: dict[str, float] = {}
        for s in self.scores:
            out[f"{s.scenario}_acc/{s.label}"] = s.accuracy
            out[f"{s.scenario}_auc/{s.label}"] = s.auc
        for scenario, role, _, _ in SCENARIOS:
            rows = [s for s in self.scores if s.scenario == scenario]
            if not rows:
                continue
            agg = max if role == "adversary" else (lambda v: float(np.mean(list(v))))
            out[f"{scenario}_acc"] = float(agg(s.accuracy for s in rows))
            out[f"{scenario}_auc"] = float(agg(s.auc for s in rows))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"scores": [asdict(s) for s in self.scores], "metrics": self.metrics(), "config": self.config}


def obfuscation_audit(
    x_train: np.ndarray,
    z_train: np.ndarray,
    train: Split,
    x_test: np.ndarray,
    z_test: np.ndarray,
    test: Split,
    num_classes: Mapping[str, int],
    cfg: AuditConfig | None = None,
) -> ObfuscationReport:
    """Weak and strong adversaries and the utility provider of seed 003 for a release z in x's format."""
    cfg = cfg or AuditConfig()
    data = {"x_train": x_train, "z_train": z_train, "x_test": x_test, "z_test": z_test}
    for name, a in data.items():
        if np.ndim(a) != 2:
            raise DataError(f"obfuscation audit: {name} must be 2-D, got shape {np.shape(a)}")
    if np.shape(x_train)[1] != np.shape(z_train)[1] or np.shape(x_test)[1] != np.shape(z_test)[1]:
        raise DataError(
            f"obfuscation audit needs a release in the input's format: x has {np.shape(x_train)[1]} "
            f"columns, z has {np.shape(z_train)[1]} (weak adversary and utility provider cross them)"
        )
    if len(x_train) != len(train) or len(z_train) != len(train) or len(x_test) != len(test) or len(z_test) != len(test):
        raise DataError("obfuscation audit: x/z rows must match the train and test splits")
    data = {name: np.asarray(a, np.float32) for name, a in data.items()}
    tasks = list(label_tasks(train, test, num_classes))
    probes: dict[tuple[str, str, str], Classifier] = {}  # the weak and the original adversary are one probe
    scores = []
    for scenario, role, src_tr, src_te in SCENARIOS:
        for t in (t for t in tasks if t.role == role):
            key = (src_tr, role, t.name)
            if key not in probes:
                seed = cfg.seed + 100 * (2 * (src_tr == "z") + (role == "utility")) + t.position
                probes[key] = train_classifier(
                    data[f"{src_tr}_train"],
                    t.y_train,
                    t.n_classes,
                    seed=seed,
                    standardize=cfg.standardize,
                    **cfg.probe_settings(),
                )
            acc, auc = accuracy_auc(t.y_test, probes[key].predict_proba(data[f"{src_te}_test"]), t.n_classes)
            scores.append(ScenarioScore(scenario, t.name, acc, auc))
    return ObfuscationReport(scores, as_params(cfg))
