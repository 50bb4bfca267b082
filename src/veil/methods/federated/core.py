"""The federation's interfaces (Flower's strategy / client split, one class per method).

A `FederatedMethod` plays both roles of one algorithm:
- client role, inside a node host: `init_nodes`, `join` (full download of the global state),
  `client_update(node, global_state, round) -> ClientUpdate` (or `client_update_many` for a vectorised
  ensemble of nodes), `finalize`, `export_node_state`;
- server role, inside the coordinator: `join_message`, `configure` (the round's downlink),
  `aggregate(round, updates, failures) -> global_state`, `finalize_message`, `global_state`;
- driver role: `assemble(global_state, node_states)` turns the final result into the model that
  `encode` releases, so the ordinary audit works.

Messages are plain Python objects holding numpy arrays. Every message is serialized with pickle
(protocol 5) by the transport, and the length of those bytes is what is counted as communication.
Nothing in this package imports Ray or anything above `veil.methods`."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import torch

from veil.datasets.base import Split
from veil.errors import ConfigError, VeilError
from veil.methods.randomness import NODE_STREAM, derive_seed, release_generator

PICKLE_PROTOCOL = 5
NOT_JOINED = "not-joined"


class FederationError(VeilError, RuntimeError):
    """The federation cannot go on (every node dead, rounds without any update, a refused resource request)."""


class ResourceError(VeilError, ValueError):
    """The cluster cannot satisfy what the federation asks for; raised before any actor starts."""


class InjectedFault(RuntimeError):
    """Raised by a node host when its fault plan says so (in-process stand-in for a process death)."""


# ---------------------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------------------
def dumps(obj: Any) -> bytes:
    """Serialize a message (what the transport sends; its length is the byte count)."""
    return pickle.dumps(obj, protocol=PICKLE_PROTOCOL)


def loads(blob: bytes) -> Any:
    """Inverse of `dumps` (messages only ever come from Veil's own hosts and coordinator)."""
    return pickle.loads(blob)


def array_bytes(obj: Any) -> int:
    """Bytes of every numpy array inside a (nested) message: the payload without the envelope."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, Mapping):
        return sum(array_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(array_bytes(v) for v in obj)
    return 0


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
class Objective:
    """The labels one node keeps (its allies / utility) and hides (its adversaries / sensitive)."""

    utility: tuple[str, ...]
    sensitive: tuple[str, ...]

    def signature(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return (self.utility, self.sensitive)


@dataclass
class NodeData:
    """What a node owns: its training shard and its objective (shipped once to the node's host)."""

    node: int
    train: Split
    objective: Objective


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
        self.joined = False
        self.state: dict[str, Any] = {}
        self.slot: tuple[Any, int] | None = None
        self.batch_gen = torch.Generator().manual_seed(derive_seed(seed, self.id, 1))
        self.noise_gen = torch.Generator().manual_seed(derive_seed(seed, self.id, 2))  # training noise
        # noise in what the node sends out (D-GPP's sanitized batches): OS entropy unless release_seed is set
        self.release_gen = release_generator(release_seed, NODE_STREAM, self.id)

    def __repr__(self) -> str:
        return f"Node({self.id}, rows={self.num_examples}, joined={self.joined})"


def index_set(seed: int, size: int, count: int) -> np.ndarray:
    """The sorted set of `count` of `size` indices drawn from `seed` (sender and receiver regenerate it)."""
    if count >= size:
        return np.arange(size, dtype=np.int64)
    return np.sort(np.random.default_rng(seed).choice(size, count, replace=False)).astype(np.int64)


def sparse_count(phi: float, size: int) -> int:
    """How many of `size` entries a fraction phi sends: round(phi * size), at least 1."""
    return max(1, min(size, int(round(phi * size))))


# ---------------------------------------------------------------------------------------------------
# The method interface
# ---------------------------------------------------------------------------------------------------
class FederatedRoles:
    """The roles of a federated algorithm: client (node hosts), server (coordinator) and driver (`assemble`).
    Methods subclass `veil.methods.federated.method.FederatedMethod`, which adds `fit`; the hosts, the
    coordinator and the simulation see only these roles."""

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

    def num_rounds(self, sizes: Sequence[int]) -> int:
        """Communication rounds for nodes holding `sizes` rows."""
        raise NotImplementedError

    def node_objectives(self) -> list[Objective]:
        """Every node's objective (validated against the task; errors name the field)."""
        t = self.task
        return [Objective(tuple(t.utility), tuple(t.sensitive))] * self.num_nodes()

    def validate_partition(self, sizes: Sequence[int]) -> None:
        """Refuse partitions the method cannot use (called before any node starts)."""
        for k, n in enumerate(sizes):
            if n < 1:
                raise ConfigError("partition", f"node {k}: 0 rows", "a partition giving every node at least one row")

    # -- client role ---------------------------------------------------------------------------
    def init_nodes(self, nodes: Sequence[Node]) -> None:
        raise NotImplementedError

    def join(self, nodes: Sequence[Node], message: Any) -> None:
        raise NotImplementedError

    def client_update(self, node: Node, global_state: Any, round: int) -> ClientUpdate:
        """One node's round: apply the downlink `global_state`, train locally, return the upload."""
        return self.client_update_many([node], {node.id: global_state}, round)[node.id]

    def client_update_many(
        self, nodes: Sequence[Node], messages: Mapping[int, Any], round: int
    ) -> dict[int, ClientUpdate]:
        raise NotImplementedError

    def finalize(self, nodes: Sequence[Node], message: Any) -> None:
        """Apply the coordinator's last message after the final round (default: nothing to do)."""

    def logs_node_metrics(self) -> bool:
        """Whether nodes keep their own metrics (`ClientUpdate.local`) for the run's log (`node_metrics`)."""
        return bool(getattr(self.config, "node_metrics", False))

    def export_node_state(self, node: Node) -> dict[str, np.ndarray] | None:
        """What the released model needs from this node (default: nothing, the global state suffices)."""
        return None

    # -- server role ---------------------------------------------------------------------------
    def server_start(self, sizes: Mapping[int, int]) -> None:
        """Called once in the coordinator before the first join, with every node's row count."""
        self.node_sizes = dict(sizes)

    def join_message(self) -> Any:
        raise NotImplementedError

    def configure(self, round: int, nodes: Sequence[int]) -> dict[int, Any]:
        """The downlink of `round` for each selected node."""
        raise NotImplementedError

    def aggregate(self, round: int, updates: Sequence[ClientUpdate], failures: Sequence[Failure]) -> Any:
        """Fold the round's updates into the global state and return it. `failures` lists the selected
        nodes that delivered nothing; they contribute nothing (their weight is not counted)."""
        raise NotImplementedError

    def finalize_message(self) -> Any | None:
        """A last broadcast after the final round (None: none)."""
        return None

    def global_state(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def server_state(self) -> dict[str, Any]:
        """Everything the server role keeps between rounds (the coordinator's checkpoint); default: the global
        state. A method whose server keeps more (an optimizer, a downlink chosen in the last round) overrides
        this and `load_server_state`."""
        return {"global_state": self.global_state()}

    def load_server_state(self, state: Mapping[str, Any]) -> None:
        """Restore `server_state()` into a server freshly started with `server_start` (a restarted coordinator)."""
        self.assemble(state["global_state"], {})

    # -- driver role ---------------------------------------------------------------------------
    def assemble(
        self, global_state: Mapping[str, np.ndarray], node_states: Mapping[int, Mapping[str, np.ndarray]]
    ) -> None:
        """Load the federation's final (or current) result so that `encode` releases from it."""
        raise NotImplementedError

    def needs_node_states(self) -> bool:
        """Whether `assemble` needs the nodes' exported states (True for private per-node encoders)."""
        return False

    def encode_node(self, x: np.ndarray, node: int) -> np.ndarray:
        """z for rows `x` as node `node` releases them (default: the global release)."""
        return self.encode(x)  # type: ignore[attr-defined]
