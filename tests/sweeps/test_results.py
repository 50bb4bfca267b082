"""Reading a sweep back from a real MLflow store (sqlite in tmp), without Ray: each trial counted once
(superseded and orphaned attempts dropped), the front and hypervolume recomputed from the recorded runs,
report files written; one trial run in-process (`run_trial`), its crash recorded as a FAILED child run."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from veil.sweeps.pareto import convex_hull_auc, hypervolume, pareto_front
from veil.sweeps.report import write_report
from veil.sweeps.results import (
    TAG_CONFIG,
    TAG_PARETO,
    TAG_ROLE,
    TAG_SUPERSEDED,
    TAG_SWEEP,
    TAG_TRIAL,
    SweepRef,
    analyze,
    collect,
    find_sweep,
    format_report,
    search_child_runs,
    settle_attempts,
    settle_members,
    tag_front,
)
from veil.sweeps.sweepspec import sweep_from_mapping
from veil.tracking import TrackedRun

SPEC = {
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "dataset_params": {"n": 200},
    "params": {"epochs": 1, "encoder_hidden": [8], "head_hidden": [8]},
    "audit": {"epochs": 1, "hidden": [8]},
    "space": {"beta": {"type": "log", "low": 0.05, "high": 8}},
    "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "adversary_auc", "direction": "min"}],
    "trials": 6,
    "concurrency": 1,
}
# (trial id, beta, utility_auc, adversary_auc)
POINTS = [
    ("t1", 0.1, 0.70, 0.55),
    ("t2", 1.0, 0.95, 0.80),
    ("t3", 0.5, 0.90, 0.70),
    ("t4", 0.3, 0.80, 0.75),
    ("t5", 4.0, 0.96, 0.85),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = sweep_from_mapping(SPEC, where="test.yaml")
    parent = TrackedRun.start(
        uri, "sweeps-test", "s1", tags={TAG_ROLE: "sweep", TAG_SWEEP: "s1", "veil.spec_name": "test"}
    )
    parent.log_dict({"spec": dict(spec.raw), "source": "test.yaml"}, "sweep/spec.json")

    def child(tid: str, beta: float, u: float | None, a: float | None, status: str = "FINISHED", **extra: str):
        tags = {
            TAG_ROLE: "trial",
            TAG_SWEEP: "s1",
            TAG_TRIAL: tid,
            TAG_CONFIG: json.dumps({"method.beta": beta}),
            **extra,
        }
        r = TrackedRun.start(uri, "sweeps-test", f"s1/{tid}", parent_run_id=parent.run_id, tags=tags)
        if u is not None:
            r.log_metrics({"utility_auc": u, "adversary_auc": a, "utility_acc": u - 0.05})
        if status != "RUNNING":
            r.finish(status)
        return r

    # an attempt of t2 cut off by a driver kill (left RUNNING), then its re-run, which supersedes it
    orphan = child("t2", 1.0, None, None, status="RUNNING")
    assert settle_attempts(uri, orphan.experiment_id, "s1", "t2") is None
    runs = {tid: child(tid, b, u, a) for tid, b, u, a in POINTS}
    # a finished first attempt of t3 nobody marked (e.g. resumed by an older veil): dedupe keeps one run
    child("t3", 0.5, 0.90, 0.70)
    child("t6", 8.0, None, None, status="FAILED", error="ValueError: Input contains NaN.")
    ref = SweepRef("s1", parent.run_id, parent.experiment_id, uri, None, "RUNNING")
    return uri, spec, ref, orphan, runs


def test_orphan_is_killed_and_superseded(store):
    uri, _, ref, orphan, _ = store
    r = TrackedRun(uri, orphan.run_id).client.get_run(orphan.run_id)
    assert r.info.status == "KILLED" and r.data.tags[TAG_SUPERSEDED] == "true"


def test_collect_counts_each_trial_once_and_recomputes_the_front(store):
    uri, spec, ref, _, _ = store
    res = collect(ref)
    t = res.trials
    assert sorted(t["trial_id"]) == ["t1", "t2", "t3", "t4", "t5", "t6"]
    assert res.superseded == 2  # the orphaned t2 attempt and the duplicate t3 run
    assert res.counts == {
        "trials": 6,
        "finished": 5,
        "failed": 1,
        "running": 0,
        "killed": 0,
        "front": 4,
        "infeasible": 0,
    }
    assert t.loc[t["trial_id"] == "t6", "error"].item().startswith("ValueError")
    pts = np.array([[u, a] for _, _, u, a in POINTS])
    mask = pareto_front(pts, ["max", "min"])
    assert set(t.loc[t["pareto"], "trial_id"]) == {p[0] for p, m in zip(POINTS, mask) if m} == {"t1", "t2", "t3", "t5"}
    assert math.isclose(res.hypervolume, hypervolume(pts, ["max", "min"], [0.5, 1.0]), rel_tol=1e-12)
    front = pts[mask]
    assert math.isclose(res.chull_auc, convex_hull_auc(front[:, 0], front[:, 1]), rel_tol=1e-12)
    assert list(res.front["trial_id"]) == ["t5", "t2", "t3", "t1"]  # best utility first
    assert "hypervolume" in format_report(res) and "beta" in format_report(res)


def gap_trials(adversary_auc: list[float], utility_auc: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "trial": range(1, len(utility_auc) + 1),
            "status": "FINISHED",
            "beta": 1.0,
            "utility_auc": utility_auc,
            "adversary_auc": adversary_auc,
            "privacy_gap": np.abs(np.array(adversary_auc) - 0.5),
        }
    )


@pytest.mark.parametrize("origin", ["zero", "half"])
def test_convex_hull_auc_over_the_privacy_gap_is_read_on_the_auc_scale(origin):
    gap_spec = sweep_from_mapping(
        {**SPEC, "objectives": ["utility_auc: max", "privacy_gap: min"], "chull_origin": origin}, where="gap.yaml"
    )
    raw_spec = sweep_from_mapping({**SPEC, "chull_origin": origin}, where="raw.yaml")
    auc, util = [0.55, 0.70, 0.80], [0.70, 0.90, 0.95]
    # every adversary above chance: the hull over 0.5 + gap is the hull over adversary_auc, to round-off
    gap_res, raw_res = analyze(gap_trials(auc, util), gap_spec), analyze(gap_trials(auc, util), raw_spec)
    assert gap_res.chull_auc == pytest.approx(raw_res.chull_auc, abs=1e-12)
    assert gap_res.hypervolume == pytest.approx(raw_res.hypervolume, abs=1e-12)
    assert gap_res.summary()["chull_leakage"] == "0.5 + privacy_gap" and gap_res.notes == []
    assert "utility_auc over 0.5 + privacy_gap" in format_report(gap_res)
    assert raw_res.notes[0].startswith("raw.yaml: objectives[1]: 'adversary_auc'")  # the warning travels along
    # an adversary inverted to AUC 0.2 (gap 0.3) at the best utility no longer enlarges the area: it counts
    # as leakage 0.8, where the raw AUC put it left of chance
    auc_inv = [0.55, 0.70, 0.20]
    gap_inv, raw_inv = analyze(gap_trials(auc_inv, util), gap_spec), analyze(gap_trials(auc_inv, util), raw_spec)
    assert gap_inv.chull_auc == pytest.approx(convex_hull_auc(util, [0.55, 0.70, 0.80], origin), abs=1e-12)
    assert raw_inv.chull_auc > gap_inv.chull_auc + 0.01
    assert set(gap_inv.trials.loc[gap_inv.trials["pareto"], "trial"]) == {1, 2, 3}


def test_constraints_exclude_infeasible_trials(store):
    uri, _, ref, _, _ = store
    spec = sweep_from_mapping({**SPEC, "constraints": ["utility_auc >= 0.85"]}, where="test.yaml")
    res = collect(ref, spec)
    assert set(res.trials.loc[res.trials["pareto"], "trial_id"]) == {"t2", "t3", "t5"}
    assert res.counts["infeasible"] == 2


def test_tag_front_and_find_sweep(store):
    uri, _, ref, _, runs = store
    res = collect(ref)
    tag_front(res)
    children = [r for r in search_child_runs(uri, ref.parent_run_id) if r.data.tags.get(TAG_SUPERSEDED) != "true"]
    tagged = {r.data.tags[TAG_TRIAL]: r.data.tags.get(TAG_PARETO) for r in children if TAG_PARETO in r.data.tags}
    assert tagged == {"t1": "true", "t2": "true", "t3": "true", "t4": "false", "t5": "true", "t6": "false"}
    for key in ("s1", ref.parent_run_id, "test"):  # name, parent run id, spec name
        assert find_sweep(key, uri).parent_run_id == ref.parent_run_id
    with pytest.raises(LookupError, match="no sweep named 'nope'"):
        find_sweep("nope", uri)
    with pytest.raises(LookupError, match="not a sweep"):
        find_sweep(runs["t1"].run_id, uri)


def test_report_files(store, tmp_path):
    _, _, ref, _, _ = store
    res = collect(ref)
    files = write_report(res, tmp_path / "out")
    import pandas as pd

    trials = pd.read_parquet(files["trials.parquet"])
    assert len(trials) == 6 and set(trials["trial_id"]) == {f"t{i}" for i in range(1, 7)}
    assert len(pd.read_csv(files["trials.csv"])) == 6 and len(pd.read_csv(files["front.csv"])) == 4
    assert files["front.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = files["front.html"].read_text()
    # self-contained: nothing is fetched (the only URLs are XML namespaces)
    assert not re.search(r"""(src|href)=["']https?:""", page) and "<script src" not in page and "<link" not in page
    svg = page[page.index("<svg") : page.index("</svg>") + 6]
    root = ET.fromstring(svg)  # well-formed inline SVG
    ns, xlink = "{http://www.w3.org/2000/svg}", "{http://www.w3.org/1999/xlink}href"

    def links(group: str) -> list[str]:
        return [a.get(xlink) for a in root.findall(f".//{ns}g[@id='{group}']//{ns}a")]

    assert sorted(links("front-0")) == ["#trial-t1", "#trial-t2", "#trial-t3", "#trial-t5"]
    assert links("dom-0") == ["#trial-t4"]  # the failed t6 is not plotted
    rows = re.findall(r'<tr id="trial-(\w+)"', page)
    assert sorted(rows) == [f"t{i}" for i in range(1, 7)]  # every link lands on a row of the trials table
    assert "beta=0.1" in page and json.loads(files["summary.json"].read_text())["front"] == 4


# --- one trial in-process (no Ray) ---------------------------------------------------------------


def test_run_trial_logs_child_and_failure(tmp_path):
    from veil.sweeps.trial import run_trial

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = sweep_from_mapping({**SPEC, "seeds": 2}, where="test.yaml")
    parent = TrackedRun.start(uri, "veil", "s2", tags={TAG_ROLE: "sweep", TAG_SWEEP: "s2"})
    out = run_trial(spec, {"method.beta": 1.0}, "a1", sweep="s2", parent_run_id=parent.run_id, tracking_uri=uri)
    assert 0.0 <= out["utility_auc"] <= 1.0 and "std__utility_auc" in out and out["mlflow_run_id"]
    with pytest.raises(ValueError, match="NaN"):
        run_trial(
            spec,
            {"method.beta": 1.0, "method.lr": 1e30, "method.encoder_hidden": [64]},
            "a2",
            sweep="s2",
            parent_run_id=parent.run_id,
            tracking_uri=uri,
        )
    kids = {r.data.tags[TAG_TRIAL]: r for r in search_child_runs(uri, parent.run_id)}
    assert kids["a1"].info.status == "FINISHED" and kids["a2"].info.status == "FAILED"
    assert "NaN" in kids["a2"].data.tags["error"]
    assert kids["a1"].data.tags["veil.seeds"] == "0,1" and "std/utility_auc" in kids["a1"].data.metrics
    seeds = search_child_runs(uri, kids["a1"].info.run_id)
    assert sorted(r.data.tags["veil.seed"] for r in seeds) == ["0", "1"]
    assert all(r.data.tags[TAG_ROLE] == "seed" and r.info.status == "FINISHED" for r in seeds)


def test_a_trial_that_finished_while_the_sweep_stopped_is_reported_not_trained_again(tmp_path):
    """SIGTERM stops a sweep while a trial's run has just FINISHED but before Tune took its result: `veil resume`
    runs that trial again (same Tune id, same values). Its recorded run is reported instead, no new run trains; an
    attempt with other values, or one that did not finish, is superseded and trained again."""
    from veil.sweeps.trial import run_population, run_trial

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = sweep_from_mapping(SPEC, where="test.yaml")
    parent = TrackedRun.start(uri, "veil", "s4", tags={TAG_ROLE: "sweep", TAG_SWEEP: "s4"})
    where = dict(sweep="s4", parent_run_id=parent.run_id, tracking_uri=uri)
    first = run_trial(spec, {"method.beta": 1.0}, "r1", **where)
    again = run_trial(spec, {"method.beta": 1.0}, "r1", **where)
    assert again["mlflow_run_id"] == first["mlflow_run_id"]
    assert {k: again[k] for k in first if k != "trial_seconds"} == {k: first[k] for k in first if k != "trial_seconds"}
    assert len(search_child_runs(uri, parent.run_id)) == 1
    other = run_trial(spec, {"method.beta": 2.0}, "r1", **where)  # not the recorded values: trained again
    kids = {r.info.run_id: r for r in search_child_runs(uri, parent.run_id)}
    assert other["mlflow_run_id"] != first["mlflow_run_id"] and len(kids) == 2
    assert kids[first["mlflow_run_id"]].data.tags[TAG_SUPERSEDED] == "true"

    # a population with its first member recorded: only the second trains
    pspec = sweep_from_mapping({**SPEC, "population": 2}, where="test.yaml")
    members = [{"method.beta": 0.5}, {"method.beta": 3.0}]
    run_trial(pspec, members[0], "p1.1", **where)
    before = {r.info.run_id for r in search_child_runs(uri, parent.run_id)}
    out = run_population(pspec, members, "p1", **where)
    after = {r.info.run_id for r in search_child_runs(uri, parent.run_id)}
    ids = [m["mlflow_run_id"] for m in out["members"]]
    assert ids[0] in before and after - before == {ids[1]}

    # one search settles a whole population: its member's interrupted attempt is superseded and KILLED, a
    # recorded member with the same values is kept, and another population's runs are left alone
    def attempt(tid: str, beta: float, status: str) -> TrackedRun:
        tags = {TAG_ROLE: "trial", TAG_SWEEP: "s4", TAG_TRIAL: tid, TAG_CONFIG: json.dumps({"method.beta": beta})}
        r = TrackedRun.start(uri, "veil", f"s4/{tid}", parent_run_id=parent.run_id, tags=tags)
        if status != "RUNNING":
            r.finish(status)
        return r

    done, cut, neighbour = (
        attempt("p2.1", 0.5, "FINISHED"),
        attempt("p2.2", 3.0, "RUNNING"),
        attempt("p20.1", 0.5, "RUNNING"),
    )
    configs = {"p2.1": json.dumps({"method.beta": 0.5}), "p2.2": json.dumps({"method.beta": 3.0})}
    kept = settle_members(uri, parent.experiment_id, "s4", "p2", configs)
    assert [None if k is None else k.info.run_id for k in kept] == [done.run_id, None]
    read = {r.info.run_id: r for r in search_child_runs(uri, parent.run_id)}
    assert read[cut.run_id].info.status == "KILLED" and read[cut.run_id].data.tags[TAG_SUPERSEDED] == "true"
    assert read[neighbour.run_id].info.status == "RUNNING" and TAG_SUPERSEDED not in read[neighbour.run_id].data.tags
    assert TAG_SUPERSEDED not in read[done.run_id].data.tags


def test_orphans_unknown_to_tune_are_superseded(tmp_path):
    """A trial created after Tune's last snapshot before a driver kill is unknown to the restored experiment:
    its child run (RUNNING or even FINISHED) must not count."""
    from veil.sweeps.results import supersede_orphans

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    parent = TrackedRun.start(uri, "veil", "s3", tags={TAG_ROLE: "sweep", TAG_SWEEP: "s3"})
    runs = {}
    for tid, status in (("k1", "FINISHED"), ("o1", "FINISHED"), ("o2", "RUNNING")):
        r = TrackedRun.start(
            uri, "veil", tid, parent_run_id=parent.run_id, tags={TAG_ROLE: "trial", TAG_SWEEP: "s3", TAG_TRIAL: tid}
        )
        if status != "RUNNING":
            r.finish(status)
        runs[tid] = r
    assert supersede_orphans(uri, parent.experiment_id, parent.run_id, {"k1"}) == 2
    c = parent.client
    assert TAG_SUPERSEDED not in c.get_run(runs["k1"].run_id).data.tags
    assert c.get_run(runs["o1"].run_id).data.tags[TAG_SUPERSEDED] == "true"
    assert c.get_run(runs["o1"].run_id).info.status == "FINISHED"
    assert c.get_run(runs["o2"].run_id).info.status == "KILLED"
    assert supersede_orphans(uri, parent.experiment_id, parent.run_id, {"k1"}) == 0  # idempotent
    res = collect(
        SweepRef("s3", parent.run_id, parent.experiment_id, uri, None, "FINISHED"),
        sweep_from_mapping(SPEC, where="test.yaml"),
    )
    assert list(res.trials["trial_id"]) == ["k1"] and res.superseded == 2


def test_a_stale_attempt_beside_a_finished_one_is_superseded_not_an_interruption(tmp_path):
    """After Tune returns, a trial left RUNNING alone was interrupted (KILLED, veil.interrupted, counted: the sweep
    is incomplete); a RUNNING run of a trial that also FINISHED is a stale attempt (a tracking server that dropped
    mid-trial left it) and is superseded without making the sweep incomplete."""
    from veil.sweeps.results import TAG_INTERRUPTED, end_interrupted

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    parent = TrackedRun.start(uri, "sweeps-stale", "s2", tags={TAG_ROLE: "sweep", TAG_SWEEP: "s2"})

    def attempt(tid: str, status: str) -> TrackedRun:
        tags = {TAG_ROLE: "trial", TAG_SWEEP: "s2", TAG_TRIAL: tid, TAG_CONFIG: json.dumps({"method.beta": 1.0})}
        r = TrackedRun.start(uri, "sweeps-stale", f"s2/{tid}", parent_run_id=parent.run_id, tags=tags)
        if status != "RUNNING":
            r.finish(status)
        return r

    stale, finished, alone = attempt("a", "RUNNING"), attempt("a", "FINISHED"), attempt("b", "RUNNING")
    assert end_interrupted(uri, parent.experiment_id, "s2") == 1
    get = TrackedRun(uri, parent.run_id).client.get_run
    s, f, b = (get(r.run_id) for r in (stale, finished, alone))
    assert s.info.status == "KILLED" and s.data.tags[TAG_SUPERSEDED] == "true" and TAG_INTERRUPTED not in s.data.tags
    assert f.info.status == "FINISHED" and TAG_SUPERSEDED not in f.data.tags
    assert b.info.status == "KILLED" and b.data.tags[TAG_INTERRUPTED] == "true" and TAG_SUPERSEDED not in b.data.tags
    assert end_interrupted(uri, parent.experiment_id, "s2") == 0  # nothing left RUNNING
