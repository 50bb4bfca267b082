"""Distributed GPP (seed 001, Alg. 2): private encoders and adversaries per client, shared utility
classifiers at the aggregator, trained on the union of what the clients send.

Client m owns a Gaussian encoder T_theta_m and an adversary Q_phi^(m) per sensitive label; the
aggregator owns one utility classifier Q_psi_j per utility label. A client sends ONLY the sanitized
batch {(z_i, u_i)}_{i=1..b} (z = mu + sigma * eps); its sensitive labels never leave it. Per round:
  Phase 1  each selected client samples b rows and sends (z, u)           b * (d_z + d_u) numbers up
  Phase 2  the aggregator takes k Adam steps of every Q_psi_j on the union of the batches
  Phase 3  the aggregator broadcasts psi (|psi| numbers down); each client takes k steps of its
           adversaries on fresh batches, then one encoder step on
           beta_m * sum_j CE(u_j, Q_psi_j(z)) - sum_j CE(s_j, Q_phi_j(z)) + lambda_m * KL      (Alg. 2, l. 34)
Transport: Phase 3 of round r travels with the request of round r + 1 (one message down, one up per
round), and a last broadcast after the final round completes its Phase 3, so the computation is
exactly Alg. 2's. Rounds = epochs * ceil(max_m n_m / b): `epochs` counts passes over the largest
client's data. `beta` and `lambda_kl` are the paper's beta_m and lambda_m: one value for every client
or one per client. Upload payload: z as float32 and u as int32, 4 * b * (d_z + d_u) bytes.

Release: client m's z is its own encoder's; `encode(x)` of unseen rows without a client deals row i
to client i mod K (the union the aggregator would receive); federated runs audit each client on its
own test rows and the union of all clients' releases globally. A restarted client rejoins with the
current psi and a freshly initialised private encoder (its encoder never leaves it, so there is no
global copy to restore from)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from veil.config import param
from veil.errors import ConfigError
from veil.methods.base import Method, MethodConfig
from veil.methods.gpp import GaussianEncoder, reparameterize
from veil.methods.nets import ClassifierBank, make_optimizer, mlp
from veil.methods.registry import register_method
from veil.methods.federated.core import ClientUpdate, Failure, Node, derive_seed
from veil.methods.federated.method import FederatedMethod
from veil.methods.federated.ensemble import (ShardStack, Stack, StackedOptimizer, copy_ce, copy_mean, copy_uniform_ce,
                                        flat_module, load_flat_module, noise_like, seeded_modules, step_all)


@dataclass(frozen=True)
class DGPPConfig(MethodConfig):
    """GPP's fields with per-client beta_m / lambda_m, plus the federation (Alg. 2)."""

    K: int = param(5, "number of clients t (the paper's HAPT run: 5)", ge=1)
    beta: tuple[float, ...] = param((1.0,), "beta_m, weight of the utility CE: one value for every client or one per client", ge=0)
    lambda_kl: tuple[float, ...] = param((0.01,), "lambda_m, weight of the KL term: one value or one per client", ge=0)
    k: int = param(2, "utility-classifier steps at the aggregator and adversary steps at each client per round", ge=0)
    lr: float = param(1e-4, "Adam learning rate alpha of every network", gt=0)
    encoder_hidden: tuple[int, ...] = param((512, 256), "hidden widths of each client's encoder MLP", ge=1)
    head_hidden: tuple[int, ...] = param((128,), "hidden widths of each utility classifier and adversary", ge=1)
    privacy_loss: str = param("neg-ce", "encoder's privacy term: the paper's -sum CE(s) ('neg-ce') or CE against "
                              "uniform ('uniform')", choices=("neg-ce", "uniform"))
    release: str = param("sample", "released z: a draw mu + sigma*eps (the paper) or the mean mu", choices=("sample", "mean"))
    fraction: float = param(1.0, "fraction of clients sampled (seeded) to take part in each round", gt=0, le=1)


def per_client(field: str, values: tuple[float, ...], k: int) -> list[float]:
    """One value per client from a scalar or a K-long list."""
    if len(values) == 1:
        return [float(values[0])] * k
    if len(values) != k:
        raise ConfigError(field, list(values), f"one value, or K={k} values (one per client)")
    return [float(v) for v in values]


class _Group:
    def __init__(self, m: "DGPP", nodes: Sequence[Node]) -> None:
        c, t = m.config, m.task
        self.enc = Stack(seeded_modules(lambda: GaussianEncoder(t.d_in, c.encoder_hidden, c.d_z),
                                        [derive_seed(c.seed, n.id, 50) for n in nodes]))
        self.advs = [Stack(seeded_modules(lambda k=k: mlp(c.d_z, c.head_hidden, k),
                                          [derive_seed(c.seed, n.id, 51, j) for n in nodes]))
                     for j, k in enumerate(t.sensitive.values())]
        self.opt_e = StackedOptimizer(self.enc.tensors(), c.lr)
        self.opt_s = StackedOptimizer([p for s in self.advs for p in s.tensors()], c.lr)
        self.beta = torch.tensor([m.betas[n.id] for n in nodes])
        self.lam = torch.tensor([m.lambdas[n.id] for n in nodes])
        self.shards = ShardStack(nodes, list(t.utility) + list(t.sensitive))


def _randn(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=gen)


@register_method
class DGPP(FederatedMethod, Method):
    name = "d-gpp"
    Config = DGPPConfig
    description = ("distributed GPP: private encoder and adversary per client, clients send only (z, u), the "
                   "aggregator trains the shared utility classifiers on the union; per-client beta_m, lambda_m")
    paper = "seed 001 (GPP), Alg. 2"
    message_kind = "representations"
    config: DGPPConfig

    def build(self) -> None:
        c, t = self.config, self.task
        self.betas = per_client("beta", c.beta, c.K)
        self.lambdas = per_client("lambda_kl", c.lambda_kl, c.K)
        self.encoder = nn.ModuleList(seeded_modules(lambda: GaussianEncoder(t.d_in, c.encoder_hidden, c.d_z),
                                                    [derive_seed(c.seed, k, 50) for k in range(c.K)]))
        self.utility = ClassifierBank(c.d_z, t.utility, c.head_hidden)
        self.groups: dict[int, _Group] = {}
        self._node: int | None = None
        self._rounds_done = 0

    def make_optimizers(self) -> None:
        self.opt_u = make_optimizer(self.utility.parameters(), self.config.lr)

    def modules(self):
        return {"encoder": self.encoder, "utility": self.utility}

    @classmethod
    def deviations(cls, config: DGPPConfig) -> dict[str, str]:
        out = {}
        if config.release == "mean":
            out["release"] = "releases the mean mu instead of the paper's stochastic draw mu + sigma*eps"
        if config.privacy_loss == "uniform":
            out["privacy_loss"] = "encoder pushes adversaries to uniform predictions instead of maximising their CE"
        if config.fraction < 1:
            out["fraction"] = f"{config.fraction} of the clients take part in each round (Alg. 2 uses all)"
        return out

    def num_rounds(self, sizes: Sequence[int]) -> int:
        return self.config.epochs * max(1, math.ceil(max(sizes) / self.config.batch_size))

    # -- release --------------------------------------------------------------------------------
    def needs_node_states(self) -> bool:
        return True

    def release(self, x: torch.Tensor) -> torch.Tensor:
        mu, logvar = self.encoder[self._node or 0](x)
        return mu if self.config.release == "mean" else reparameterize(mu, logvar)

    def encode_node(self, x: np.ndarray, node: int) -> np.ndarray:
        self._node = int(node)
        try:
            return Method.encode(self, x)
        finally:
            self._node = None

    def encode(self, x: np.ndarray, batch_size: int = 4096) -> np.ndarray:
        """Row i is released by client i mod K (the union the aggregator sees)."""
        k = self.config.K
        z = np.zeros((len(x), self.config.d_z), np.float32)
        for m in range(min(k, len(x))):
            rows = np.arange(m, len(x), k)
            z[rows] = self.encode_node(np.asarray(x)[rows], m)
        return z

    # -- client role ----------------------------------------------------------------------------
    def init_nodes(self, nodes: Sequence[Node]) -> None:
        self.groups[0] = _Group(self, nodes)
        self.psi = ClassifierBank(self.config.d_z, self.task.utility, self.config.head_hidden)  # local copy of the broadcast
        for i, n in enumerate(nodes):
            n.slot = (0, i)

    def join(self, nodes: Sequence[Node], message: Any) -> None:
        for n in nodes:
            n.joined = True

    def _phase3(self, nodes: Sequence[Node], members: torch.Tensor, g: _Group, enc: Stack, advs: list[Stack],
                opt_e: StackedOptimizer, opt_s: StackedOptimizer, psi: np.ndarray) -> dict[str, torch.Tensor]:
        """k adversary steps on fresh batches, then one encoder step against the received psi (Alg. 2, l. 21-35)."""
        c, t = self.config, self.task
        load_flat_module(self.psi, psi)
        plan = ShardStack.sample_plan(nodes, c.k + 1, c.batch_size)
        everyone = torch.ones(len(nodes), dtype=torch.bool)
        adv_tensors = [p for s in advs for p in s.tensors()]
        for tau in range(c.k):
            x, y, w = g.shards.gather(plan[:, tau], members)
            with torch.no_grad():
                mu, logvar = enc(x)
                z = mu + torch.exp(0.5 * logvar) * noise_like(nodes, plan[:, tau], c.d_z, _randn)
            ls = sum(copy_ce(a(z), y[lab], w) for a, lab in zip(advs, t.sensitive))
            step_all(ls.sum(), adv_tensors, opt_s, everyone)
        x, y, w = g.shards.gather(plan[:, c.k], members)
        mu, logvar = enc(x)
        z = mu + torch.exp(0.5 * logvar) * noise_like(nodes, plan[:, c.k], c.d_z, _randn)
        lu = sum(copy_ce(h(z), y[lab], w) for h, lab in zip(self.psi.heads, t.utility))
        lv = [copy_ce(a(z), y[lab], w) for a, lab in zip(advs, t.sensitive)]
        privacy = sum(copy_uniform_ce(a(z), w) for a in advs) if c.privacy_loss == "uniform" else -sum(lv)
        kl = copy_mean(0.5 * (mu.pow(2) + logvar.exp() - logvar - 1).sum(-1), w)
        beta, lam = g.beta[members], g.lam[members]
        loss = beta * lu + privacy + lam * kl
        step_all(loss.sum(), enc.tensors(), opt_e, everyone)
        return {"loss/encoder": loss.detach(), "loss/kl": kl.detach(), "loss/utility": lu.detach(),
                "loss/adversary": sum(lv).detach()}

    def _run(self, nodes: Sequence[Node], psi: np.ndarray | None, round: int, upload: bool) -> dict[int, ClientUpdate]:
        c, t = self.config, self.task
        g = self.groups[0]
        members = torch.tensor([n.slot[1] for n in nodes])
        enc, advs = g.enc.take(members), [a.take(members) for a in g.advs]
        opt_e = g.opt_e.take(members, enc.tensors())
        opt_s = g.opt_s.take(members, [p for s in advs for p in s.tensors()])
        metrics = self._phase3(nodes, members, g, enc, advs, opt_e, opt_s, psi) if psi is not None else {}
        g.enc.put(members, enc)
        for full, sub in zip(g.advs, advs):
            full.put(members, sub)
        g.opt_e.put(members, opt_e)
        g.opt_s.put(members, opt_s)
        if not upload:
            return {}
        plan = ShardStack.sample_plan(nodes, 1, c.batch_size)  # Phase 1: one sanitized batch per client
        x, y, w = g.shards.gather(plan[:, 0], members)
        with torch.no_grad():
            mu, logvar = enc(x)
            z = mu + torch.exp(0.5 * logvar) * noise_like(nodes, plan[:, 0], c.d_z, _randn)
        out = {}
        for i, n in enumerate(nodes):
            b = int((plan[i, 0] >= 0).sum())
            payload = {"z": z[i, :b].numpy().astype(np.float32),
                       "u": {lab: y[lab][i, :b].numpy().astype(np.int32) for lab in t.utility}}  # s stays here
            out[n.id] = ClientUpdate(n.id, round, b, payload, "representations",
                                     {k: float(v[i]) for k, v in metrics.items()})
        return out

    def client_update_many(self, nodes: Sequence[Node], messages: Mapping[int, Any], round: int) -> dict[int, ClientUpdate]:
        psi = next((m["psi"] for m in messages.values() if m is not None), None)
        return self._run(nodes, psi, round, upload=True)

    def finalize(self, nodes: Sequence[Node], message: Any) -> None:
        if message is not None and nodes:
            self._run(nodes, message["psi"], -1, upload=False)

    def export_node_state(self, node: Node) -> dict[str, np.ndarray]:
        st = self.groups[0].enc.state_dict(node.slot[1])
        return {k: v.numpy() for k, v in st.items()}

    # -- server role ----------------------------------------------------------------------------
    def server_start(self, sizes: Mapping[int, int]) -> None:
        super().server_start(sizes)
        self._rounds_done = 0

    def join_message(self) -> Any:
        return {}

    def _psi(self) -> np.ndarray:
        return flat_module(self.utility).numpy().astype(np.float32)

    def configure(self, round: int, nodes: Sequence[int]) -> dict[int, Any]:
        msg = {"psi": self._psi()} if self._rounds_done else None
        return {k: msg for k in nodes}

    def aggregate(self, round: int, updates: Sequence[ClientUpdate], failures: Sequence[Failure]) -> Any:
        if updates:  # Phase 2: k steps of every utility classifier on the union of the sanitized batches
            z = torch.as_tensor(np.concatenate([np.asarray(u.payload["z"]) for u in updates]))
            labels = {lab: torch.as_tensor(np.concatenate([np.asarray(u.payload["u"][lab]) for u in updates])).long()
                      for lab in self.task.utility}
            for _ in range(self.config.k):
                loss = sum(F.cross_entropy(h(z), labels[lab]) for h, lab in zip(self.utility.heads, self.task.utility))
                self.opt_u.zero_grad(set_to_none=True)
                loss.backward()
                self.opt_u.step()
            self._rounds_done += 1
        return {"psi": self._psi()}

    def finalize_message(self) -> Any | None:
        return {"psi": self._psi()} if self._rounds_done else None

    def global_state(self) -> dict[str, np.ndarray]:
        return {"psi": self._psi()}

    def assemble(self, global_state: Mapping[str, np.ndarray], node_states: Mapping[int, Mapping[str, np.ndarray]]) -> None:
        load_flat_module(self.utility, global_state["psi"])
        for k, st in node_states.items():
            self.encoder[int(k)].load_state_dict({n: torch.as_tensor(np.asarray(v)) for n, v in st.items()})
