"""Every registered sampler, Optuna-style conformance (no Ray): a small two-objective ask/tell loop over a toy
function suggests only values inside the declared distributions, the study's best trials are non-dominated
(and every non-dominated trial is among them), and the same seed gives the same suggestions twice."""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import optuna
import pytest
import yaml
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from veil.errors import ConfigError, UnknownNameError
from veil.sweeps import sweepspec as spec_module
from veil.sweeps.samplers import GRID, SAMPLER_OPTIONS, SAMPLERS, get_sampler, sampler_entry, sampler_names

N_TRIALS = 12
DISTS: dict[str, BaseDistribution] = {
    "x": FloatDistribution(0.0, 1.0),
    "lr": FloatDistribution(1e-4, 1e-1, log=True),
    "q": FloatDistribution(0.0, 1.0, step=0.25),
    "depth": IntDistribution(1, 7, step=2),
    "act": CategoricalDistribution(["relu", "tanh", "gelu"]),
}


@dataclass(frozen=True)
class ToySpec:
    """The fields a sampler factory reads (veil.sweeps.samplers.SamplerSpec)."""

    sampler_options: Mapping[str, Any] = field(default_factory=dict)
    sampler_seed: int = 7
    trials: int = N_TRIALS
    population: int = 1
    concurrency: int = 1


def toy(p: Mapping[str, Any]) -> tuple[float, float]:
    """Two minimised objectives in tension along x (ZDT1-like), each worsened by the other parameters."""
    pen = (
        {"relu": 0.0, "tanh": 0.05, "gelu": 0.1}[p["act"]]
        + 0.02 * (p["depth"] - 1)
        + 0.05 * abs(math.log10(p["lr"]) + 2)
        + 0.1 * p["q"]
    )
    return p["x"] + pen, 1.0 - math.sqrt(p["x"]) + pen


def within(dist: BaseDistribution, v: Any) -> bool:
    if isinstance(dist, CategoricalDistribution):
        return v in dist.choices
    if isinstance(dist, IntDistribution):
        return isinstance(v, int) and dist.low <= v <= dist.high and (v - dist.low) % dist.step == 0
    assert isinstance(dist, FloatDistribution)
    if not (isinstance(v, float) and dist.low <= v <= dist.high):
        return False
    if dist.step is not None:
        k = (v - dist.low) / dist.step
        return abs(k - round(k)) < 1e-9
    return True


def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def optimise(name: str, seed: int) -> tuple[optuna.Study, list[dict[str, Any]]]:
    sampler = get_sampler(name)(ToySpec(sampler_seed=seed))
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    suggested = []
    for _ in range(N_TRIALS):
        trial = study.ask(DISTS)
        suggested.append(dict(trial.params))
        study.tell(trial, toy(trial.params))
    return study, suggested


@pytest.fixture(autouse=True)
def _quiet_optuna():
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    yield
    optuna.logging.set_verbosity(level)


def grid_spec(tmp_path: Path):
    data = {
        "method": "gpp",
        "dataset": "gaussian-correlated",
        "dataset_params": {"n": 400},
        "params": {"epochs": 2},
        "space": {
            "k": {"type": "int", "low": 0, "high": 4, "step": 2},
            "d_z": {"type": "categorical", "values": [2, 4]},
        },
        "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "adversary_auc", "direction": "min"}],
        "sampler": GRID,
    }
    p = tmp_path / "grid.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec_module.load_sweep(p)


@pytest.mark.parametrize("name", SAMPLERS)
def test_sampler_conformance(name, tmp_path):
    sampler = get_sampler(name)(ToySpec())
    if name == GRID:
        # Not an Optuna sampler: a grid sweep is Tune's grid_search over `grid_points` (every point exactly once,
        # whatever the concurrency), so the ask/tell part below does not apply. Its conformance instead: every
        # point lies in the declared values, each exactly once, in the same order every time.
        assert sampler is None
        spec = grid_spec(tmp_path)
        points = spec_module.grid_points(spec)
        declared = {sp.canonical: sp.grid_values() for sp in spec.space}
        assert declared == {"method.k": [0, 2, 4], "method.d_z": [2, 4]}
        assert all(p[k] in vals for p in points for k, vals in declared.items())
        assert len({tuple(sorted(p.items())) for p in points}) == len(points) == spec.trials == 6
        assert spec_module.grid_points(spec) == points
        return

    assert isinstance(sampler, optuna.samplers.BaseSampler)
    study, suggested = optimise(name, seed=7)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == N_TRIALS and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    for params in suggested:
        assert set(params) == set(DISTS)
        for k, v in params.items():
            assert within(DISTS[k], v), f"{name}: {k}={v!r} outside {DISTS[k]}"

    values = {t.number: tuple(t.values) for t in trials}
    best = {t.number for t in study.best_trials}
    assert best
    for b in best:
        assert not any(dominates(values[o], values[b]) for o in values), f"{name}: best trial {b} is dominated"
    non_dominated = {n for n in values if not any(dominates(values[o], values[n]) for o in values)}
    assert best == non_dominated

    _, again = optimise(name, seed=7)
    assert again == suggested, f"{name}: the same seed suggested different values"

    # Tune pickles its searcher, sampler included (into the experiment directory, and for `veil resume`): a study
    # pickled mid-way suggests what the original suggests next
    copy = pickle.loads(pickle.dumps(study))
    nxt = [s.ask(DISTS).params for s in (study, copy)]
    assert nxt[0] == nxt[1], f"{name}: a pickled study suggested {nxt[1]} where the original suggests {nxt[0]}"


def test_registry_vocabulary_matches_the_spec():
    """Veil's own samplers are the vocabulary a spec accepts (no plugin is installed in the test session)."""
    assert SAMPLERS == ("nsga2", "tpe", "random", "grid") == sampler_names()
    for name in SAMPLERS:
        spec = spec_module.sweep_from_mapping(
            {
                "method": "gpp",
                "dataset": "gaussian-correlated",
                "space": {"beta": {"type": "categorical", "values": [0.5, 1.0]}},
                "objectives": [{"metric": "utility_auc", "direction": "max"}],
                "sampler": name,
                **({"trials": 2} if name != "grid" else {}),
            }
        )
        assert spec.sampler == name and set(SAMPLER_OPTIONS[name]) == set(sampler_entry(name).options)
    with pytest.raises(ConfigError, match="'sampler': 'qmc' \\(allowed: nsga2 \\| tpe \\| random \\| grid\\)"):
        spec_module.sweep_from_mapping(
            {
                "method": "gpp",
                "dataset": "gaussian-correlated",
                "space": {"beta": {"type": "categorical", "values": [0.5, 1.0]}},
                "objectives": [{"metric": "utility_auc", "direction": "max"}],
                "sampler": "qmc",
            }
        )


def test_unknown_sampler_lists_the_valid_names():
    with pytest.raises(UnknownNameError) as e:
        get_sampler("cmaes", where="s.yaml")
    msg = str(e.value)
    assert "'cmaes'" in msg and msg.startswith("s.yaml: ")
    for name in SAMPLERS:
        assert name in msg


def test_factories_take_seed_and_options():
    nsga2 = get_sampler("nsga2")(ToySpec(trials=40))
    assert nsga2._population_size == 20  # default: trials // 2, within [4, 50]
    nsga2 = get_sampler("nsga2")(ToySpec(sampler_options={"population_size": 8}))
    assert nsga2._population_size == 8
    tpe = get_sampler("tpe")(ToySpec(sampler_options={"n_startup_trials": 3}))
    assert tpe._n_startup_trials == 3
    assert sampler_entry("random").options == () and sampler_entry(GRID).options == ()


def test_tpe_lies_constantly_when_trials_are_asked_before_others_report():
    """A population asks for all its members, and concurrent workers for their trials, before the others report:
    TPE then counts the trials still running as bad results (constant liar) so they spread out; one trial at a time
    needs no lie; a spec may still say otherwise."""
    liar = lambda spec: get_sampler("tpe")(spec)._constant_liar  # noqa: E731, SLF001 (Optuna keeps it private)
    assert liar(ToySpec(population=4)) is True
    assert liar(ToySpec(concurrency=2)) is True
    assert liar(ToySpec()) is False
    assert liar(ToySpec(population=4, sampler_options={"constant_liar": False})) is False
    assert liar(ToySpec(concurrency=2, sampler_options={"constant_liar": False})) is False


def _draws(name: str, spec: ToySpec, n: int, told: bool) -> list[dict[str, Any]]:
    """The first `n` suggestions of sampler `name`: all asked before any reports (told=False), or each told its
    toy objectives before the next is asked (told=True)."""
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=get_sampler(name)(spec))
    out = []
    for _ in range(n):
        trial = study.ask(DISTS)
        out.append(dict(trial.params))
        if told:
            study.tell(trial, toy(trial.params))
    return out


INDEPENDENCE_CASES = [
    *((name, {}) for name in SAMPLERS if name != GRID),
    ("tpe", {"n_startup_trials": 4}),
    ("nsga2", {"population_size": 6}),
]


@pytest.mark.parametrize(("name", "options"), INDEPENDENCE_CASES)
def test_independent_trials_are_drawn_without_looking_at_results(name, options):
    """What a population sweep relies on (`SamplerEntry.independent`): the sampler's first `independent` trials
    are the same whether each was told its result before the next was asked or all were asked at once, so
    asking them as one population costs the sampler nothing. The count is not too small either: where the
    sampler adapts (TPE, NSGA-II), the trials after it differ once results are told."""
    spec = ToySpec(sampler_options=options, trials=N_TRIALS + 8)
    n = sampler_entry(name).independent(spec)
    expected = {"tpe": options.get("n_startup_trials", 10), "nsga2": options.get("population_size", 10)}
    assert n == expected.get(name, spec.trials)
    upto = min(n, spec.trials)
    assert _draws(name, spec, upto, told=False) == _draws(name, spec, upto, told=True)
    if name in ("tpe", "nsga2"):
        extra = n + 6
        assert _draws(name, spec, extra, told=False)[n:] != _draws(name, spec, extra, told=True)[n:]
