"""Population sweeps (`population: P`): the pure logic (StudySearch on a real Optuna study, grid chunks,
member numbering), the spec's refusals, and real sweeps on a real local Ray into a real MLflow store: every
member is one trial run with a solo run's params, and a population grid sweep gives the same results as the
same grid run trial by trial."""

from __future__ import annotations

import math

import optuna
import pytest
from optuna.distributions import FloatDistribution

from veil.errors import ConfigError
from veil.sweeps.population_trials import (
    MEMBER_RESULTS,
    MEMBERS,
    NUMBERS,
    grid_chunks,
    member_numbers,
    member_values,
    product_points,
)
from veil.sweeps.results import TAG_NUMBER, TAG_POPULATION, TAG_ROLE, TAG_TRIAL, search_child_runs
from veil.sweeps.search import StudySearch
from veil.sweeps.sweepspec import sweep_from_mapping
from veil.sweeps.trial import member_id

GRID = {
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "dataset_params": {"n": 300},
    "params": {
        "epochs": 2,
        "lr": 1.0e-3,
        "encoder_hidden": [16],
        "head_hidden": [8],
        "d_z": 4,
        "release_seed": 5,  # releases drawn from a fixed stream: solo and population audits see the same z
    },
    "audit": {"epochs": 2, "hidden": [16]},
    "space": {"beta": {"type": "categorical", "values": [0.1, 1.0, 4.0]}},
    "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
    "reference": {"utility_auc": 0.5, "privacy_gap": 0.5},
    "sampler": "grid",
    "seeds": 1,
    "concurrency": 1,
    "resources": {"cpus": 1},
}


# -- pure logic ----------------------------------------------------------------------------------
def _search(population: int, total: int, independent: int | None = None, concurrency: int = 1) -> StudySearch:
    s = StudySearch(
        {"method.beta": FloatDistribution(0.1, 4.0, log=True)},
        population=population,
        total=total,
        independent=independent,
        concurrency=concurrency,
        metric=["utility_auc", "privacy_gap"],
        mode=["max", "min"],
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    return s


def test_population_search_asks_a_population_and_tells_each_member_its_own_values():
    s = _search(population=3, total=5)
    first, second = s.suggest("a"), s.suggest("b")
    assert [len(first[MEMBERS]), len(second[MEMBERS])] == [3, 2]  # 5 trials: 3 + 2, never more
    assert first[NUMBERS] == [1, 2, 3] and second[NUMBERS] == [4, 5]
    assert s.suggest("c") == "FINISHED"  # Tune's Searcher.FINISHED: every trial is asked
    s.on_trial_complete(
        "a",
        {MEMBER_RESULTS: [{"utility_auc": 0.9, "privacy_gap": 0.1}, None, {"utility_auc": 0.7, "privacy_gap": 0.05}]},
    )
    s.on_trial_complete("b", None, error=True)
    trials = s.study.trials
    states = [t.state.name for t in trials]
    assert states == ["COMPLETE", "FAIL", "COMPLETE", "FAIL", "FAIL"]
    assert trials[0].values == [0.9, 0.1] and trials[2].values == [0.7, 0.05]
    assert trials[0].params["method.beta"] == first[MEMBERS][0]["method.beta"]


def test_member_values_need_every_objective():
    assert member_values({"a": 1, "b": 2.5}, ["b", "a"]) == [2.5, 1.0]
    assert member_values({"a": 1}, ["a", "b"]) is None and member_values(None, ["a"]) is None


def test_grid_chunks_keep_every_point_once_in_order():
    points = product_points({"x": [1, 2, 3], "y": ["a", "b"]})
    assert points[:3] == [{"x": 1, "y": "a"}, {"x": 1, "y": "b"}, {"x": 2, "y": "a"}] and len(points) == 6
    chunks = grid_chunks(points, 4)
    assert [len(c) for c in chunks] == [4, 2] and [p for c in chunks for p in c] == points


def test_populations_only_while_the_sampler_draws_without_results_then_one_trial_at_a_time():
    """With 4 independent draws (TPE's start-up, say), 9 trials in populations of 3 are asked as 3 + 1, then
    one by one: the sampler gets as many adaptive rounds as 9 separate trials would give it."""
    s = _search(population=3, total=9, independent=4)
    sizes, numbers = [], []
    while (cfg := s.suggest(f"t{len(sizes)}")) != "FINISHED":
        sizes.append(len(cfg[MEMBERS]))
        numbers += cfg[NUMBERS]
        s.on_trial_complete(
            f"t{len(sizes) - 1}", {MEMBER_RESULTS: [{"utility_auc": 0.8, "privacy_gap": 0.1}] * sizes[-1]}
        )
    assert sizes == [3, 1, 1, 1, 1, 1, 1] and numbers == list(range(1, 10))
    assert [t.state.name for t in s.study.trials] == ["COMPLETE"] * 9
    assert s.plan() == (
        "populations: the first 4 trial(s) in populations of up to 3, then 5 asked one at a time as the sampler adapts"
    )
    # 2 workers: TPE's 6 start-up trials as 2 populations of 3, not one of 6 and another of 0 (a population of 7
    # would hold 6 results back while the other worker's trials, asked before them, are drawn at random too)
    two = _search(population=7, total=14, independent=6, concurrency=2)
    assert [len(two.suggest(x)[MEMBERS]) for x in "abcd"] == [3, 3, 1, 1]
    # a sampler that declares no independent draws (a plugin's default): every trial on its own
    none = _search(population=3, total=2, independent=0)
    assert [len(none.suggest(x)[MEMBERS]) for x in "ab"] == [1, 1] and none.suggest("c") == "FINISHED"
    # without populations a trial's config is the plain values
    assert set(_search(population=1, total=1).suggest("a")) == {"method.beta"}


def test_members_are_numbered_as_if_each_were_a_trial():
    """A grid's chunks of 4: Tune trial #2 holds trials #5-#8; a sampled population carries its own numbers."""
    chunk = {MEMBERS: [{}] * 4}
    assert member_numbers(chunk, 2, 4) == [5, 6, 7, 8] and member_numbers(chunk, None, 4) == [None] * 4
    assert member_numbers({MEMBERS: [{}, {}], NUMBERS: [7, 8]}, 3, 4) == [7, 8]
    assert member_id("abc_00001", 0) == "abc_00001.1"


# -- the spec ---------------------------------------------------------------------------------------
def test_spec_takes_population_and_counts_tune_trials():
    spec = sweep_from_mapping({**GRID, "population": 2})
    assert spec.population == 2 and spec.trials == 3 and spec.tune_trials() == 2  # a grid: chunks of 2
    sampled = sweep_from_mapping(
        {
            **GRID,
            "population": 2,
            "sampler": "tpe",
            "trials": 5,
            "space": {"beta": {"type": "log", "low": 0.1, "high": 4}},
        }
    )
    assert sampled.tune_trials() == 5  # at most one per trial: the searcher ends the search once all are asked
    assert spec.flat_params()["sweep.population"] == 2
    assert sweep_from_mapping(GRID).population == 1


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"population": 0}, ">= 1"),
        ({"population": "four"}, "integer"),
        ({"population": 2, "executor": "ray-train"}, "1 unless executor is inline"),
        (
            {
                "population": 2,
                "method": "autoencoder",
                "params": {"epochs": 1},
                "space": {"lr": {"type": "categorical", "values": [0.001, 0.01]}},
            },
            "populations train methods",
        ),
    ],
)
def test_spec_refuses_populations_it_cannot_run(change, says):
    with pytest.raises(ConfigError) as e:
        sweep_from_mapping({**GRID, **change})
    assert e.value.field == "population" and says in str(e.value)


# -- real sweeps ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grid_pair(ray_local, tmp_path_factory):
    """The same 3-point grid run trial by trial and as populations of 2 (a population of 2, then one of 1)."""
    from veil.sweeps.driver import run_sweep

    root = tmp_path_factory.mktemp("pop")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    solo = run_sweep(sweep_from_mapping(GRID), name="solo", tracking_uri=uri, storage_root=root / "s", quiet=True)
    pop = run_sweep(
        sweep_from_mapping({**GRID, "population": 2}),
        name="pop",
        tracking_uri=uri,
        storage_root=root / "s",
        quiet=True,
    )
    return uri, solo, pop


@pytest.mark.ray
def test_every_member_is_its_own_trial_run_with_a_solo_runs_params(grid_pair):
    from mlflow.tracking import MlflowClient

    uri, solo, pop = grid_pair
    assert not pop.incomplete and pop.results.counts["finished"] == 3
    kids = {k.data.tags[TAG_TRIAL]: k for k in search_child_runs(uri, pop.parent_run_id)}
    assert len(kids) == 3 and all(k.data.tags[TAG_ROLE] == "trial" for k in kids.values())
    populations = {k.data.tags[TAG_POPULATION] for k in kids.values()}
    assert len(populations) == 2 and all(tid.rsplit(".", 1)[0] in populations for tid in kids)
    assert sorted(int(k.data.tags[TAG_NUMBER]) for k in kids.values()) == [1, 2, 3]
    solo_kids = search_child_runs(uri, solo.parent_run_id)
    c = MlflowClient(uri)
    solo_keys = set(c.get_run(solo_kids[0].info.run_id).data.params)
    for k in kids.values():
        params = c.get_run(k.info.run_id).data.params
        assert set(params) == solo_keys  # the same params a solo run records, nothing population-specific
    sizes = sorted(k.data.tags.get("veil.population.size", "alone") for k in kids.values())
    assert sizes == ["2", "2", "alone"]  # the population of 2 trained as one model; the last trial alone


@pytest.mark.ray
def test_population_results_match_the_same_trials_run_alone(grid_pair):
    _, solo, pop = grid_pair
    cols = ["utility_auc", "privacy_gap", "adversary_auc"]
    a = solo.results.trials.set_index("beta")[cols].sort_index()
    b = pop.results.trials.set_index("beta")[cols].sort_index()
    assert list(a.index) == list(b.index) == [0.1, 1.0, 4.0]
    diff = (a - b).abs().to_numpy()
    # Same seed, data order, noise and release stream: only float order in the batched kernels differs.
    assert diff.max() <= 1e-3, f"population vs solo, per trial and metric:\n{a}\n{b}"
    assert math.isclose(solo.results.hypervolume, pop.results.hypervolume, abs_tol=1e-3)


@pytest.mark.ray
def test_a_tpe_population_sweep_asks_its_start_up_trials_as_a_population_then_one_at_a_time(ray_local, tmp_path):
    """Optuna (TPE, 3 start-up trials) through Tune: 5 trials as a population of 3, then 2 asked on their own
    once TPE models the results; each member told to the study, numbered #1-#5, and the sweep complete though
    Tune ran 3 trials of the 5 it may."""
    from veil.sweeps.driver import run_sweep

    spec = sweep_from_mapping(
        {
            **GRID,
            "space": {"beta": {"type": "log", "low": 0.05, "high": 8}},
            "sampler": "tpe",
            "sampler_options": {"n_startup_trials": 3},
            "trials": 5,
            "population": 3,
        }
    )
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    out = run_sweep(spec, name="tpe-pop", tracking_uri=uri, storage_root=tmp_path, quiet=True)
    assert not out.incomplete and out.results.counts["finished"] == 5
    study = out.searcher.study
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 5
    by_beta = out.results.trials.set_index("beta")
    for t in study.trials:  # the study holds each member's own objectives, as its MLflow run does
        row = by_beta.loc[t.params["method.beta"]]
        assert t.values == pytest.approx([row["utility_auc"], row["privacy_gap"]], abs=1e-9)
    kids = search_child_runs(uri, out.parent_run_id)
    by_number = {int(k.data.tags[TAG_NUMBER]): k.data.tags for k in kids}
    assert sorted(by_number) == [1, 2, 3, 4, 5]
    assert [by_number[n].get("veil.population.size", "alone") for n in range(1, 6)] == ["3", "3", "3", "alone", "alone"]
    assert len({by_number[n][TAG_POPULATION] for n in range(1, 6)}) == 3  # Tune ran 3 trials: 3 + 1 + 1
