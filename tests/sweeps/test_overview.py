"""The sweep at a glance in MLflow (a real sqlite store, no Ray): the parent run's description holds the front as
a Markdown table linking each front trial's run and the front plot; the saved runs-table view selects exactly the
sweep's trial runs (its filter run through MLflow's own search) with the searched parameter and the objectives as
columns; `veil ui`'s links point at the latest sweep."""

from __future__ import annotations

import json
import re

import pytest

from veil.sweeps import overview
from veil.sweeps.overview import NOTE_TAG, description, latest_sweep_links, publish, view_key
from veil.sweeps.results import TAG_CONFIG, TAG_ROLE, TAG_SWEEP, TAG_TRIAL, SweepRef, collect
from veil.sweeps.sweepspec import sweep_from_mapping
from veil.tracking import TrackedRun, client
from veil.tracking.server import SHARED_VIEW_TAG

SPEC = {
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "space": {"beta": {"type": "log", "low": 0.05, "high": 8}},
    "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
    "trials": 4,
}
# (trial id, beta, utility_auc, privacy_gap): t3 is dominated by t2
POINTS = [("t1", 0.1, 0.70, 0.05), ("t2", 1.0, 0.95, 0.30), ("t3", 0.5, 0.90, 0.35), ("t4", 4.0, 0.97, 0.40)]


def make_sweep(uri: str, name: str) -> tuple[SweepRef, dict[str, str]]:
    spec = sweep_from_mapping(SPEC, where="test.yaml")
    parent = TrackedRun.start(uri, "overview", name, tags={TAG_ROLE: "sweep", TAG_SWEEP: name})
    parent.log_dict({"spec": dict(spec.raw), "source": "test.yaml"}, "sweep/spec.json")
    runs = {}
    for tid, beta, u, gap in POINTS:
        tags = {TAG_ROLE: "trial", TAG_SWEEP: name, TAG_TRIAL: tid, TAG_CONFIG: json.dumps({"method.beta": beta})}
        with TrackedRun.start(uri, "overview", f"{name}/{tid}", parent_run_id=parent.run_id, tags=tags) as r:
            r.log_params({"method.beta": beta})
            r.log_metrics({"utility_auc": u, "privacy_gap": gap})
        runs[tid] = r.run_id
    return SweepRef(name, parent.run_id, parent.experiment_id, uri, None, "RUNNING"), runs


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('overview') / 'mlflow.db'}"
    ref, runs = make_sweep(uri, "s1")
    results = collect(ref)
    publish(results)
    return uri, ref, runs, results


def test_parent_description_holds_the_linked_front_and_the_plot(published):
    uri, ref, runs, results = published
    note = client(uri).get_run(ref.parent_run_id).data.tags[NOTE_TAG]
    assert note == description(results)
    assert "| trial | beta | utility_auc | privacy_gap |" in note
    linked = re.findall(r"\| \[(\d+)\]\(#/experiments/(\d+)/runs/([0-9a-f]{32})\?workflowType=machine_learning\)", note)
    assert [(int(t), e) for t, e, _ in linked] == [
        (4, ref.experiment_id),
        (2, ref.experiment_id),
        (1, ref.experiment_id),
    ]
    assert [rid for *_, rid in linked] == [runs["t4"], runs["t2"], runs["t1"]]  # the front, best utility first
    assert "| 0.9700 | 0.4000 |" in note and runs["t3"] not in note
    assert f"![Pareto front](get-artifact?path=plots/front.png&run_uuid={ref.parent_run_id})" in note
    hv = f"{results.hypervolume:.4f}"
    assert f"Hypervolume {hv} [utility_auc × privacy_gap], ref = (0.5, 0.5)." in note
    view_link = f"#/experiments/{ref.experiment_id}/runs?workflowType=machine_learning&viewStateShareKey=veil-s1"
    assert f"]({view_link})" in note


def test_saved_view_selects_the_sweeps_trials_with_objective_columns(published):
    uri, ref, runs, _ = published
    c = client(uri)
    state = json.loads(c.get_experiment(ref.experiment_id).tags[SHARED_VIEW_TAG + view_key("s1")])
    assert state["selectedColumns"] == [
        "params.`method.beta`",
        "metrics.`utility_auc`",
        "metrics.`privacy_gap`",
        "tags.`veil.pareto`",
    ]
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`utility_auc`", False)
    # the UI sends this filter to MLflow's search: it must select the four trial runs and nothing else
    found = c.search_runs([ref.experiment_id], state["searchFilter"])
    assert sorted(r.info.run_id for r in found) == sorted(runs.values())
    # every column the view shows exists on every trial run
    for r in found:
        assert "method.beta" in r.data.params and {"utility_auc", "privacy_gap"} <= set(r.data.metrics)


def test_long_fronts_are_cut_to_fit_mlflows_tag_limit(published, monkeypatch):
    _, _, _, results = published
    full = description(results)
    monkeypatch.setattr(overview, "MAX_NOTE_CHARS", len(full) - 1)
    short = description(results)
    assert len(short) < len(full) and "... and 1 more front trials in `results/front.csv`." in short
    assert short.count("](#/experiments/") == 3  # two front rows and the table-view link


def test_latest_sweep_links_name_the_newest_sweep(published):
    uri, ref, _, _ = published
    newer, _ = make_sweep(uri, "s2")
    # s1's trials and its publish ran between the two parents' starts, so s2's is the later one
    started = [client(uri).get_run(r.parent_run_id).info.start_time for r in (ref, newer)]
    assert started[0] < started[1]
    (what, run_link), (_, table_link) = latest_sweep_links(uri)
    assert (
        "s2" in what
        and run_link == f"#/experiments/{newer.experiment_id}/runs/{newer.parent_run_id}?workflowType=machine_learning"
    )
    assert table_link.endswith("viewStateShareKey=veil-s2")
