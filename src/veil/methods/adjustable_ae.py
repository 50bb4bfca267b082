"""The adjustable-privacy autoencoder (seed 003): an obfuscator whose privacy level is set at
release time, without retraining.

Networks (Table 2, categorical data; every layer ReLU):
    v    = E(x)          d_in-128-128-64
    w_np = C(v)          64-32-8-|U|, LogSoftmax     (utility log-probabilities; one head per utility label)
    w_p  = R(v)          64-64-62                    (the rest; width 64 - |U| by default)
    x'   = D(w_np || w_p)  66 -> 128-128-d_in, Sigmoid (the record in the input format)
Features are min-max normalised to [0, 1] with training-split statistics (the paper normalises its
variables and decodes through a sigmoid); the released x' is mapped back to the input's units.

Training (Alg. 1 and Sec. 3.1 "Training"), per minibatch: one step of E, R, C, D on the
reconstruction MSE L_ae = ||x - D(C(E(x)) || R(E(x)))||^2 (eq. 9), then one step of E and C on the
utility NLL L_C (eq. 10), R and D unchanged. No adversary is trained. f and g are off in training.

Release (Sec. 4.2): g replaces every utility head's output by the hard value log 1 = 0 for the
label's class and log 0 ~ lam (e.g. -3000) for the others; f adds white Gaussian noise to w_p with
variance noise * nu, nu being the mean of R's output nodes for that record. Both are knobs of the
release: `adjusted(noise=..., lam=...)` gives a copy with the same trained weights.

The paper's g uses the TRUE utility label. `release_with_labels(x, labels)` does that; plain
`encode(x)` (what a run's audit calls) has no labels and uses the classifier's own prediction
argmax C(v) instead, recorded as the deviation 'g_label'.

The released z is x' itself, of width d_in: the shared `d_z` field is ignored.
PyTorch's default initialisation is used (the paper draws weights from N(0, 0.02))."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from veil.config import build
from veil.datasets.dataset import Split, TaskSpec
from veil.errors import ConfigError
from veil.methods.configs.adjustable_ae_card import AdjustableAECard, AdjustableAEConfig
from veil.methods.method import Batch, BatchSampler, Method, MethodConfig, TrainContext, step
from veil.methods.nets import loss_row, loss_sum, make_optimizer, mlp
from veil.methods.population import Fitted, register_population
from veil.methods.table import register_method
from veil.randomness import Noise, gaussian_like


class MinMaxScaler(nn.Module):
    """Per-column min-max scaling to [0, 1] with training statistics kept as buffers (they travel in `state()`)."""

    low: torch.Tensor
    span: torch.Tensor

    def __init__(self, d: int) -> None:
        super().__init__()
        self.register_buffer("low", torch.zeros(d))
        self.register_buffer("span", torch.ones(d))

    def fit(self, x: np.ndarray) -> None:
        lo, hi = x.min(axis=0), x.max(axis=0)
        span = np.where(hi - lo > 1e-12, hi - lo, 1.0)
        self.low.copy_(torch.as_tensor(lo, dtype=torch.float32))
        self.span.copy_(torch.as_tensor(span, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.low) / self.span

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y * self.span + self.low


class UtilityHeads(nn.Module):
    """C: one log-softmax head per utility label; outputs are concatenated into w_np."""

    def __init__(self, d_in: int, classes: Mapping[str, int], hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.names = list(classes)
        self.classes = [int(classes[n]) for n in self.names]
        self.heads = nn.ModuleList([nn.Sequential(mlp(d_in, hidden, k), nn.LogSoftmax(dim=1)) for k in self.classes])

    def forward(self, v: torch.Tensor) -> list[torch.Tensor]:
        return [h(v) for h in self.heads]


def relu_mlp(d_in: int, hidden: tuple[int, ...], d_out: int) -> nn.Sequential:
    """ReLU MLP whose output layer is ReLU too (Table 2's E and R)."""
    return nn.Sequential(mlp(d_in, hidden, d_out), nn.ReLU())


@register_method
class AdjustableAE(AdjustableAECard, Method):
    config: AdjustableAEConfig
    AE_ROLES = ("encoder", "classifier", "rest", "decoder")  # trained on the reconstruction (eq. 9)
    CLASSIFIER_ROLES = ("encoder", "classifier")  # trained on the utility NLL (eq. 10)

    def build(self) -> None:
        c, t = self.config, self.task
        n_u = sum(int(k) for k in t.utility.values())
        r_width = c.r_width if c.r_width is not None else max(1, c.code_width - n_u)
        self.scaler = MinMaxScaler(t.d_in)
        self.encoder = relu_mlp(t.d_in, c.encoder_hidden, c.code_width)
        self.classifier = UtilityHeads(c.code_width, t.utility, c.classifier_hidden)
        self.rest = relu_mlp(c.code_width, c.r_hidden, r_width)
        out = "sigmoid" if c.decoder_out == "sigmoid" else None
        self.decoder = mlp(n_u + r_width, c.decoder_hidden, t.d_in, out=out)

    def make_optimizers(self) -> None:
        lr = self.config.lr
        self.opt_ae = make_optimizer(self.parameters_of(*self.AE_ROLES), lr)
        self.opt_c = make_optimizer(self.parameters_of(*self.CLASSIFIER_ROLES), lr)

    def modules(self) -> dict[str, nn.Module]:
        return {
            "encoder": self.encoder,
            "classifier": self.classifier,
            "rest": self.rest,
            "decoder": self.decoder,
            "scaler": self.scaler,
        }

    def fit(self, train: Split, ctx: TrainContext | None = None) -> list[dict[str, float]]:
        self.scaler.fit(np.asarray(train.x, dtype=np.float64))
        return super().fit(train, ctx)

    # -- training (Alg. 1) ----------------------------------------------------------------------
    def train_step(self, batch: Batch, sampler: BatchSampler, ctx: TrainContext) -> dict[str, torch.Tensor]:
        xs = self.scaler(batch.x)
        v = self.encoder(xs)
        x_rec = self.decoder(torch.cat(self.classifier(v) + [self.rest(v)], dim=1))
        loss_ae = F.mse_loss(x_rec, xs)
        step(loss_ae, self.opt_ae, ctx, list(self.parameters_of(*self.AE_ROLES)))
        w_np = self.classifier(self.encoder(xs))
        nll = {n: F.nll_loss(w, batch.utility[n]) for n, w in zip(self.classifier.names, w_np)}
        loss_c = loss_sum(nll.values())
        step(loss_c, self.opt_c, ctx, list(self.parameters_of(*self.CLASSIFIER_ROLES)))
        return {
            "loss/reconstruction": loss_ae.detach(),
            "loss/classifier": loss_c.detach(),
            **loss_row("loss/utility", nll),
        }

    # -- release ---------------------------------------------------------------------------------
    def obfuscate(
        self, x: torch.Tensor, generator: Noise, labels: Mapping[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """x' = D(g(C(v)) || f(R(v))) in the input's units; g uses `labels` if given, else C's prediction;
        f's noise comes from `generator`."""
        c = self.config
        v = self.encoder(self.scaler(x))
        w_np = self.classifier(v)
        if c.apply_g:
            hard = []
            for name, w in zip(self.classifier.names, w_np):
                y = labels[name] if labels is not None else w.argmax(dim=1)
                g = torch.full_like(w, c.lam)
                g.scatter_(1, y.long().view(-1, 1), 0.0)
                hard.append(g)
            w_np = hard
        w_p = self.rest(v)
        if c.noise > 0:
            nu = w_p.mean(dim=1, keepdim=True).clamp_min(0.0)
            w_p = w_p + torch.sqrt(c.noise * nu) * gaussian_like(w_p, generator)
        return self.scaler.inverse(self.decoder(torch.cat(w_np + [w_p], dim=1)))

    def release(self, x: torch.Tensor, generator: Noise) -> torch.Tensor:
        return self.obfuscate(x, generator)

    def encode(
        self, x: np.ndarray, batch_size: int = 4096, utility_labels: Mapping[str, np.ndarray] | np.ndarray | None = None
    ) -> np.ndarray:
        """Release x' for rows `x`; with `utility_labels` g uses them (the paper's g), else C's prediction."""
        labels = self._labels(utility_labels, len(x))

        def one(xb: torch.Tensor, gen: Noise, rows: slice) -> torch.Tensor:
            lb = (
                None if labels is None else {k: torch.as_tensor(v[rows], device=self.device) for k, v in labels.items()}
            )
            return self.obfuscate(xb, gen, lb)

        return self.release_in_batches(x, batch_size, one)

    def release_with_labels(self, x: np.ndarray, utility_labels: Mapping[str, np.ndarray] | np.ndarray) -> np.ndarray:
        """The paper's release: g replaces C's output by the TRUE utility label(s)."""
        return self.encode(x, utility_labels=utility_labels)

    def _labels(self, labels: Mapping[str, np.ndarray] | np.ndarray | None, n: int) -> dict[str, np.ndarray] | None:
        if labels is None:
            return None
        names = self.classifier.names
        if not isinstance(labels, Mapping):
            if len(names) != 1:
                raise ConfigError(
                    "utility_labels", type(labels).__name__, f"a mapping with one array per utility label {names}"
                )
            labels = {names[0]: labels}
        missing = [k for k in names if k not in labels]
        if missing:
            raise ConfigError("utility_labels", sorted(labels), f"arrays for every utility label {names}")
        out = {}
        for name, k in zip(names, self.classifier.classes):
            y = np.asarray(labels[name]).astype(np.int64)
            if y.shape != (n,) or (len(y) and (y.min() < 0 or y.max() >= k)):
                raise ConfigError(
                    f"utility_labels[{name}]",
                    f"shape {y.shape}, range [{y.min() if len(y) else ''}, {y.max() if len(y) else ''}]",
                    f"{n} class indices in 0..{k - 1}",
                )
            out[name] = y
        return out

    def adjusted(self, **knobs: Any) -> "AdjustableAE":
        """A copy with the same trained weights and new release knobs (noise, lam, apply_g): no retraining."""
        allowed = {"noise", "lam", "apply_g", "seed", "release_seed"}
        bad = sorted(set(knobs) - allowed)
        if bad:
            raise ConfigError(bad[0], knobs[bad[0]], "a release knob: " + ", ".join(sorted(allowed)))
        cfg = build(self.Config, {**dataclasses.asdict(self.config), **knobs}, where=f"method '{self.name}'")
        new = type(self)(cfg, self.task)
        new.load_state(self.state())
        new.to(self.device)
        return new


@register_population("adjustable-ae", knobs=("noise", "lam", "apply_g"))
def fit_adjustable_population(
    configs: Sequence[MethodConfig], task: TaskSpec, train: Split, ctx: TrainContext
) -> Fitted:
    """Members differ only in the release knobs f (noise), g (lam) and apply_g, which training never reads: the
    model trains once and each member is that model with its own knobs (`AdjustableAE.adjusted`), the very
    weights each would have trained alone."""
    trained = AdjustableAE(configs[0], task)
    history = trained.fit(train, ctx)
    trained.to("cpu")
    members: Fitted = []
    for c in configs:
        knobs = cast(AdjustableAEConfig, c)
        member = trained.adjusted(noise=knobs.noise, lam=knobs.lam, apply_g=knobs.apply_g)
        member.release_calls, member.config = 0, knobs  # the member's own config, release_seed included
        members.append((member, [dict(r) for r in history]))
    return members
