"""The fresh-probe audit (GPP's protocol, seed 001 Sec. VI): after training, NEW probes are trained on the
released train representation and scored on the released test representation, for every utility and
sensitive label. The training-time adversary never grades itself."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch.nn import functional as F

from veil.config import as_params, param
from veil.datasets.base import Split
from veil.methods.nets import mlp


@dataclass(frozen=True)
class AuditConfig:
    """How the fresh probes are built and trained."""

    hidden: tuple[int, ...] = param((256, 128), "hidden widths of each probe MLP (GPP's 3-layer 256-128)", ge=1)
    epochs: int = param(30, "training epochs of each probe (GPP: 30)", ge=1)
    lr: float = param(1e-3, "Adam learning rate of the probes (GPP: 1e-4; 1e-3 converges in 30 epochs on small data)", gt=0)
    batch_size: int = param(128, "probe minibatch size", ge=1)
    standardize: bool = param(True, "z-score each column of z with train statistics before probing (invertible)")
    seed: int = param(0, "seed of probe initialisation and minibatch order", ge=0)
    mi: str = param("none", "also estimate I(Z;label) in nats for every label with this estimator (variational: "
                            "H(S) - CE bound; ksg: kNN, z of at most 16 columns; mine)",
                    choices=("none", "variational", "ksg", "mine"))
    capacity: bool = param(False, "also run the adversary-capacity sweep (logistic, MLPs of growing size, random "
                                  "forest, boosting; 3 seeds) and report its worst case as adversary_auc_max")


@dataclass(frozen=True)
class LabelScore:
    """A fresh probe's score on one label of the released test representation."""

    label: str
    role: str  # "utility" | "adversary"
    accuracy: float
    auc: float
    privacy_gap: float
    majority: float
    n_classes: int


@dataclass
class AuditReport:
    """Every label's score plus the primary metrics derived from them."""

    scores: list[LabelScore]
    config: dict[str, Any] = field(default_factory=dict)

    def by_role(self, role: str) -> list[LabelScore]:
        return [s for s in self.scores if s.role == role]

    def metrics(self) -> dict[str, float]:
        """Primary metrics plus '<metric>/<label>' per label.

        utility_* is the mean over utility labels; adversary_* and privacy_gap are the WORST case
        (max) over sensitive labels, so one well-hidden label cannot mask a leaking one."""
        out: dict[str, float] = {}
        for s in self.scores:
            out[f"{s.role}_acc/{s.label}"] = s.accuracy
            out[f"{s.role}_auc/{s.label}"] = s.auc
            out[f"majority/{s.label}"] = s.majority
            if s.role == "adversary":
                out[f"privacy_gap/{s.label}"] = s.privacy_gap
        u, a = self.by_role("utility"), self.by_role("adversary")
        if u:
            out["utility_acc"] = float(np.mean([s.accuracy for s in u]))
            out["utility_auc"] = float(np.mean([s.auc for s in u]))
        if a:
            out["adversary_acc"] = float(max(s.accuracy for s in a))
            out["adversary_auc"] = float(max(s.auc for s in a))
            out["privacy_gap"] = float(max(s.privacy_gap for s in a))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"scores": [asdict(s) for s in self.scores], "metrics": self.metrics(), "config": self.config}

    def to_markdown(self) -> str:
        lines = ["| label | role | classes | accuracy | majority | ROC-AUC | privacy gap |",
                 "|---|---|---|---|---|---|---|"]
        for s in self.scores:
            gap = f"{s.privacy_gap:.3f}" if s.role == "adversary" else ""
            lines.append(f"| {s.label} | {s.role} | {s.n_classes} | {s.accuracy:.3f} | {s.majority:.3f} | {s.auc:.3f} | {gap} |")
        return "\n".join(lines)


def auc_score(y: np.ndarray, proba: np.ndarray, n_classes: int) -> float:
    """ROC-AUC: binary on P(class 1); one-vs-rest macro for multi-class (classes absent from y are skipped)."""
    present = np.unique(y)
    if len(present) < 2:
        return float("nan")
    if n_classes == 2:
        return float(roc_auc_score(y, proba[:, 1]))
    cols = [c for c in range(n_classes) if c in present]
    return float(np.mean([roc_auc_score(y == c, proba[:, c]) for c in cols]))


def train_probe(z: np.ndarray, y: np.ndarray, n_classes: int, cfg: AuditConfig, seed: int) -> torch.nn.Module:
    """A fresh MLP classifier trained on (z, y) with Adam for cfg.epochs epochs."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = mlp(z.shape[1], cfg.hidden, n_classes)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    zt, yt = torch.as_tensor(z, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
    bs = min(cfg.batch_size, len(zt))
    for _ in range(cfg.epochs):
        perm = torch.randperm(len(zt), generator=gen)
        for i in range(0, len(zt) - bs + 1, bs):
            idx = perm[i:i + bs]
            loss = F.cross_entropy(net(zt[idx]), yt[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return net.eval()


def score_label(label: str, role: str, z_tr: np.ndarray, y_tr: np.ndarray, z_te: np.ndarray, y_te: np.ndarray,
                n_classes: int, cfg: AuditConfig, seed: int) -> LabelScore:
    """Train a fresh probe for one label and score it on the test representation."""
    net = train_probe(z_tr, y_tr, n_classes, cfg, seed)
    with torch.no_grad():
        proba = torch.softmax(net(torch.as_tensor(z_te, dtype=torch.float32)), dim=1).numpy()
    acc = float((proba.argmax(1) == y_te).mean())
    auc = auc_score(y_te, proba, n_classes)
    majority = float(np.bincount(y_te, minlength=n_classes).max() / len(y_te))
    return LabelScore(label, role, acc, auc, abs(auc - 0.5), majority, n_classes)


def standardize(z_tr: np.ndarray, z_te: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = z_tr.mean(axis=0), z_tr.std(axis=0)
    sd = np.where(sd > 1e-8, sd, 1.0)
    return (z_tr - mu) / sd, (z_te - mu) / sd


def label_tasks(train: Split, test: Split, num_classes: Mapping[str, int]):
    """(role, label, n_classes, y_train, y_test, seed offset) for every utility then sensitive label."""
    for i, (role, labels_tr, labels_te) in enumerate([("utility", train.utility, test.utility),
                                                       ("adversary", train.sensitive, test.sensitive)]):
        for j, name in enumerate(labels_tr):
            yield role, name, int(num_classes[name]), np.asarray(labels_tr[name]), np.asarray(labels_te[name]), 100 * i + j


def prepare(z_train: np.ndarray, z_test: np.ndarray, do_standardize: bool) -> tuple[np.ndarray, np.ndarray]:
    """float32 copies of the released representations, z-scored with train statistics if asked."""
    z_tr, z_te = np.asarray(z_train, np.float32), np.asarray(z_test, np.float32)
    return standardize(z_tr, z_te) if do_standardize else (z_tr, z_te)


def audit(z_train: np.ndarray, train: Split, z_test: np.ndarray, test: Split, num_classes: Mapping[str, int],
          config: AuditConfig | None = None) -> AuditReport:
    """Score fresh probes for every utility and sensitive label on the released representation."""
    cfg = config or AuditConfig()
    z_tr, z_te = prepare(z_train, z_test, cfg.standardize)
    scores = [score_label(name, role, z_tr, y_tr, z_te, y_te, k, cfg, cfg.seed + offset)
              for role, name, k, y_tr, y_te, offset in label_tasks(train, test, num_classes)]
    return AuditReport(scores, as_params(cfg))
