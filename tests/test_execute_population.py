"""`execute_population` against a real MLflow tracking store (sqlite file): three GPP runs differing in beta
train as one population, and each member's MLflow run has exactly the params, tags and artifacts of a solo
`execute` of the same run, with metrics within tolerance of it at a fixed release_seed; a run that cannot
join (another d_z) falls back to a solo run, and the note says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from veil.pipeline.execute import RunSpec, execute, execute_population
from veil.pipeline.validation import validate

BETAS = (0.1, 1.0, 3.0)
SMALL = {"epochs": 2, "d_z": 4, "encoder_hidden": [16, 16], "head_hidden": [8], "k": 2, "release_seed": 5}
#: per-epoch losses and audit figures of a member vs its solo run (measured differences: ~1e-6)
TOLERANCE = 1e-4


def spec(uri: str, experiment: str, name: str, **params: Any) -> RunSpec:
    return RunSpec(
        method="gpp",
        dataset="gaussian-correlated",
        params={**SMALL, **params},
        dataset_params={"n": 600},
        audit={"epochs": 5},
        seed=3,
        tracking_uri=uri,
        experiment=experiment,
        run_name=name,
    )


def artifacts(client: MlflowClient, run_id: str, path: str = "") -> set[str]:
    out: set[str] = set()
    for f in client.list_artifacts(run_id, path):
        out |= artifacts(client, run_id, f.path) if f.is_dir else {f.path}
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture(scope="module")
def population(store: str, tmp_path_factory: pytest.TempPathFactory):
    runs = [validate(spec(store, "population", f"beta-{b}", beta=b)) for b in BETAS]
    runs.append(validate(spec(store, "population", "wide", beta=1.0, d_z=6)))
    notes: list[str] = []
    results = execute_population(runs, storage=tmp_path_factory.mktemp("ray"), note=notes.append)
    return results, notes


@pytest.fixture(scope="module")
def solo(store: str, tmp_path_factory: pytest.TempPathFactory):
    runs = [spec(store, "solo", f"beta-{b}", beta=b) for b in BETAS] + [spec(store, "solo", "wide", beta=1.0, d_z=6)]
    return [execute(r, storage=tmp_path_factory.mktemp("ray")) for r in runs]


def test_fallback_is_noted(population):
    results, notes = population
    assert notes == ["run 3 (wide) trains alone: d_z differs (6 vs 4 in run 0 (beta-0.1))"]
    assert len(results) == 4


def test_members_log_what_a_solo_run_logs(store: str, population, solo):
    client = MlflowClient(store)
    for p, (mine, theirs) in enumerate(zip(population[0], solo)):
        a, b = client.get_run(mine.run_id), client.get_run(theirs.run_id)
        assert mine.params == theirs.params
        assert a.data.params == b.data.params
        assert a.info.run_name == b.info.run_name and a.info.status == "FINISHED"
        assert artifacts(client, mine.run_id) == artifacts(client, theirs.run_id)
        assert set(a.data.metrics) == set(b.data.metrics)
        for key, value in b.data.metrics.items():
            if not key.endswith("seconds"):
                assert a.data.metrics[key] == pytest.approx(value, abs=TOLERANCE), key
        for key in ("loss/encoder", "loss/kl"):
            steps = [(m.step, m.value) for m in client.get_metric_history(mine.run_id, key)]
            solo_steps = [(m.step, m.value) for m in client.get_metric_history(theirs.run_id, key)]
            assert [s for s, _ in steps] == [s for s, _ in solo_steps] == [0, 1]
            assert [v for _, v in steps] == pytest.approx([v for _, v in solo_steps], abs=TOLERANCE)
        tags, solo_tags = a.data.tags, b.data.tags
        population_tags = {k: v for k, v in tags.items() if k.startswith("veil.population.")}
        if p < len(BETAS):
            assert population_tags.keys() == {
                "veil.population.size",
                "veil.population.member",
                "veil.population.train_seconds",
            }
            assert tags["veil.population.size"] == "3" and tags["veil.population.member"] == str(p)
            group_seconds = float(tags["veil.population.train_seconds"])
            assert mine.metrics["train_seconds"] == pytest.approx(group_seconds / 3, abs=1e-3)
        else:
            assert population_tags == {}  # the fallback is an ordinary solo run
        veil_tags = {k: v for k, v in solo_tags.items() if k.startswith("veil.")}
        assert {k: tags[k] for k in veil_tags} == veil_tags


def test_results_keep_the_runs_order(population):
    results, _ = population
    assert [r.params["method.beta"] for r in results] == [*BETAS, 1.0]
    assert [r.params["method.d_z"] for r in results] == [4, 4, 4, 6]
    assert all(len(r.history) == 2 for r in results)


def test_method_without_population_form_runs_solo(store: str, tmp_path: Path):
    runs = [
        validate(RunSpec("pca", "gaussian-correlated", {"d_z": d}, {"n": 300}, {"epochs": 2}, tracking_uri=store))
        for d in (1, 2)
    ]
    notes: list[str] = []
    results = execute_population(runs, storage=tmp_path / "ray", note=notes.append)
    assert notes == ["method 'pca' has no population form: run 0, run 1 train one by one"]
    assert [r.params["method.d_z"] for r in results] == [1, 2]
    for r in results:
        tags = MlflowClient(store).get_run(r.run_id).data.tags
        assert not any(k.startswith("veil.population.") for k in tags)
