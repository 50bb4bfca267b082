"""The federation's interfaces (Flower's strategy / client split, one class per method).

A `FederatedMethod` plays both roles of one algorithm:
- client role, inside a node host: `init_nodes`, `join` (full download of the global state),
  `client_update(node, global_state, round) -> ClientUpdate` (or `client_update_many` for a vectorised
  ensemble of nodes), `finalize`, and for methods whose clients own private encoders (`private_encoders`)
  `release_rows`: the z a client releases of its own rows (its encoder never leaves it);
- server role, inside the coordinator: `join_message`, `configure` (the round's downlink),
  `aggregate(round, updates, failures) -> global_state`, `finalize_message`, `global_state`;
- driver role: `assemble(global_state)` loads the final (or current) global state. A method that shares
  its encoder (D-EIGAN, LDP-FedAvg) then releases z with `encode`; a method with private encoders
  (D-GPP) cannot: what the driver has of the release is what the clients sent (`receive_release`).

Messages are plain Python objects holding numpy arrays. Every message is serialized with pickle
(protocol 5) by the transport, and the length of those bytes is what is counted as communication.
Nothing in this package imports Ray or anything above `veil.methods`."""

from __future__ import annotations

import functools
import pickle
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from veil.datasets.dataset import Split
from veil.errors import ConfigError, VeilError
from veil.randomness import NODE_RELEASE_STREAM, NODE_STREAM, ReleaseKey, derive_seed, release_generator

PICKLE_PROTOCOL = 5
NOT_JOINED = "not-joined"
RELEASE_SPLITS = ("train", "test")
"""The splits a node releases rows of: its training shard and the test rows the audit deals it."""


class FederationError(VeilError, RuntimeError):
    """The federation cannot go on (every node dead, rounds without any update, a refused resource request)."""


class ResourceError(VeilError, ValueError):
    """The cluster cannot satisfy what the federation asks for; raised before any actor starts."""


class EncodersStayHome(VeilError, RuntimeError):
    """A method whose clients keep their encoders (D-GPP) was asked, outside a client, to encode rows."""

    def __init__(self, method: str) -> None:
        super().__init__(
            f"{method}: the encoders stay on their clients (each client releases z of its own rows; the aggregator "
            "and the run's records hold only the utility classifiers psi), so a model assembled outside the clients "
            "cannot encode rows; the release of a federated run is what its clients sent (the audit's "
            "`Release`)"
        )


class InjectedFault(RuntimeError):
    """A node host's death in process: raised by instrumentation (`host.ROUND_HOOK_ENV`), the in-process pool
    rebuilds the host as Ray restarts a dead actor."""


# ---------------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------------
def dumps(obj: Any) -> bytes:
    """Serialize a message (what the transport sends; its length is the byte count)."""
    return pickle.dumps(obj, protocol=PICKLE_PROTOCOL)


def loads(blob: bytes) -> Any:
    """Inverse of `dumps` (messages only ever come from Veil's own hosts and coordinator)."""
    return pickle.loads(blob)


_SCALARS = (int, float, str, bytes, type(None), np.generic)
"""Message values that hold no array (bool is an int)."""


def array_bytes(obj: Any) -> int:
    """Bytes of every numpy array inside a (nested) message: the payload without the envelope."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, Mapping):
        items: Any = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    else:
        return 0
    total = 0
    for v in items:  # scalars skipped before the recursive call: a coordinator reads ten thousand messages a round
        if isinstance(v, np.ndarray):
            total += int(v.nbytes)
        elif not isinstance(v, _SCALARS):
            total += array_bytes(v)
    return total


def iter_arrays(obj: Any, path: str = ""):
    """(path, array) for every numpy array inside a message, and (path, key) for every mapping key."""
    if isinstance(obj, np.ndarray):
        yield path, obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield f"{path}/{k}", None
            yield from iter_arrays(v, f"{path}/{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from iter_arrays(v, f"{path}[{i}]")


@dataclass
class ClientUpdate:
    """What one node sends after a round: parameters (D-EIGAN, LDP-FedAvg) or sanitized representations
    (distributed GPP), with its example count and the metrics it shares. `nbytes` is the length of the
    serialized message as it travelled; `payload_bytes` the bytes of its arrays alone. `local` holds the
    node's own metrics: they stay on the node (never part of `wire()`) and reach the run's log only
    through the host's side channel, as `node_local/*` (see `Coordinator`)."""

    node: int
    round: int
    num_examples: int
    payload: Any
    kind: str = "parameters"  # "parameters" | "representations"
    metrics: dict[str, float] = field(default_factory=dict)
    nbytes: int = 0
    payload_bytes: int = 0
    local: dict[str, float] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        """The part that is sent (node id and round are known to the receiver from the call); a node that
        shares no metrics sends no metrics entry."""
        out: dict[str, Any] = {"num_examples": int(self.num_examples), "kind": self.kind, "payload": self.payload}
        if self.metrics:
            out["metrics"] = {k: float(v) for k, v in self.metrics.items()}
        return out

    @classmethod
    def from_wire(cls, node: int, rnd: int, msg: Mapping[str, Any], nbytes: int) -> "ClientUpdate":
        return cls(
            node,
            rnd,
            int(msg["num_examples"]),
            msg["payload"],
            msg["kind"],
            dict(msg.get("metrics", {})),
            nbytes,
            array_bytes(msg["payload"]),
        )


@dataclass
class Failure:
    """A node that did not deliver its update in a round: 'died' (its process went away), 'error' (its
    update raised), 'unavailable' (its host could not be reached or restarted), 'timeout'."""

    node: int
    round: int
    kind: str
    message: str = ""
    host: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "round": self.round,
            "kind": self.kind,
            "message": self.message[:500],
            "host": self.host,
            "role": "node",
        }


@dataclass
class CoordinatorFailure:
    """The coordinator's process died while `round` was under way (or before it started); the federation
    went on from its checkpoint of the last completed round. Recorded beside the nodes' `Failure`s, never
    passed to `aggregate`."""

    round: int
    kind: str = "died"
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": None,
            "round": self.round,
            "kind": self.kind,
            "message": self.message[:500],
            "host": None,
            "role": "coordinator",
        }


@dataclass(frozen=True)
class NodeObjective:
    """The labels one node keeps (its allies / utility) and hides (its adversaries / sensitive)."""

    utility: tuple[str, ...]
    sensitive: tuple[str, ...]

    def signature(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return (self.utility, self.sensitive)


@dataclass
class NodeData:
    """What a node owns: its training shard and its objective (shipped once to the node's host), and for a
    method whose nodes release their own rows (`private_encoders`), the ids of those rows in the run's train
    split (`rows`, default 0..n-1) and the inputs and ids of the test rows the audit deals it (`test_x`,
    `test_rows`; no labels: the audit has them, the node need not)."""

    node: int
    train: Split
    objective: NodeObjective
    rows: np.ndarray | None = None
    test_x: np.ndarray | None = None
    test_rows: np.ndarray | None = None


class Node:
    """One federated participant, long-lived inside its host: its shard, its objective, its own random
    streams and whatever local state its method keeps between rounds (allies, adversaries, optimizers;
    for a vectorised method, a slot in the host's ensemble)."""

    def __init__(self, data: NodeData, seed: int, release_seed: int | None = None) -> None:
        self.id = int(data.node)
        self.train = data.train
        self.objective = data.objective
        self.num_examples = len(data.train)
        self.seed = seed
        self.release_seed = release_seed
        rows = np.arange(len(data.train)) if data.rows is None else np.asarray(data.rows, np.int64)
        self.own: dict[str, tuple[np.ndarray, np.ndarray]] = {"train": (rows, data.train.x)}
        if data.test_rows is not None and data.test_x is not None:
            self.own["test"] = (np.asarray(data.test_rows, np.int64), np.asarray(data.test_x))
        self.releases = 0  # releases of its own rows so far
        # the secret its releases of its own rows derive from (with each row's content): the same row released twice
        # gets the same z. Drawn here (it never leaves the node), or from (release_seed, node) when set.
        self.release_key = (
            ReleaseKey.new()
            if release_seed is None
            else ReleaseKey.from_seed(release_seed, NODE_RELEASE_STREAM, self.id)
        )
        self.joined = False
        self.state: dict[str, Any] = {}
        self.slot: tuple[Any, int] | None = None
        self.batch_gen = torch.Generator().manual_seed(derive_seed(seed, self.id, 1))
        self.noise_gen = torch.Generator().manual_seed(derive_seed(seed, self.id, 2))  # training noise
        # noise in what the node sends out (D-GPP's sanitized batches): OS entropy unless release_seed is set
        self.release_gen = release_generator(release_seed, NODE_STREAM, self.id)

    def __repr__(self) -> str:
        return f"Node({self.id}, rows={self.num_examples}, joined={self.joined})"

    def rows_to_release(self, request: Mapping[str, Any] | None) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """(split, row ids sorted, their inputs) for a release request: per split the ids asked for, or None
        for every row of that split the node owns (a request None: every row it owns). A node releases only
        its own rows: asking for another's is an error. Splits with no row asked for are left out."""
        if request is not None and set(request) - set(self.own):
            raise ValueError(f"node {self.id} holds no {'/'.join(sorted(set(request) - set(self.own)))} rows")
        out = []
        for split, (ids, x) in self.own.items():
            if request is not None and split not in request:
                continue
            want = None if request is None else request[split]
            order = np.argsort(ids, kind="stable")
            if want is None:
                pos = order
            else:
                want = np.unique(np.asarray(want, np.int64))
                at = np.searchsorted(ids[order], want)
                found = at < len(ids)
                found[found] = ids[order][at[found]] == want[found]
                if not found.all():
                    raise ValueError(
                        f"node {self.id} was asked to release {split} rows it does not own: {want[~found][:5].tolist()}"
                    )
                pos = order[at]
            if len(pos):
                out.append((split, ids[pos], x[pos]))
        return out

    def next_release_key(self) -> ReleaseKey:
        """The key of this node's next release of its own rows: the same in every release (permanent
        randomization: a row released again by the same encoder gets the same noise; D-GPP derives a subkey per
        encoder), so a replayed or repeated release gains nothing."""
        self.releases += 1
        return self.release_key


@dataclass
class Release:
    """The z the nodes released of their own rows, as the coordinator received them (methods with private
    encoders): per split ('train', 'test') and node, the row ids (indices into the run's split) and their z.
    Built from the release messages `{kind: 'release', <split>: {rows: int64[n], z: float32[n, d_z]}}`."""

    parts: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)

    @classmethod
    def from_messages(cls, messages: Mapping[int, Mapping[str, Any]]) -> "Release":
        parts: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        for k, msg in sorted(messages.items()):
            for split in RELEASE_SPLITS:
                if split not in msg:
                    continue
                rows, z = np.asarray(msg[split]["rows"], np.int64), np.asarray(msg[split]["z"], np.float32)
                if z.ndim != 2 or len(rows) != len(z):
                    raise ValueError(f"node {k}'s {split} release: {len(rows)} row ids for z of shape {z.shape}")
                parts.setdefault(split, {})[int(k)] = (rows, z)
        return cls(parts)

    def nodes(self, split: str) -> list[int]:
        """The nodes that released rows of `split`."""
        return sorted(self.parts.get(split, {}))

    def rows(self, split: str) -> np.ndarray:
        """Every released row id of `split`, sorted."""
        got = [r for r, _ in self.parts.get(split, {}).values()]
        return np.sort(np.concatenate(got)) if got else np.empty(0, np.int64)

    def z(self, split: str, rows: np.ndarray | None = None) -> np.ndarray:
        """z of `rows` of `split`, in that order (default: every released row, by id); a row that no node
        released is an error."""
        got = list(self.parts.get(split, {}).values())
        if not got:
            raise KeyError(f"no node released {split} rows")
        ids = np.concatenate([r for r, _ in got])
        zs = np.concatenate([z for _, z in got])
        order = np.argsort(ids, kind="stable")
        ids, zs = ids[order], zs[order]
        if rows is None:
            return zs
        rows = np.asarray(rows, np.int64)
        at = np.searchsorted(ids, rows)
        ok = (at < len(ids)) & (ids[np.minimum(at, len(ids) - 1)] == rows)
        if not np.all(ok):
            raise KeyError(f"{split} rows {rows[~ok][:5].tolist()} were not released by any node")
        return zs[at]

    def nbytes(self) -> int:
        """Bytes of the released arrays (row ids and z), without the envelope."""
        return sum(int(r.nbytes + z.nbytes) for p in self.parts.values() for r, z in p.values())


def index_set(seed: int, size: int, count: int) -> np.ndarray:
    """The sorted set of `count` of `size` indices drawn from `seed` (sender and receiver regenerate it)."""
    if count >= size:
        return _every(size)
    return np.sort(np.random.default_rng(seed).choice(size, count, replace=False)).astype(np.int64)


@functools.lru_cache(maxsize=16)
def _every(size: int) -> np.ndarray:
    """0..size-1, read-only and shared: a dense upload's index set, asked for by every node every round."""
    out = np.arange(size, dtype=np.int64)
    out.flags.writeable = False
    return out


def sparse_count(phi: float, size: int) -> int:
    """How many of `size` entries a fraction phi sends: round(phi * size), at least 1."""
    return max(1, min(size, int(round(phi * size))))


# ---------------------------------------------------------------------------------------------------
# The method interface
# ---------------------------------------------------------------------------------------------------
class FederatedRoles(ABC):
    """The roles of a federated algorithm: client (node hosts), server (coordinator) and driver (`assemble`).
    Methods subclass `veil.methods.federated.fed_method.FederatedMethod`, which adds `fit`; the hosts, the
    coordinator and the simulation see only these roles. The abstract methods are what every federated method
    must define; `release_rows` only a method with `private_encoders`."""

    name: ClassVar[str]
    federated: ClassVar[bool] = True
    message_kind: ClassVar[str] = "parameters"
    vectorised: ClassVar[bool] = True  # client_update_many runs a host's nodes as one ensemble

    config: Any
    task: Any

    # -- shape of the federation ---------------------------------------------------------------
    def num_nodes(self) -> int:
        return int(self.config.K)

    def participation(self) -> float:
        return float(getattr(self.config, "fraction", 1.0))

    @abstractmethod
    def num_rounds(self, sizes: Sequence[int]) -> int:
        """Communication rounds for nodes holding `sizes` rows."""
        ...

    def node_objectives(self) -> list[NodeObjective]:
        """Every node's objective (validated against the task; errors name the field)."""
        t = self.task
        return [NodeObjective(tuple(t.utility), tuple(t.sensitive))] * self.num_nodes()

    def validate_partition(self, sizes: Sequence[int]) -> None:
        """Refuse partitions the method cannot use (called before any node starts)."""
        for k, n in enumerate(sizes):
            if n < 1:
                raise ConfigError("partition", f"node {k}: 0 rows", "a partition giving every node at least one row")

    # -- client role ---------------------------------------------------------------------------
    @abstractmethod
    def init_nodes(self, nodes: Sequence[Node]) -> None: ...

    @abstractmethod
    def join(self, nodes: Sequence[Node], message: Any) -> None: ...

    def client_update(self, node: Node, global_state: Any, round: int) -> ClientUpdate:
        """One node's round: apply the downlink `global_state`, train locally, return the upload."""
        return self.client_update_many([node], {node.id: global_state}, round)[node.id]

    @abstractmethod
    def client_update_many(
        self, nodes: Sequence[Node], messages: Mapping[int, Any], round: int
    ) -> dict[int, ClientUpdate]:
        """Every node's round at once (`client_update`). Nodes sent the same broadcast share one decoded message
        object: read it, never modify it."""

    def finalize(self, nodes: Sequence[Node], message: Any) -> None:
        """Apply the coordinator's last message after the final round (default: nothing to do)."""
        return None

    def logs_node_metrics(self) -> bool:
        """Whether nodes keep their own metrics (`ClientUpdate.local`) for the run's log (`node_metrics`)."""
        return bool(getattr(self.config, "node_metrics", False))

    def private_encoders(self) -> bool:
        """Whether each client owns an encoder that never leaves it (D-GPP): then no `encode` exists outside the
        clients, and the release of the run is what each client releases of its own rows (`release_rows`),
        sent to the coordinator as a 'release' message and counted. False: the global state is the model
        (D-EIGAN, LDP-FedAvg), and `encode` after `assemble` releases z."""
        return False

    def release_rows(self, node: Node, x: np.ndarray, generator: ReleaseKey) -> np.ndarray:
        """z (float32, one row per row of `x`) that `node` releases of its own rows `x`, any noise drawn from
        `generator` (the node's release key, with each row's content: `veil.randomness.for_rows`); only for
        methods with `private_encoders`."""
        raise NotImplementedError(f"{self.name} keeps no private encoders: its nodes release no rows of their own")

    # -- server role ---------------------------------------------------------------------------
    def server_start(self, sizes: Mapping[int, int]) -> None:
        """Called once in the coordinator before the first join, with every node's row count."""
        self.node_sizes = dict(sizes)

    @abstractmethod
    def join_message(self) -> Any: ...

    @abstractmethod
    def configure(self, round: int, nodes: Sequence[int]) -> dict[int, Any]:
        """The downlink of `round` for each selected node."""
        ...

    @abstractmethod
    def aggregate(self, round: int, updates: Sequence[ClientUpdate], failures: Sequence[Failure]) -> Any:
        """Fold the round's updates into the global state and return it. `failures` lists the selected
        nodes that delivered nothing; they contribute nothing (their weight is not counted)."""
        ...

    def finalize_message(self) -> Any | None:
        """A last broadcast after the final round (None: none)."""
        return None

    @abstractmethod
    def global_state(self) -> dict[str, np.ndarray]: ...

    def server_state(self) -> dict[str, Any]:
        """Everything the server role keeps between rounds (the coordinator's checkpoint); default: the global
        state. A method whose server keeps more (an optimizer, a downlink chosen in the last round) overrides
        this and `load_server_state`."""
        return {"global_state": self.global_state()}

    def load_server_state(self, state: Mapping[str, Any]) -> None:
        """Restore `server_state()` into a server freshly started with `server_start` (a restarted coordinator)."""
        self.assemble(state["global_state"])

    # -- driver role ---------------------------------------------------------------------------
    released: Release | None = None
    """What the clients released of their own rows (methods with `private_encoders`), once received."""

    @abstractmethod
    def assemble(self, global_state: Mapping[str, np.ndarray]) -> None:
        """Load the federation's final (or current) global state (for a method that shares its encoder, the
        model that `encode` releases from)."""
        ...

    def receive_release(self, release: Release) -> None:
        """Keep the clients' release of their own rows (what the audit measures for `private_encoders`)."""
        self.released = release


def release_message(method: FederatedRoles, node: Node, request: Mapping[str, Any] | None) -> dict[str, Any]:
    """What `node` sends when asked to release its own rows (`Node.rows_to_release`): `{kind: 'release',
    <split>: {rows: int64[n], z: float32[n, d_z]}}` and nothing else (no s, no parameter), its noise from the
    node's release key (one encoder releases the same rows as the same z every time)."""
    gen = node.next_release_key()
    out: dict[str, Any] = {"kind": "release"}
    for split, ids, x in node.rows_to_release(request):
        z = np.asarray(method.release_rows(node, x, gen), np.float32)
        out[split] = {"rows": ids.astype(np.int64), "z": z}
    return out
