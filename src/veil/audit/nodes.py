"""Audits of a federated release: the global audit with every row released as its owner releases it, one
audit per node on its own train/test rows with its own objective's labels, and the cheap live audit run
every few rounds."""

from __future__ import annotations

import csv
import io
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from veil.audit.probes import AuditConfig, AuditReport, audit, audit_many
from veil.datasets.base import Dataset, Split
from veil.methods.federated.core import Objective
from veil.methods.federated.method import FederatedMethod
from veil.methods.federated.simulation import FederationPlan


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


def live_auditor(plan: FederationPlan, ds: Dataset) -> Callable[[FederatedMethod], dict[str, float]]:
    """A cheap audit of the current release on at most `live_rows` rows (small probes, few epochs)."""
    rng = np.random.default_rng(plan.seed)
    tr = np.sort(rng.permutation(len(ds.train))[: plan.options.live_rows])
    te = np.sort(rng.permutation(len(ds.test))[: plan.options.live_rows])
    cfg = AuditConfig(hidden=(32,), epochs=plan.options.live_probe_epochs, seed=plan.seed)
    owner_tr = _owner(len(ds.train), plan.parts)
    owner_te = _owner(len(ds.test), plan.test_parts) if plan.test_parts is not None else None

    def run(method: FederatedMethod) -> dict[str, float]:
        sub_parts_tr = _sub_parts(owner_tr, tr, len(plan.parts))
        sub_parts_te = _sub_parts(owner_te, te, len(plan.parts)) if owner_te is not None else None
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


PER_NODE_COLUMNS = (
    "node",
    "train_rows",
    "test_rows",
    "utility",
    "sensitive",
    "utility_acc",
    "utility_auc",
    "adversary_acc",
    "adversary_auc",
    "privacy_gap",
)


def audit_final(
    plan: FederationPlan, ds: Dataset, method: FederatedMethod, cfg: AuditConfig
) -> tuple[AuditReport, list[dict[str, Any]], np.ndarray, np.ndarray]:
    """The global audit (every row, released as its owner releases it) and one audit per node on its own
    train/test rows with its own objective's labels."""
    z_train = release(method, ds.train.x, plan.parts)
    z_test = release(method, ds.test.x, plan.test_parts)
    report = audit(z_train, ds.train, z_test, ds.test, ds.num_classes, cfg)
    rows = per_node_audit(plan, ds, z_train, z_test, cfg) if plan.options.per_node_audit else []
    return report, rows, z_train, z_test


def per_node_audit(
    plan: FederationPlan, ds: Dataset, z_train: np.ndarray, z_test: np.ndarray, cfg: AuditConfig
) -> list[dict[str, Any]]:
    """One row per node: its fresh-probe audit on its own train/test rows with its own objective's labels (NaN
    metrics for a node with fewer than 2 train or test rows). Every node's probes train as stacked models
    (`audit_many`), each equal up to floating-point order to the node's own `audit`."""
    rows: list[dict[str, Any]] = []
    audited: list[int] = []
    trains: list[Split] = []
    tests: list[Split] = []
    for k, obj in enumerate(plan.objectives):
        tr = plan.parts[k]
        te = plan.test_parts[k] if plan.test_parts is not None else np.empty(0, np.int64)
        rows.append(
            {
                "node": k,
                "train_rows": int(len(tr)),
                "test_rows": int(len(te)),
                "utility": "+".join(obj.utility),
                "sensitive": "+".join(obj.sensitive),
                **{c: float("nan") for c in PER_NODE_COLUMNS[5:]},
            }
        )
        if len(te) >= 2 and len(tr) >= 2:
            audited.append(k)
            trains.append(role_split(ds.train.take(tr), obj))
            tests.append(role_split(ds.test.take(te), obj))
    if not audited:
        return rows
    assert plan.test_parts is not None  # a node is audited only with test rows
    reports = audit_many(
        [z_train[plan.parts[k]] for k in audited],
        trains,
        [z_test[plan.test_parts[k]] for k in audited],
        tests,
        ds.num_classes,
        cfg,
    )
    for k, report in zip(audited, reports):
        m = report.metrics()
        rows[k].update({c: m.get(c, float("nan")) for c in PER_NODE_COLUMNS[5:]})
    return rows


def per_node_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(PER_NODE_COLUMNS))
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()


def per_node_markdown(rows: Sequence[Mapping[str, Any]], limit: int = 25) -> str:
    lines = [
        "| node | rows (train/test) | hides | utility acc | utility AUC | adversary acc | adversary AUC |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows[:limit]:
        lines.append(
            f"| {r['node']} | {r['train_rows']}/{r['test_rows']} | {r['sensitive']} | {r['utility_acc']:.3f} | "
            f"{r['utility_auc']:.3f} | {r['adversary_acc']:.3f} | {r['adversary_auc']:.3f} |"
        )
    if len(rows) > limit:
        lines.append(f"| ... {len(rows) - limit} more in audit/per_node.csv | | | | | | |")
    return "\n".join(lines)


def per_node_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    out = {}
    for key, fn in (
        ("utility_auc", "min"),
        ("utility_auc", "mean"),
        ("adversary_auc", "max"),
        ("adversary_auc", "mean"),
        ("utility_acc", "mean"),
        ("adversary_acc", "max"),
    ):
        vals = np.array([r[key] for r in rows], dtype=float)
        vals = vals[np.isfinite(vals)]
        if len(vals):
            out[f"per_node/{key}_{fn}"] = float(getattr(np, fn)(vals))
    return out
