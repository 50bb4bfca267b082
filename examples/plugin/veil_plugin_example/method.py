"""mean-nulling: a linear release that removes, from the centred features, the directions along which the
sensitive classes' means differ, then keeps the top principal components of what is left. Closed form, no
training: a small, honest method for showing how a plugin plugs in (on data where s correlates with u, nulling
the mean difference of s also removes some of u, and nonlinear adversaries may still read s)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veil.config import param
from veil.datasets.dataset import Split
from veil.methods.baselines import LinearBaseline
from veil.methods.configs.method_card import ClosedFormConfig
from veil.methods.table import register_method


@dataclass(frozen=True)
class MeanNullingConfig(ClosedFormConfig):
    """The mean directions to null, then principal components."""

    steps: int = param(
        2,
        "nulling steps: each removes, for every sensitive label, the class-mean directions left after the last",
        ge=1,
        le=32,
    )


def null_directions(x: np.ndarray, labels: list[np.ndarray], steps: int) -> np.ndarray:
    """The projection (d x d) that removes, `steps` times over, each sensitive class's mean direction from the
    centred rows `x`."""
    proj = np.eye(x.shape[1])
    for _ in range(steps):
        for s in labels:
            for c in np.unique(s):
                v = (x @ proj)[s == c].mean(axis=0)
                norm = np.linalg.norm(v)
                if norm > 1e-9:
                    v = v / norm
                    proj = proj @ (np.eye(len(v)) - np.outer(v, v))
    return proj


@register_method
class MeanNulling(LinearBaseline):
    name = "mean-nulling"
    Config = MeanNullingConfig
    description = "null the sensitive classes' mean directions, then principal components (example plugin)"
    paper = "examples/plugin, not one of Veil's papers"
    config: MeanNullingConfig

    def fit_closed_form(self, train: Split) -> None:
        x = train.x.astype(np.float64)
        mean = x.mean(axis=0)
        proj = null_directions(x - mean, list(train.sensitive.values()), self.config.steps)
        _, _, vt = np.linalg.svd((x - mean) @ proj, full_matrices=False)
        k = min(self.config.d_z, vt.shape[0])
        w = np.zeros((self.task.d_in, self.config.d_z))
        w[:, :k] = proj @ vt[:k].T
        self.encoder.set(mean, w)
