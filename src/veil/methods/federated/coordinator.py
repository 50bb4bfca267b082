"""The coordinator: the round loop of a federation (plain class; runs in the driver for the in-process
runtime and inside a coordinator actor for the Ray runtimes).

Per round r:
  1. sample the participants: max(1, round(fraction * K)) of the live nodes, from a generator seeded
     by (seed, r), so the same seed selects the same nodes whatever the runtime;
  2. (re)join the selected nodes that need it (first contact, or back after a failure): they receive
     the full global state (`join_message`), counted as bytes down;
  3. send each selected node the round's downlink (`configure`), collect the uploads; a node that
     answers "not joined" (its process was restarted between rounds) is joined and asked again once;
  4. every selected node that delivered nothing is a `Failure` (died / error / unavailable / dead);
     failures are passed to `aggregate` with the updates, recorded, and the node rejoins from the
     global state when next selected. A node whose host is gone for good ('dead') is not selected again;
  5. `aggregate(r, updates, failures)`;
  6. when the method's nodes log their own metrics (`logs_node_metrics`), fetch them from the hosts of the
     nodes that delivered: a side channel standing for each node's own log, outside every message (not
     counted, not tapped), recorded as `node_local/*` (mean over those nodes) and per node in the record.
After the rounds, for a method whose clients own private encoders, `release(requests)` asks the nodes to
release z of their own rows (for the audit; every few rounds too for the live audit): a 'release' request
down and each node's 'release' message up (row ids and z, never an encoder or s). Nothing else ever comes up
from a node: no encoder, no node state.
Every message is serialized once by `dumps` and its length is what is counted: bytes down per node
(join + downlink + release requests) and bytes up per node (the serialized update, the release).
`tap(direction, round, node, kind, blob)` sees every blob that crosses the transport, for tests and audits
of the protocol; `_receive` is where every blob from a node arrives."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from veil.methods.federated.core import (
    NOT_JOINED,
    ClientUpdate,
    CoordinatorFailure,
    Failure,
    FederatedRoles,
    FederationError,
    derive_seed,
    dumps,
    loads,
)

Tap = Callable[[str, int, int, str, bytes], None]
NODE_LOCAL = "node_local/"
"""Prefix of the metrics a node logs itself: computed on the node, they never crossed the wire."""


class Pool(Protocol):
    """Where the nodes live; every call is keyed by node id and returns per node a result or a Failure."""

    node_ids: list[int]
    sizes: dict[int, int]

    def join(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]: ...
    def run_round(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]: ...
    def finalize(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]: ...
    def release(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]: ...
    def local_metrics(self, rnd: int, node_ids: Sequence[int]) -> dict[int, Any]: ...
    def restarts(self) -> int: ...
    def shutdown(self) -> None: ...


@dataclass
class RoundRecord:
    """What happened in one round."""

    round: int
    selected: list[int]
    completed: list[int]
    failures: list[Failure]
    joined: list[int]
    bytes_up: dict[int, int]
    bytes_down: dict[int, int]
    payload_up: dict[int, int]
    metrics: dict[str, float]
    seconds: float
    final_bytes_down: dict[int, int] = field(default_factory=dict)
    release_up: dict[int, int] = field(default_factory=dict)
    """Bytes of the release messages the nodes sent after this round (a live audit's; after the last round
    also the final release), per node; part of bytes_up_total."""
    release_down: dict[int, int] = field(default_factory=dict)
    """Bytes of the release requests sent after this round, per node; part of bytes_down_total."""
    node_local: dict[int, dict[str, float]] = field(default_factory=dict)
    """Each node's own metrics (never in a message); empty unless the method's nodes log them."""
    coordinator_failures: list[CoordinatorFailure] = field(default_factory=list)
    """Deaths of the coordinator's process while this round was under way (it was restarted from its
    checkpoint of the round before and ran the round again)."""

    def row(self) -> dict[str, float]:
        """Scalars for MLflow (step = round) and the progress bar."""
        out = {
            "participants": float(len(self.completed)),
            "selected": float(len(self.selected)),
            "failures": float(len(self.failures) + len(self.coordinator_failures)),
            "rejoined": float(len(self.joined)),
            "bytes_up": float(sum(self.bytes_up.values())),
            "bytes_down": float(sum(self.bytes_down.values())),
            "round_seconds": self.seconds,
        }
        out.update(self.metrics)
        keys = sorted({k for m in self.node_local.values() for k in m})
        for key in keys:
            vals = [m[key] for m in self.node_local.values() if key in m]
            out[f"{NODE_LOCAL}{key}"] = float(np.mean(vals))
        return out

    def to_dict(self) -> dict[str, Any]:
        """The round's record without its per-node figures (`node_table` holds them): which nodes were
        selected and completed are counts here, and `joined` and the failures name their nodes."""
        d: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in PER_NODE}
        d["selected"], d["completed"] = len(self.selected), len(self.completed)
        d["failures"] = [f.to_dict() for f in self.failures]
        d["coordinator_failures"] = [f.to_dict() for f in self.coordinator_failures]
        return d


BYTE_FIELDS = ("bytes_up", "bytes_down", "payload_up", "final_bytes_down", "release_up", "release_down")
PER_NODE = frozenset(("selected", "completed", *BYTE_FIELDS, "node_local"))
"""RoundRecord fields with a value per node: columns of `node_table`, not keys of `to_dict`."""


def node_table(records: Sequence[RoundRecord]) -> dict[str, np.ndarray]:
    """Every round's per-node figures as columns of one table, a row per node a round names (selected, or in one
    of its per-node fields), sorted by round then node: `round`, `node`, `selected`, `completed`, the bytes of
    each of `BYTE_FIELDS` (0: none that round) and `node_local/<metric>` (NaN: not logged). Built with one array
    per round and field: the table has nodes x rounds rows, too many for a loop per row at thousands of nodes."""
    parts: list[dict[str, np.ndarray]] = []
    metrics = sorted({k for r in records for m in r.node_local.values() for k in m})
    for r in records:
        ids = [np.asarray(r.selected, np.int64), *(np.fromiter(getattr(r, f), np.int64) for f in BYTE_FIELDS)]
        nodes = np.unique(np.concatenate([*ids, np.fromiter(r.node_local, np.int64)]))
        cols: dict[str, np.ndarray] = {"round": np.full(len(nodes), r.round, np.int64), "node": nodes}
        cols["selected"] = np.isin(nodes, ids[0])
        cols["completed"] = np.isin(nodes, np.asarray(r.completed, np.int64))
        for f, keys in zip(BYTE_FIELDS, ids[1:]):
            col = np.zeros(len(nodes), np.int64)
            col[np.searchsorted(nodes, keys)] = np.fromiter(getattr(r, f).values(), np.int64, len(keys))
            cols[f] = col
        for key in metrics:
            col = np.full(len(nodes), np.nan)
            logged = [(k, m[key]) for k, m in r.node_local.items() if key in m]
            if logged:
                at, vals = zip(*logged)
                col[np.searchsorted(nodes, np.asarray(at, np.int64))] = vals
            cols[f"{NODE_LOCAL}{key}"] = col
        parts.append(cols)
    names = ["round", "node", "selected", "completed", *BYTE_FIELDS, *(f"{NODE_LOCAL}{k}" for k in metrics)]
    if not parts:
        return {n: np.empty(0) for n in names}
    return {n: np.concatenate([p[n] for p in parts]) for n in names}


class Coordinator:
    """Runs the rounds of `method` (server role) over the nodes in `pool`."""

    def __init__(
        self, method: FederatedRoles, pool: Pool, *, seed: int, tap: Tap | None = None, max_empty_rounds: int = 3
    ) -> None:
        self.method, self.pool, self.seed, self.tap = method, pool, int(seed), tap
        self.nodes = list(pool.node_ids)
        self.needs_join = set(self.nodes)
        self.dead: set[int] = set()
        self.records: list[RoundRecord] = []
        self.join_bytes: dict[int, int] = {}
        self.max_empty_rounds = max_empty_rounds
        self._empty = 0
        self._started = False
        self.last_round = 0

    # -- checkpoint -----------------------------------------------------------------------------
    def checkpoint(self) -> dict[str, Any]:
        """What a restarted coordinator needs to go on after the last completed round: the method's server state
        and which nodes must (re)join or are dead. Round records are not kept: the driver has them."""
        return {
            "round": self.last_round,
            "started": self._started,
            "server": self.method.server_state() if self._started else None,
            "needs_join": sorted(self.needs_join),
            "dead": sorted(self.dead),
            "join_bytes": dict(self.join_bytes),
            "empty": self._empty,
        }

    def restore(self, ckpt: Mapping[str, Any]) -> None:
        """Continue from `checkpoint()` (this coordinator was built afresh over the same pool)."""
        if ckpt["started"]:
            self.method.server_start(dict(self.pool.sizes))
            self.method.load_server_state(ckpt["server"])
        self._started = bool(ckpt["started"])
        self.last_round = int(ckpt["round"])
        self.needs_join = set(ckpt["needs_join"])
        self.dead = set(ckpt["dead"])
        self.join_bytes = dict(ckpt["join_bytes"])
        self._empty = int(ckpt["empty"])

    # -- transport ------------------------------------------------------------------------------
    def _encode_all(self, direction: str, rnd: int, kind: str, msgs: Mapping[int, Any]) -> dict[int, bytes]:
        cache: dict[int, bytes] = {}
        out = {}
        for k, m in msgs.items():
            blob = cache.get(id(m))
            if blob is None:
                blob = cache[id(m)] = dumps(m)
            out[k] = blob
            if self.tap:
                self.tap(direction, rnd, k, kind, blob)
        return out

    def _receive(self, rnd: int, k: int, blob: bytes, kind: str) -> Any:
        if self.tap:
            self.tap("up", rnd, k, kind, blob)
        return loads(blob)

    # -- joining --------------------------------------------------------------------------------
    def _join(self, rnd: int, nodes: Sequence[int], bytes_down: dict[int, int]) -> list[Failure]:
        if not nodes:
            return []
        msg = self.method.join_message()
        blobs = self._encode_all("down", rnd, "join", {k: msg for k in nodes})
        failures = []
        for k, res in self.pool.join(rnd, blobs).items():
            bytes_down[k] = bytes_down.get(k, 0) + len(blobs[k])
            if isinstance(res, Failure):
                failures.append(res)
                if res.kind == "dead":
                    self.dead.add(k)
            else:
                self.needs_join.discard(k)
        return failures

    def start(self) -> None:
        """Every node downloads the initial global state (Alg. 1, l. 14)."""
        self.method.server_start(dict(self.pool.sizes))
        self._started = True
        failures = self._join(0, sorted(self.needs_join), self.join_bytes)
        for f in failures:  # a node that cannot join now tries again when it is next selected
            self.needs_join.add(f.node)

    # -- rounds ---------------------------------------------------------------------------------
    def select(self, rnd: int) -> list[int]:
        alive = [k for k in self.nodes if k not in self.dead]
        if not alive:
            raise FederationError(f"round {rnd}: every node is dead ({len(self.nodes)} nodes, restarts exhausted)")
        m = max(1, int(round(self.method.participation() * len(self.nodes))))
        rng = np.random.default_rng(derive_seed(self.seed, rnd, 3))
        return sorted(int(k) for k in rng.choice(alive, min(m, len(alive)), replace=False))

    def run_round(self, rnd: int) -> RoundRecord:
        if not self._started:
            self.start()
        t0 = time.time()
        selected = self.select(rnd)
        bytes_down: dict[int, int] = {}
        to_join = [k for k in selected if k in self.needs_join]
        failures = self._join(rnd, to_join, bytes_down)
        joined = [k for k in to_join if k not in self.needs_join]
        failed = {f.node for f in failures}
        ready = [k for k in selected if k not in failed]
        results: dict[int, Any] = {}
        if ready:
            blobs = self._encode_all("down", rnd, "round", self.method.configure(rnd, ready))
            for k in ready:
                bytes_down[k] = bytes_down.get(k, 0) + len(blobs[k])
            results = self.pool.run_round(rnd, blobs)
            again = [k for k, r in results.items() if isinstance(r, str) and r == NOT_JOINED]
            if again:  # restarted between rounds: join, then ask once more
                self.needs_join.update(again)
                jf = self._join(rnd, again, bytes_down)
                failures += jf
                jfailed = {f.node for f in jf}
                joined += [k for k in again if k not in jfailed]
                retry = [k for k in again if k not in jfailed]
                for k in jfailed:
                    results.pop(k, None)
                if retry:
                    blobs2 = {k: blobs[k] for k in retry}
                    for k in retry:
                        bytes_down[k] += len(blobs2[k])
                        if self.tap:  # sent again: the tap sees every blob that is counted
                            self.tap("down", rnd, k, "round", blobs2[k])
                    results.update(self.pool.run_round(rnd, blobs2))
        updates: list[ClientUpdate] = []
        bytes_up: dict[int, int] = {}
        for k in sorted(results):
            res = results[k]
            if isinstance(res, Failure):
                failures.append(res)
            elif isinstance(res, (bytes, bytearray)):
                u = ClientUpdate.from_wire(k, rnd, self._receive(rnd, k, bytes(res), "update"), len(res))
                updates.append(u)
                bytes_up[k] = u.nbytes
            else:
                failures.append(Failure(k, rnd, "unavailable", f"node did not answer the round ({res!r})"))
        for f in failures:
            self.needs_join.add(f.node)
            if f.kind == "dead":
                self.dead.add(f.node)
        self.method.aggregate(rnd, updates, failures)
        if updates:
            self._empty = 0
        else:
            self._empty += 1
            if self._empty >= self.max_empty_rounds:
                detail = "; ".join(f"node {f.node}: {f.kind} {f.message[:200]}" for f in failures[:5])
                raise FederationError(f"{self._empty} rounds in a row without a single update (round {rnd}): {detail}")
        rec = RoundRecord(
            rnd,
            selected,
            sorted(u.node for u in updates),
            failures,
            sorted(joined),
            bytes_up,
            bytes_down,
            {k: u.payload_bytes for k, u in ((u.node, u) for u in updates)},
            _weighted(updates),
            time.time() - t0,
            node_local=self._node_local(rnd, updates),
        )
        self.records.append(rec)
        self.last_round = rnd
        return rec

    def _node_local(self, rnd: int, updates: Sequence[ClientUpdate]) -> dict[int, dict[str, float]]:
        """The delivering nodes' own metrics, over the hosts' side channel (only when the method logs them)."""
        if not updates or not self.method.logs_node_metrics():
            return {}
        got = self.pool.local_metrics(rnd, [u.node for u in updates])
        return {k: dict(v) for k, v in sorted(got.items()) if isinstance(v, Mapping) and v}

    def finish(self) -> dict[int, int]:
        """The method's last broadcast (if any) to every live, joined node; returns bytes per node."""
        msg = self.method.finalize_message()
        sent: dict[int, int] = {}
        if msg is None:
            return sent
        nodes = [k for k in self.nodes if k not in self.dead and k not in self.needs_join]
        if not nodes:
            return sent
        rnd = self.last_round
        blobs = self._encode_all("down", rnd, "finalize", {k: msg for k in nodes})
        for k, res in self.pool.finalize(rnd, blobs).items():
            sent[k] = len(blobs[k])
            if isinstance(res, Failure):
                self.needs_join.add(k)
        if self.records:
            self.records[-1].final_bytes_down = sent
        return sent

    def snapshot(self) -> dict[str, np.ndarray]:
        """The global state (what every node may hold; for private-encoder methods the shared part only)."""
        return self.method.global_state()

    def release(self, requests: Mapping[int, Any]) -> tuple[dict[int, Any], dict[int, int], dict[int, int]]:
        """Ask each node in `requests` (dead ones excepted) to release z of its own rows (`requests[k]`: per
        split the row ids, or None for every row it owns); returns the release messages received and the bytes
        up and down per node. A node that fails to answer releases nothing."""
        nodes = [k for k in sorted(requests) if k not in self.dead]
        if not nodes:
            return {}, {}, {}
        rnd = self.last_round
        blobs = self._encode_all("down", rnd, "release", {k: requests[k] for k in nodes})
        down = {k: len(blobs[k]) for k in nodes}
        got: dict[int, Any] = {}
        up: dict[int, int] = {}
        for k, res in sorted(self.pool.release(rnd, blobs).items()):
            if isinstance(res, (bytes, bytearray)):
                got[k] = self._receive(rnd, k, bytes(res), "release")
                up[k] = len(res)
        return got, up, down

    def all_failures(self) -> list[Failure]:
        return [f for r in self.records for f in r.failures]


def _weighted(updates: Sequence[ClientUpdate]) -> dict[str, float]:
    """Example-weighted mean of the clients' metrics."""
    total = sum(u.num_examples for u in updates)
    sums: dict[str, float] = {}
    weights: dict[str, int] = {}
    for u in updates:  # one pass, adding in the updates' order (as a sum per key would)
        n = u.num_examples
        for key, v in u.metrics.items():
            sums[key] = sums.get(key, 0) + v * n
            weights[key] = weights.get(key, 0) + n
    return {key: float(sums[key] / weights[key]) for key in sorted(sums) if weights[key]} if total else {}
