"""Seeded partial participation, and D-EIGAN's per-node objectives (half the nodes hide one label, half
another) carried through training and the per-node audit."""

from __future__ import annotations

import numpy as np
import torch
from veil_test_hooks import fault_env

from veil.audit import AuditConfig
from veil.audit.nodes import audit_final
from veil.datasets import load_dataset
from veil.methods import create_method
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.core import NodeObjective
from veil.methods.federated.ensemble import ShardStack
from veil.methods.federated.simulation import run_in_process
from veil.methods.ldp_fedavg import first_regular_step
from veil.platform.federation import plan_on, run_planned


def test_fraction_samples_the_same_nodes_for_the_same_seed():
    ds = load_dataset("gaussian-quadrant", {"n": 400})
    runs = []
    for per_host in (1, 0):
        m = create_method("ldp-fedavg", {"K": 6, "fraction": 0.5, "epochs": 5, "d_z": 2}, ds.task())
        out = run_in_process(m, ds.train, options=FederationOptions(nodes_per_host=per_host))
        runs.append([r.selected for r in out.records])
        assert all(len(r.selected) == 3 == len(r.completed) and set(r.bytes_up) == set(r.selected) for r in out.records)
    assert runs[0] == runs[1]  # same seed, same participants, whatever the placement
    assert len({tuple(s) for s in runs[0]}) > 1  # resampled every round


def test_half_the_nodes_hide_one_label_half_another():
    ds = load_dataset("gaussian-octant", {"n": 600})
    m = create_method(
        "d-eigan", {"K": 4, "epochs": 2, "d_z": 3, "node_sensitive": ["adversary_1", "adversary_2"]}, ds.task()
    )
    assert (
        m.node_objectives()
        == [NodeObjective(("ally",), ("adversary_1",))] * 2 + [NodeObjective(("ally",), ("adversary_2",))] * 2
    )
    prep = plan_on("in-process", m, "d-eigan", ds.train, dataset=ds, seed=0)
    out = run_planned(prep)
    assert all(len(r.completed) == 4 for r in out.records)
    report, rows, _, _ = audit_final(prep, ds, m, AuditConfig(epochs=2, hidden=(16,)))
    assert [r["sensitive"] for r in rows] == ["adversary_1"] * 2 + ["adversary_2"] * 2
    assert all(np.isfinite(r["adversary_auc"]) for r in rows)
    assert {"adversary_auc/adversary_1", "adversary_auc/adversary_2"} <= set(report.metrics())  # global: dataset roles


def test_ldp_fedavg_warm_up_adds_local_passes_to_a_clients_first_update_only():
    """warmup_epochs W: a client's first update takes local_epochs + W passes, later ones local_epochs. Without the
    reconstruction term (beta 0, where warm-up and regular passes train the same loss), one round at 1 + 2 passes
    equals one round of local_epochs 3 exactly (the same minibatches in the same order); a second round then adds
    one pass, as the paper's protocol does (tolerance 0). With it, the warm-up passes differ from regular ones."""
    ds = load_dataset("gaussian-correlated", {"n": 600})
    base = {"K": 3, "d_z": 2, "encoder_hidden": [16], "seed": 0, "warmup_epochs": 0, "beta": 0.0}

    def omega(**params) -> np.ndarray:
        m = create_method("ldp-fedavg", {**base, **params}, ds.task())
        run_in_process(m, ds.train)
        return m.global_state()["omega"]

    warm = omega(epochs=1, warmup_epochs=2)
    assert np.array_equal(warm, omega(epochs=3, local_epochs=3))
    assert not np.array_equal(warm, omega(epochs=1))
    two = omega(epochs=2, warmup_epochs=2)  # round 1: 3 passes, round 2: 1 pass
    assert not np.array_equal(two, warm) and not np.array_equal(two, omega(epochs=6, local_epochs=3))
    assert not np.array_equal(omega(epochs=1, warmup_epochs=2, beta=1.0), omega(epochs=3, local_epochs=3, beta=1.0))


def test_ldp_fedavg_warm_up_passes_come_first_and_regular_steps_follow():
    """The reconstruction term starts at each node's first step past its warm-up passes (the first warmup/passes
    share of its steps); a node without warm-up has it from step 0."""
    steps = torch.tensor([6, 4, 3])  # 3 passes of 2 steps; 2 passes of 2; 1 pass of 3
    assert first_regular_step(steps, [2, 1, 0], [3, 2, 1]).tolist() == [4, 2, 0]


def _passes_per_round(monkeypatch, faults: str) -> list[dict[int, int]]:
    """Run a 3-round, 3-client LDP-FedAvg (one host per node, warmup_epochs 2) with the node deaths `faults`
    ('NODE@ROUND'), and return each host call's local passes per node (a spy on `ShardStack.epoch_plan`)."""
    for k, v in fault_env(faults).items():
        monkeypatch.setenv(k, v)
    calls: list[dict[int, int]] = []
    plan = ShardStack.epoch_plan

    def spy(nodes, epochs, batch_size):
        calls.append({n.id: e for n, e in zip(nodes, epochs, strict=True)})
        return plan(nodes, epochs, batch_size)

    monkeypatch.setattr(ShardStack, "epoch_plan", staticmethod(spy))
    ds = load_dataset("gaussian-correlated", {"n": 300})
    m = create_method("ldp-fedavg", {"K": 3, "epochs": 3, "d_z": 2, "warmup_epochs": 2}, ds.task())
    out = run_in_process(m, ds.train, options=FederationOptions(nodes_per_host=1))
    assert out.restarts == 1
    return calls


def test_ldp_fedavg_warms_up_clients_the_server_never_heard_from(monkeypatch):
    """The server, not the node host, knows who has uploaded: a host restarted after its node's first upload
    does not warm up again (node 2 dies in round 2), and a node whose first update was lost still does (node 2
    dies in round 1). One pass per round otherwise; exact counts."""
    after_upload = _passes_per_round(monkeypatch, "2@2")
    assert after_upload[:3] == [{0: 3}, {1: 3}, {2: 3}]  # round 1: every client warms up
    assert after_upload[3:] == [{0: 1}, {1: 1}, {0: 1}, {1: 1}, {2: 1}]  # round 2 without node 2, then round 3
    lost_first = _passes_per_round(monkeypatch, "2@1")
    assert lost_first[:2] == [{0: 3}, {1: 3}]
    assert lost_first[2:] == [{0: 1}, {1: 1}, {2: 3}, {0: 1}, {1: 1}, {2: 1}]
