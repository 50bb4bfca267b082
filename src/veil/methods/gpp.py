"""GPP, the Gaussian Privacy Protector (seed 001, Alg. 1).

The encoder outputs the mean and diagonal std of a Gaussian; z = mu + sigma * eps. Each iteration
takes k steps of every utility classifier and adversary (fresh minibatches, z detached), then one
encoder step on
    beta * sum_j CE(u_j) - sum_j CE(s_j) + lambda_kl * KL(N(mu, sigma^2) || N(0, I))      (eq. 39).

Its population form trains P runs that differ only in beta, lambda_kl and lr as one vectorised model
(`veil.methods.population`)."""

from __future__ import annotations

from typing import Mapping, Sequence, cast

import torch
from torch import nn

from veil.datasets.dataset import Split, TaskSpec
from veil.methods.configs.gpp_card import GPPCard, GPPConfig
from veil.methods.ensemble_ops import copy_ces, pair, privacy_term
from veil.methods.federated.ensemble import ChainStep, Stack, linear_chain, run_chain, step_all
from veil.methods.method import Batch, BatchSampler, Method, MethodConfig, TrainContext, step
from veil.methods.nets import ClassifierBank, gaussian_kl, gaussian_kl_rows, loss_row, loss_sum, make_optimizer, mlp
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


class GaussianEncoder(nn.Module):
    """MLP trunk with mean and log-variance heads."""

    def __init__(self, d_in: int, hidden: tuple[int, ...], d_z: int) -> None:
        super().__init__()
        self.trunk = mlp(d_in, hidden[:-1], hidden[-1])
        self.mu = nn.Linear(hidden[-1], d_z)
        self.logvar = nn.Linear(hidden[-1], d_z)
        trunk = linear_chain(self.trunk)
        assert trunk is not None  # `mlp` builds the trunk
        self.trunk_chain: list[ChainStep] = [
            (k, f"trunk.{a}" if k == "linear" else a, b and f"trunk.{b}") for k, a, b in trunk
        ]
        """The trunk as a chain over a `Stack`'s parameter names (`stacked_forward`), built once."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.relu(self.trunk(x))
        return self.mu(h), self.logvar(h).clamp(-12.0, 8.0)

    def stacked_forward(self, params: Mapping[str, torch.Tensor], x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward` of every copy of a `Stack` of these encoders on its own rows x (P, b, d_in), as batched matmuls:
        the same arithmetic as vmap over `forward`, without its dispatch on every call."""
        h = torch.relu(run_chain(self.trunk_chain, params, x))
        return run_chain(HEAD_MU, params, h), run_chain(HEAD_LOGVAR, params, h).clamp(-12.0, 8.0)


HEAD_MU: list[ChainStep] = [("linear", "mu.weight", "mu.bias")]
HEAD_LOGVAR: list[ChainStep] = [("linear", "logvar.weight", "logvar.bias")]


def reparameterize(mu: torch.Tensor, logvar: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
    """z = mu + sigma * eps, eps standard normal: `noise` if given, else a fresh draw like mu."""
    return mu + torch.exp(0.5 * logvar) * (torch.randn_like(mu) if noise is None else noise)


def released(mu: torch.Tensor, logvar: torch.Tensor, release: str, generator: Noise) -> torch.Tensor:
    """The released z of a Gaussian encoder's output: the mean mu ('mean') or a draw ('sample') from `generator`."""
    return mu if release == "mean" else reparameterize(mu, logvar, gaussian_like(mu, generator))


@register_method
class GPP(GPPCard, Method):
    config: GPPConfig

    def build(self) -> None:
        c, t = self.config, self.task
        self.encoder = GaussianEncoder(t.d_in, c.encoder_hidden, c.d_z)
        self.utility = ClassifierBank(c.d_z, t.utility, c.head_hidden)
        self.adversaries = ClassifierBank(c.d_z, t.sensitive, c.head_hidden)

    def make_optimizers(self) -> None:
        lr = self.config.lr
        self.opt_e = make_optimizer(self.encoder.parameters(), lr)
        self.opt_u = make_optimizer(self.utility.parameters(), lr)
        self.opt_s = make_optimizer(self.adversaries.parameters(), lr)

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder, "utility": self.utility, "adversaries": self.adversaries}

    def release(self, x: torch.Tensor, generator: Noise) -> torch.Tensor:
        mu, logvar = self.encoder(x)
        return released(mu, logvar, self.config.release, generator)

    def train_step(self, batch: Batch, sampler: BatchSampler, ctx: TrainContext) -> dict[str, torch.Tensor]:
        c = self.config
        # Phase 1: k steps of the utility classifiers and adversaries on fresh minibatches.
        for _ in range(c.k):
            b = sampler.sample()
            with torch.no_grad():
                z = reparameterize(*self.encoder(b.x))
            lu = self.utility.losses(z, b.utility)
            ls = self.adversaries.losses(z, b.sensitive)
            step(loss_sum(lu.values()), self.opt_u, ctx, list(self.utility.parameters()))
            step(loss_sum(ls.values()), self.opt_s, ctx, list(self.adversaries.parameters()))
        # Phase 2: one encoder step (eq. 39).
        mu, logvar = self.encoder(batch.x)
        z = reparameterize(mu, logvar)
        lu = self.utility.losses(z, batch.utility)
        ls = self.adversaries.losses(z, batch.sensitive)
        kl = gaussian_kl(mu, logvar)
        privacy = self.adversaries.privacy_term(c.privacy_loss, z, ls)
        loss = c.beta * loss_sum(lu.values()) + privacy + c.lambda_kl * kl
        step(loss, self.opt_e, ctx, list(self.encoder.parameters()))
        return {
            "loss/encoder": loss.detach(),
            "loss/kl": kl.detach(),
            **loss_row("loss/utility", lu),
            **loss_row("loss/adversary", ls),
        }


# -- population form ---------------------------------------------------------------------------------
@register_population("gpp", knobs=("beta", "lambda_kl", "lr"))
def fit_gpp_population(configs: Sequence[MethodConfig], task: TaskSpec, train: Split, ctx: TrainContext) -> Fitted:
    """GPP runs equal in all but beta, lambda_kl and lr, trained as one vectorised model: the members share
    their seed, hence initialisation, minibatches and training noise; each member's loss is summed into one
    scalar before differentiating, so each gets its own gradient and Adam state, as alone."""
    cs = [cast(GPPConfig, c) for c in configs]
    members = [GPP(c, task) for c in cs]  # each seeds the global RNG; it is left where one solo run leaves it
    c, dev, n = cs[0], ctx.device, len(cs)
    for m in members:
        m.to(dev)
    names_u, names_s = members[0].utility.names, members[0].adversaries.names
    encoder = Stack([m.encoder for m in members])
    utility, adversaries = bank_stacks(members, "utility"), bank_stacks(members, "adversaries")
    tensors = {
        "e": encoder.tensors(),
        "u": [p for s in utility.values() for p in s.tensors()],
        "s": [p for s in adversaries.values() for p in s.tensors()],
    }
    opt = {k: LoneAdam(t, member_lr(cs, "lr")) for k, t in tensors.items()}
    beta, lam = per_member(cs, "beta", dev), per_member(cs, "lambda_kl", dev)
    everyone = torch.ones(n, dtype=torch.bool, device=dev)
    sampler = BatchSampler(train, c.batch_size, dev, c.seed + 1000 * ctx.rank, rows=ctx.rows(len(train)))
    w = torch.ones(n, sampler.batch_size, device=dev)
    heads_u, heads_s = list(utility.values()), list(adversaries.values())

    def encode(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = pair(encoder, x.expand(n, -1, -1))
        return mu, logvar, reparameterize(mu, logvar, torch.randn_like(mu[0]))  # the solo run's one draw, shared

    def train_step(batch: Batch) -> dict[str, torch.Tensor]:
        for _ in range(c.k):
            b = sampler.sample()
            with torch.no_grad():
                z = encode(b.x)[2]
            lu = loss_sum(copy_ces(heads_u, names_u, z, shared(b.utility, n), w))
            step_all(lu.sum(), tensors["u"], opt["u"], everyone)
            ls = loss_sum(copy_ces(heads_s, names_s, z, shared(b.sensitive, n), w))
            step_all(ls.sum(), tensors["s"], opt["s"], everyone)
        mu, logvar, z = encode(batch.x)
        lu_heads = list(copy_ces(heads_u, names_u, z, shared(batch.utility, n), w))
        ls_heads = list(copy_ces(heads_s, names_s, z, shared(batch.sensitive, n), w))
        kl = gaussian_kl_rows(mu, logvar).mean(dim=-1)
        privacy = privacy_term(c.privacy_loss, heads_s, z, w, ls_heads)
        loss = beta * loss_sum(lu_heads) + privacy + lam * kl
        step_all(loss.sum(), tensors["e"], opt["e"], everyone)
        return {
            "loss/encoder": loss.detach(),
            "loss/kl": kl.detach(),
            **{f"loss/utility/{k}": v.detach() for k, v in zip(names_u, lu_heads)},
            **{f"loss/adversary/{k}": v.detach() for k, v in zip(names_s, ls_heads)},
        }

    histories = train_members(sampler, c.epochs, n, train_step, ctx)
    load_members(members, {"encoder": encoder, **utility, **adversaries})
    return list(zip(members, histories))
