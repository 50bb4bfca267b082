"""Tiny real sweeps: a real local Ray (the `ray_local` fixture), real Optuna, a real MLflow store (sqlite in
tmp). One parent run, one child run per trial, the front and hypervolume from the recorded runs (checked
against Optuna's own study), `veil report` in a new process, and a crashing trial recorded while the sweep
goes on."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweep_procs import veil_cmd
from veil.sweeps.results import TAG_PARETO, TAG_ROLE, TAG_SWEEP, TAG_TRIAL, search_child_runs
from veil.sweeps.sweepspec import sweep_from_mapping

pytestmark = pytest.mark.ray

TINY = {
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "dataset_params": {"n": 300},
    # release_seed: the audit's release noise is drawn from a fixed stream, so the figures are the same every run
    "params": {"epochs": 4, "lr": 1.0e-3, "encoder_hidden": [16], "head_hidden": [8], "d_z": 4, "release_seed": 0},
    "audit": {"epochs": 2, "hidden": [16]},
    "space": {"beta": {"type": "log", "low": 0.05, "high": 8}},
    "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "adversary_auc", "direction": "min"}],
    "reference": {"utility_auc": 0.5, "adversary_auc": 1.0},
    "sampler": "nsga2",
    "sampler_options": {"population_size": 2},
    "sampler_seed": 3,
    "trials": 4,
    "seeds": 1,
    "concurrency": 2,
    "resources": {"cpus": 1},
}


@pytest.fixture(scope="module")
def tiny_sweep(ray_local, tmp_path_factory):
    from veil.sweeps.driver import run_sweep

    root = tmp_path_factory.mktemp("tiny")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    spec = sweep_from_mapping(TINY, where=str(root / "tiny.yaml"))
    outcome = run_sweep(spec, name="tiny", tracking_uri=uri, storage_root=root / "sweeps")
    return root, uri, outcome


def test_parent_and_child_runs(tiny_sweep):
    from mlflow.tracking import MlflowClient

    root, uri, outcome = tiny_sweep
    c = MlflowClient(uri)
    parent = c.get_run(outcome.parent_run_id)
    assert parent.info.status == "FINISHED" and parent.data.tags[TAG_ROLE] == "sweep"
    assert parent.data.tags[TAG_SWEEP] == "tiny" and parent.info.run_name == "tiny"
    m = parent.data.metrics
    assert m["n_trials"] == 4 and m["n_finished"] == 4 and m["n_failed"] == 0
    assert math.isclose(m["hypervolume"], outcome.results.hypervolume) and m["hypervolume"] > 0
    assert "chull_auc" in m and parent.data.params["sweep.sampler"] == "nsga2"
    # TINY minimises the raw adversary_auc (Optuna's study is compared below): accepted, and the parent says why not
    assert "use 'privacy_gap'" in parent.data.tags["veil.warnings"]
    arts = {a.path for d in ("results", "plots", "sweep") for a in c.list_artifacts(outcome.parent_run_id, d)}
    assert {
        "results/front.csv",
        "results/trials.csv",
        "results/trials.parquet",
        "plots/front.png",
        "plots/front.html",
        "sweep/spec.yaml",
        "sweep/spec.json",
    } <= arts

    kids = search_child_runs(uri, outcome.parent_run_id)
    assert len(kids) == 4 and len({k.data.tags[TAG_TRIAL] for k in kids}) == 4
    for k in kids:
        t = k.data.tags
        assert k.info.status == "FINISHED" and t[TAG_ROLE] == "trial" and t[TAG_SWEEP] == "tiny"
        assert t["veil.seed"] == "0" and t[TAG_PARETO] in ("true", "false")
        assert 0.05 <= float(k.data.params["method.beta"]) <= 8
        assert {"utility_auc", "adversary_auc", "utility_acc", "adversary_acc"} <= set(k.data.metrics)
    front_ids = {k.data.tags[TAG_TRIAL] for k in kids if k.data.tags[TAG_PARETO] == "true"}
    assert front_ids == set(outcome.results.front["trial_id"]) and front_ids
    assert (Path(outcome.experiment_dir) / "veil-sweep.json").is_file()
    assert outcome.experiment_dir == (root / "sweeps" / "tiny").resolve()


def test_front_and_hypervolume_match_optuna(tiny_sweep):
    from optuna._hypervolume import compute_hypervolume
    from optuna.trial import TrialState

    _, _, outcome = tiny_sweep
    study = outcome.searcher.study
    assert study is not None and [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(done) == 4
    ours = outcome.results.trials[["utility_auc", "adversary_auc"]].to_numpy(dtype=float)
    theirs = np.array([t.values for t in done])
    np.testing.assert_allclose(np.sort(ours, axis=0), np.sort(theirs, axis=0), rtol=1e-12)
    front_ours = outcome.results.front[["utility_auc", "adversary_auc"]].to_numpy(dtype=float)
    front_optuna = np.array([t.values for t in study.best_trials])
    np.testing.assert_allclose(np.sort(front_ours, axis=0), np.sort(front_optuna, axis=0), rtol=1e-12)
    loss = theirs * np.array([-1.0, 1.0])  # Optuna's hypervolume works in minimisation space
    ref = np.array([-0.5, 1.0])
    inside = loss[(loss <= ref).all(axis=1)]  # a trial worse than the reference adds no volume (Optuna refuses it)
    hv_optuna = compute_hypervolume(inside, ref) if len(inside) else 0.0
    assert math.isclose(outcome.results.hypervolume, hv_optuna, rel_tol=1e-9)


def test_veil_report_in_a_new_process(tiny_sweep, tmp_path):
    root, uri, outcome = tiny_sweep
    out = tmp_path / "report"
    proc = subprocess.run(
        veil_cmd("report", "tiny", "--tracking-uri", uri, "--out", str(out), "--json"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Pareto front" in proc.stderr and "hypervolume" in proc.stderr
    for name in ("trials.parquet", "trials.csv", "front.csv", "front.png", "front.html", "summary.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0
    trials = pd.read_parquet(out / "trials.parquet")
    assert len(trials) == 4 and trials["trial_id"].is_unique and (trials["status"] == "FINISHED").all()
    assert set(trials.loc[trials["pareto"], "trial_id"]) == set(outcome.results.front["trial_id"])
    import json

    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert math.isclose(summary["hypervolume"], outcome.results.hypervolume)
    # by parent run id too, from its stored Tune directory's state file
    proc = subprocess.run(
        veil_cmd("report", str(outcome.experiment_dir), "--out", str(tmp_path / "r2")),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "r2" / "front.html").is_file()


def test_failing_trial_is_recorded_and_the_sweep_goes_on(ray_local, mlflow_server, tmp_path):
    """A grid over lr: 1e30 blows the encoder up (NaN z, the audit raises); the other trial finishes. Two seeds
    each, so the mean ± std path and the nested seed runs are covered too; tracked through a real MLflow
    server on 127.0.0.1 (as on a cluster)."""
    from mlflow.tracking import MlflowClient

    from veil.sweeps.driver import run_sweep

    uri = mlflow_server
    params = {**TINY["params"], "encoder_hidden": [64]}
    params.pop("lr")
    data = {
        **TINY,
        "params": params,
        "sampler": "grid",
        "seeds": 2,
        "space": {"lr": {"type": "categorical", "values": [1.0e-3, 1.0e30]}},
        "max_failures": 1,
    }
    data.pop("trials"), data.pop("sampler_options")
    data["experiment"] = f"failing-{tmp_path.name}"
    spec = sweep_from_mapping(data, where=str(tmp_path / "failing.yaml"))
    outcome = run_sweep(spec, name="failing", tracking_uri=uri, storage_root=tmp_path / "sweeps", quiet=True)
    res = outcome.results
    assert res.counts["trials"] == 2 and res.counts["finished"] == 1 and res.counts["failed"] == 1
    assert not outcome.stopped_for_failures
    failed = res.trials[res.trials["status"] == "FAILED"].iloc[0]
    assert float(failed["lr"]) == 1.0e30 and "NaN" in failed["error"]
    ok = res.trials[res.trials["status"] == "FINISHED"].iloc[0]
    assert ok["std/utility_auc"] >= 0 and ok["seeds"] == "0,1" and bool(ok["pareto"])
    c = MlflowClient(uri)
    assert c.get_run(outcome.parent_run_id).info.status == "FINISHED"
    run = c.get_run(failed["run_id"])
    assert run.info.status == "FAILED" and "NaN" in run.data.tags["error"]
    seeds = search_child_runs(uri, ok["run_id"])
    assert sorted(r.data.tags["veil.seed"] for r in seeds) == ["0", "1"]


def test_monitor_stops_after_max_failures():
    from veil.sweeps.monitor import SweepMonitor

    spec = sweep_from_mapping({**TINY, "max_failures": 1}, where="t.yaml")
    mon = SweepMonitor(spec, total=4, quiet=True)

    class T:
        def __init__(self, status, trial_id):
            self.status, self.trial_id, self.config, self.error_file = status, trial_id, {}, None

    trials = [T("ERROR", "a")]
    mon.on_trial_error(0, trials, trials[0])
    assert not mon.stop_all()
    trials.append(T("ERROR", "b"))
    mon.on_trial_error(0, trials, trials[1])
    assert mon.stop_all() and mon.stopped_for_failures
    unlimited = SweepMonitor(sweep_from_mapping(TINY, where="t.yaml"), total=4, quiet=True)
    unlimited.on_trial_error(0, trials, trials[1])
    assert not unlimited.stop_all()


def test_a_sweep_whose_every_trial_failed_exits_non_zero(ray_local, tmp_path, monkeypatch, capsys):
    """`veil sweep` where every trial crashes (lr 1e30: NaN release, the audit raises): exit 1 and says so, the
    failures recorded in the report; never exit 0 with an empty front."""
    import yaml

    from veil.cli import main

    monkeypatch.chdir(tmp_path)
    params = {k: v for k, v in TINY["params"].items() if k != "lr"}
    data = {k: v for k, v in TINY.items() if k not in ("trials", "sampler_options")}
    data.update(params=params, sampler="grid", space={"lr": {"type": "categorical", "values": [1.0e30, 2.0e30]}})
    (tmp_path / "doomed.yaml").write_text(yaml.safe_dump(data))
    code = main(["sweep", "doomed.yaml", "--name", "doomed", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1 and "error: no trial finished" in err
    assert "failed 2" in out or "2 failed" in out, out[-2000:]
