"""A node host: one process-resident object holding one or many long-lived `Node`s of a federated method.

The host is a plain class; `veil.platform.federation` wraps it in a Ray actor. Every call takes and
returns serialized messages (bytes) keyed by node id, so what crosses the process boundary is exactly
what the coordinator counted. With several nodes, `client_update_many` runs them as one vectorised
ensemble; with one node (one actor per node) it is the same code with P = 1. A node's own metrics
(`ClientUpdate.local`) stay in the host until `local_metrics` hands them to the run's log. A round asked
again with the same downlink (a coordinator restarted from its checkpoint replays the round) gets the
answer already computed, so no node trains twice on one round. A node of a method with private encoders
releases z of its own rows when asked (`release`); asked again for the same rows before it trained again, it
replays that release instead of drawing fresh noise for the same rows."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from veil.datasets.dataset import TaskSpec
from veil.methods.federated.core import (
    NOT_JOINED,
    FederatedRoles,
    Node,
    NodeData,
    dumps,
    loads,
    release_message,
)
from veil.plugins import instrumentation

ROUND_HOOK_ENV = "VEIL_ROUND_HOOK"
"""Instrumentation every node host loads, unset in normal use (`veil.plugins.instrumentation`): its factory gets the
host's `host` id, its `nodes` and `own_process` (True in a Ray actor, False in process) and returns a callback
`(round, node_ids)` called as each round starts on the host, or None. The chaos tests' node deaths plug in here: a
callback that raises `InjectedFault` stands for the host's death in process."""


class NodeHost:
    """Hosts the nodes in `shards` for the federated method class `method_cls` with its validated `config`
    (client role). The class, not a registry name, so the node layer never looks names up (no import back into
    veil.methods); a Ray actor receives it by reference and imports its module."""

    def __init__(
        self,
        method_cls: type,
        config: Any,
        task: TaskSpec,
        shards: Sequence[NodeData],
        *,
        host_id: int = 0,
        own_process: bool = False,
        threads: int | None = None,
    ) -> None:
        if threads:
            torch.set_num_threads(threads)
        self.host_id = host_id
        method = method_cls(config, task)  # a built config: no re-validation
        assert isinstance(method, FederatedRoles), f"{method_cls.__name__} is not a federated method"
        self.method = method
        seed = int(config.seed)
        self.nodes = {d.node: Node(d, seed, config.release_seed) for d in shards}
        self.method.init_nodes(list(self.nodes.values()))
        context = {"host": host_id, "nodes": sorted(self.nodes), "own_process": own_process}
        self._on_round: Callable[[int, list[int]], None] | None = instrumentation(ROUND_HOOK_ENV, context)
        self.pid = os.getpid()
        self._local: dict[int, dict[str, float]] = {}  # each node's own metrics of its last round
        # per node, its last answer: (round, digest of the downlink, reply, own metrics)
        self._answered: dict[int, tuple[int, bytes, bytes, dict[str, float]]] = {}
        self._trained: dict[int, int] = {}  # per node, how many times it trained (a release is replayed until then)
        self._released: dict[int, tuple[tuple[int, bytes], bytes]] = {}  # per node, its last release
        self._full: dict[int, tuple[int, dict[str, Any]]] = {}  # per node, its release of every own row

    def info(self) -> dict[str, Any]:
        return {
            "host": self.host_id,
            "pid": self.pid,
            "nodes": sorted(self.nodes),
            "joined": sorted(k for k, n in self.nodes.items() if n.joined),
        }

    def join(self, blobs: Mapping[int, bytes]) -> dict[int, str]:
        for k, blob in blobs.items():
            self.method.join([self.nodes[k]], loads(blob))
        return {k: "ok" for k in blobs}

    def run_round(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]:
        if self._on_round is not None:
            self._on_round(rnd, list(blobs))
        out: dict[int, Any] = {}
        for k in blobs:  # asked again for the same round (a restarted coordinator): the same answer, no retraining
            seen = self._answered.get(k)
            if seen is not None and seen[0] == rnd and seen[1] == _digest(blobs[k]):
                out[k] = seen[2]
                if seen[3]:
                    self._local[k] = dict(seen[3])
        ready = [self.nodes[k] for k in sorted(blobs) if k not in out and self.nodes[k].joined]
        out.update({k: NOT_JOINED for k in blobs if k not in out and not self.nodes[k].joined})
        if ready:
            msgs = _load_shared({n.id: blobs[n.id] for n in ready})
            ups = self.method.client_update_many(ready, msgs, rnd)
            for n in ready:
                self._trained[n.id] = self._trained.get(n.id, 0) + 1
            digests: dict[bytes, bytes] = {}  # a broadcast's blobs are equal: one digest for all
            for k, u in ups.items():
                out[k] = dumps(u.wire())
                blob = blobs[k]
                if blob not in digests:
                    digests[blob] = _digest(blob)
                self._answered[k] = (rnd, digests[blob], out[k], dict(u.local))
            self._local.update({k: dict(u.local) for k, u in ups.items() if u.local})
        return out

    def local_metrics(self, node_ids: Sequence[int]) -> dict[int, dict[str, float]]:
        """The nodes' own metrics of their last round, handed over once: the side channel by which a node's
        log reaches the run, outside every protocol message (not counted, not tapped)."""
        return {k: self._local.pop(k, {}) for k in node_ids}

    def finalize(self, blobs: Mapping[int, bytes]) -> dict[int, str]:
        ready = [self.nodes[k] for k in sorted(blobs) if self.nodes[k].joined]
        if ready:
            self.method.finalize(ready, loads(blobs[ready[0].id]))
            for n in ready:
                self._trained[n.id] = self._trained.get(n.id, 0) + 1
        return {k: "ok" for k in blobs}

    def release(self, blobs: Mapping[int, bytes]) -> dict[int, bytes]:
        """Each addressed node's release of its own rows (`release_message`), serialized: per split the row
        ids and their z, nothing else. The same request again before the node trained again gets the same
        bytes (a coordinator restarted mid-release asks again; no second draw of noise for the same rows)."""
        out: dict[int, bytes] = {}
        for k in sorted(blobs):
            key = (self._trained.get(k, 0), _digest(blobs[k]))
            seen = self._released.get(k)
            if seen is not None and seen[0] == key:
                out[k] = seen[1]
                continue
            out[k] = dumps(self._release_of(k, loads(blobs[k])))
            self._released[k] = (key, out[k])
        return out

    def _release_of(self, k: int, request: Any) -> dict[str, Any]:
        """Node k's release of the rows `request` names, cut from its release of every own row, computed once per
        training state: a row's z is then the same bytes whichever rows are asked with it (the encoder's float sums
        depend on how many rows pass through it together)."""
        trained = self._trained.get(k, 0)
        full = self._full.get(k)
        if full is None or full[0] != trained:
            full = (trained, release_message(self.method, self.nodes[k], None))
            self._full[k] = full
            if request is None:
                return full[1]
        else:
            self.nodes[k].releases += 1
        msg: dict[str, Any] = {"kind": "release"}
        for split, ids, _ in self.nodes[k].rows_to_release(request):
            have = full[1][split]
            where = {int(r): i for i, r in enumerate(have["rows"])}
            msg[split] = {"rows": ids.astype(np.int64), "z": have["z"][[where[int(r)] for r in ids]]}
        return msg


def _load_shared(blobs: Mapping[int, bytes]) -> dict[int, Any]:
    """Each node's downlink message, deserialized once per distinct content: a broadcast reaches a host as one
    blob per node, all equal, so its nodes share the decoded message, which `client_update_many` only reads."""
    seen: dict[bytes, Any] = {}
    out = {}
    for k, blob in blobs.items():
        if blob not in seen:
            seen[blob] = loads(blob)
        out[k] = seen[blob]
    return out


def _digest(blob: bytes) -> bytes:
    """A short fingerprint of a downlink message."""
    return hashlib.blake2b(blob, digest_size=16).digest()
