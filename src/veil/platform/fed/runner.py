"""A federated run end to end: check everything, partition, place the coordinator and node hosts, run
the rounds (with a live audit every `audit_every` rounds), audit the final release per node and
globally, and log it all to MLflow.

Everything that can be refused is refused in `prepare`, before any actor starts: the method's
config (phi, delta, K, per-node objectives naming unknown labels, per-client lists of the wrong
length), K larger than the number of rows, a partition leaving a node empty, an unknown runtime or
federation option, and a resource request the cluster cannot satisfy."""
from __future__ import annotations

import csv
import io
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from veil.audit.probes import AuditConfig, AuditReport, audit
from veil.config import as_params, build, param
from veil.datasets.base import Dataset, Split
from veil.datasets.partition import column, parse_scheme, partition
from veil.errors import ConfigError
from veil.platform.fed.core import FederatedMethod, NodeData, Objective, derive_seed
from veil.platform.fed.runtime import RUNTIMES, plan_resources, split_hosts


@dataclass(frozen=True)
class FederationOptions:
    """How a federated run is placed, watched and stress-tested (`--set fed.NAME=VALUE`)."""

    audit_every: int = param(0, "run a quick audit of the current release every N rounds (live/* metrics, progress bar); 0 = none", ge=0)
    live_probe_epochs: int = param(5, "probe epochs of the quick live audit", ge=1)
    live_rows: int = param(2000, "at most this many train and test rows in a live audit", ge=10)
    per_node_audit: bool = param(True, "audit the final release on each node's own train/test rows too")
    nodes_per_host: int = param(0, "in-process runtime: nodes per vectorised host (0 = all nodes in one)", ge=0)
    hosts: int = param(0, "virtual runtime: node host actors (0 = min(K, available CPUs))", ge=0)
    cpus_per_host: float = param(1.0, "most CPUs one actor asks for (shrunk to fit the budget)", gt=0)
    cpus: float = param(0.0, "CPU budget of the federation (0 = what the cluster has available; more is refused)", ge=0)
    actor_memory_mb: int = param(450, "expected memory of one actor (a torch process), to refuse runs that cannot fit", ge=0)
    max_restarts: int = param(3, "restarts of a node host after its process dies", ge=0)
    ready_timeout_s: float = param(60.0, "seconds the placement group may take to be placed before the run is refused", gt=0)
    faults: tuple[str, ...] = param((), "chaos testing: 'NODE@ROUND' entries; that node's host process exits at the "
                                    "start of that round (in-process: raises)")


@dataclass
class Prepared:
    """A checked federation, ready to start."""

    method: FederatedMethod
    method_name: str
    method_values: dict[str, Any]
    dataset: Dataset | None
    train: Split
    parts: list[np.ndarray]
    test_parts: list[np.ndarray] | None
    test_partition_note: str
    objectives: list[Objective]
    shards: list[NodeData]
    rounds: int
    runtime: str
    options: FederationOptions
    faults: dict[int, int]
    seed: int
    node_blocks: list[list[int]] = field(default_factory=list)
    plan: Any = None
    partition: str = "iid"

    def params(self) -> dict[str, Any]:
        out = {"federation.runtime": self.runtime, "federation.partition": self.partition,
               "federation.rounds": self.rounds, "federation.nodes": len(self.shards),
               "federation.hosts": len(self.node_blocks) if self.node_blocks else 1,
               "federation.test_partition": self.test_partition_note,
               "federation.node_rows": [int(len(p)) for p in self.parts][:200]}
        out.update(as_params(self.options, "federation."))
        if self.plan is not None:
            out.update({f"federation.{k}": v for k, v in self.plan.to_params().items()})
        return out


def parse_faults(entries: Sequence[str], k: int) -> dict[int, int]:
    out = {}
    for e in entries:
        node, sep, rnd = str(e).partition("@")
        try:
            n, r = int(node), int(rnd)
        except ValueError:
            raise ConfigError("faults", list(entries), "entries 'NODE@ROUND' (e.g. 1@2)") from None
        if not sep or not 0 <= n < k or r < 1:
            raise ConfigError("faults", list(entries), f"entries 'NODE@ROUND' with 0 <= NODE < K={k} and ROUND >= 1")
        out[n] = r
    return out


def resolve_runtime(runtime: str) -> str:
    if runtime not in RUNTIMES:
        raise ConfigError("runtime", runtime, " | ".join(RUNTIMES))
    return "virtual" if runtime == "auto" else runtime


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


def partition_test_split(train: Split, test: Split, parts: Sequence[np.ndarray], scheme_text: str,
                         seed: int) -> tuple[list[np.ndarray], str]:
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


def prepare(method: FederatedMethod, method_name: str, train: Split, *, dataset: Dataset | None = None,
            partition_scheme: str = "iid", runtime: str = "in-process", options: FederationOptions | None = None,
            seed: int = 0, address: str | None = None) -> Prepared:
    """Validate and partition; for a Ray runtime also connect to Ray and size the actors. Starts no actor."""
    opts = options or FederationOptions()
    rt = resolve_runtime(runtime)
    k = method.num_nodes()
    if k > len(train):
        raise ConfigError("K", k, f"at most the {len(train)} training rows (every node needs a row)")
    parts = partition(train, partition_scheme, k, seed)
    sizes = [len(p) for p in parts]
    method.validate_partition(sizes)
    objectives = method.node_objectives()
    faults = parse_faults(opts.faults, k)
    shards = [NodeData(i, train.take(parts[i]), objectives[i]) for i in range(k)]
    test_parts, note = (partition_test_split(train, dataset.test, parts, partition_scheme, seed) if dataset is not None
                        else (None, "no test split"))
    values = _values(method)
    prep = Prepared(method, method_name, values, dataset, train, parts, test_parts, note, objectives, shards,
                    method.num_rounds(sizes), rt, opts, faults, seed, partition=partition_scheme)
    if rt in ("ray-actors", "virtual"):
        import ray

        from veil.platform.train import ensure_ray

        ensure_ray(address)
        avail = ray.available_resources()
        hosts = k if rt == "ray-actors" else (opts.hosts or max(1, min(k, int(avail.get("CPU", 1.0)) or 1)))
        hosts = min(hosts, k)
        prep.node_blocks = split_hosts(list(range(k)), hosts)
        prep.plan = plan_resources(len(prep.node_blocks), cpus_per_host=opts.cpus_per_host, cpus=opts.cpus,
                                   actor_memory_mb=opts.actor_memory_mb, available=avail)
    else:
        per = opts.nodes_per_host or k
        prep.node_blocks = split_hosts(list(range(k)), math.ceil(k / per))
    return prep


def _values(method: FederatedMethod) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(method.config)


@dataclass
class FederationOutcome:
    """What a federation produced: the assembled method, one record per round, totals."""

    method: FederatedMethod
    records: list[Any]
    history: list[dict[str, float]]
    join_bytes: dict[int, int]
    final_bytes: dict[int, int]
    restarts: int
    seconds: float
    startup_seconds: float = 0.0
    round_seconds: float = 0.0

    def failures(self) -> list[dict[str, Any]]:
        return [f.to_dict() for r in self.records for f in r.failures]

    def totals(self) -> dict[str, float]:
        up = sum(sum(r.bytes_up.values()) for r in self.records)
        down = sum(sum(r.bytes_down.values()) for r in self.records)
        join0 = sum(self.join_bytes.values())
        final = sum(self.final_bytes.values())
        return {"rounds": float(len(self.records)), "bytes_up_total": float(up),
                "bytes_down_total": float(down + join0 + final), "bytes_join_initial": float(join0),
                "bytes_down_final": float(final),
                "failures_total": float(sum(len(r.failures) for r in self.records)),
                "restarts": float(self.restarts), "federation_seconds": self.seconds,
                "startup_seconds": self.startup_seconds,
                "rounds_per_second": len(self.records) / self.round_seconds if self.round_seconds > 0 else float("nan")}


RoundHook = Callable[[int, dict[str, float]], None]


def run_federation(prep: Prepared, *, on_round: RoundHook | None = None, tap: Callable[..., None] | None = None,
                   live_audit: Callable[[FederatedMethod], dict[str, float]] | None = None) -> FederationOutcome:
    """Start the coordinator and node hosts, run every round, finish, assemble the final release."""
    from veil.platform.fed.runtime import LocalFederation, RayFederation

    m, opts = prep.method, prep.options
    t0 = time.time()
    if prep.runtime == "in-process":
        fed: Any = LocalFederation(m, prep.method_name, prep.method_values, m.task, prep.shards,
                                   nodes_per_host=opts.nodes_per_host, max_restarts=opts.max_restarts,
                                   faults=prep.faults, seed=prep.seed, tap=tap)
    else:
        fed = RayFederation(prep.method_name, prep.method_values, m.task, prep.shards, prep.node_blocks, prep.plan,
                            max_restarts=opts.max_restarts, faults=prep.faults, seed=prep.seed,
                            ready_timeout_s=opts.ready_timeout_s)
    records, history, round_walls = [], [], []
    try:
        join_bytes = fed.start()
        started = time.time()
        for r in range(1, prep.rounds + 1):
            t_round = time.time()
            rec = fed.run_round(r)
            records.append(rec)
            round_walls.append(time.time() - t_round)
            row = {"round": float(r), "rounds_total": float(prep.rounds), **rec.row(), "round_wall_seconds": round_walls[-1]}
            if live_audit is not None and opts.audit_every and (r % opts.audit_every == 0 or r == prep.rounds):
                gs, ns = fed.snapshot()
                m.assemble(gs, ns)
                row.update({f"live/{k}": v for k, v in live_audit(m).items()})
            history.append(row)
            if on_round:
                on_round(r - 1, row)
        final = fed.finish()
        if records and final:
            records[-1].final_bytes_down = final
        gs, ns = fed.snapshot()
        m.assemble(gs, ns)
        restarts = fed.restarts()
    finally:
        fed.shutdown()
    return FederationOutcome(m, records, history, join_bytes, final, restarts, time.time() - t0,
                             startup_seconds=(started - t0) if records else time.time() - t0,
                             round_seconds=float(sum(round_walls)))


def run_in_process(method: FederatedMethod, train: Split, *, partition_scheme: str = "iid",
                   options: FederationOptions | None = None, tap: Callable[..., None] | None = None) -> FederationOutcome:
    """`FederatedMethod.fit`: the whole federation in this process (one vectorised host by default)."""
    prep = prepare(method, method.name, train, partition_scheme=partition_scheme, runtime="in-process",  # type: ignore[attr-defined]
                   options=options, seed=method.config.seed)
    return run_federation(prep, tap=tap)


# ---------------------------------------------------------------------------------------------------
# Audits
# ---------------------------------------------------------------------------------------------------
def release(method: FederatedMethod, x: np.ndarray, parts: Sequence[np.ndarray] | None) -> np.ndarray:
    """z for rows `x`: the global release, or (private per-node encoders) each node's rows by its own encoder."""
    if not method.needs_node_states() or parts is None:
        return method.encode(x)  # type: ignore[attr-defined]
    z = None
    for k, rows in enumerate(parts):
        if len(rows) == 0:
            continue
        zk = method.encode_node(x[rows], k)
        if z is None:
            z = np.zeros((len(x), zk.shape[1]), np.float32)
        z[rows] = zk
    return z if z is not None else method.encode(x)  # type: ignore[attr-defined]


def role_split(split: Split, obj: Objective) -> Split:
    labels = split.labels()
    return Split(split.x, {u: labels[u] for u in obj.utility}, {s: labels[s] for s in obj.sensitive})


def live_auditor(prep: Prepared) -> Callable[[FederatedMethod], dict[str, float]]:
    """A cheap audit of the current release on at most `live_rows` rows (small probes, few epochs)."""
    ds = prep.dataset
    assert ds is not None
    rng = np.random.default_rng(prep.seed)
    tr = np.sort(rng.permutation(len(ds.train))[:prep.options.live_rows])
    te = np.sort(rng.permutation(len(ds.test))[:prep.options.live_rows])
    cfg = AuditConfig(hidden=(32,), epochs=prep.options.live_probe_epochs, seed=prep.seed)
    owner_tr = _owner(len(ds.train), prep.parts)
    owner_te = _owner(len(ds.test), prep.test_parts) if prep.test_parts is not None else None

    def run(method: FederatedMethod) -> dict[str, float]:
        sub_parts_tr = _sub_parts(owner_tr, tr, len(prep.parts))
        sub_parts_te = _sub_parts(owner_te, te, len(prep.parts)) if owner_te is not None else None
        z_tr = release(method, ds.train.x[tr], sub_parts_tr)
        z_te = release(method, ds.test.x[te], sub_parts_te)
        m = audit(z_tr, ds.train.take(tr), z_te, ds.test.take(te), ds.num_classes, cfg).metrics()
        return {k: m[k] for k in ("utility_acc", "utility_auc", "adversary_acc", "adversary_auc") if k in m}

    return run


def _owner(n: int, parts: Sequence[np.ndarray]) -> np.ndarray:
    owner = np.full(n, -1, dtype=np.int64)
    for k, rows in enumerate(parts):
        owner[rows] = k
    return owner


def _sub_parts(owner: np.ndarray, rows: np.ndarray, k: int) -> list[np.ndarray]:
    o = owner[rows]
    return [np.flatnonzero(o == i) for i in range(k)]


PER_NODE_COLUMNS = ("node", "train_rows", "test_rows", "utility", "sensitive", "utility_acc", "utility_auc",
                    "adversary_acc", "adversary_auc", "privacy_gap")


def audit_final(prep: Prepared, method: FederatedMethod, cfg: AuditConfig) -> tuple[AuditReport, list[dict[str, Any]], np.ndarray, np.ndarray]:
    """The global audit (every row, released as its owner releases it) and one audit per node on its own
    train/test rows with its own objective's labels."""
    ds = prep.dataset
    assert ds is not None
    z_train = release(method, ds.train.x, prep.parts)
    z_test = release(method, ds.test.x, prep.test_parts)
    report = audit(z_train, ds.train, z_test, ds.test, ds.num_classes, cfg)
    rows: list[dict[str, Any]] = []
    if prep.options.per_node_audit:
        for k, obj in enumerate(prep.objectives):
            tr = prep.parts[k]
            te = prep.test_parts[k] if prep.test_parts is not None else np.empty(0, np.int64)
            row: dict[str, Any] = {"node": k, "train_rows": int(len(tr)), "test_rows": int(len(te)),
                                   "utility": "+".join(obj.utility), "sensitive": "+".join(obj.sensitive)}
            if len(te) >= 2 and len(tr) >= 2:
                m = audit(z_train[tr], role_split(ds.train.take(tr), obj), z_test[te], role_split(ds.test.take(te), obj),
                          ds.num_classes, cfg).metrics()
                row.update({c: m.get(c, float("nan")) for c in PER_NODE_COLUMNS[5:]})
            else:
                row.update({c: float("nan") for c in PER_NODE_COLUMNS[5:]})
            rows.append(row)
    return report, rows, z_train, z_test


def per_node_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(PER_NODE_COLUMNS))
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()


def per_node_markdown(rows: Sequence[Mapping[str, Any]], limit: int = 25) -> str:
    lines = ["| node | rows (train/test) | hides | utility acc | utility AUC | adversary acc | adversary AUC |",
             "|---|---|---|---|---|---|---|"]
    for r in rows[:limit]:
        lines.append(f"| {r['node']} | {r['train_rows']}/{r['test_rows']} | {r['sensitive']} | {r['utility_acc']:.3f} | "
                     f"{r['utility_auc']:.3f} | {r['adversary_acc']:.3f} | {r['adversary_auc']:.3f} |")
    if len(rows) > limit:
        lines.append(f"| ... {len(rows) - limit} more in audit/per_node.csv | | | | | | |")
    return "\n".join(lines)


def per_node_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    out = {}
    for key, fn in (("utility_auc", "min"), ("utility_auc", "mean"), ("adversary_auc", "max"), ("adversary_auc", "mean"),
                    ("utility_acc", "mean"), ("adversary_acc", "max")):
        vals = np.array([r[key] for r in rows], dtype=float)
        vals = vals[np.isfinite(vals)]
        if len(vals):
            out[f"per_node/{key}_{fn}"] = float(getattr(np, fn)(vals))
    return out


# ---------------------------------------------------------------------------------------------------
# The run (called from veil.run.execute)
# ---------------------------------------------------------------------------------------------------
def prepare_run(v: Any) -> tuple[Prepared, Dataset]:
    """Load the data and check the whole federation for a validated run (no actor, no MLflow run yet)."""
    from veil.datasets.registry import load_dataset
    from veil.methods.registry import create_method

    spec = v.spec
    opts = build(FederationOptions, dict(spec.federation), where="federation")
    ds = load_dataset(spec.dataset, spec.dataset_values())
    import dataclasses

    method = create_method(spec.method, dataclasses.asdict(v.method_config), ds.task())
    prep = prepare(method, spec.method, ds.train, dataset=ds, partition_scheme=spec.partition, runtime=spec.runtime,
                   options=opts, seed=spec.seed, address=spec.address)
    return prep, ds


def execute_federated(v: Any, *, on_epoch: RoundHook | None = None, parent_run_id: str | None = None):
    """Train a federated method as `v` says, audit it per node and globally, and log everything."""
    from veil.methods.registry import get_method
    from veil.run import RunResult, extra_audits, log_release, run_params
    from veil.tracking.mlflow_run import TrackedRun

    spec = v.spec
    prep, ds = prepare_run(v)  # every refusal happens here, before MLflow and before any actor
    t0 = time.time()
    tracker = TrackedRun.start(spec.tracking_uri, spec.experiment, spec.run_name or f"{spec.method}-{spec.dataset}",
                               parent_run_id=parent_run_id,
                               tags={"veil.method": spec.method, "veil.dataset": spec.dataset, "veil.federated": "true",
                                     **spec.tags})
    with tracker:
        params = run_params(v, ds.params, get_method(spec.method).deviations(v.method_config))
        params["executor"] = f"federated:{prep.runtime}"
        params.update(prep.params())
        tracker.log_params(params)

        def log_round(step: int, row: dict[str, float]) -> None:
            tracker.log_metrics({k: val for k, val in row.items() if k not in ("round", "rounds_total")}, step=step + 1)
            if on_epoch:
                on_epoch(step, row)

        live = live_auditor(prep) if prep.options.audit_every else None
        outcome = run_federation(prep, on_round=log_round, live_audit=live)
        tracker.set_tags({"veil.device": "cpu", "veil.runtime": prep.runtime})
        report, per_node, z_train, z_test = audit_final(prep, outcome.method, v.audit_config)
        metrics = report.metrics()
        metrics.update(extra_audits(v, ds, z_train, z_test, tracker))
        metrics.update(per_node_summary(per_node))
        metrics.update(outcome.totals())
        metrics["train_seconds"] = outcome.seconds
        metrics["total_seconds"] = time.time() - t0
        tracker.log_metrics(metrics)
        log_release(tracker, v, ds, outcome.method, report, params["code_version"], partition=spec.partition,
                    runtime=prep.runtime)
        if per_node:
            tracker.log_text(per_node_csv(per_node), "audit/per_node.csv")
            tracker.log_dict(per_node, "audit/per_node.json")
        tracker.log_dict([r.to_dict() for r in outcome.records], "federation/rounds.json")
        tracker.log_dict(outcome.failures(), "federation/failures.json")
        tracker.log_dict({"join_bytes": {str(k): b for k, b in outcome.join_bytes.items()},
                          "final_bytes": {str(k): b for k, b in outcome.final_bytes.items()},
                          "node_rows": {str(k): int(len(p)) for k, p in enumerate(prep.parts)},
                          "objectives": [{"utility": list(o.utility), "sensitive": list(o.sensitive)}
                                         for o in prep.objectives]}, "federation/nodes.json")
        tracker.log_dict(outcome.history, "training/history.json")
    return RunResult(tracker.run_id, tracker.experiment_id, tracker.tracking_uri, params, metrics, report,
                     outcome.history, time.time() - t0,
                     extra={"per_node": per_node, "federation": {**outcome.totals(), "runtime": prep.runtime,
                                                                  "failures": outcome.failures()}})
