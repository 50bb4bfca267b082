"""Planning and running a federation (Flower's "simulation"): check and partition the rows into node
shards, then drive the coordinator's rounds over a pool of node hosts.

Everything that can be refused is refused in `plan_federation`, before any host starts: K larger than
the number of rows, a partition leaving a node empty, per-node objectives naming unknown labels, a
malformed fault plan. The in-process pool (`LocalPool`) lives here; Ray transports of the same pool
interface live in `veil.platform.federation`. Nothing here imports Ray."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from veil.config import as_params
from veil.datasets.dataset import Dataset, Split
from veil.datasets.partition import column, constant_on_every_node, parse_scheme, partition
from veil.errors import ConfigError
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.coordinator import Coordinator, RoundRecord, Tap
from veil.methods.federated.core import FederatedRoles, InjectedFault, NodeData, NodeObjective, Release, derive_seed
from veil.methods.federated.host import NodeHost


@dataclass
class FederationPlan:
    """A checked federation, ready to start: the method, every node's shard and objective, how many rounds,
    which nodes share a host, and (after a Ray runtime has placed it) the resource plan."""

    method: FederatedRoles
    method_name: str
    train: Split
    parts: list[np.ndarray]
    test_parts: list[np.ndarray] | None
    test_partition_note: str
    objectives: list[NodeObjective]
    shards: list[NodeData]
    rounds: int
    options: FederationOptions
    seed: int
    partition: str = "iid"
    runtime: str = "in-process"
    node_blocks: list[list[int]] = field(default_factory=list)
    resources: Any = None
    """The Ray runtime's resource plan (an object with `to_params()`), None in process."""
    warnings: list[str] = field(default_factory=list)
    """What the audit report must say about this federation (a partition that defeats the privacy training)."""
    started: Any = None
    """What a Ray runtime started for this federation before it runs (its owner actor, `prestart`), None: nothing."""
    wire: Any = None
    """Called after every round as `wire(round, method, fed, record)` (None: nothing): the audit's capture of what
    the coordinator received in sampled rounds (`veil.certify.wire.WireCapture`), set by the run pipeline."""

    def params(self) -> dict[str, Any]:
        out = {
            "federation.runtime": self.runtime,
            "federation.partition": self.partition,
            "federation.rounds": self.rounds,
            "federation.nodes": len(self.shards),
            "federation.hosts": len(self.node_blocks) if self.node_blocks else 1,
            "federation.test_partition": self.test_partition_note,
            "federation.node_rows": node_rows_param([int(len(p)) for p in self.parts]),
        }
        out.update(as_params(self.options, "federation."))
        if self.resources is not None:
            out.update({f"federation.{k}": v for k, v in self.resources.to_params().items()})
        return out


NODE_ROWS_LISTED = 200
"""Up to this many nodes, the run's params list each node's training rows; beyond it, they summarise them."""


def node_rows_param(rows: Sequence[int]) -> list[int] | str:
    """Each node's training rows as one MLflow param: the list, or past `NODE_ROWS_LISTED` nodes a summary that says
    where the full list is (a cut list would read as a smaller federation)."""
    if len(rows) <= NODE_ROWS_LISTED:
        return list(rows)
    return (
        f"{len(rows)} nodes: min {min(rows)}, median {float(np.median(rows)):g}, max {max(rows)} rows "
        "(each node's in federation/nodes.json)"
    )


def split_hosts(node_ids: Sequence[int], hosts: int) -> list[list[int]]:
    """Contiguous, near-equal blocks of nodes, one per host."""
    hosts = max(1, min(hosts, len(node_ids)))
    per = math.ceil(len(node_ids) / hosts)
    return [list(node_ids[i : i + per]) for i in range(0, len(node_ids), per)]


def partition_key(split: Split, scheme_text: str) -> tuple[np.ndarray | None, str]:
    """The per-row column a scheme splits by (dirichlet: its label; silo / variance: its column; iid and
    quantity: none)."""
    scheme, kw = parse_scheme(scheme_text)
    if scheme == "dirichlet":
        name = kw.get("label") or next(iter(split.utility))
    elif scheme == "silo":
        name = kw.get("column") or ("node" if "node" in split.extra else None)
    elif scheme == "variance":
        name = kw.get("column", "node")
    else:
        return None, "rows"
    return (column(split, name) if name is not None else None), str(name)


def partition_test_split(
    train: Split, test: Split, parts: Sequence[np.ndarray], scheme_text: str, seed: int
) -> tuple[list[np.ndarray], str]:
    """Each node's test rows, drawn to follow that node's TRAINING distribution: a test row whose key
    (the scheme's label or column) has value v goes to node k with probability n_train(k, v) / n_train(v)
    (for iid / quantity, or a value unseen in training: N_k / N). Re-running the partitioner on the test
    split would draw fresh Dirichlet shares, so a node's test rows would not look like its training rows."""
    k = len(parts)
    key_tr, name = partition_key(train, scheme_text)
    key_te = partition_key(test, scheme_text)[0]
    sizes = np.array([len(p) for p in parts], dtype=float)
    prior = sizes / sizes.sum()
    rng = np.random.default_rng(derive_seed(seed, 77))
    if key_tr is None or key_te is None:
        owner = rng.choice(k, size=len(test), p=prior)
    else:
        owner_tr = np.empty(len(train), dtype=np.int64)
        for i, rows in enumerate(parts):
            owner_tr[rows] = i
        owner = np.empty(len(test), dtype=np.int64)
        for v in np.unique(key_te):
            rows = np.flatnonzero(key_te == v)
            counts = np.bincount(owner_tr[key_tr == v], minlength=k).astype(float)
            p = counts / counts.sum() if counts.sum() > 0 else prior
            owner[rows] = rng.choice(k, size=len(rows), p=p)
    return [np.flatnonzero(owner == i) for i in range(k)], f"matched to each node's training distribution of {name}"


def plan_federation(
    method: FederatedRoles,
    method_name: str,
    train: Split,
    *,
    dataset: Dataset | None = None,
    partition_scheme: str = "iid",
    options: FederationOptions | None = None,
    seed: int = 0,
) -> FederationPlan:
    """Validate and partition (no host starts). Node blocks are laid out for the in-process pool; a Ray
    runtime re-lays them when it places the federation."""
    opts = options or FederationOptions()
    k = method.num_nodes()
    if k > len(train):
        raise ConfigError("K", k, f"at most the {len(train)} training rows (every node needs a row)")
    parts = partition(train, partition_scheme, k, seed)
    sizes = [len(p) for p in parts]
    method.validate_partition(sizes)
    objectives = method.node_objectives()
    test_parts, note = (
        partition_test_split(train, dataset.test, parts, partition_scheme, seed)
        if dataset is not None
        else (None, "no test split")
    )
    if method.private_encoders():  # a node releases its own rows: it learns their ids and its test rows' inputs
        test_x = dataset.test.x if dataset is not None else None
        shards = [
            NodeData(
                i,
                train.take(parts[i]),
                objectives[i],
                rows=np.asarray(parts[i], np.int64),
                test_x=test_x[test_parts[i]] if test_x is not None and test_parts is not None else None,
                test_rows=np.asarray(test_parts[i], np.int64) if test_parts is not None else None,
            )
            for i in range(k)
        ]
    else:
        shards = [NodeData(i, train.take(parts[i]), objectives[i]) for i in range(k)]
    per = opts.nodes_per_host or k
    warnings = [
        f"sensitive label '{name}' takes one value on every node (partition {partition_scheme}): no node's "
        "adversary sees two of its classes, so training cannot hide it, and a release that tells the nodes apart "
        "(D-GPP: one encoder per client) reveals it. Partition so that nodes hold several of its values "
        "(benchmarks/reproduce row dgpp-silos: race AUC 0.87 over race silos, 0.55 over iid clients)."
        for name in constant_on_every_node(train, parts)
    ]
    return FederationPlan(
        method,
        method_name,
        train,
        parts,
        test_parts,
        note,
        objectives,
        shards,
        method.num_rounds(sizes),
        opts,
        seed,
        partition=partition_scheme,
        node_blocks=split_hosts(list(range(k)), math.ceil(k / per)),
        warnings=warnings,
    )


# ---------------------------------------------------------------------------------------------------
# Pools of node hosts
# ---------------------------------------------------------------------------------------------------
class HostDied(RuntimeError):
    """A host's process went away during a call (it is restarted, as Ray restarts an actor)."""


class HostDead(RuntimeError):
    """A host is gone for good (its restarts are spent)."""


class PoolBase:
    """Fan a call out to the hosts that hold the addressed nodes; per node, a result or a Failure."""

    node_ids: list[int]
    sizes: dict[int, int]
    host_of: dict[int, int]

    def _invoke(self, calls: list[tuple[int, str, tuple]]) -> list[tuple[int, Any]]:
        raise NotImplementedError

    def _failure_kind(self, error: BaseException) -> str:
        return "error"

    def _fanout(self, rnd: int, method: str, by_node: Mapping[int, Any], pass_dict: bool = True) -> dict[int, Any]:
        from veil.methods.federated.core import Failure

        by_host: dict[int, dict[int, Any]] = {}
        for k, v in by_node.items():
            by_host.setdefault(self.host_of[k], {})[k] = v
        calls = []
        for h, sub in by_host.items():
            arg = sub if pass_dict else list(sub)
            calls.append((h, method, (rnd, arg) if method == "run_round" else (arg,)))
        out: dict[int, Any] = {}
        for h, res in self._invoke(calls):
            if isinstance(res, BaseException):
                kind = self._failure_kind(res)
                msg = f"{type(res).__name__}: {res}"
                for k in by_host[h]:
                    out[k] = Failure(k, rnd, kind, msg, h)
            else:
                out.update(res)
        return out

    def join(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]:
        return self._fanout(rnd, "join", blobs)

    def run_round(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]:
        return self._fanout(rnd, "run_round", blobs)

    def finalize(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]:
        return self._fanout(rnd, "finalize", blobs)

    def release(self, rnd: int, blobs: Mapping[int, bytes]) -> dict[int, Any]:
        return self._fanout(rnd, "release", blobs)

    def local_metrics(self, rnd: int, node_ids: Sequence[int]) -> dict[int, Any]:
        return self._fanout(rnd, "local_metrics", {k: None for k in node_ids}, pass_dict=False)


class LocalPool(PoolBase):
    """Node hosts as objects in this process, one per block of nodes."""

    def __init__(
        self,
        method_cls: type,
        config: Any,
        task: Any,
        shards: Sequence[NodeData],
        blocks: list[list[int]],
        *,
        max_restarts: int = 3,
    ) -> None:
        by_id = {d.node: d for d in shards}
        self.node_ids = [d.node for d in shards]
        self.sizes = {d.node: len(d.train) for d in shards}
        self.host_of = {k: h for h, block in enumerate(blocks) for k in block}
        self._args = [(method_cls, config, task, [by_id[k] for k in block]) for block in blocks]
        self.max_restarts = max_restarts
        self._restarts = [0] * len(blocks)
        self._dead: set[int] = set()
        self.hosts: list[NodeHost | None] = [self._make(h) for h in range(len(blocks))]

    def _make(self, h: int) -> NodeHost:
        return NodeHost(*self._args[h], host_id=h)

    def _invoke(self, calls: list[tuple[int, str, tuple]]) -> list[tuple[int, Any]]:
        out: list[tuple[int, Any]] = []
        for h, method, args in calls:
            host = self.hosts[h] if h not in self._dead else None
            if host is None:
                out.append((h, HostDead(f"node host {h} is dead (restarted {self._restarts[h]} times)")))
                continue
            try:
                out.append((h, getattr(host, method)(*args)))
            except InjectedFault as e:  # the host "died": rebuild it as Ray would restart the actor
                out.append((h, HostDied(str(e))))
                if self._restarts[h] < self.max_restarts:
                    self._restarts[h] += 1
                    self.hosts[h] = self._make(h)
                else:
                    self._dead.add(h)
                    self.hosts[h] = None
            except Exception as e:  # noqa: BLE001  an update that raised: the node rejoins next time
                out.append((h, e))
        return out

    def _failure_kind(self, error: BaseException) -> str:
        return "dead" if isinstance(error, HostDead) else "died" if isinstance(error, HostDied) else "error"

    def restarts(self) -> int:
        return sum(self._restarts)

    def shutdown(self) -> None:
        self.hosts = []


class Federation(Protocol):
    """A started federation as the driver sees it, whatever the transport."""

    def start(self) -> dict[int, int]: ...
    def run_round(self, rnd: int) -> RoundRecord: ...
    def finish(self) -> dict[int, int]: ...
    def snapshot(self) -> Any: ...
    def release(self, requests: Mapping[int, Any]) -> tuple[dict[int, Any], dict[int, int], dict[int, int]]: ...
    def restarts(self) -> int: ...
    def shutdown(self) -> None: ...


class Coordinated:
    """A coordinator driving a pool of node hosts: the round calls every runtime exposes."""

    coordinator: Coordinator
    pool: Any

    def start(self) -> dict[int, int]:
        self.coordinator.start()
        return dict(self.coordinator.join_bytes)

    def run_round(self, rnd: int) -> RoundRecord:
        return self.coordinator.run_round(rnd)

    def finish(self) -> dict[int, int]:
        return self.coordinator.finish()

    def snapshot(self) -> Any:
        return self.coordinator.snapshot()

    def release(self, requests: Mapping[int, Any]) -> tuple[dict[int, Any], dict[int, int], dict[int, int]]:
        return self.coordinator.release(requests)

    def restarts(self) -> int:
        return int(self.pool.restarts())

    def shutdown(self) -> None:
        self.pool.shutdown()


class LocalFederation(Coordinated):
    """The whole federation in this process: the coordinator over a `LocalPool`."""

    def __init__(self, plan: FederationPlan, tap: Tap | None = None) -> None:
        m = plan.method
        self.pool = LocalPool(
            type(m),
            m.config,
            m.task,
            plan.shards,
            plan.node_blocks,
            max_restarts=plan.options.max_restarts,
        )
        self.coordinator = Coordinator(m, self.pool, seed=plan.seed, tap=tap)


# ---------------------------------------------------------------------------------------------------
# The round loop
# ---------------------------------------------------------------------------------------------------
@dataclass
class FederationOutcome:
    """What a federation produced: the assembled method, one record per round, totals. For a method whose
    clients keep their encoders, `release_up` / `release_down` are the bytes of the final release (the z each
    client released of its own rows, and the requests), per node; the release itself is `method.released`."""

    method: FederatedRoles
    records: list[RoundRecord]
    history: list[dict[str, float]]
    join_bytes: dict[int, int]
    final_bytes: dict[int, int]
    restarts: int
    seconds: float
    startup_seconds: float = 0.0
    round_seconds: float = 0.0
    release_up: dict[int, int] = field(default_factory=dict)
    release_down: dict[int, int] = field(default_factory=dict)

    def failures(self) -> list[dict[str, Any]]:
        """Every failure, round by round: the coordinator's (role 'coordinator') before the nodes' of its round."""
        out = []
        for r in self.records:
            out += [f.to_dict() for f in r.coordinator_failures] + [f.to_dict() for f in r.failures]
        return out

    def totals(self) -> dict[str, float]:
        """Byte totals count every message: up = the rounds' uploads + every release (live audits' and the final
        one, recorded per round in `release_up`); down = joins + downlinks + the last broadcast + release
        requests. Methods whose clients keep their encoders also report the releases apart (bytes_release_*)."""
        up = sum(sum(r.bytes_up.values()) for r in self.records)
        down = sum(sum(r.bytes_down.values()) for r in self.records)
        rel_up = sum(sum(r.release_up.values()) for r in self.records)
        rel_down = sum(sum(r.release_down.values()) for r in self.records)
        if not self.records:  # no round to hold it: the final release is counted here
            rel_up, rel_down = sum(self.release_up.values()), sum(self.release_down.values())
        join0 = sum(self.join_bytes.values())
        final = sum(self.final_bytes.values())
        releases = (
            {"bytes_release_up": float(rel_up), "bytes_release_down": float(rel_down)}
            if self.method.private_encoders()
            else {}
        )  # only methods whose clients keep their encoders release at the nodes
        return {
            "rounds": float(len(self.records)),
            "bytes_up_total": float(up + rel_up),
            "bytes_down_total": float(down + join0 + final + rel_down),
            "bytes_join_initial": float(join0),
            "bytes_down_final": float(final),
            **releases,
            "failures_total": float(sum(len(r.failures) + len(r.coordinator_failures) for r in self.records)),
            "restarts": float(self.restarts),
            "coordinator_restarts": float(sum(len(r.coordinator_failures) for r in self.records)),
            "federation_seconds": self.seconds,
            "startup_seconds": self.startup_seconds,
            "rounds_per_second": len(self.records) / self.round_seconds if self.round_seconds > 0 else float("nan"),
        }


RoundHook = Callable[[int, dict[str, float]], None]


class LiveAudit(Protocol):
    """The quick audit run every `audit_every` rounds on the current release; `rows` are the row ids of each
    split it audits (None: every row), which the clients of a private-encoder method are asked to release."""

    @property
    def rows(self) -> Mapping[str, np.ndarray] | None: ...

    def __call__(self, method: Any) -> dict[str, float]: ...


def release_requests(plan: FederationPlan, rows: Mapping[str, np.ndarray] | None) -> dict[int, Any]:
    """Each node's release request: per split, the ids among `rows` that are its own (rows None: a request None,
    every row it owns). The driver knows the partition; a node is never asked for another's rows."""
    k = len(plan.shards)
    if rows is None:
        return {i: None for i in range(k)}
    out: dict[int, Any] = {}
    for i in range(k):
        own = {"train": plan.parts[i]}
        if plan.test_parts is not None:
            own["test"] = plan.test_parts[i]
        out[i] = {
            split: np.intersect1d(own[split], want).astype(np.int64) for split, want in rows.items() if split in own
        }
    return out


def _add(into: dict[int, int], more: Mapping[int, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + int(v)


def run_federation(
    plan: FederationPlan, fed: Federation, *, on_round: RoundHook | None = None, live_audit: LiveAudit | None = None
) -> FederationOutcome:
    """Run every round of a started-to-be federation `fed`, finish, assemble the final global state and (for a
    method whose clients keep their encoders) collect the clients' release of their own rows; `fed` is shut
    down whatever happens."""
    m, opts = plan.method, plan.options
    private = m.private_encoders()
    t0 = time.time()
    records: list[RoundRecord] = []
    history: list[dict[str, float]] = []
    round_walls: list[float] = []
    started = t0
    release_up: dict[int, int] = {}
    release_down: dict[int, int] = {}

    def collect(
        rec: RoundRecord | None, rows: Mapping[str, np.ndarray] | None
    ) -> tuple[dict[int, int], dict[int, int]]:
        got, up, down = fed.release(release_requests(plan, rows))
        m.receive_release(Release.from_messages(got))
        if rec is not None:
            _add(rec.release_up, up)
            _add(rec.release_down, down)
        return up, down

    try:
        join_bytes = fed.start()
        started = time.time()
        for r in range(1, plan.rounds + 1):
            t_round = time.time()
            rec = fed.run_round(r)
            records.append(rec)
            round_walls.append(time.time() - t_round)
            row = {
                "round": float(r),
                "rounds_total": float(plan.rounds),
                **rec.row(),
                "round_wall_seconds": round_walls[-1],
            }
            if live_audit is not None and opts.audit_every and (r % opts.audit_every == 0 or r == plan.rounds):
                m.assemble(fed.snapshot())
                if private:
                    up, _ = collect(rec, getattr(live_audit, "rows", None))
                    row["bytes_release_up"] = float(sum(up.values()))
                row.update({f"live/{k}": v for k, v in live_audit(m).items()})
            if plan.wire is not None:
                plan.wire(r, m, fed, rec)
            history.append(row)
            if on_round:
                on_round(r - 1, row)
        final = fed.finish()
        if records and final:
            records[-1].final_bytes_down = final
        m.assemble(fed.snapshot())
        if private:
            release_up, release_down = collect(records[-1] if records else None, None)
        restarts = fed.restarts()
    finally:
        fed.shutdown()
    return FederationOutcome(
        m,
        records,
        history,
        join_bytes,
        final,
        restarts,
        time.time() - t0,
        startup_seconds=(started - t0) if records else time.time() - t0,
        round_seconds=float(sum(round_walls)),
        release_up=release_up,
        release_down=release_down,
    )


def run_in_process(
    method: FederatedRoles,
    train: Split,
    *,
    dataset: Dataset | None = None,
    partition_scheme: str = "iid",
    options: FederationOptions | None = None,
    tap: Tap | None = None,
) -> FederationOutcome:
    """`FederatedMethod.fit`: the whole federation in this process (one vectorised host by default). With
    `dataset`, nodes are dealt its test rows too (as `veil run` does), so that clients with private encoders
    release z of their test rows as well as their training rows."""
    plan = plan_federation(
        method,
        method.name,
        train,
        dataset=dataset,
        partition_scheme=partition_scheme,
        options=options,
        seed=method.config.seed,
    )
    return run_federation(plan, LocalFederation(plan, tap=tap))
