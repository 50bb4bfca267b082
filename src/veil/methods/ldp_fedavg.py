"""LDP-FedAvg: the `ldp-frl` model (seed 002) trained by FedAvg, as the paper's Alg. 1.

Each round the server broadcasts omega_t (every parameter: feature extractor, utility decoders, side
decoders); each selected client sets omega_k <- omega_t, runs `local_epochs` passes over its data on
    CE(y, y_hat) + beta * MSE(x, x_hat),   z = M_eps(v)  (the calibrated Laplace mechanism)
and returns omega_k; the server sets omega_{t+1} = (1/K) sum_k omega_k, the uniform average (over the
clients whose update arrived). Rounds = ceil(epochs / local_epochs); the paper uses one local pass
and K = 20 clients. Networks and `LaplaceMechanism` come from `ldp_frl` / `mechanisms` unchanged.
The released z is M_eps(v) from the final global model."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from veil.config import param
from veil.methods.ldp_frl import LDPFRL, BoundedExtractor, LDPFRLConfig, side_input, side_width
from veil.methods.nets import mlp
from veil.methods.registry import register_method
from veil.methods.federated.core import ClientUpdate, Failure, Node, derive_seed
from veil.methods.federated.method import FederatedMethod
from veil.methods.federated.ensemble import (ShardStack, Stack, StackedOptimizer, copy_ce, copy_mean, noise_like,
                                        seeded_modules, step_all)


@dataclass(frozen=True)
class LDPFedAvgConfig(LDPFRLConfig):
    """LDP-FRL's fields plus FedAvg's: clients, local passes per round, participation."""

    K: int = param(20, "number of clients (the paper: 20)", ge=1)
    local_epochs: int = param(1, "passes over the local data per round (Alg. 1: one; rounds = ceil(epochs / local_epochs))", ge=1)
    fraction: float = param(1.0, "fraction of clients sampled (seeded) to take part in each round", gt=0, le=1)


class _Group:
    """All nodes of one host as one ensemble (every client has the same objective)."""

    def __init__(self, m: "LDPFedAvg", nodes: Sequence[Node]) -> None:
        c, t = m.config, m.task
        seeds = lambda role, j=0: [derive_seed(c.seed, n.id, role, j) for n in nodes]  # noqa: E731
        self.enc = Stack(seeded_modules(lambda: BoundedExtractor(t.d_in, c.encoder_hidden, c.d_z, c.bound, c.clip), seeds(40)))
        self.util = [Stack(seeded_modules(lambda k=k: mlp(c.d_z, c.utility_hidden, k), seeds(41, j)))
                     for j, k in enumerate(t.utility.values())]
        self.side = [Stack(seeded_modules(lambda k=k: mlp(c.d_z + side_width(k), c.side_hidden, t.d_in), seeds(42, j)))
                     for j, k in enumerate(t.sensitive.values())]
        self.opt = StackedOptimizer(self.tensors(), c.lr, c.optimizer)
        self.shards = ShardStack(nodes, list(t.utility) + list(t.sensitive))

    def stacks(self) -> list[Stack]:
        return [self.enc, *self.util, *self.side]

    def tensors(self, stacks: Sequence[Stack] | None = None) -> list[torch.Tensor]:
        return [p for s in (stacks or self.stacks()) for p in s.tensors()]


def _set_flat(stacks: Sequence[Stack], i: int, vec: torch.Tensor) -> None:
    o = 0
    for s in stacks:
        s.set_flat(i, vec[o:o + s.size])
        o += s.size


def _side(s: torch.Tensor, n_classes: int) -> torch.Tensor:
    """`ldp_frl.side_input` for a (P, b) label tensor."""
    return side_input(s.reshape(-1), n_classes).view(*s.shape, -1)


def _flat(stacks: Sequence[Stack], i: int) -> torch.Tensor:
    return torch.cat([s.flat(i) for s in stacks])


@register_method
class LDPFedAvg(FederatedMethod, LDPFRL):
    name = "ldp-fedavg"
    Config = LDPFedAvgConfig
    description = ("the ldp-frl model (eps-LDP Laplace on bounded features, CE + beta*MSE side decoders) trained "
                   "by FedAvg over all parameters, uniform 1/K average")
    paper = "seed 002 (LDP-FRL), Alg. 1 (FedAvg)"
    config: LDPFedAvgConfig

    def build(self) -> None:
        super().build()
        self.groups: dict[int, _Group] = {}

    def make_optimizers(self) -> None:  # clients keep their own optimizers
        pass

    @classmethod
    def deviations(cls, config: LDPFedAvgConfig) -> dict[str, str]:
        out = {k: v for k, v in LDPFRL.deviations(config).items() if k != "training"}
        if config.fraction < 1:
            out["fraction"] = f"{config.fraction} of the clients take part in each round (the paper uses all)"
        return out

    def num_rounds(self, sizes: Sequence[int]) -> int:
        return math.ceil(self.config.epochs / self.config.local_epochs)

    # -- client role ----------------------------------------------------------------------------
    def init_nodes(self, nodes: Sequence[Node]) -> None:
        g = _Group(self, nodes)
        self.groups[0] = g
        for i, n in enumerate(nodes):
            n.slot = (0, i)

    def join(self, nodes: Sequence[Node], message: Any) -> None:
        omega = torch.as_tensor(np.asarray(message["omega"]))
        for n in nodes:
            _set_flat(self.groups[0].stacks(), n.slot[1], omega)
            n.joined = True

    def client_update_many(self, nodes: Sequence[Node], messages: Mapping[int, Any], round: int) -> dict[int, ClientUpdate]:
        c, t = self.config, self.task
        g = self.groups[0]
        members = torch.tensor([n.slot[1] for n in nodes])
        stacks = [s.take(members) for s in g.stacks()]
        enc, util, side = stacks[0], stacks[1:1 + len(g.util)], stacks[1 + len(g.util):]
        opt = g.opt.take(members, g.tensors(stacks))
        for i, n in enumerate(nodes):  # omega_k <- omega_t
            _set_flat(stacks, i, torch.as_tensor(np.asarray(messages[n.id]["omega"])))
        plan, steps = ShardStack.epoch_plan(nodes, c.local_epochs, c.batch_size)
        sums = torch.zeros(len(nodes), 2)
        classes = list(t.sensitive.values())
        for step in range(plan.shape[1]):
            active = step < steps
            x, y, w = g.shards.gather(plan[:, step], members)
            v = enc(x)
            noise = noise_like(nodes, plan[:, step], c.d_z,
                               lambda shape, gen: self.mechanism.noise(torch.empty(shape), generator=gen))
            z = v + noise
            ce = sum(copy_ce(h(z), y[lab], w) for h, lab in zip(util, t.utility))
            mse = sum(copy_mean(((dec(torch.cat([z, _side(y[lab], k)], dim=-1)) - x) ** 2).mean(-1), w)
                      for dec, lab, k in zip(side, t.sensitive, classes)) / len(side)
            loss = ce + c.beta * mse
            step_all(loss.sum(), g.tensors(stacks), opt, active)
            sums += active.unsqueeze(1) * torch.stack([loss.detach(), mse.detach()], dim=1)
        for full, sub in zip(g.stacks(), stacks):
            full.put(members, sub)
        g.opt.put(members, opt)
        out = {}
        for i, n in enumerate(nodes):
            mean = (sums[i] / max(int(steps[i]), 1)).tolist()
            out[n.id] = ClientUpdate(n.id, round, n.num_examples, {"omega": _flat(stacks, i).numpy().astype(np.float32)},
                                     "parameters", {"loss/total": mean[0], "loss/reconstruction": mean[1]})
        return out

    # -- server role ----------------------------------------------------------------------------
    def _modules(self):
        return [self.encoder, self.utility, self.side]

    def server_start(self, sizes: Mapping[int, int]) -> None:
        super().server_start(sizes)
        self.omega = torch.cat([torch.nn.utils.parameters_to_vector(m.parameters()) for m in self._modules()]).detach().numpy().astype(np.float32)

    def join_message(self) -> Any:
        return {"omega": self.omega.copy()}

    def configure(self, round: int, nodes: Sequence[int]) -> dict[int, Any]:
        msg = {"omega": self.omega}
        return {k: msg for k in nodes}

    def aggregate(self, round: int, updates: Sequence[ClientUpdate], failures: Sequence[Failure]) -> Any:
        if updates:  # omega_{t+1} = (1/K) sum_k omega_k over the clients that delivered
            acc = np.zeros(self.omega.size, dtype=np.float64)
            for u in updates:
                acc += np.asarray(u.payload["omega"], dtype=np.float64)
            self.omega = (acc / len(updates)).astype(np.float32)
            self._load(self.omega)
        return {"omega": self.omega}

    def _load(self, vec: np.ndarray) -> None:
        v = torch.as_tensor(vec)
        o = 0
        for m in self._modules():
            n = sum(p.numel() for p in m.parameters())
            torch.nn.utils.vector_to_parameters(v[o:o + n].clone(), m.parameters())
            o += n

    def global_state(self) -> dict[str, np.ndarray]:
        return {"omega": self.omega.copy()}

    def assemble(self, global_state: Mapping[str, np.ndarray], node_states: Mapping[int, Any]) -> None:
        self.omega = np.asarray(global_state["omega"], dtype=np.float32).copy()
        self._load(self.omega)
