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
or one per client. Upload: {num_examples, kind, payload: {z, u}} and nothing else; payload z as float32
and u as int32, 4 * b * (d_z + d_u) bytes. The client's losses (computed from s) stay on it; with
`node_metrics` a client logs them itself, recorded as `node_local/loss/*` (they never enter a message).
The eps of an uploaded z is a release to the aggregator, so it comes from the client's release stream (OS
entropy), not from the logged seed: a D-GPP run trains reproducibly only with an explicit `release_seed`.

Release: a client's encoder never leaves it, not even at the end. Asked for a release (`release_rows`), a
client releases z of its OWN rows only (its training rows and the test rows the audit dealt it) with its own
encoder: a message {kind: 'release', train: {rows, z}, test: {rows, z}} of int64 row ids and float32 z (never
s, never a parameter), 4 * n * d_z + 8 * n bytes for n rows, counted with the uploads. Its noise is keyed by the
client's release key, the encoder's weights (`veil.randomness.state_digest`) and the row: one encoder releases a
row as one z however often it is asked, and another encoder (a later round's) draws independent noise, so joining
one row's releases across rounds cannot difference the noise away (they compose as independent releases, which
the certificate's linked view measures, and calibration scores each candidate on: `veil.certify.wire`). The
aggregator, and the model a run logs, hold only psi: `encode` outside the clients raises `EncodersStayHome`. The
audit trains its fresh probes on the union of the clients' releases (and each client's own rows for the per-node
audit). A restarted client rejoins with the current psi and a freshly initialised private encoder (there is no
copy of its encoder anywhere to restore from).

Warm-up (Veil, `warmup_epochs`, default 0 = Alg. 2): before a client's first upload (first contact, or a restarted
client's fresh encoder) it takes `warmup_epochs` passes of its local steps without the utility term (no psi yet).
What the aggregator's view reveals, round by round, is certified by the run's certificate (`veil.certify.wire`);
measured, the warm-up does not lower round 1's leakage (docs/threat-model.md), hence its default."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Mapping, Sequence, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from veil.errors import ConfigError
from veil.methods.configs.d_gpp_card import DGPPCard, DGPPConfig
from veil.methods.ensemble_ops import (
    assign_slots,
    copy_ces,
    members,
    pair,
    privacy_term,
    put_all,
    seeded_stack,
    slot,
    stack_tensors,
    take_all,
    whole,
)
from veil.methods.federated.core import ClientUpdate, EncodersStayHome, Failure, Node
from veil.methods.federated.ensemble import (
    ShardStack,
    Stack,
    StackedOptimizer,
    copy_mean,
    flat_module,
    load_flat_module,
    noise_like,
    seeded_modules,
    step_all,
)
from veil.methods.federated.fed_method import FederatedMethod
from veil.methods.gpp import GaussianEncoder, released, reparameterize
from veil.methods.method import Method
from veil.methods.nets import ClassifierBank, gaussian_kl_rows, loss_sum, make_optimizer, mlp
from veil.methods.table import register_method
from veil.randomness import Noise, ReleaseKey, for_rows, state_digest


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
        self.enc = seeded_stack(m.new_encoder, c.seed, nodes, 50)
        self.advs = [
            seeded_stack(partial(mlp, c.d_z, c.head_hidden, k), c.seed, nodes, 51, j)
            for j, k in enumerate(t.sensitive.values())
        ]
        self.opt_e = StackedOptimizer(self.enc.tensors(), c.lr)
        self.opt_s = StackedOptimizer(stack_tensors(self.advs), c.lr)
        self.beta = torch.tensor([m.betas[n.id] for n in nodes])
        self.lam = torch.tensor([m.lambdas[n.id] for n in nodes])
        self.shards = ShardStack(nodes, list(t.utility) + list(t.sensitive))


def _randn(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=gen)


def _draw(
    enc: Stack, x: torch.Tensor, nodes: Sequence[Node], idx: torch.Tensor, d_z: int, released: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every copy's mu, log-variance and z = mu + sigma * eps on rows `idx`, eps from each node's own stream
    (its release stream when z is `released` to the aggregator)."""
    mu, logvar = pair(enc, x)
    return mu, logvar, reparameterize(mu, logvar, noise_like(nodes, idx, d_z, _randn, released))


@register_method
class DGPP(DGPPCard, FederatedMethod, Method):
    message_kind = "representations"
    config: DGPPConfig

    def build(self) -> None:
        c, t = self.config, self.task
        self.betas = per_client("beta", c.beta, c.K)
        self.lambdas = per_client("lambda_kl", c.lambda_kl, c.K)
        self.utility = ClassifierBank(c.d_z, t.utility, c.head_hidden)  # the aggregator's psi
        self.groups: dict[int, _Group] = {}  # the clients' encoders and adversaries (client role only)
        self._rounds_done = 0

    def make_optimizers(self) -> None:
        self.opt_u = make_optimizer(self.utility.parameters(), self.config.lr)

    def new_encoder(self) -> GaussianEncoder:
        """A freshly initialised client encoder T_theta (seeded by the caller)."""
        c = self.config
        return GaussianEncoder(self.task.d_in, c.encoder_hidden, c.d_z)

    def modules(self) -> dict[str, nn.Module]:
        """What the aggregator has, hence what a run logs: psi. The encoders stay on their clients."""
        return {"utility": self.utility}

    def num_rounds(self, sizes: Sequence[int]) -> int:
        return self.config.epochs * max(1, math.ceil(max(sizes) / self.config.batch_size))

    # -- release ------------------------------------------------------------------------------
    def private_encoders(self) -> bool:
        return True

    def release(self, x: torch.Tensor, generator: Noise) -> torch.Tensor:
        raise EncodersStayHome(self.name)

    def encode(self, x: np.ndarray, batch_size: int = 4096) -> np.ndarray:
        """Refused: no encoder exists outside the clients (each releases its own rows: `release_rows`)."""
        raise EncodersStayHome(self.name)

    @torch.no_grad()
    def release_rows(self, node: Node, x: np.ndarray, generator: ReleaseKey, batch_size: int = 4096) -> np.ndarray:
        """Client role: z of `node`'s own rows `x` by its own encoder (a draw or the mean, per `release`), its noise
        from `generator`'s subkey for this encoder's weights (see the module's Release)."""
        g = self.groups[0]
        enc = cast(GaussianEncoder, seeded_modules(self.new_encoder, [0])[0])  # the global RNG is left as it was
        state = g.enc.state_dict(slot(node)[1])
        enc.load_state_dict(state)
        enc.eval()
        generator = generator.derive(state_digest(state))
        out = []
        for i in range(0, len(x), batch_size):
            xb = np.asarray(x[i : i + batch_size], np.float32)
            mu, logvar = enc(torch.as_tensor(xb))
            out.append(released(mu, logvar, self.config.release, for_rows(generator, xb)).float().numpy())
        return np.concatenate(out) if out else np.zeros((0, self.config.d_z), np.float32)

    # -- client role ----------------------------------------------------------------------------
    def init_nodes(self, nodes: Sequence[Node]) -> None:
        self.groups[0] = _Group(self, nodes)
        self.psi = ClassifierBank(
            self.config.d_z, self.task.utility, self.config.head_hidden
        )  # local copy of the broadcast
        assign_slots(nodes)

    def join(self, nodes: Sequence[Node], message: Any) -> None:
        for n in nodes:
            n.joined = True

    def _phase3(
        self,
        nodes: Sequence[Node],
        rows: torch.Tensor,
        g: _Group,
        enc: Stack,
        advs: list[Stack],
        opt_e: StackedOptimizer,
        opt_s: StackedOptimizer,
        psi: np.ndarray | None,
    ) -> dict[str, torch.Tensor]:
        """k adversary steps on fresh batches, then one encoder step against the received psi (Alg. 2, l. 21-35);
        psi None (a warm-up step, before any psi): the encoder step has no utility term."""
        c, t = self.config, self.task
        if psi is not None:
            load_flat_module(self.psi, psi)
        plan = ShardStack.sample_plan(nodes, c.k + 1, c.batch_size)
        everyone = torch.ones(len(nodes), dtype=torch.bool)
        adv_tensors = stack_tensors(advs)
        for tau in range(c.k):
            x, y, w = g.shards.gather(plan[:, tau], rows)
            with torch.no_grad():
                _, _, z = _draw(enc, x, nodes, plan[:, tau], c.d_z)
            ls = loss_sum(copy_ces(advs, t.sensitive, z, y, w))
            step_all(ls.sum(), adv_tensors, opt_s, everyone)
        x, y, w = g.shards.gather(plan[:, c.k], rows)
        mu, logvar, z = _draw(enc, x, nodes, plan[:, c.k], c.d_z)
        lu = loss_sum(copy_ces(self.psi.heads, t.utility, z, y, w)) if psi is not None else torch.zeros(len(nodes))
        lv = list(copy_ces(advs, t.sensitive, z, y, w))
        privacy = privacy_term(c.privacy_loss, advs, z, w, lv)
        kl = copy_mean(gaussian_kl_rows(mu, logvar), w)
        beta, lam = g.beta[rows], g.lam[rows]
        loss = beta * lu + privacy + lam * kl
        step_all(loss.sum(), enc.tensors(), opt_e, everyone)
        return {
            "loss/encoder": loss.detach(),
            "loss/kl": kl.detach(),
            "loss/utility": lu.detach(),
            "loss/adversary": loss_sum(lv).detach(),
        }

    def _warm_up(self, nodes: Sequence[Node]) -> None:
        """Before a client's first upload (first contact, or a restarted client's fresh encoder): `warmup_epochs`
        passes of its local steps (k adversary steps, one encoder step on the privacy and KL terms; no utility
        term, there is no psi yet), so that no upload is drawn by an encoder that never hid s."""
        cold = [n for n in nodes if not n.state.get("warm")]
        c = self.config
        if cold and c.warmup_epochs:
            steps = c.warmup_epochs * max(1, math.ceil(max(n.num_examples for n in cold) / c.batch_size))
            self._train(cold, None, steps)
        for n in cold:
            n.state["warm"] = True

    def _train(self, nodes: Sequence[Node], psi: np.ndarray | None, steps: int) -> dict[str, torch.Tensor]:
        """`steps` client steps (`_phase3`) of `nodes` as one ensemble; the last step's losses."""
        g = self.groups[0]
        rows = members(nodes)
        in_place = whole(g.enc, rows)
        if in_place:
            enc, advs, opt_e, opt_s = g.enc, g.advs, g.opt_e, g.opt_s
        else:
            enc, advs = g.enc.take(rows), take_all(g.advs, rows)
            opt_e = g.opt_e.take(rows, enc.tensors())
            opt_s = g.opt_s.take(rows, stack_tensors(advs))
        metrics: dict[str, torch.Tensor] = {}
        for _ in range(steps):
            metrics = self._phase3(nodes, rows, g, enc, advs, opt_e, opt_s, psi)
        if not in_place:
            g.enc.put(rows, enc)
            put_all(g.advs, advs, rows)
            g.opt_e.put(rows, opt_e)
            g.opt_s.put(rows, opt_s)
        return metrics

    def _run(self, nodes: Sequence[Node], psi: np.ndarray | None, round: int, upload: bool) -> dict[int, ClientUpdate]:
        c, t = self.config, self.task
        g = self.groups[0]
        if upload:
            self._warm_up(nodes)
        metrics = self._train(nodes, psi, 1) if psi is not None else {}
        if not upload:
            return {}
        rows = members(nodes)
        enc = g.enc if whole(g.enc, rows) else g.enc.take(rows)
        plan = ShardStack.sample_plan(nodes, 1, c.batch_size)  # Phase 1: one sanitized batch per client
        x, y, w = g.shards.gather(plan[:, 0], rows)
        with torch.no_grad():
            _, _, z = _draw(enc, x, nodes, plan[:, 0], c.d_z, released=True)
        out = {}
        for i, n in enumerate(nodes):
            b = int((plan[i, 0] >= 0).sum())
            payload = {
                "z": z[i, :b].numpy().astype(np.float32),
                "u": {lab: y[lab][i, :b].numpy().astype(np.int32) for lab in t.utility},
            }  # s stays here
            own = {k: float(v[i]) for k, v in metrics.items()} if c.node_metrics else {}
            out[n.id] = ClientUpdate(n.id, round, b, payload, "representations", local=own)
        return out

    def client_update_many(
        self, nodes: Sequence[Node], messages: Mapping[int, Any], round: int
    ) -> dict[int, ClientUpdate]:
        psi = next((m["psi"] for m in messages.values() if m is not None), None)
        return self._run(nodes, psi, round, upload=True)

    def finalize(self, nodes: Sequence[Node], message: Any) -> None:
        if message is not None and nodes:
            self._run(nodes, message["psi"], -1, upload=False)

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
            labels = {
                lab: torch.as_tensor(np.concatenate([np.asarray(u.payload["u"][lab]) for u in updates])).long()
                for lab in self.task.utility
            }
            for _ in range(self.config.k):
                loss = loss_sum(
                    F.cross_entropy(h(z), labels[lab]) for h, lab in zip(self.utility.heads, self.task.utility)
                )
                self.opt_u.zero_grad(set_to_none=True)
                loss.backward()
                self.opt_u.step()
            self._rounds_done += 1
        return {"psi": self._psi()}

    def finalize_message(self) -> Any | None:
        return {"psi": self._psi()} if self._rounds_done else None

    def global_state(self) -> dict[str, np.ndarray]:
        return {"psi": self._psi()}

    def server_state(self) -> dict[str, Any]:
        return {"global_state": self.global_state(), "opt_u": self.opt_u.state_dict(), "rounds": self._rounds_done}

    def load_server_state(self, state: Mapping[str, Any]) -> None:
        self.assemble(state["global_state"])
        self.opt_u.load_state_dict(state["opt_u"])
        self._rounds_done = int(state["rounds"])

    def assemble(self, global_state: Mapping[str, np.ndarray]) -> None:
        load_flat_module(self.utility, np.array(global_state["psi"], np.float32))  # a copy: Ray's arrays are read-only
