"""LDP-FedAvg: the `ldp-frl` model (seed 002) trained by FedAvg, as the paper's Alg. 1.

Each round the server broadcasts omega_t (every parameter: feature extractor, utility decoders, side
decoders); each selected client sets omega_k <- omega_t, runs `local_epochs` passes over its data on
    CE(y, y_hat) + beta * MSE(x, x_hat),   z = M_eps(v)  (the calibrated Laplace mechanism)
and returns omega_k; the server sets omega_{t+1} = (1/K) sum_k omega_k, the uniform average (over the
clients whose update arrived). Rounds = ceil(epochs / local_epochs); the paper uses one local pass
and K = 20 clients. Warm-up (Veil, `warmup_epochs`, default 20; 0 = Alg. 1): a client whose update the server
has never received first takes that many extra local passes on the utility term alone (no reconstruction, which
keeps s in a young extractor's v), so the first parameters the aggregator receives are not a fresh extractor's.
The server decides it per downlink (it knows who has uploaded), so a restarted node host
does not warm up again and a client whose first update was lost still does.
Networks and `LaplaceMechanism` come from `ldp_frl` / `mechanisms` unchanged. The released z is M_eps(v) from
the final global model."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from veil.methods.configs.ldp_fedavg_card import LDPFedAvgCard, LDPFedAvgConfig
from veil.methods.ensemble_ops import (
    assign_slots,
    copy_ces,
    members,
    node_means,
    put_all,
    seeded_stack,
    single,
    slot,
    stack_tensors,
    take_all,
)
from veil.methods.federated.aggregation import aggregate
from veil.methods.federated.core import ClientUpdate, Failure, Node
from veil.methods.federated.ensemble import (
    ShardStack,
    Stack,
    StackedOptimizer,
    copy_mean,
    noise_like,
    step_all,
)
from veil.methods.federated.fed_method import FederatedMethod
from veil.methods.ldp_frl import LDPFRL, BoundedExtractor, side_input, side_width
from veil.methods.nets import loss_sum, mlp
from veil.methods.table import register_method


def first_regular_step(steps: torch.Tensor, warmups: Sequence[int], passes: Sequence[int]) -> torch.Tensor:
    """Each node's first local step past its warm-up passes (they come first: `warmups[i]` of its `passes[i]`,
    `steps[i]` steps in all). The warm-up trains the utility term alone: reconstructing x is what keeps s in a
    young extractor's v, which the first upload hands to the aggregator."""
    return steps * torch.tensor(warmups) // torch.tensor(passes)


class _Group:
    """All nodes of one host as one ensemble (every client has the same objective)."""

    def __init__(self, m: "LDPFedAvg", nodes: Sequence[Node]) -> None:
        c, t = m.config, m.task
        self.enc = seeded_stack(
            partial(BoundedExtractor, t.d_in, c.encoder_hidden, c.d_z, c.bound, c.clip), c.seed, nodes, 40, 0
        )
        self.util = [
            seeded_stack(partial(mlp, c.d_z, c.utility_hidden, k), c.seed, nodes, 41, j)
            for j, k in enumerate(t.utility.values())
        ]
        self.side = [
            seeded_stack(partial(mlp, c.d_z + side_width(k), c.side_hidden, t.d_in), c.seed, nodes, 42, j)
            for j, k in enumerate(t.sensitive.values())
        ]
        self.opt = StackedOptimizer(self.tensors(), c.lr, c.optimizer)
        self.shards = ShardStack(nodes, list(t.utility) + list(t.sensitive))

    def stacks(self) -> list[Stack]:
        return [self.enc, *self.util, *self.side]

    def tensors(self, stacks: Sequence[Stack] | None = None) -> list[torch.Tensor]:
        return stack_tensors(stacks or self.stacks())


def _set_flat(stacks: Sequence[Stack], i: int, vec: torch.Tensor) -> None:
    o = 0
    for s in stacks:
        s.set_flat(i, vec[o : o + s.size])
        o += s.size


def _side(s: torch.Tensor, n_classes: int) -> torch.Tensor:
    """`ldp_frl.side_input` for a (P, b) label tensor."""
    return side_input(s.reshape(-1), n_classes).view(*s.shape, -1)


def _flat_all(stacks: Sequence[Stack]) -> np.ndarray:
    """Every copy's parameters of all `stacks`, one row per copy."""
    return torch.cat([s.flat_all() for s in stacks], dim=1).numpy()


@register_method
class LDPFedAvg(LDPFedAvgCard, FederatedMethod, LDPFRL):
    config: LDPFedAvgConfig

    def build(self) -> None:
        super().build()
        self.groups: dict[int, _Group] = {}

    def make_optimizers(self) -> None:  # clients keep their own optimizers
        pass

    def num_rounds(self, sizes: Sequence[int]) -> int:
        return math.ceil(self.config.epochs / self.config.local_epochs)

    # -- client role ----------------------------------------------------------------------------
    def init_nodes(self, nodes: Sequence[Node]) -> None:
        self.groups[0] = _Group(self, nodes)
        assign_slots(nodes)

    def join(self, nodes: Sequence[Node], message: Any) -> None:
        omega = torch.as_tensor(np.asarray(message["omega"]))
        for n in nodes:
            _set_flat(self.groups[0].stacks(), slot(n)[1], omega)
            n.joined = True

    def client_update_many(
        self, nodes: Sequence[Node], messages: Mapping[int, Any], round: int
    ) -> dict[int, ClientUpdate]:
        c, t = self.config, self.task
        g = self.groups[0]
        rows = members(nodes)
        stacks = take_all(g.stacks(), rows)
        enc, util, side = stacks[0], stacks[1 : 1 + len(g.util)], stacks[1 + len(g.util) :]
        opt = g.opt.take(rows, g.tensors(stacks))
        for i, n in enumerate(nodes):  # omega_k <- omega_t
            _set_flat(stacks, i, torch.as_tensor(np.asarray(messages[n.id]["omega"])))
        warmups = [int(messages[n.id]["warmup"]) for n in nodes]
        passes = [c.local_epochs + w for w in warmups]
        plan, steps = ShardStack.epoch_plan(nodes, passes, c.batch_size)
        regular = first_regular_step(steps, warmups, passes)
        sums = torch.zeros(len(nodes), 2)
        classes = list(t.sensitive.values())
        for step in range(plan.shape[1]):
            active = step < steps
            x, y, w = g.shards.gather(plan[:, step], rows)
            v = single(enc, x)
            noise = noise_like(
                nodes, plan[:, step], c.d_z, lambda shape, gen: self.mechanism.noise(torch.empty(shape), generator=gen)
            )
            z = v + noise
            ce = loss_sum(copy_ces(util, t.utility, z, y, w))
            mse = loss_sum(
                copy_mean(((single(dec, torch.cat([z, _side(y[lab], k)], dim=-1)) - x) ** 2).mean(-1), w)
                for dec, lab, k in zip(side, t.sensitive, classes)
            ) / len(side)
            loss = ce + c.beta * (step >= regular) * mse
            step_all(loss.sum(), g.tensors(stacks), opt, active)
            sums += active.unsqueeze(1) * torch.stack([loss.detach(), mse.detach()], dim=1)
        put_all(g.stacks(), stacks, rows)
        g.opt.put(rows, opt)
        out = {}
        flat, means = _flat_all(stacks), node_means(sums, steps)
        for i, n in enumerate(nodes):
            mean = means[i]
            out[n.id] = ClientUpdate(
                n.id,
                round,
                n.num_examples,
                {"omega": flat[i].astype(np.float32)},
                "parameters",
                {"loss/total": mean[0], "loss/reconstruction": mean[1]},
            )
        return out

    # -- server role ----------------------------------------------------------------------------
    def _modules(self) -> list[nn.Module]:
        return [self.encoder, self.utility, self.side]

    def server_start(self, sizes: Mapping[int, int]) -> None:
        super().server_start(sizes)
        self.uploaded: set[int] = set()
        self.omega = (
            torch.cat([torch.nn.utils.parameters_to_vector(m.parameters()) for m in self._modules()])
            .detach()
            .numpy()
            .astype(np.float32)
        )

    def join_message(self) -> Any:
        return {"omega": self.omega.copy()}

    def configure(self, round: int, nodes: Sequence[int]) -> dict[int, Any]:
        warm, cold = ({"omega": self.omega, "warmup": w} for w in (0, self.config.warmup_epochs))
        return {k: warm if k in self.uploaded else cold for k in nodes}

    def aggregate(self, round: int, updates: Sequence[ClientUpdate], failures: Sequence[Failure]) -> Any:
        if updates:  # omega_{t+1} = (1/K) sum_k omega_k over the clients that delivered
            every = np.arange(self.omega.size)
            self.omega = aggregate(
                "mean",
                self.omega.size,
                self.omega,
                [(every, np.asarray(u.payload["omega"]), u.num_examples) for u in updates],
            )
            self._load(self.omega)
            self.uploaded.update(u.node for u in updates)
        return {"omega": self.omega}

    def server_state(self) -> dict[str, Any]:
        return {**super().server_state(), "uploaded": sorted(self.uploaded)}

    def load_server_state(self, state: Mapping[str, Any]) -> None:
        super().load_server_state(state)
        self.uploaded = set(state["uploaded"])

    def _load(self, vec: np.ndarray) -> None:
        v = torch.as_tensor(vec)
        o = 0
        for m in self._modules():
            n = sum(p.numel() for p in m.parameters())
            torch.nn.utils.vector_to_parameters(v[o : o + n].clone(), m.parameters())
            o += n

    def global_state(self) -> dict[str, np.ndarray]:
        return {"omega": self.omega.copy()}

    def assemble(self, global_state: Mapping[str, np.ndarray]) -> None:
        self.omega = np.asarray(global_state["omega"], dtype=np.float32).copy()
        self._load(self.omega)
