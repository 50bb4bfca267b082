"""EIGAN (seed 000, Alg. A1): an encoder against n allies and m adversaries.

Per minibatch: one encoder step on
    L_E = (alpha/n) * sum_i CE(A_i) - ((1-alpha)/m) * sum_j CE(V_j)      (eq. 4)
then one step of every ally and `adversary_steps` steps of every adversary on its own cross-entropy, with
separate learning rates (Alg. A1: one step each; Veil's default gives the adversaries 5, see the config).
The release is E(x) plus N(0, release_noise^2) per entry, fresh per release (the paper releases E(x) itself).

Its population form trains P runs that differ only in alpha and the three learning rates as one vectorised
model (`veil.methods.population`)."""

from __future__ import annotations

from typing import Sequence, cast

import torch
from torch import nn

from veil.datasets.dataset import Split, TaskSpec
from veil.methods.configs.eigan_card import EIGANCard, EIGANConfig
from veil.methods.ensemble_ops import copy_ces, privacy_term, single
from veil.methods.federated.ensemble import Stack, step_all
from veil.methods.method import Batch, BatchSampler, Method, MethodConfig, TrainContext, step
from veil.methods.nets import ClassifierBank, loss_row, loss_sum, make_optimizer, mlp
from veil.methods.population import (
    Fitted,
    LoneAdam,
    bank_stacks,
    load_members,
    member_lr,
    per_member,
    register_population,
    shared,
    train_members,
)
from veil.methods.table import register_method
from veil.randomness import Noise, gaussian_like


def encoder_objective(
    alpha: float | torch.Tensor, ally_losses: Sequence[torch.Tensor], adversaries: int, privacy: torch.Tensor
) -> torch.Tensor:
    """Eq. 4 with alpha_A = alpha/n and alpha_V = (1-alpha)/m: the n allies' losses, and the privacy term
    against the m adversaries (-sum CE(V), or the uniform alternative); a (P,) alpha weighs P members' losses."""
    return (alpha / len(ally_losses)) * loss_sum(ally_losses) + ((1 - alpha) / adversaries) * privacy


@register_method
class EIGAN(EIGANCard, Method):
    config: EIGANConfig
    graph_safe = True

    def build(self) -> None:
        c, t = self.config, self.task
        self.encoder = mlp(t.d_in, c.encoder_hidden, self.release_width, out="tanh")
        self.allies = ClassifierBank(self.release_width, t.utility, c.head_hidden)
        self.adversaries = ClassifierBank(self.release_width, t.sensitive, c.head_hidden)

    def make_optimizers(self) -> None:
        c = self.config
        self.opt_e = make_optimizer(self.encoder.parameters(), c.lr_encoder, c.optimizer)
        self.opt_a = make_optimizer(self.allies.parameters(), c.lr_ally, c.optimizer)
        self.opt_v = make_optimizer(self.adversaries.parameters(), c.lr_adversary, c.optimizer)

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder, "allies": self.allies, "adversaries": self.adversaries}

    def release(self, x: torch.Tensor, generator: Noise) -> torch.Tensor:
        z = self.encoder(x)
        noise = self.config.release_noise
        return z + noise * gaussian_like(z, generator) if noise else z

    def encoder_loss(self, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Eq. 4 with alpha_A = alpha/n and alpha_V = (1-alpha)/m, plus the per-head losses."""
        c = self.config
        z = self.encoder(batch.x)
        la = self.allies.losses(z, batch.utility)
        lv = self.adversaries.losses(z, batch.sensitive)
        privacy = self.adversaries.privacy_term(c.privacy_loss, z, lv)
        return encoder_objective(c.alpha, list(la.values()), len(lv), privacy), la, lv

    def train_step(self, batch: Batch, sampler: BatchSampler, ctx: TrainContext) -> dict[str, torch.Tensor]:
        loss_e, _, _ = self.encoder_loss(batch)
        step(loss_e, self.opt_e, ctx, list(self.encoder.parameters()))
        with torch.no_grad():
            z = self.encoder(batch.x)
        la = self.allies.losses(z, batch.utility)
        step(loss_sum(la.values()), self.opt_a, ctx, list(self.allies.parameters()))
        for k in range(self.config.adversary_steps):  # on the same z; the first step's losses are the row's
            lk = self.adversaries.losses(z, batch.sensitive)
            step(loss_sum(lk.values()), self.opt_v, ctx, list(self.adversaries.parameters()))
            if k == 0:
                lv = lk
        return {"loss/encoder": loss_e.detach(), **loss_row("loss/ally", la), **loss_row("loss/adversary", lv)}


@register_population("eigan", knobs=("alpha", "lr_encoder", "lr_ally", "lr_adversary"))
def fit_eigan_population(configs: Sequence[MethodConfig], task: TaskSpec, train: Split, ctx: TrainContext) -> Fitted:
    """EIGAN runs equal in all but alpha and the learning rates, trained as one vectorised model: the members
    share their seed, hence initialisation and minibatches; each member's loss is summed into one scalar
    before differentiating, so each gets its own gradient and optimizer state, as alone."""
    cs = [cast(EIGANConfig, c) for c in configs]
    members = [EIGAN(c, task) for c in cs]
    c, dev, n = cs[0], ctx.device, len(cs)
    for m in members:
        m.to(dev)
    names_a, names_v = members[0].allies.names, members[0].adversaries.names
    encoder = Stack([m.encoder for m in members])
    allies, adversaries = bank_stacks(members, "allies"), bank_stacks(members, "adversaries")
    heads_a, heads_v = list(allies.values()), list(adversaries.values())
    tensors = {
        "e": encoder.tensors(),
        "a": [p for s in heads_a for p in s.tensors()],
        "v": [p for s in heads_v for p in s.tensors()],
    }
    lrs = {"e": "lr_encoder", "a": "lr_ally", "v": "lr_adversary"}
    opt = {k: LoneAdam(t, member_lr(cs, lrs[k]), c.optimizer) for k, t in tensors.items()}
    alpha = per_member(cs, "alpha", dev)
    everyone = torch.ones(n, dtype=torch.bool, device=dev)
    sampler = BatchSampler(train, c.batch_size, dev, c.seed + 1000 * ctx.rank, rows=ctx.rows(len(train)))
    w = torch.ones(n, sampler.batch_size, device=dev)

    def train_step(batch: Batch) -> dict[str, torch.Tensor]:
        x, ya, yv = batch.x.expand(n, -1, -1), shared(batch.utility, n), shared(batch.sensitive, n)
        z = single(encoder, x)
        la = list(copy_ces(heads_a, names_a, z, ya, w))
        lv = list(copy_ces(heads_v, names_v, z, yv, w))
        loss_e = encoder_objective(alpha, la, len(lv), privacy_term(c.privacy_loss, heads_v, z, w, lv))
        step_all(loss_e.sum(), tensors["e"], opt["e"], everyone)
        with torch.no_grad():
            z = single(encoder, x)
        la = list(copy_ces(heads_a, names_a, z, ya, w))
        step_all(loss_sum(la).sum(), tensors["a"], opt["a"], everyone)
        for k in range(c.adversary_steps):  # on the same z; the first step's losses are the row's
            lk = list(copy_ces(heads_v, names_v, z, yv, w))
            step_all(loss_sum(lk).sum(), tensors["v"], opt["v"], everyone)
            if k == 0:
                lv = lk
        return {
            "loss/encoder": loss_e.detach(),
            **{f"loss/ally/{k}": v.detach() for k, v in zip(names_a, la)},
            **{f"loss/adversary/{k}": v.detach() for k, v in zip(names_v, lv)},
        }

    histories = train_members(sampler, c.epochs, n, train_step, ctx)
    load_members(members, {"encoder": encoder, **allies, **adversaries})
    return list(zip(members, histories))
