"""LDP-FRL: representation learning with an eps-LDP Laplace mechanism on the features (seed 002).

Per sample (Alg. 1, Table 1):
    v     = FeatureExtractor(x)            d_in-100-d_z, bounded to [-c, c]   (Veil: tanh or clip)
    z     = M_eps(v) = v + Laplace(0, b)   b = Delta / eps, Delta = 2 * c * d_z (L1 sensitivity)
    y_hat = UtilityDecoder(z)              d_z-100-|Y|   (one per utility label)
    x_hat = SideDecoder(z, s)              (d_z + d_s)-100-d_in   (one per sensitive label)
    loss  = CE(y, y_hat) + beta * MSE(x, x_hat)     (eq. 15; MSE averaged over the side decoders)
The mechanism is applied in training and at release, so I(S;Z) <= I(X;Z) <= eps (Theorem 1) holds
for the released z. This class trains one centralised model (the paper's per-client model with
K = 1); the federated runner reuses the same networks and `LaplaceMechanism` under FedAvg.

Side-decoder input: the paper feeds a binary s as one scalar (d_s = 1, Table 1); Veil does the
same for binary labels and uses a one-hot vector (d_s = |S|) for labels with more classes.
Utility decoder: Table 1 lists a sigmoid over 2 outputs followed by cross-entropy; Veil uses the
equivalent well-posed form, softmax cross-entropy on the decoder's logits.

Its population form trains P runs that differ only in eps, beta and lr as one vectorised model
(`veil.methods.population`)."""

from __future__ import annotations

from typing import Mapping, Sequence, cast

import torch
from torch import nn
from torch.nn import functional as F

from veil.datasets.dataset import Split, TaskSpec
from veil.methods.configs.ldp_frl_card import LDPFRLCard, LDPFRLConfig
from veil.methods.ensemble_ops import copy_ces, single
from veil.methods.federated.ensemble import Stack, step_all
from veil.methods.mechanisms import LaplaceMechanism, l1_sensitivity
from veil.methods.method import (
    Batch,
    BatchSampler,
    LDPRelease,
    Method,
    MethodConfig,
    TrainContext,
    step,
)
from veil.methods.nets import ClassifierBank, loss_row, loss_sum, make_optimizer, mlp
from veil.methods.population import (
    Fitted,
    LoneAdam,
    bank_stacks,
    load_members,
    member_lr,
    per_copy,
    per_member,
    register_population,
    shared,
    train_members,
)
from veil.methods.table import register_method
from veil.randomness import Noise


class BoundedExtractor(nn.Module):
    """MLP d_in -> hidden -> d_z whose output is bounded to [-c, c] by c*tanh or a clamp."""

    def __init__(self, d_in: int, hidden: tuple[int, ...], d_z: int, bound: str, c: float) -> None:
        super().__init__()
        self.net = mlp(d_in, hidden, d_z)
        self.bound, self.c = bound, float(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bound(self.net(x), self.bound, self.c)


def bound(v: torch.Tensor, how: str, c: float) -> torch.Tensor:
    """The bound on a raw extractor output v: c*tanh(v) or a clamp to [-c, c] (also used by the population form)."""
    return c * torch.tanh(v) if how == "tanh" else v.clamp(-c, c)


def side_width(n_classes: int) -> int:
    """Width d_s of the sensitive input of a side decoder: 1 for a binary label (Table 1), else one-hot."""
    return 1 if n_classes == 2 else n_classes


def side_input(s: torch.Tensor, n_classes: int) -> torch.Tensor:
    if n_classes == 2:
        return s.float().unsqueeze(1)
    return F.one_hot(s, n_classes).float()


class SideDecoders(nn.Module):
    """One decoder per sensitive label reconstructing x from (z, s)."""

    def __init__(self, d_z: int, d_in: int, sensitive: Mapping[str, int], hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.names = list(sensitive)
        self.classes = [int(sensitive[n]) for n in self.names]
        self.decoders = nn.ModuleList([mlp(d_z + side_width(k), hidden, d_in) for k in self.classes])

    def losses(self, z: torch.Tensor, x: torch.Tensor, labels: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for name, k, dec in zip(self.names, self.classes, self.decoders):
            x_hat = dec(torch.cat([z, side_input(labels[name], k)], dim=1))
            out[name] = F.mse_loss(x_hat, x)
        return out


@register_method
class LDPFRL(LDPFRLCard, Method):
    config: LDPFRLConfig

    def build(self) -> None:
        c, t = self.config, self.task
        self.encoder = BoundedExtractor(t.d_in, c.encoder_hidden, c.d_z, c.bound, c.clip)
        self.utility = ClassifierBank(c.d_z, t.utility, c.utility_hidden)
        self.side = SideDecoders(c.d_z, t.d_in, t.sensitive, c.side_hidden)
        self.mechanism = LaplaceMechanism(c.eps, l1_sensitivity(c.clip, c.d_z))

    def make_optimizers(self) -> None:
        self.opt = make_optimizer(
            self.parameters_of("encoder", "utility", "side"), self.config.lr, self.config.optimizer
        )

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder, "utility": self.utility, "side": self.side}

    def release(self, x: torch.Tensor, generator: Noise) -> torch.Tensor:
        return self.mechanism(self.encoder(x), generator)

    def ldp_release(self) -> LDPRelease:
        c = self.config
        return LDPRelease(self.mechanism, self.encoder, c.clip, c.d_z)

    def train_step(self, batch: Batch, sampler: BatchSampler, ctx: TrainContext) -> dict[str, torch.Tensor]:
        z = self.mechanism(self.encoder(batch.x))
        lu = self.utility.losses(z, batch.utility)
        ls = self.side.losses(z, batch.x, batch.sensitive)
        ce = loss_sum(lu.values())
        mse = loss_sum(ls.values()) / len(ls)
        loss = ce + self.config.beta * mse
        step(loss, self.opt, ctx, list(self.parameters_of("encoder", "utility", "side")))
        return {
            "loss/total": loss.detach(),
            "loss/reconstruction": mse.detach(),
            **loss_row("loss/utility", lu),
            **loss_row("loss/side", ls),
        }


# -- population form ---------------------------------------------------------------------------------
@register_population("ldp-frl", knobs=("eps", "beta", "lr"))
def fit_ldp_frl_population(configs: Sequence[MethodConfig], task: TaskSpec, train: Split, ctx: TrainContext) -> Fitted:
    """LDP-FRL runs equal in all but eps, beta and lr, trained as one vectorised model. Members share their seed,
    hence initialisation, minibatches and the standard Laplace draws: member p's noise is its own scale
    b_p = Delta / eps_p times the draw a solo run makes, so each member sees exactly its solo run's noise."""
    cs = [cast(LDPFRLConfig, c) for c in configs]
    members = [LDPFRL(c, task) for c in cs]  # each seeds the global RNG; it is left where one solo run leaves it
    c, dev, n = cs[0], ctx.device, len(cs)
    for m in members:
        m.to(dev)
    names_u = members[0].utility.names
    classes = members[0].side.classes
    encoder = Stack([m.encoder.net for m in members])
    utility = bank_stacks(members, "utility")
    side = {f"side.decoders.{j}": Stack([m.side.decoders[j] for m in members]) for j in range(len(classes))}
    stacks = {"encoder.net": encoder, **utility, **side}
    tensors = [p for s in stacks.values() for p in s.tensors()]
    opt = LoneAdam(tensors, member_lr(cs, "lr"), c.optimizer)
    beta = per_member(cs, "beta", dev)
    scales = [m.mechanism.scale for m in members]
    noisy = any(b > 0 for b in scales)
    everyone = torch.ones(n, dtype=torch.bool, device=dev)
    sampler = BatchSampler(train, c.batch_size, dev, c.seed + 1000 * ctx.rank, rows=ctx.rows(len(train)))
    w = torch.ones(n, sampler.batch_size, device=dev)
    heads_u, heads_side, names_s = list(utility.values()), list(side.values()), members[0].side.names

    def train_step(batch: Batch) -> dict[str, torch.Tensor]:
        v = bound(single(encoder, batch.x.expand(n, -1, -1)), c.bound, c.clip)
        if noisy:  # the solo run's draw: e1 - e2 of two Exp(1) samples shaped like one member's v
            unit = LaplaceMechanism(1.0, 1.0).noise(v[0].detach())
            v = v + per_copy(scales, v) * unit
        lu = list(copy_ces(heads_u, names_u, v, shared(batch.utility, n), w))
        ls = []
        for dec, name, k in zip(heads_side, names_s, classes):
            s_in = side_input(batch.sensitive[name], k).expand(n, -1, -1)
            x_hat = single(dec, torch.cat([v, s_in], dim=-1))
            ls.append(((x_hat - batch.x) ** 2).mean(dim=(1, 2)))
        ce = loss_sum(lu)
        mse = loss_sum(ls) / len(ls)
        loss = ce + beta * mse
        step_all(loss.sum(), tensors, opt, everyone)
        return {
            "loss/total": loss.detach(),
            "loss/reconstruction": mse.detach(),
            **{f"loss/utility/{k}": x.detach() for k, x in zip(names_u, lu)},
            **{f"loss/side/{k}": x.detach() for k, x in zip(names_s, ls)},
        }

    histories = train_members(sampler, c.epochs, n, train_step, ctx)
    load_members(members, stacks)
    return list(zip(members, histories))
