"""D-EIGAN (seed 000, Alg. 1): EIGAN over K nodes, each with its own data, allies and adversaries.

Per round, every selected node
  1. overwrites the entries Q of its encoder that the server chose after the previous aggregation
     (theta_E(k)(q) = theta_E(q) for q in Q, |Q| = phi * |theta_E|; nothing in the first round, where
     the node has just downloaded the whole initial theta_E),
  2. runs `delta` local epochs of EIGAN's Alg. A1 (one encoder step on eq. 4, then one step of each of
     its own allies and adversaries, per minibatch), and
  3. uploads a random fraction phi of its encoder entries, Q_k.
The server aggregates
  - `masked-mean` (default): each entry is the N_k-weighted mean over the nodes that sent it; entries
                   nobody sent keep their previous global value;
  - `paper`:       theta_E = sum_k (N_k / N) * theta~_k, with theta~_k = theta_k on Q_k and 0 elsewhere
                   (N = rows of the nodes whose update arrived).
With phi = 1 the two are the same. With phi < 1 the paper's rule counts every unsent entry as 0, so each
round multiplies the global encoder by about phi: it shrinks towards zero, to a model no node trained
(mean |w| of the released encoder, gaussian-quadrant, K = 4, 4 rounds: 0.25 at phi 1, 0.12 at phi 0.8,
0.056 at phi 0.5; masked-mean stays at 0.25). An adversary's drop at small phi under `paper` then measures
the shrinkage, not the hiding; `masked-mean` is recorded as a deviation when phi < 1.
Rounds = ceil(epochs / delta): `epochs` counts every node's local passes, as in Alg. 1.

Wire format (Veil): an upload or downlink is sparse, {seed, values}: the receiver regenerates the
sorted index set Q from the 31-bit seed, so a message carries round(phi * |theta_E|) float32 values
plus a constant envelope, instead of the paper's dense vector with zeros. The sparse wire changes no
aggregate: under `paper` a missing entry counts as 0, exactly as the dense zeros would.

Per-node objectives: `node_sensitive` / `node_utility` list label sets ("a" or "a+b"), dealt to the
nodes in contiguous blocks (two entries and K = 4: nodes 0-1 take the first, nodes 2-3 the second).
By default a node keeps every utility label and hides every sensitive label of the dataset; a node
that hides a utility label keeps the others. The released model is the global encoder theta_E."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from veil.errors import ConfigError
from veil.methods.configs.d_eigan_card import DEIGANCard, DEIGANConfig
from veil.methods.eigan import EIGAN, encoder_objective
from veil.methods.ensemble_ops import (
    assign_slots,
    copy_ces,
    members,
    node_means,
    privacy_term,
    put_all,
    seeded_stack,
    single,
    slot,
    stack_tensors,
    take_all,
)
from veil.methods.federated.aggregation import aggregate
from veil.methods.federated.core import ClientUpdate, Failure, Node, NodeObjective, derive_seed, index_set, sparse_count
from veil.methods.federated.ensemble import (
    ShardStack,
    StackedOptimizer,
    flat_module,
    load_flat_module,
    step_all,
)
from veil.methods.federated.fed_method import FederatedMethod
from veil.methods.nets import loss_sum, mlp
from veil.methods.table import register_method
from veil.randomness import derive_seeds


def deal(field: str, entries: Sequence[str], k: int, labels: Sequence[str]) -> list[tuple[str, ...]] | None:
    """Parse per-node label sets and deal them to k nodes in contiguous blocks (None when not given)."""
    if not entries:
        return None
    if len(entries) > k:
        raise ConfigError(field, list(entries), f"at most K={k} entries (dealt to the nodes in contiguous blocks)")
    parsed = []
    for e in entries:
        names = tuple(n.strip() for n in str(e).split("+") if n.strip())
        unknown = [n for n in names if n not in labels]
        if not names or unknown:
            raise ConfigError(
                field,
                list(entries),
                f"label sets 'a' or 'a+b' of the dataset's labels {sorted(labels)}"
                + (f"; unknown: {unknown}" if unknown else ""),
            )
        parsed.append(names)
    return [parsed[i * len(parsed) // k] for i in range(k)]


class _Group:
    """The nodes of one host that share an objective, as one ensemble."""

    def __init__(self, m: "DEIGAN", nodes: Sequence[Node], obj: NodeObjective) -> None:
        c, t = m.config, m.task
        classes = {**t.utility, **t.sensitive}
        self.nodes = [n.id for n in nodes]
        self.obj = obj
        self.enc = seeded_stack(partial(mlp, t.d_in, c.encoder_hidden, m.release_width, out="tanh"), c.seed, nodes, 10)
        self.allies = [
            seeded_stack(partial(mlp, m.release_width, c.head_hidden, classes[lab]), c.seed, nodes, 11, j)
            for j, lab in enumerate(obj.utility)
        ]
        self.advs = [
            seeded_stack(partial(mlp, m.release_width, c.head_hidden, classes[lab]), c.seed, nodes, 12, j)
            for j, lab in enumerate(obj.sensitive)
        ]
        self.opt_e = StackedOptimizer(self.enc.tensors(), c.lr_encoder, c.optimizer)
        self.opt_a = StackedOptimizer(stack_tensors(self.allies), c.lr_ally, c.optimizer)
        self.opt_v = StackedOptimizer(stack_tensors(self.advs), c.lr_adversary, c.optimizer)
        self.shards = ShardStack(nodes, obj.utility + obj.sensitive)


@register_method
class DEIGAN(DEIGANCard, FederatedMethod, EIGAN):
    config: DEIGANConfig

    def build(self) -> None:
        super().build()
        self.objectives = self._resolve_objectives()
        self.groups: dict[Any, _Group] = {}
        self._downlink: dict[str, Any] | None = None

    def make_optimizers(self) -> None:  # the server trains nothing; nodes keep their own optimizers
        pass

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder}

    # -- shape ----------------------------------------------------------------------------------
    def _resolve_objectives(self) -> list[NodeObjective]:
        c, t = self.config, self.task
        labels = list(t.utility) + list(t.sensitive)
        sens = deal("node_sensitive", c.node_sensitive, c.K, labels) or [tuple(t.sensitive)] * c.K
        util = deal("node_utility", c.node_utility, c.K, labels)
        out = []
        for k in range(c.K):
            u = util[k] if util else tuple(n for n in t.utility if n not in sens[k])
            if not u:
                raise ConfigError(
                    "node_utility",
                    list(c.node_utility),
                    f"at least one ally label for node {k} "
                    f"(it hides {list(sens[k])}; the dataset's utility labels are {list(t.utility)})",
                )
            clash = set(u) & set(sens[k])
            if clash:
                raise ConfigError(
                    "node_sensitive",
                    list(c.node_sensitive),
                    f"label sets disjoint from node {k}'s allies (both name {sorted(clash)})",
                )
            out.append(NodeObjective(tuple(u), tuple(sens[k])))
        return out

    def node_objectives(self) -> list[NodeObjective]:
        return list(self.objectives)

    def num_rounds(self, sizes: Sequence[int]) -> int:
        return math.ceil(self.config.epochs / self.config.delta)

    # -- client role ----------------------------------------------------------------------------
    def init_nodes(self, nodes: Sequence[Node]) -> None:
        by_obj: dict[NodeObjective, list[Node]] = {}
        for n in nodes:
            by_obj.setdefault(n.objective, []).append(n)
        for obj, group_nodes in by_obj.items():
            key = obj.signature()
            self.groups[key] = _Group(self, group_nodes, obj)
            assign_slots(group_nodes, key)

    def join(self, nodes: Sequence[Node], message: Any) -> None:
        theta = torch.as_tensor(np.asarray(message["theta"]))
        for n in nodes:
            key, i = slot(n)
            self.groups[key].enc.set_flat(i, theta)
            n.joined = True

    def client_update_many(
        self, nodes: Sequence[Node], messages: Mapping[int, Any], round: int
    ) -> dict[int, ClientUpdate]:
        c = self.config
        out: dict[int, ClientUpdate] = {}
        by_group: dict[Any, list[Node]] = {}
        for n in nodes:
            by_group.setdefault(slot(n)[0], []).append(n)
        for key, group_nodes in by_group.items():
            g = self.groups[key]
            rows = members(group_nodes)
            enc, allies, advs = g.enc.take(rows), take_all(g.allies, rows), take_all(g.advs, rows)
            opt_e = g.opt_e.take(rows, enc.tensors())
            opt_a = g.opt_a.take(rows, stack_tensors(allies))
            opt_v = g.opt_v.take(rows, stack_tensors(advs))
            downlink: dict[tuple[int, int], list[tuple[int, Any]]] = {}  # 1. downlink: the server's chosen entries
            for i, n in enumerate(group_nodes):  # nodes sent the same choice of entries are written at once
                msg = messages.get(n.id)
                if msg is not None:
                    downlink.setdefault((int(msg["seed"]), len(msg["values"])), []).append((i, msg["values"]))
            for (seed, count), got in downlink.items():
                values = torch.as_tensor(np.stack([np.asarray(v) for _, v in got]))
                enc.set_entries_many([i for i, _ in got], index_set(seed, enc.size, count), values)
            plan, steps = ShardStack.epoch_plan(group_nodes, c.delta, c.batch_size)  # 2. delta local epochs
            sums = torch.zeros(len(group_nodes), 3)
            for t in range(plan.shape[1]):
                active = t < steps
                x, y, w = g.shards.gather(plan[:, t], rows)
                z = single(enc, x)
                la = list(copy_ces(allies, g.obj.utility, z, y, w))
                lv = list(copy_ces(advs, g.obj.sensitive, z, y, w))
                privacy = privacy_term(c.privacy_loss, advs, z, w, lv)
                loss_e = encoder_objective(c.alpha, la, len(lv), privacy)
                step_all(loss_e.sum(), enc.tensors(), opt_e, active)
                with torch.no_grad():
                    z = single(enc, x)
                ce_a = loss_sum(copy_ces(allies, g.obj.utility, z, y, w))
                step_all(ce_a.sum(), stack_tensors(allies), opt_a, active)
                for k in range(c.adversary_steps):  # on the same z; the first step's losses are the row's
                    ce_k = loss_sum(copy_ces(advs, g.obj.sensitive, z, y, w))
                    step_all(ce_k.sum(), stack_tensors(advs), opt_v, active)
                    if k == 0:
                        ce_v = ce_k
                sums += active.unsqueeze(1) * torch.stack([loss_e.detach(), ce_a.detach(), ce_v.detach()], dim=1)
            g.enc.put(rows, enc)
            put_all(g.allies + g.advs, allies + advs, rows)
            g.opt_e.put(rows, opt_e)
            g.opt_a.put(rows, opt_a)
            g.opt_v.put(rows, opt_v)
            count = sparse_count(c.phi, enc.size)
            flat = enc.flat_all().numpy()
            means = node_means(sums, steps)
            seeds = derive_seeds(c.seed, np.array([n.id for n in group_nodes]), round, 20).tolist()
            for i, n in enumerate(group_nodes):  # 3. upload a random fraction phi of the entries
                seed = seeds[i]
                values = flat[i, index_set(seed, enc.size, count)].astype(np.float32)
                mean = means[i]
                out[n.id] = ClientUpdate(
                    n.id,
                    round,
                    n.num_examples,
                    {"seed": seed, "values": values},
                    "parameters",
                    {"loss/encoder": mean[0], "loss/ally": mean[1], "loss/adversary": mean[2]},
                )
        return out

    # -- server role ----------------------------------------------------------------------------
    def server_start(self, sizes: Mapping[int, int]) -> None:
        super().server_start(sizes)
        self.theta = flat_module(self.encoder).numpy().astype(np.float32)
        self._downlink = None

    def join_message(self) -> Any:
        return {"theta": self.theta.copy()}

    def configure(self, round: int, nodes: Sequence[int]) -> dict[int, Any]:
        return {k: self._downlink for k in nodes}

    def aggregate(self, round: int, updates: Sequence[ClientUpdate], failures: Sequence[Failure]) -> Any:
        c = self.config
        size = self.theta.size
        sparse = [
            (
                index_set(int(u.payload["seed"]), size, len(u.payload["values"])),
                np.asarray(u.payload["values"]),
                u.num_examples,
            )
            for u in updates
        ]
        if sparse:
            self.theta = aggregate(c.aggregation, size, self.theta, sparse)
            load_flat_module(self.encoder, self.theta)
            seed = derive_seed(c.seed, round, 30)  # the server's downlink choice Q for the next round
            idx = index_set(seed, size, sparse_count(c.phi, size))
            self._downlink = {"seed": seed, "values": self.theta[idx].copy()}
        return {"encoder": self.theta}

    def global_state(self) -> dict[str, np.ndarray]:
        return {"encoder": self.theta.copy()}

    def server_state(self) -> dict[str, Any]:
        return {"global_state": self.global_state(), "downlink": self._downlink}

    def load_server_state(self, state: Mapping[str, Any]) -> None:
        self.assemble(state["global_state"])
        self._downlink = state["downlink"]

    def assemble(self, global_state: Mapping[str, np.ndarray]) -> None:
        self.theta = np.asarray(global_state["encoder"], dtype=np.float32).copy()
        load_flat_module(self.encoder, self.theta)
