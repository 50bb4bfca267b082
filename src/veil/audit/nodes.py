"""Audits of a federated release: the global audit of every row as its owner releases it, one audit per
node on its own train/test rows with its own objective's labels, and the cheap live audit run every few
rounds. For a method that shares its encoder (D-EIGAN, LDP-FedAvg) the driver releases z with the global
model (`encode`); for one whose clients keep their encoders (D-GPP) the audit has exactly what the clients
released of their own rows (`FederatedRoles.released`, received by the coordinator and counted) and trains
its fresh probes on that union. The labels come from the evaluation harness's dataset: the audit is the
platform's measurement, not a party to the protocol."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from typing import Any, Mapping, Sequence

import numpy as np

from veil.audit.probes import AuditReport, audit, audit_many
from veil.audit.settings import AuditConfig
from veil.datasets.dataset import Dataset, Split
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.core import FederationError, NodeObjective, Release
from veil.methods.federated.fed_method import FederatedMethod
from veil.methods.federated.simulation import FederationPlan


def received_release(method: FederatedMethod) -> Release:
    """The clients' release of their own rows, as the coordinator received it (private-encoder methods)."""
    if method.released is None:
        raise FederationError(f"{method.name}: the clients' release was never received (the federation did not finish)")
    return method.released


def check_owners(release: Release, plan: FederationPlan) -> list[str]:
    """Every node released exactly its own rows of each split (checked), or nothing at all (said, in the
    returned warnings: its host is gone, so its rows are not in the audit)."""
    owned = {"train": plan.parts, "test": plan.test_parts}
    notes = []
    for split, parts in owned.items():
        if parts is None:
            continue
        got = release.parts.get(split, {})
        for k, own in enumerate(parts):
            if k not in got:
                if len(own):
                    notes.append(
                        f"node {k} released none of its {len(own)} {split} rows (its host was gone at the end): "
                        "they are not in the audit"
                    )
                continue
            if not np.array_equal(np.sort(got[k][0]), np.sort(np.asarray(own))):
                raise FederationError(f"node {k}'s {split} release does not cover exactly its own rows")
    return notes


def _spread(n: int, rows: np.ndarray, z: np.ndarray) -> np.ndarray:
    """z of `rows` laid out over all n rows of a split (NaN where nothing was released)."""
    out = np.full((n, z.shape[1]), np.nan, np.float32)
    out[rows] = z
    return out


def role_split(split: Split, obj: NodeObjective) -> Split:
    labels = split.labels()
    return Split(split.x, {u: labels[u] for u in obj.utility}, {s: labels[s] for s in obj.sensitive})


class LiveAuditor:
    """A cheap audit of the current release on at most `live_rows` rows of each split (small probes, few
    epochs). `rows` are those rows' ids: a private-encoder method's clients are asked to release just those."""

    def __init__(self, plan: FederationPlan, ds: Dataset) -> None:
        rng = np.random.default_rng(plan.seed)
        self.ds = ds
        tr = np.sort(rng.permutation(len(ds.train))[: plan.options.live_rows])
        te = np.sort(rng.permutation(len(ds.test))[: plan.options.live_rows])
        self.rows: dict[str, np.ndarray] = {"train": tr, "test": te}
        self.cfg = AuditConfig(hidden=(32,), epochs=plan.options.live_probe_epochs, seed=plan.seed)

    def __call__(self, method: FederatedMethod) -> dict[str, float]:
        ds, tr, te = self.ds, self.rows["train"], self.rows["test"]
        if method.private_encoders():
            rel = received_release(method)
            tr, te = np.intersect1d(tr, rel.rows("train")), np.intersect1d(te, rel.rows("test"))
            z_tr, z_te = rel.z("train", tr), rel.z("test", te)
        else:
            z_tr, z_te = method.encode(ds.train.x[tr]), method.encode(ds.test.x[te])  # type: ignore[attr-defined]
        m = audit(z_tr, ds.train.take(tr), z_te, ds.test.take(te), ds.num_classes, self.cfg).metrics()
        return {k: m[k] for k in ("utility_acc", "utility_auc", "adversary_acc", "adversary_auc") if k in m}


def live_auditor(plan: FederationPlan, ds: Dataset) -> LiveAuditor:
    """The live audit of `plan`'s federation on `ds` (`fed.audit_every`)."""
    return LiveAuditor(plan, ds)


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
    train/test rows with its own objective's labels. For private-encoder methods the rows are the clients'
    release (each node's own rows, checked); a node that released nothing is said in the report's warnings,
    its rows are left out and its per-node row is NaN (z_train / z_test then hold the released rows only)."""
    if not method.private_encoders():
        z_train = method.encode(ds.train.x)  # type: ignore[attr-defined]
        z_test = method.encode(ds.test.x)  # type: ignore[attr-defined]
        report = audit(z_train, ds.train, z_test, ds.test, ds.num_classes, cfg)
        rows = per_node_audit(plan, ds, z_train, z_test, cfg) if plan.options.per_node_audit else []
        return report, rows, z_train, z_test
    rel = received_release(method)
    notes = check_owners(rel, plan)
    tr, te = rel.rows("train"), rel.rows("test")
    z_tr, z_te = rel.z("train"), rel.z("test")
    whole = len(tr) == len(ds.train) and len(te) == len(ds.test)
    train, test = (ds.train, ds.test) if whole else (ds.train.take(tr), ds.test.take(te))
    report = audit(z_tr, train, z_te, test, ds.num_classes, cfg)
    report.warnings.extend(notes)
    rows = []
    if plan.options.per_node_audit:
        silent = {k for k in range(len(plan.parts)) if k not in rel.nodes("train") or k not in rel.nodes("test")}
        full_tr, full_te = _spread(len(ds.train), tr, z_tr), _spread(len(ds.test), te, z_te)
        rows = per_node_audit(plan, ds, full_tr, full_te, cfg, skip=silent)
    return report, rows, z_tr, z_te


def released_data(ds: Dataset, method: FederatedMethod) -> Dataset:
    """The rows `audit_final`'s z cover: `ds` itself, or for private-encoder methods whose clients did not all
    release, the train and test rows that were released (in the release's order)."""
    if not method.private_encoders():
        return ds
    rel = received_release(method)
    tr, te = rel.rows("train"), rel.rows("test")
    if len(tr) == len(ds.train) and len(te) == len(ds.test):
        return ds
    return dataclasses.replace(ds, train=ds.train.take(tr), test=ds.test.take(te))


def node_probe(cfg: AuditConfig, options: FederationOptions) -> AuditConfig:
    """The per-node audit's settings: the run's audit with the federation's per-node probe (`fed.node_probe_hidden`,
    `fed.node_probe_epochs`). A node holds a few dozen rows: the global probe (256-128, 30 epochs) takes one
    full-batch step an epoch there, and a thousand of them move ~35,000 parameters each per step."""
    return dataclasses.replace(cfg, hidden=options.node_probe_hidden, epochs=options.node_probe_epochs)


def per_node_audit(
    plan: FederationPlan,
    ds: Dataset,
    z_train: np.ndarray,
    z_test: np.ndarray,
    cfg: AuditConfig,
    skip: set[int] | frozenset[int] = frozenset(),
) -> list[dict[str, Any]]:
    """One row per node: its fresh-probe audit (the per-node probe, `node_probe`) on its own train/test rows with its own objective's labels (NaN
    metrics for a node with fewer than 2 train or test rows, and for the nodes in `skip`, which released nothing). Every node's probes train as stacked models
    (`audit_many`, on torch's thread setting as `audit`), each equal up to floating-point order to the node's own `audit`."""
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
        if len(te) >= 2 and len(tr) >= 2 and k not in skip:
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
        node_probe(cfg, plan.options),
        num_threads=None,  # the run's own threads, as its global `audit`: these probes are the run's work now
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
    cell = lambda v: "n/a" if math.isnan(v) else f"{v:.3f}"  # noqa: E731
    for r in rows[:limit]:
        lines.append(
            f"| {r['node']} | {r['train_rows']}/{r['test_rows']} | {r['sensitive']} | {cell(r['utility_acc'])} | "
            f"{cell(r['utility_auc'])} | {cell(r['adversary_acc'])} | {cell(r['adversary_auc'])} |"
        )
    if len(rows) > limit:
        lines.append(f"| ... {len(rows) - limit} more in audit/per_node.csv | | | | | | |")
    return "\n".join(lines + [f"n/a: {why}" for why in not_audited(rows)])


def not_audited(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why some per-node figures are missing, one line per cause naming its nodes."""
    few, silent, one_class = [], [], []
    for r in rows:
        if r["train_rows"] < 2 or r["test_rows"] < 2:
            few.append(r["node"])
        elif math.isnan(r["utility_acc"]):
            silent.append(r["node"])
        elif math.isnan(r["utility_auc"]) or math.isnan(r["adversary_auc"]):
            one_class.append(r["node"])
    nodes = lambda ks: ", ".join(map(str, ks))  # noqa: E731
    causes = [
        (few, "fewer than 2 train or test rows, too few to audit"),
        (silent, "released nothing (its rows are not in the release)"),
        (one_class, "its test rows hold one class of the label, and ROC-AUC needs both (accuracy is still given)"),
    ]
    return [f"node{'s' if len(ks) > 1 else ''} {nodes(ks)}: {why}" for ks, why in causes if ks]


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
