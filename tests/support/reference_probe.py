"""The probe trainer a user would write with plain PyTorch: an `nn.Sequential` MLP, `torch.optim.Adam(fused=True)`,
`F.cross_entropy` and autograd, one probe at a time. Veil's `train_classifier` (the `StackedMLP` engine) must train
exactly this, up to floating-point order: the equivalence tests compare against it, and `benchmarks/suite.py
--only audit` times Veil's audit against the audit built on it."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
from torch.nn import functional as F

from veil.audit.probes import AuditReport, label_tasks, prepare, proba_score
from veil.audit.settings import AuditConfig
from veil.audit.train import Classifier, Standardizer, probe_device, seeded_torch
from veil.config import as_params
from veil.datasets.dataset import Split
from veil.methods.nets import mlp


def reference_classifier(
    z: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    hidden: Sequence[int],
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    weight_decay: float = 0.0,
    standardize: bool = False,
    drop_last: bool = True,
    device: str = "cpu",
) -> Classifier:
    """`train_classifier`'s protocol in the plain autograd loop (same seeding, minibatch order and update), on
    `device` ("auto": a GPU when one is visible), as a user would move the net and the rows there."""
    scaler = Standardizer.fit(z) if standardize else None
    dev = probe_device(device)
    with seeded_torch(seed) as gen:
        net = mlp(z.shape[1], [int(h) for h in hidden], n_classes).to(dev)
        opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay, fused=True)
        zt = torch.tensor(scaler(z) if scaler is not None else z, dtype=torch.float32, device=dev)
        yt = torch.as_tensor(y, dtype=torch.long, device=dev)
        n = len(zt)
        bs = min(batch_size, n)
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen).to(dev)
            for i in range(0, n - bs + 1 if drop_last else n, bs):
                idx = perm[i : i + bs]
                loss = F.cross_entropy(net(zt[idx]), yt[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    return Classifier(net.to("cpu").eval(), n_classes, scaler)


def reference_audit(
    z_train: np.ndarray,
    train: Split,
    z_test: np.ndarray,
    test: Split,
    num_classes: Mapping[str, int],
    config: AuditConfig | None = None,
) -> AuditReport:
    """`veil.audit.probes.audit`'s protocol on the plain loop: one `reference_classifier` per label, one after
    another (seed cfg.seed + the label's offset), scored the same way."""
    cfg = config or AuditConfig()
    z_tr, z_te = prepare(z_train, z_test, cfg.standardize)
    scores, probas = [], {}
    for t in label_tasks(train, test, num_classes):
        probe = reference_classifier(z_tr, t.y_train, t.n_classes, seed=cfg.seed + t.offset, **cfg.probe_settings())
        probas[t.name] = probe.predict_proba(z_te)
        scores.append(proba_score(t.name, t.role, probas[t.name], t.y_test, t.n_classes))
    return AuditReport(scores, as_params(cfg), probas=probas)
