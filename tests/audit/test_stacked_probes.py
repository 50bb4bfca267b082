"""The probe engine (`StackedMLP`: stacked parameters, a written-out backward pass, fused Adam) trains every probe
exactly as the plain autograd loop trains it alone (tests/support/reference_probe.py), up to floating-point order:
probabilities within 1e-4, audit scores (log-loss included) within 1e-6."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from reference_probe import reference_audit, reference_classifier

from veil.audit import AuditConfig, audit
from veil.audit import train as train_module
from veil.audit.nodes import PER_NODE_COLUMNS, audit_final, node_probe, role_split
from veil.audit.probes import audit_many
from veil.audit.train import train_classifier, train_classifiers_stacked, train_predict_stacked
from veil.datasets import load_dataset
from veil.datasets.dataset import Split
from veil.errors import DataError
from veil.methods import create_method
from veil.platform.federation import plan_on, run_planned

SETTINGS = {"hidden": (16, 8), "epochs": 4, "lr": 1e-2, "batch_size": 32}
CFG = AuditConfig(epochs=4, hidden=(16,), batch_size=32)


def data(n: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    return (rng.standard_normal((n, 4)) + 2.0 * np.eye(classes, 4)[y]).astype(np.float32), y


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("rows", [[64, 64, 64], [100, 37, 64, 5, 1]])
def test_each_member_equals_its_solo_probe(classes: int, drop_last: bool, rows: list[int]) -> None:
    members = [data(n, classes, seed) for seed, n in enumerate(rows)]
    zs, ys = [z for z, _ in members], [y for _, y in members]
    probe_z = data(50, classes, 99)[0]
    before = torch.get_rng_state().clone()
    stacked = train_classifiers_stacked(zs, ys, classes, seed=3, drop_last=drop_last, standardize=True, **SETTINGS)
    assert torch.equal(before, torch.get_rng_state())
    for z, y, got in zip(zs, ys, stacked):
        solo = reference_classifier(z, y, classes, seed=3, drop_last=drop_last, standardize=True, **SETTINGS)
        np.testing.assert_allclose(got.predict_proba(probe_z), solo.predict_proba(probe_z), atol=1e-4)
        assert isinstance(got.net, torch.nn.Sequential) and not got.net.training


@pytest.mark.parametrize("block_floats", [1 << 24, 40])
def test_stacked_prediction_equals_each_trained_classifier(monkeypatch: pytest.MonkeyPatch, block_floats: int) -> None:
    """`train_predict_stacked` predicts from the trained stacks what each member's Classifier predicts (within 1e-6),
    for test sets of different lengths, in one block of rows or in many (a tiny `PREDICT_FLOATS`)."""
    monkeypatch.setattr(train_module, "PREDICT_FLOATS", block_floats)
    members = [data(n, 3, seed) for seed, n in enumerate([100, 37, 64, 5])]
    zs, ys = [z for z, _ in members], [y for _, y in members]
    tests = [data(n, 3, 50 + i)[0] for i, n in enumerate([7, 30, 1, 12])]
    got = train_predict_stacked(zs, ys, tests, 3, seed=[3, 4, 5, 6], **SETTINGS)
    want = train_classifiers_stacked(zs, ys, 3, seed=[3, 4, 5, 6], **SETTINGS)
    for p, probe, z in zip(got, want, tests):
        assert p.shape == (len(z), 3) and p.dtype == np.float32
        np.testing.assert_allclose(p, probe.predict_proba(z), atol=1e-6)
    with pytest.raises(DataError, match="4 training representations but 3 test ones"):
        train_predict_stacked(zs, ys, tests[:3], 3, seed=0, **SETTINGS)


@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
def test_one_probe_equals_the_plain_loop_at_the_audit_protocol(weight_decay: float) -> None:
    """The audit's own probe (256-128, lr 1e-3, batch 128, standardised): every parameter within 1e-5 of the plain
    loop's after 3 epochs (15 Adam steps), probabilities within 1e-5."""
    z, y = data(640, 3, 5)
    kw = {"hidden": (256, 128), "epochs": 3, "lr": 1e-3, "batch_size": 128, "seed": 11, "standardize": True}
    got = train_classifier(z, y, 3, weight_decay=weight_decay, **kw)
    want = reference_classifier(z, y, 3, weight_decay=weight_decay, **kw)
    for (name, a), b in zip(got.net.state_dict().items(), want.net.state_dict().values()):
        assert a.shape == b.shape and float((a - b).abs().max()) < 1e-5, name
    np.testing.assert_allclose(got.predict_proba(z), want.predict_proba(z), atol=1e-5)


def test_audit_trains_its_labels_together_as_each_alone() -> None:
    """`audit` stacks the probes of its labels (two class counts here: u has 3, s 2); its report equals the plain
    loop's audit, one probe per label with that label's seed, scored the same way."""
    (z_tr, tr), (z_te, te) = split(300, 0, "s"), split(100, 1, "s")
    classes = {"u": 3, "s": 2}
    got, want = audit(z_tr, tr, z_te, te, classes, CFG), reference_audit(z_tr, tr, z_te, te, classes, CFG)
    assert (
        [(s.label, s.role) for s in got.scores]
        == [(s.label, s.role) for s in want.scores]
        == [
            ("u", "utility"),
            ("s", "adversary"),
        ]
    )
    assert got.config == want.config
    assert_same_report(got.metrics(), want.metrics())


def test_per_member_seeds_and_more_members_than_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    import veil.audit.train as train_module

    monkeypatch.setattr(train_module, "STACK_PARAMS", 2 * 300)  # (4*16+16 + 16*8+8 + 8*2+2) = 234 params each
    members = [data(n, 2, seed) for seed, n in enumerate([40, 90, 33, 70, 12])]
    seeds = [0, 7, 0, 100, 5]
    stacked = train_classifiers_stacked([z for z, _ in members], [y for _, y in members], 2, seed=seeds, **SETTINGS)
    for (z, y), s, got in zip(members, seeds, stacked):
        solo = reference_classifier(z, y, 2, seed=s, **SETTINGS)
        np.testing.assert_allclose(got.predict_proba(z), solo.predict_proba(z), atol=1e-4)


def test_bad_members_are_refused_by_name() -> None:
    (z, y), (w, v) = data(20, 2, 0), data(20, 2, 1)
    with pytest.raises(DataError, match="same column count"):
        train_classifiers_stacked([z, w[:, :3]], [y, v], 2, seed=0, **SETTINGS)
    with pytest.raises(DataError, match="label arrays"):
        train_classifiers_stacked([z, w], [y], 2, seed=0, **SETTINGS)
    with pytest.raises(DataError, match="no training rows"):
        train_classifiers_stacked([z, w[:0]], [y, v[:0]], 2, seed=0, **SETTINGS)
    assert train_classifiers_stacked([], [], 2, seed=0, **SETTINGS) == []


def split(n: int, seed: int, sensitive: str) -> tuple[np.ndarray, Split]:
    rng = np.random.default_rng(seed)
    u, s = rng.integers(0, 3, n), rng.integers(0, 2, n)
    z = np.stack([u + rng.standard_normal(n), s + rng.standard_normal(n), rng.standard_normal(n)], 1)
    return z.astype(np.float32), Split(np.zeros((n, 1), np.float32), {"u": u}, {sensitive: s})


def assert_same_report(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for k in want:
        assert math.isclose(got[k], want[k], abs_tol=1e-6) or (math.isnan(got[k]) and math.isnan(want[k])), k


def test_audit_many_equals_audit_member_by_member() -> None:
    sizes = [(120, 40, "s"), (57, 23, "t"), (200, 80, "s"), (9, 5, "t")]  # members hide different labels
    members = [(split(n, 2 * i, lab), split(m, 2 * i + 1, lab)) for i, (n, m, lab) in enumerate(sizes)]
    classes = {"u": 3, "s": 2, "t": 2}
    reports = audit_many(
        [tr[0] for tr, _ in members],
        [tr[1] for tr, _ in members],
        [te[0] for _, te in members],
        [te[1] for _, te in members],
        classes,
        CFG,
    )
    for ((z_tr, tr), (z_te, te)), got in zip(members, reports):
        want = audit(z_tr, tr, z_te, te, classes, CFG)
        assert [(s.label, s.role) for s in got.scores] == [(s.label, s.role) for s in want.scores]
        assert got.config == want.config
        got_metrics = got.metrics()
        assert_same_report(got_metrics, want.metrics())  # every metric, the log-loss included
        label = next(iter(te.sensitive))
        assert {"logloss/u", f"logloss/{label}", "utility_logloss", "adversary_logloss"} <= set(got_metrics)
        assert [s.logloss for s in got.scores] == pytest.approx([s.logloss for s in want.scores], abs=1e-6)
    with pytest.raises(DataError, match="every member needs all four"):
        audit_many([members[0][0][0]], [], [], [], classes, CFG)


def test_per_node_audit_equals_the_node_by_node_loop() -> None:
    ds = load_dataset("gaussian-octant", {"n": 600})
    m = create_method(
        "d-eigan", {"K": 5, "epochs": 2, "d_z": 3, "node_sensitive": ["adversary_1", "adversary_2"]}, ds.task()
    )
    prep = plan_on("in-process", m, "d-eigan", ds.train, dataset=ds, seed=0)
    run_planned(prep)
    assert prep.test_parts is not None
    test_parts = list(prep.test_parts)
    test_parts[3] = test_parts[3][:1]  # one test row: this node stays NaN
    prep = dataclasses.replace(prep, test_parts=test_parts)
    report, rows, z_train, z_test = audit_final(prep, ds, m, CFG)
    assert [r["node"] for r in rows] == list(range(5)) and all(list(r) == list(PER_NODE_COLUMNS) for r in rows)
    assert {r["sensitive"] for r in rows} == {"adversary_1", "adversary_2"}
    for k, (obj, row) in enumerate(zip(prep.objectives, rows)):
        tr, te = prep.parts[k], test_parts[k]
        assert (row["train_rows"], row["test_rows"]) == (len(tr), len(te))
        if k == 3:
            assert all(math.isnan(row[c]) for c in PER_NODE_COLUMNS[5:])
            continue
        want = audit(
            z_train[tr], role_split(ds.train.take(tr), obj), z_test[te], role_split(ds.test.take(te), obj),
            ds.num_classes, node_probe(CFG, prep.options),
        ).metrics()  # fmt: skip
        assert_same_report({c: row[c] for c in PER_NODE_COLUMNS[5:]}, {c: want[c] for c in PER_NODE_COLUMNS[5:]})
    assert_same_report(report.metrics(), audit(z_train, ds.train, z_test, ds.test, ds.num_classes, CFG).metrics())


def test_roc_auc_equals_sklearn_with_ties() -> None:
    from sklearn.metrics import roc_auc_score

    from veil.audit.probes import roc_auc

    rng = np.random.default_rng(0)
    for decimals in (1, 2, 6):
        y = rng.integers(0, 2, 40)
        s = np.round(rng.random(40), decimals).astype(np.float32)
        assert math.isclose(roc_auc(y == 1, s), roc_auc_score(y, s), abs_tol=1e-12)
