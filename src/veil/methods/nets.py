"""Networks and losses shared by every method (one place, no copies)."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from veil.methods.optim import SGD, Adam, Optimizer


def mlp(d_in: int, hidden: Sequence[int], d_out: int, out: str | None = None) -> nn.Sequential:
    """ReLU MLP d_in -> hidden... -> d_out, with an optional 'tanh' or 'sigmoid' output."""
    layers: list[nn.Module] = []
    width = d_in
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, d_out))
    if out == "tanh":
        layers.append(nn.Tanh())
    elif out == "sigmoid":
        layers.append(nn.Sigmoid())
    elif out is not None:
        raise ValueError(f"unknown output activation {out!r}; use 'tanh', 'sigmoid' or None")
    return nn.Sequential(*layers)


class ClassifierBank(nn.Module):
    """One classifier head per named label (the allies, or the adversaries)."""

    def __init__(self, d_in: int, classes: Mapping[str, int], hidden: Sequence[int]) -> None:
        super().__init__()
        self.names = list(classes)
        # ModuleDict keys may not contain '.', so heads are stored by position.
        self.heads = nn.ModuleList([mlp(d_in, hidden, classes[n]) for n in self.names])

    def losses(self, z: torch.Tensor, labels: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Mean cross-entropy of each head on its own label."""
        return {n: F.cross_entropy(h(z), labels[n]) for n, h in zip(self.names, self.heads)}

    def total(self, z: torch.Tensor, labels: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Sum of the heads' cross-entropies (each head's gradient is its own loss's)."""
        return torch.stack(list(self.losses(z, labels).values())).sum()

    def privacy_term(self, kind: str, z: torch.Tensor, losses: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """An encoder's term against these heads (the adversaries): minus the sum of their cross-entropies
        `losses` ('neg-ce'), or the sum of their CEs against uniform on `z` ('uniform', see `uniform_ce`)."""
        if kind == "uniform":
            return loss_sum(uniform_ce(h(z)) for h in self.heads)
        return -loss_sum(losses.values())


def loss_sum(losses: Iterable[torch.Tensor]) -> torch.Tensor:
    """The builtin `sum` of at least one loss tensor (left to right, so values and gradients are exactly
    sum()'s), typed as a tensor. A generator is consumed lazily, as by sum()."""
    total = sum(losses)
    if not isinstance(total, torch.Tensor):
        raise ValueError("loss_sum needs at least one loss")
    return total


def loss_row(prefix: str, losses: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Named scalar losses as one row of a training log: {'<prefix>/<name>': the detached 0-d tensor} (read by
    `Method.fit` without a host sync per step)."""
    return {f"{prefix}/{k}": v.detach() for k, v in losses.items()}


def gaussian_kl_rows(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, diag exp(logvar)) || N(0, I)) of every row, summed over the last (latent) dimension."""
    return 0.5 * (mu.pow(2) + logvar.exp() - logvar - 1).sum(dim=-1)


def gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, diag exp(logvar)) || N(0, I)) summed over dimensions, averaged over the batch (GPP eq. 38)."""
    return gaussian_kl_rows(mu, logvar).mean()


#: devices with torch's fused Adam kernel (one pass over each parameter instead of about ten)
FUSED_ADAM_DEVICES = ("cpu", "cuda")


def make_optimizer(params: Iterable[torch.Tensor], lr: float, kind: str = "adam") -> Optimizer:
    """Adam (default) or plain SGD over the tensors `params` at one learning rate (`veil.methods.optim`: torch's
    updates). Adam is torch's fused kernel where the parameters' device has one (one kernel for every tensor
    instead of a loop over them), with the same update up to float rounding."""
    tensors = list(params)
    if not all(isinstance(p, torch.Tensor) for p in tensors):
        raise TypeError("make_optimizer takes tensors (e.g. module.parameters()), not param groups or named pairs")
    if kind == "adam":
        return Adam(tensors, lr, fused=all(fusable(p) for p in tensors))
    if kind == "sgd":
        return SGD(tensors, lr)
    raise ValueError(f"unknown optimizer {kind!r}; use 'adam' or 'sgd'")


def fusable(p: torch.Tensor) -> bool:
    """Whether torch's fused Adam takes tensor `p` (floating point, on a device with the kernel)."""
    return p.is_floating_point() and p.device.type in FUSED_ADAM_DEVICES


def uniform_ce(logits: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the predictions against the uniform distribution over classes: minimal exactly
    when the classifier cannot tell the classes apart (unlike -CE, which also rewards confident errors)."""
    return -F.log_softmax(logits, dim=1).mean(dim=1).mean()
