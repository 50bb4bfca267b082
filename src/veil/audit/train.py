"""The one trainer of small MLP classifiers on a representation, and the helpers every audit shares.

The fresh-probe audit, the adversary-capacity sweep, the obfuscation audit and the variational MI
bound all fit a classifier ``q(label | z)`` on a released train representation and read its class
probabilities on a test representation. They do it with `train_classifier`: seeded, Adam on softmax
cross-entropy, fixed epochs of shuffled minibatches, optional z-scoring with training statistics. Training leaves torch's global RNG as it found it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from torch.nn import functional as F

from veil.errors import ConfigError
from veil.methods.nets import mlp

__all__ = [
    "MIN_SCALE",
    "Classifier",
    "Standardizer",
    "seeded_torch",
    "sklearn_proba",
    "torch_threads",
    "train_classifier",
]

#: columns whose standard deviation is at most this are left unscaled (only centred) by `Standardizer`
MIN_SCALE = 1e-8


@dataclass(frozen=True)
class Standardizer:
    """Column z-scoring with statistics fitted on training rows; applied unchanged to any other rows.

    Works in the dtype it is fitted on (float32 arrays stay float32)."""

    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, a: np.ndarray) -> Standardizer:
        mean, sd = a.mean(axis=0), a.std(axis=0)
        return cls(mean, np.where(sd > MIN_SCALE, sd, 1.0).astype(sd.dtype, copy=False))

    def __call__(self, a: np.ndarray) -> np.ndarray:
        return (a - self.mean) / self.scale

    @classmethod
    def fit_transform(cls, a: np.ndarray) -> np.ndarray:
        """`a` z-scored with its own statistics."""
        return cls.fit(a)(a)


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` intra-op torch threads, restoring the previous count afterwards.

    Small probes are fastest single-threaded (thread hand-off costs more than the arithmetic and
    degrades badly on busy shared cores); ``None`` leaves torch's setting alone."""
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ConfigError("num_threads", n, "an integer >= 1 or None")
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


@contextlib.contextmanager
def seeded_torch(seed: int, num_threads: int | None = None) -> Iterator[torch.Generator]:
    """Inside: torch's CPU RNG seeded with `seed` (network initialisation draws from it) and a fresh
    generator seeded with `seed` for batch order; torch's global CPU RNG is restored on exit."""
    with torch.random.fork_rng(devices=[]), torch_threads(num_threads):
        gen = torch.Generator().manual_seed(seed)
        torch.default_generator.manual_seed(seed)
        yield gen


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float32)


@dataclass(frozen=True)
class Classifier:
    """A trained MLP classifier (eval mode) with the input standardisation it was trained with."""

    net: torch.nn.Module
    n_classes: int
    scaler: Standardizer | None = None

    def logits(self, z: np.ndarray) -> torch.Tensor:
        with torch.no_grad():
            return self.net(_tensor(self.scaler(z) if self.scaler is not None else z))

    def predict_proba(self, z: np.ndarray) -> np.ndarray:
        """Class probabilities, rows x n_classes (float32)."""
        return torch.softmax(self.logits(z), dim=1).numpy()

    def predict_log_proba(self, z: np.ndarray) -> np.ndarray:
        """Log class probabilities, rows x n_classes (float64)."""
        return torch.log_softmax(self.logits(z), dim=1).double().numpy()


def train_classifier(
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
    num_threads: int | None = None,
) -> Classifier:
    """A fresh ReLU MLP ``z.shape[1] -> hidden... -> n_classes`` trained on (z, y) by softmax cross-entropy.

    Seeded by `seed` (initialisation and minibatch order; torch's global RNG is left untouched), Adam
    (`lr`, `weight_decay`) for `epochs` passes over shuffled minibatches of ``min(batch_size, rows)``
    rows; `drop_last` skips the incomplete last batch of each pass (the fresh-probe audit's protocol),
    otherwise it is a smaller step. `y` holds class codes 0..n_classes-1.
    `standardize` z-scores the columns with statistics of `z` (in z's dtype) and applies the same map
    to whatever the returned classifier predicts on. `num_threads`: torch intra-op threads while
    training (restored afterwards; None leaves torch's setting alone)."""
    scaler = Standardizer.fit(z) if standardize else None
    with seeded_torch(seed, num_threads) as gen:
        net = mlp(z.shape[1], [int(h) for h in hidden], n_classes)
        opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
        zt = _tensor(scaler(z) if scaler is not None else z)
        yt = torch.as_tensor(y, dtype=torch.long)
        n = len(zt)
        bs = min(batch_size, n)
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen)
            for i in range(0, n - bs + 1 if drop_last else n, bs):
                idx = perm[i : i + bs]
                loss = F.cross_entropy(net(zt[idx]), yt[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    return Classifier(net.eval(), n_classes, scaler)


def sklearn_proba(model: Any, z: np.ndarray, n_classes: int) -> np.ndarray:
    """Class probabilities (rows x n_classes) of a fitted scikit-learn classifier trained on class codes;
    classes absent from its training labels get probability 0."""
    proba = np.zeros((len(z), n_classes))
    proba[:, model.classes_] = model.predict_proba(z)
    return proba
