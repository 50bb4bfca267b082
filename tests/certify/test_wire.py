"""The certificate's wire section: what the coordinator of a federation received, certified round by round, and
the view of an aggregator that joins the audit's releases and the final release by row id (both decide a D-GPP
certificate).

Small D-GPP federations on gaussian-correlated, in process, with pinned seeds and release_seed (deterministic).
The section's figures are checked against a direct recomputation (the certificate's own `audit` + `certify` on
the captured view: equal to 1e-12, the same computation); a federation whose first uploads come from a fresh
encoder on data whose x carries s plainly is reported not met, and fails the certificate it is attached to; the
default protocol's first uploaded round on gaussian-correlated (8,000 rows) meets the default target on every seed
checked (0, 1, 2)."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest

from veil.audit.probes import audit
from veil.audit.settings import AuditConfig
from veil.certify.certificate import certify
from veil.certify.target import default_target, parse_target
from veil.certify.wire import (
    WireCapture,
    WireView,
    attach,
    audit_wire,
    linked_rows,
    linked_view,
    sampled_rounds,
    view_data,
    wire_capture,
)
from veil.cli.run import print_certificate
from veil.datasets.catalog import load_dataset
from veil.datasets.dataset import Dataset
from veil.methods.builtin import create_method
from veil.methods.configs.fed_options import FederationOptions
from veil.methods.federated.core import Release
from veil.methods.federated.simulation import LocalFederation, plan_federation, run_federation

CFG = AuditConfig(hidden=(32,), epochs=5, bootstrap=400, suite=("logistic", "hist-gradient-boosting"))
TOL = 1e-12


def federate(ds: Dataset, wire_rounds: int, seed: int = 0, **params) -> tuple[object, WireCapture]:
    base = {"K": 3, "epochs": 1, "batch_size": 64, "seed": seed, "release_seed": seed, "encoder_hidden": [32]}
    m = create_method("d-gpp", {**base, **params}, ds.task())
    plan = plan_federation(
        m, "d-gpp", ds.train, dataset=ds, options=FederationOptions(wire_rounds=wire_rounds), seed=seed
    )
    capture = wire_capture(plan, ds)
    assert capture is not None
    plan.wire = capture
    run_federation(plan, LocalFederation(plan))
    return m, capture


def small_run(n: int, federation: dict | None = None, calibrate: bool = True, **params):
    """A tiny D-GPP `veil run` spec on gaussian-correlated (2 clients, 1 epoch, a 2-epoch logistic-only audit)."""
    from veil.pipeline.runspec import RunSpec

    return RunSpec(
        method="d-gpp",
        dataset="gaussian-correlated",
        params={"K": 2, "epochs": 1, "encoder_hidden": [16], **params},
        dataset_params={"n": n},
        audit={"epochs": 2, "hidden": [8], "suite": ["logistic"], "bootstrap": 200},
        runtime="in-process",
        federation=federation or {},
        calibrate=calibrate,
    )


def test_sampled_rounds() -> None:
    assert sampled_rounds(10, 3) == [1, 6, 10]  # first, evenly between, last
    assert sampled_rounds(2, 3) == [1, 2] and sampled_rounds(5, 1) == [1] and sampled_rounds(5, 0) == []


def test_the_linked_view_joins_each_rows_releases_by_row_id() -> None:
    """Per row: the final release's z, then each sampled round's (zeros and a 0 in the presence column where the
    round's participants did not own the row; no presence column for a round that covered every row)."""

    def release(train: dict[int, list[int]], test: dict[int, list[int]], base: float) -> Release:
        msgs = {
            k: {
                split: {"rows": np.array(rows[k]), "z": base + np.array(rows[k], np.float32)[:, None] * [1, -1]}
                for split, rows in (("train", train), ("test", test))
                if k in rows
            }
            for k in set(train) | set(test)
        }
        return Release.from_messages(msgs)

    final = release({0: [2, 0], 1: [1, 3]}, {0: [1], 1: [0]}, 100.0)
    partial = release({1: [1, 3]}, {1: [0]}, 10.0)  # round 4: node 1 only
    full = release({0: [0, 2], 1: [3, 1]}, {0: [1], 1: [0]}, 20.0)

    def view(rnd: int, rel: Release) -> WireView:
        return WireView(rnd, rel.nodes("train"), rel.rows("train"), rel.z("train"), rel.rows("test"), rel.z("test"))

    capture = WireCapture.__new__(WireCapture)
    capture.views = {1: view(1, full), 4: view(4, partial)}
    joined = linked_view(capture, final)
    assert joined is not None and joined.nodes == [0, 1]
    assert joined.train_rows.tolist() == [0, 1, 2, 3] and joined.test_rows.tolist() == [0, 1]
    assert joined.z_train.tolist() == [
        [100, 100, 20, 20, 0, 0, 0],
        [101, 99, 21, 19, 11, 9, 1],
        [102, 98, 22, 18, 0, 0, 0],
        [103, 97, 23, 17, 13, 7, 1],
    ]
    assert joined.z_test.tolist() == [[100, 100, 20, 20, 10, 10, 1], [101, 99, 21, 19, 0, 0, 0]]
    assert linked_view(capture, None) is None

    # what calibration scores: every row of the fold in row order, or nothing when the final release misses rows
    @dataclasses.dataclass
    class Fold:
        train: np.ndarray
        test: np.ndarray

    fold = Fold(np.arange(4), np.arange(2))
    fit, val = linked_rows(capture, final, fold)
    assert fit.tolist() == joined.z_train.tolist() and val.tolist() == joined.z_test.tolist()
    only_node_0 = release({0: [2, 0]}, {0: [1]}, 100.0)
    assert linked_rows(capture, only_node_0, fold) is None


def test_wire_section_matches_a_direct_recomputation() -> None:
    """Per sampled round: the view covers exactly the rows its participants own, and the section's gap, AUC and
    verdict equal `audit` + `certify` run directly on that round's z (tolerance 1e-12: the same computation)."""
    ds = load_dataset("gaussian-correlated", {"n": 900})
    m, capture = federate(ds, wire_rounds=3)
    assert sorted(capture.views) == capture.rounds == [1, 2, 4]  # 4 rounds: ceil(225 / 64)
    section = audit_wire(capture, ds, default_target(), CFG, m)
    d = section.to_dict()
    assert d["sampled_rounds"] == [1, 2, 4] and d["decides_certificate"] and d["rounds_total"] == 4
    for entry in d["rounds"]:
        view = capture.views[entry["round"]]
        assert entry["nodes"] == [0, 1, 2]
        assert np.array_equal(view.train_rows, np.arange(len(ds.train)))  # every participant's own rows
        assert np.array_equal(view.test_rows, np.arange(len(ds.test)))
        data = view_data(ds, view)
        report = audit(view.z_train, data.train, view.z_test, data.test, data.num_classes, CFG)
        direct = certify(view.z_train, view.z_test, data, report, default_target(), CFG)
        pairs = (
            ("privacy_gap", direct.worst_gap),
            ("excess_gap", direct.worst_excess),
            ("adversary_auc_max", direct.worst_auc),
        )
        for key, iv in pairs:
            for part, value in (("value", iv.point), ("low", iv.low), ("high", iv.high)):
                assert entry[key][part] == pytest.approx(value, abs=TOL)
        assert entry["met"] == direct.met
    worst = max(d["rounds"], key=lambda r: (r["privacy_gap"]["high"], r["privacy_gap"]["value"]))
    assert d["worst_round"] == worst["round"] and d["privacy_gap"] == worst["privacy_gap"]
    assert section.metrics()["certificate/wire_privacy_gap_high"] == worst["privacy_gap"]["high"]
    check, linked = section.checks()  # the rounds' check, then the linked view's: both decide
    assert check.metric == "wire/excess_gap" and check.checked == max(r["excess_gap"]["high"] for r in d["rounds"])
    assert check.met == all(r["met"] for r in d["rounds"])
    joined = linked_view(capture, m.released)  # the final release and the 3 rounds' side by side
    assert joined is not None and joined.z_train.shape == (len(ds.train), 4 * m.config.d_z)
    data = view_data(ds, joined)
    report = audit(joined.z_train, data.train, joined.z_test, data.test, data.num_classes, CFG)
    direct = certify(joined.z_train, joined.z_test, data, report, default_target(), CFG)
    assert linked.metric == "wire/linked/excess_gap" and linked.checked == pytest.approx(
        direct.worst_excess.high, abs=TOL
    )
    assert linked.met == direct.met == d["linked"]["met"] and d["linked"]["rounds"] == [1, 2, 4]
    assert section.met == (check.met and linked.met) and d["checks"][1]["metric"] == "wire/linked/excess_gap"


def leaky() -> Dataset:
    """x carries s plainly (separation 6 along its two directions) and u says nothing of it (rho 0)."""
    return load_dataset("gaussian-correlated", {"n": 1200, "rho": 0.0, "separation": 6.0})


def test_uploads_of_a_fresh_encoder_are_not_met_and_fail_the_certificate() -> None:
    """Round 1's z come from freshly initialised encoders, random maps of x that keep s (x carries s plainly). The
    wire section says not met, and attached to a (met) release certificate it makes the certificate not met."""
    ds = leaky()
    m, capture = federate(ds, wire_rounds=1)
    section = audit_wire(capture, ds, default_target(), CFG, m)
    (entry,) = section.to_dict()["rounds"]
    assert entry["round"] == 1 and entry["met"] is False and entry["privacy_gap"]["value"] > 0.1, entry
    assert section.met is False
    rng = np.random.default_rng(0)  # a release that reveals nothing
    z_tr, z_te = rng.standard_normal((len(ds.train), 4)), rng.standard_normal((len(ds.test), 4))
    cert = certify(z_tr, z_te, ds, audit(z_tr, ds.train, z_te, ds.test, ds.num_classes, CFG), default_target(), CFG)
    before = list(cert.checks)
    attach(cert, section)
    assert cert.checks[: len(before)] == before and [c.metric for c in cert.checks[len(before) :]] == [
        "wire/excess_gap",
        "wire/linked/excess_gap",
    ]
    assert not cert.checks[-1].met and not cert.met and cert.to_dict()["wire"]["met"] is False
    assert "aggregator's view (wire): **NOT met**" in cert.to_markdown()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_default_protocol_s_first_upload_meets_the_target(seed: int) -> None:
    """gaussian-correlated (rho 0.5, 8,000 rows, 2,000 test rows), D-GPP's defaults (K 5, encoder 512-256, no
    warm-up): round 1's uploads meet the absolute privacy_gap <= 0.05 (not only the default excess bound) on every
    seed checked (measured with this test's suite: upper ends 0.012, 0.020 and 0.028 for seeds 0, 1, 2)."""
    ds = load_dataset("gaussian-correlated", {"n": 8000, "seed": seed})
    m, capture = federate(ds, wire_rounds=1, seed=seed, K=5, encoder_hidden=[512, 256])
    section = audit_wire(capture, ds, parse_target({"privacy_gap": 0.05}) or default_target(), CFG, m)
    (entry,) = section.to_dict()["rounds"]
    assert entry["round"] == 1 and entry["met"] is True, entry


def test_warm_up_trains_before_the_first_upload() -> None:
    """warmup_epochs=1: the first upload comes from an encoder trained against the client's own adversaries (z
    differ from those of the paper's protocol in round 1, over the same rows)."""
    ds = load_dataset("gaussian-correlated", {"n": 600})
    _, cold = federate(ds, wire_rounds=1)
    m, warm = federate(ds, wire_rounds=1, warmup_epochs=1)
    assert not np.allclose(cold.views[1].z_train, warm.views[1].z_train)
    assert cold.views[1].train_rows.tolist() == warm.views[1].train_rows.tolist()


def test_a_shared_encoder_is_reported_not_decisive() -> None:
    """D-EIGAN: the aggregator holds the global encoder, applied without release noise to the rows; its section
    is measured and reported but does not decide the certificate (the aggregator holds no rows)."""
    ds = load_dataset("gaussian-correlated", {"n": 600})
    m = create_method("d-eigan", {"K": 2, "epochs": 1, "seed": 0, "release_seed": 0}, ds.task())
    plan = plan_federation(m, "d-eigan", ds.train, dataset=ds, options=FederationOptions(wire_rounds=1), seed=0)
    plan.wire = wire_capture(plan, ds)
    run_federation(plan, LocalFederation(plan))
    section = audit_wire(plan.wire, ds, default_target(), CFG, m)
    d = section.to_dict()
    assert d["rounds"] and not d["decides_certificate"] and "global encoder" in d["can_learn"]
    rng = np.random.default_rng(0)
    z_tr, z_te = rng.standard_normal((len(ds.train), 4)), rng.standard_normal((len(ds.test), 4))
    cert = certify(z_tr, z_te, ds, audit(z_tr, ds.train, z_te, ds.test, ds.num_classes, CFG), default_target(), CFG)
    checks = list(cert.checks)
    attach(cert, section)
    assert cert.checks == checks and cert.to_dict()["wire"]["method"] == "d-eigan"


def test_veil_run_records_the_wire_section(in_tmp) -> None:
    """The pipeline: a D-GPP `veil run` with the default target certifies the sampled rounds, logs the wire metrics
    and puts the wire check among the certificate's (so it decides `met`); without a target nothing is sampled."""
    from veil.pipeline.execute import execute

    spec = small_run(500, release_seed=0, federation={"per_node_audit": False}, calibrate=False)
    result = execute(spec)
    cert = result.certificate
    assert cert is not None and cert.wire is not None
    wire = cert.to_dict()["wire"]
    assert wire["sampled_rounds"] == [1, 2, 3] and wire["decides_certificate"]
    assert result.metrics["certificate/wire_privacy_gap_high"] == wire["privacy_gap"]["high"]
    linked = wire["linked"]  # each row's three sampled-round releases and the final one, side by side
    assert linked["rounds"] == [1, 2, 3] and linked["columns"] == 4 * int(result.params["method.d_z"])
    assert result.metrics["certificate/wire_linked_excess_gap_high"] == linked["excess_gap"]["high"]
    assert "| 1+2+3 + final, joined by row id | 2 |" in cert.to_markdown()
    shown = io.StringIO()
    print_certificate(result, shown)  # what `veil run` prints after the run
    assert "\n  wire/linked/excess_gap <= 0.05: " in shown.getvalue()
    assert [c.metric for c in cert.checks] == ["excess_gap", "wire/excess_gap", "wire/linked/excess_gap"]
    assert cert.met == all(c.met for c in cert.checks) and "The aggregator's view (wire)" in cert.to_markdown()
    off = execute(dataclasses.replace(spec, target="none"))
    assert off.certificate is None and not any(k.startswith("certificate/wire") for k in off.metrics)


def test_a_release_met_but_an_unmet_wire_view_says_which_party(capsys) -> None:
    """When calibration met the release's bound and only the aggregator's view is unmet, the error says so and
    names the wire checks, not "calibration could not meet the target"."""
    from types import SimpleNamespace

    from veil.certify.certificate import Check

    checks = [
        Check("excess_gap", 0.05, 0.01, 0.035, "95% upper end", True),
        Check("wire/excess_gap", 0.05, 0.0, 0.02, "95% upper end, worst sampled round (580)", True),
        Check("wire/linked/excess_gap", 0.05, 0.04, 0.061, "95% upper end, joined", False),
    ]
    cert = SimpleNamespace(
        checks=checks,
        notes=[],
        met=False,
        knob={"field": "beta", "value": 0.0977, "set_by": "calibration"},
        target=default_target(),
        headline=lambda: "certificate NOT MET",
    )
    print_certificate(SimpleNamespace(certificate=cert, calibration=object(), exit_code=3), io.StringIO())
    err = capsys.readouterr().err
    assert err.startswith("error: the release meets its target (excess_gap <= 0.05")
    assert "but the aggregator's view does not (wire/linked/excess_gap)" in err
    assert "it does certify wire/linked/excess_gap <= 0.061" in err and "could not meet" not in err
    checks[0] = dataclasses.replace(checks[0], met=False, checked=0.058)  # the release itself unmet: as before
    print_certificate(SimpleNamespace(certificate=cert, calibration=object(), exit_code=3), io.StringIO())
    assert capsys.readouterr().err.startswith("error: calibration could not meet the target")


def test_calibration_scores_a_d_gpp_candidate_on_its_linked_view(in_tmp) -> None:
    """A D-GPP calibration candidate carries the view its certificate's linked check will read: per row of the
    fold, its final release then each sampled round's release, side by side in row order."""
    from veil.certify.calibrate import calibration_audit
    from veil.pipeline.execute import calibration_subject
    from veil.pipeline.validation import validate

    v = validate(small_run(600, beta=0.5))
    ds = load_dataset("gaussian-correlated", v.dataset_config)
    subject = calibration_subject(v)
    assert subject.federate is not None
    cand = subject.federate(v.method_config, ds, calibration_audit(v.audit_config), None)
    d_z = int(v.method_config.d_z)
    assert len(cand.views) == 1
    z_fit, z_val, report = cand.views[0]
    assert z_fit.shape == (len(ds.train), 4 * d_z) and z_val.shape == (len(ds.test), 4 * d_z)
    np.testing.assert_array_equal(z_fit[:, :d_z], cand.z_fit)
    np.testing.assert_array_equal(z_val[:, :d_z], cand.z_val)
    assert {s.role for s in report.scores} == {s.role for s in cand.report.scores}  # audited as the release is
    for r in (1, 2, 3):  # every sampled round's encoder is another one (the clients train once more after the
        # last round, on the final heads), so each round's columns are another draw
        assert np.abs(z_fit[:, r * d_z : (r + 1) * d_z] - cand.z_fit).mean() > 0.1


def test_a_linked_view_calibration_cannot_join_is_warned_about_once(in_tmp, monkeypatch, capsys) -> None:
    """Where a candidate's linked view misses rows, calibration scores it on its release alone and says so once per
    calibration, not once per candidate (a view that cannot be joined is simulated: `linked_rows` finds none)."""
    import veil.certify.wire as wire
    from veil.certify.calibrate import calibration_audit
    from veil.pipeline.execute import calibration_subject
    from veil.pipeline.validation import validate

    said = "scored a candidate on its release alone"
    monkeypatch.setattr(wire, "linked_rows", lambda *a: None)
    v = validate(small_run(600, beta=0.5))
    ds = load_dataset("gaussian-correlated", v.dataset_config)
    subject = calibration_subject(v)
    assert subject.federate is not None
    capsys.readouterr()
    cands = [subject.federate(v.method_config, ds, calibration_audit(v.audit_config), None) for _ in range(2)]
    assert [c.views for c in cands] == [(), ()]  # each scored on its release alone
    assert capsys.readouterr().err.count(said) == 1
    again = calibration_subject(v)  # another calibration says it again
    assert again.federate is not None
    again.federate(v.method_config, ds, calibration_audit(v.audit_config), None)
    assert capsys.readouterr().err.count(said) == 1
