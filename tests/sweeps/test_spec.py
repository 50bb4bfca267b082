"""Sweep spec validation: every shipped spec loads (and minimises the privacy gap), and every kind of
bad input is rejected before any trial starts, naming the file, the key and the value. No Ray here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from veil.errors import ConfigError, UnknownNameError, VeilError
from veil.sweeps.metrics import known_metrics
from veil.sweeps.samplers import SAMPLERS
from veil.sweeps.space import decode_value, encode_value
from veil.sweeps.sweepspec import grid_points, load_sweep, sweep_from_mapping

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "sweeps").glob("*.yaml"))

BASE = {
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "dataset_params": {"n": 400},
    "params": {"epochs": 2},
    "space": {"beta": {"type": "log", "low": 0.1, "high": 8}},
    "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
    "trials": 4,
}


def write(tmp_path: Path, data: dict, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def with_(**changes) -> dict:
    d = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v) for k, v in BASE.items()}
    for k, v in changes.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def rejected(tmp_path: Path, data: dict, *needles: str, err: type = VeilError) -> str:
    path = write(tmp_path, data)
    with pytest.raises(err) as info:
        load_sweep(path)
    msg = str(info.value)
    assert str(path) in msg, msg
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"
    return msg


# --- shipped specs --------------------------------------------------------------------------------


def test_shipped_specs_exist():
    names = {p.name for p in SHIPPED}
    for want in (
        "quickstart.yaml",
        "gpp_beta.yaml",
        "gpp_dz.yaml",
        "eigan_alpha.yaml",
        "ldp_frl_eps_beta.yaml",
        "deigan_k_phi_delta.yaml",
        "adjustable_ae_noise_lam.yaml",
    ):
        assert want in names
    assert not list((ROOT / "sweeps").glob("*.py")), "sweeps/ holds YAML only"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_spec_loads(path: Path):
    spec = load_sweep(path)
    assert spec.objectives and spec.space and spec.trials >= 1
    assert len(spec.reference) == len(spec.objectives)
    # leakage that cannot be gamed: every shipped spec minimises the privacy gap against its worst value
    leak = [(o, r) for o, r in zip(spec.objectives, spec.reference) if o.metric == "privacy_gap"]
    assert [(o.direction, r) for o, r in leak] == [("min", 0.5)]
    assert not any(o.metric.startswith("adversary_") for o in spec.objectives) and spec.warnings == ()


def test_quickstart_shape():
    spec = load_sweep(ROOT / "sweeps" / "quickstart.yaml")
    assert spec.method == "gpp" and spec.sampler in ("nsga2", "tpe") and spec.concurrency == 2
    assert spec.metrics == ("utility_auc", "privacy_gap") and spec.directions == ("max", "min")
    assert spec.reference == (0.5, 0.5)
    assert 12 <= spec.trials <= 16 and spec.executor == "inline"


def test_gpp_beta_is_table_iv_grid():
    spec = load_sweep(ROOT / "sweeps" / "gpp_beta.yaml")
    beta = next(sp for sp in spec.space if sp.name == "beta")
    assert spec.sampler == "grid" and list(beta.values) == [0.1, 0.5, 1, 2, 4, 8]
    assert spec.trials == spec.grid_size() == 6


# --- a valid spec and its derived pieces -----------------------------------------------------------


def test_valid_spec_routes_and_builds_run_specs(tmp_path):
    data = with_(
        space={
            "beta": {"type": "log", "low": 0.1, "high": 8},
            "k": {"type": "int", "low": 0, "high": 10},
            "d_z": {"type": "categorical", "values": [2, 4, 8]},
            "encoder_hidden": {"type": "categorical", "values": [[16], [16, 16]]},
            "dataset.rho": {"type": "float", "low": 0.1, "high": 0.9},
        },
        seeds=3,
        constraints=["utility_auc >= 0.6"],
        resources={"cpus": 0.5, "gpu": 0.25},
    )
    spec = load_sweep(write(tmp_path, data))
    assert [sp.canonical for sp in spec.space] == [
        "method.beta",
        "method.k",
        "method.d_z",
        "method.encoder_hidden",
        "dataset.rho",
    ]
    assert spec.seeds == (0, 1, 2) and spec.reference == (0.5, 0.5)
    assert str(spec.constraints[0]) == "utility_auc >= 0.6" and spec.constraints[0].holds(0.7)
    rs = spec.run_spec({"method.beta": 2.0, "dataset.rho": 0.3, "method.encoder_hidden": [16, 16]}, seed=1)
    assert rs.params["beta"] == 2.0 and rs.params["epochs"] == 2 and rs.dataset_params == {"n": 400, "rho": 0.3}
    assert rs.seed == 1 and rs.use_gpu and rs.executor == "inline"
    assert decode_value(encode_value((16, 16))) == [16, 16] and encode_value(3) == 3


def test_grid_points_enumerate_int_and_categorical(tmp_path):
    data = with_(
        sampler="grid",
        trials=None,
        space={"k": {"type": "int", "low": 0, "high": 4, "step": 2}, "d_z": {"type": "categorical", "values": [2, 4]}},
    )
    spec = load_sweep(write(tmp_path, data))
    assert spec.trials == 6 and len(grid_points(spec)) == 6
    assert grid_points(spec)[0] == {"method.k": 0, "method.d_z": 2}


def test_objective_shorthand_and_per_label_metric(tmp_path):
    spec = load_sweep(
        write(tmp_path, with_(objectives=[{"utility_auc/u": "max"}, "adversary_auc/s: min"], reference=[0.5, 1.0]))
    )
    assert spec.metrics == ("utility_auc/u", "adversary_auc/s")


def test_privacy_gap_objective_defaults_to_reference_half_and_no_warning(tmp_path):
    spec = load_sweep(write(tmp_path, BASE))
    assert spec.metrics == ("utility_auc", "privacy_gap") and spec.reference == (0.5, 0.5)
    assert spec.warnings == ()
    spec = load_sweep(write(tmp_path, with_(objectives=["utility_auc/u: max", "privacy_gap/s: min"]), "label.yaml"))
    assert spec.reference == (0.5, 0.5) and spec.warnings == ()


@pytest.mark.parametrize(
    ("metric", "better"),
    [
        ("adversary_auc", "privacy_gap"),
        ("adversary_acc", "privacy_gap"),
        ("adversary_auc/s", "privacy_gap/s"),
        ("adversary_acc/s", "privacy_gap/s"),
    ],
)
def test_minimising_a_raw_adversary_score_is_accepted_with_a_warning(tmp_path, metric, better):
    path = write(tmp_path, with_(objectives=[{"utility_auc": "max"}, {metric: "min"}]))
    spec = load_sweep(path)
    assert spec.metrics == ("utility_auc", metric)
    assert spec.reference == (0.5, 1.0)  # per-label metrics default like their prefix
    (warning,) = spec.warnings
    assert warning.startswith(f"{path}: objectives[1]: '{metric}'")
    assert f"use '{better}'" in warning and "inverted" in warning and "below chance" in warning


def test_raw_adversary_warning_covers_upper_bound_constraints_and_capacity_metrics(tmp_path):
    data = with_(constraints=["adversary_auc <= 0.7", "adversary_acc >= 0.1", "utility_auc >= 0.6"])
    (warning,) = load_sweep(write(tmp_path, data)).warnings
    assert warning.startswith(f"{tmp_path / 'spec.yaml'}: constraints[0]: 'adversary_auc'")
    objs = [{"utility_auc": "max"}, {"adversary_auc_max": "min"}]
    (warning,) = load_sweep(write(tmp_path, with_(objectives=objs, audit={"capacity": True}), "cap.yaml")).warnings
    assert "use 'privacy_gap_max'" in warning
    # a leakage figure nobody minimises (here maximised, or a utility score) draws no warning
    assert load_sweep(write(tmp_path, with_(objectives=[{"adversary_auc": "max"}]), "max.yaml")).warnings == ()


# --- rejections: file, key and value named ---------------------------------------------------------


def test_unknown_top_level_key(tmp_path):
    rejected(tmp_path, with_(trails=5), "sweep key", "'trails'", err=UnknownNameError)


def test_unknown_method(tmp_path):
    rejected(tmp_path, with_(method="gppp"), "key 'method'", "'gppp'", "gpp", err=UnknownNameError)


def test_unknown_dataset(tmp_path):
    rejected(tmp_path, with_(dataset="nope"), "key 'dataset'", "'nope'", err=UnknownNameError)


def test_unknown_search_parameter(tmp_path):
    rejected(
        tmp_path,
        with_(space={"betta": {"type": "float", "low": 0, "high": 1}}),
        "key 'space'",
        "'betta'",
        err=UnknownNameError,
    )


def test_unknown_prefixed_dataset_parameter(tmp_path):
    rejected(
        tmp_path,
        with_(space={"dataset.rhoo": {"type": "float", "low": 0, "high": 1}}),
        "space.dataset.rhoo",
        "'rhoo'",
        err=UnknownNameError,
    )


def test_unknown_fixed_parameter(tmp_path):
    rejected(tmp_path, with_(params={"epochz": 3}), "key 'params'", "'epochz'", err=UnknownNameError)


def test_unknown_audit_parameter(tmp_path):
    rejected(tmp_path, with_(audit={"epoch": 3}), "key 'audit'", "'epoch'", err=UnknownNameError)


def test_unknown_metric(tmp_path):
    rejected(
        tmp_path,
        with_(objectives=[{"metric": "utility_f1", "direction": "max"}]),
        "objectives[0].metric",
        "'utility_f1'",
        "utility_auc",
        err=UnknownNameError,
    )


def test_metric_the_method_does_not_produce(tmp_path):
    msg = rejected(
        tmp_path,
        with_(
            objectives=[
                {"metric": "utility_auc", "direction": "max"},
                {"metric": "bytes_up_total", "direction": "min"},
            ],
            reference=[0.5, 1e6],
        ),
        "objectives[1].metric",
        "'bytes_up_total'",
        "'gpp'",
        err=ConfigError,
    )
    assert "federated" in msg


def test_capacity_metric_needs_the_capacity_audit(tmp_path):
    objs = [{"metric": "utility_auc", "direction": "max"}, {"metric": "adversary_auc_max", "direction": "min"}]
    msg = rejected(tmp_path, with_(objectives=objs), "objectives[1].metric", "'adversary_auc_max'", err=ConfigError)
    assert "capacity: true" in msg
    spec = load_sweep(write(tmp_path, with_(objectives=objs, audit={"capacity": True}), "ok.yaml"))
    assert spec.metrics[1] == "adversary_auc_max" and spec.reference == (0.5, 1.0)


def test_obfuscation_metric_only_for_input_format_methods(tmp_path):
    objs = [
        {"metric": "provider_utility_acc", "direction": "max"},
        {"metric": "strong_adversary_acc", "direction": "min"},
    ]
    rejected(
        tmp_path,
        with_(objectives=objs),
        "objectives[0].metric",
        "'provider_utility_acc'",
        "input's format",
        err=ConfigError,
    )
    data = with_(method="adjustable-ae", objectives=objs, space={"noise": {"type": "float", "low": 0, "high": 100}})
    assert load_sweep(write(tmp_path, data, "ok.yaml")).reference == (0.0, 1.0)


def test_federated_keys_rejected_for_centralized_methods(tmp_path):
    rejected(tmp_path, with_(runtime="in-process"), "'runtime'", "centralized")
    rejected(tmp_path, with_(federation={"hosts": 2}), "'federation'", "centralized")


def test_federated_spec_builds_federated_runs():
    spec = load_sweep(ROOT / "sweeps" / "deigan_k_phi_delta.yaml")
    assert spec.federated and spec.metrics[2] == "bytes_up_total"
    rs = spec.run_spec({"method.K": 3, "method.phi": 0.5, "method.delta": 2}, seed=1)
    assert rs.partition == "silo:node" and rs.runtime == "in-process" and rs.params["K"] == 3


def test_bad_direction(tmp_path):
    rejected(
        tmp_path, with_(objectives=[{"metric": "utility_auc", "direction": "up"}]), "objectives[0].direction", "'up'"
    )


def test_no_objectives(tmp_path):
    rejected(tmp_path, with_(objectives=[]), "'objectives'")


@pytest.mark.parametrize(
    "body,key,value",
    [
        ({"type": "float", "low": 2.0, "high": 1.0}, "space.beta.high", "1.0"),  # inverted
        ({"type": "log", "low": 1.0, "high": 1.0}, "space.beta.high", "1.0"),  # empty
        ({"type": "log", "low": 0.0, "high": 1.0}, "space.beta.low", "0.0"),  # log of 0
        ({"type": "categorical", "values": []}, "space.beta.values", "[]"),  # empty list
        ({"type": "categorical", "values": [1, 1]}, "space.beta.values", "[1, 1]"),  # duplicates
        ({"type": "float", "low": -1.0, "high": 2.0}, "space.beta.low", "-1.0"),  # outside GPP's beta >= 0
        ({"type": "categorical", "values": [1, -2]}, "space.beta.values", "-2"),  # one bad value
        ({"type": "exp", "low": 1, "high": 2}, "space.beta.type", "'exp'"),  # unknown type
        ({"type": "float", "low": 1}, "space.beta.high", "None"),  # missing end
        ({"type": "float", "low": "a", "high": 2}, "space.beta.low", "'a'"),  # not a number
    ],
)
def test_bad_ranges(tmp_path, body, key, value):
    rejected(tmp_path, with_(space={"beta": body}), key, value)


def test_int_range_must_hold_ints(tmp_path):
    rejected(tmp_path, with_(space={"k": {"type": "int", "low": 0.5, "high": 3}}), "space.k.low", "0.5")


def test_unknown_range_key(tmp_path):
    rejected(
        tmp_path,
        with_(space={"beta": {"type": "float", "low": 0, "high": 1, "lo": 0}}),
        "space.beta",
        "'lo'",
        err=UnknownNameError,
    )


def test_empty_space(tmp_path):
    rejected(tmp_path, with_(space={}), "'space'")


def test_bad_sampler(tmp_path):
    msg = rejected(tmp_path, with_(sampler="cmaes"), "'sampler'", "'cmaes'", err=ConfigError)
    for s in SAMPLERS:
        assert s in msg


def test_bad_sampler_option(tmp_path):
    rejected(
        tmp_path,
        with_(sampler="tpe", sampler_options={"population_size": 4}),
        "'population_size'",
        err=UnknownNameError,
    )


def test_grid_needs_enumerable_params(tmp_path):
    rejected(tmp_path, with_(sampler="grid", trials=None), "space.beta.type", "'log'")


def test_grid_trials_must_match(tmp_path):
    rejected(
        tmp_path,
        with_(sampler="grid", trials=3, space={"d_z": {"type": "categorical", "values": [2, 4]}}),
        "'trials'",
        "3",
    )


@pytest.mark.parametrize(
    "changes,needles",
    [
        ({"trials": 0}, ("'trials'", "0")),
        ({"concurrency": -1}, ("'concurrency'", "-1")),
        ({"seeds": 0}, ("'seeds'", "0")),
        ({"seeds": [1, 1]}, ("'seeds'", "[1, 1]")),
        ({"resources": {"cpus": 0}}, ("resources.cpus", "0")),
        ({"resources": {"gpus": 1}}, ("'gpus'",)),
        ({"executor": "spark"}, ("'executor'", "'spark'")),
        ({"max_failures": -1}, ("'max_failures'", "-1")),
        ({"reference": [0.5]}, ("'reference'", "[0.5]")),
        ({"reference": {"utility_auc": 0.5, "leak": 1}}, ("'leak'",)),
        ({"constraints": ["utility_auc ~ 0.9"]}, ("constraints[0]", "'utility_auc ~ 0.9'")),
        ({"constraints": ["utility_f1 >= 0.9"]}, ("constraints[0]", "'utility_f1'")),
        ({"chull_origin": "one"}, ("'chull_origin'", "'one'")),
        ({"partition": "iid"}, ("'partition'", "'iid'", "centralized")),
        (
            {"method": "d-eigan", "partition": "zipf:2", "space": {"phi": {"type": "float", "low": 0.1, "high": 1}}},
            ("'partition'", "'zipf:2'"),
        ),
        (
            {
                "method": "d-eigan",
                "federation": {"hostz": 1},
                "space": {"phi": {"type": "float", "low": 0.1, "high": 1}},
            },
            ("federation", "'hostz'"),
        ),
        ({"params": {"epochs": -3}}, ("params.epochs", "-3")),
        ({"params": {"seed": 3}}, ("params.seed",)),
        ({"dataset_params": {"rho": 7}}, ("dataset_params.rho", "7")),
        ({"audit": {"epochs": 0}}, ("audit.epochs", "0")),
    ],
)
def test_other_bad_values(tmp_path, changes, needles):
    rejected(tmp_path, with_(**changes), *needles)


SETTINGS = ("sampler", "sampler_seed", "concurrency", "population", "max_failures", "retries", "executor")
SETTINGS += ("num_workers", "experiment", "chull_origin", "description", "trials")


def test_settings_left_out_take_the_field_defaults():
    """Each scalar setting's default is written once, on its SweepSpec field: the parser applies that one."""
    import dataclasses

    from veil.sweeps.spec_keys import Resources
    from veil.sweeps.sweepspec import SweepSpec

    spec = sweep_from_mapping({k: v for k, v in BASE.items() if k != "trials"})
    fields = {f.name: f for f in dataclasses.fields(SweepSpec)}
    for key in SETTINGS:
        assert getattr(spec, key) == fields[key].default, key
        assert fields[key].metadata["doc"], key
    assert spec.resources == Resources() and spec.seeds == SweepSpec.seeds


@pytest.mark.parametrize("key", [k for k in SETTINGS if k not in ("max_failures",)])
def test_a_null_setting_is_refused_by_name(tmp_path, key):
    path = write(tmp_path, {**BASE, key: None})
    with pytest.raises(ConfigError, match=f"'{key}': None"):
        load_sweep(path)


@pytest.mark.parametrize(
    "key,value,allowed",
    [
        ("trials", 0, "an integer from 1 to 10000 (Veil's limit for one sweep)"),
        ("trials", 2.5, "an integer from 1 to 10000"),
        ("concurrency", True, "an integer from 1 to 10000 (Veil's limit for one sweep)"),
        ("retries", -1, "an integer from 0 to 100 (Veil's limit for one sweep)"),
        ("executor", "spark", "inline | ray-train"),
        ("sampler", {}, "nsga2 | tpe | random | grid"),
        ("description", 3, "a string"),
        ("resources", {"cpus": float("inf")}, "a number > 0"),
        ("resources", {"gpu": -0.5}, "a number >= 0"),
    ],
)
def test_setting_errors_name_the_key_and_what_it_accepts(key, value, allowed):
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({**BASE, key: value}, "s.yaml", check_names=False)
    assert f"(allowed: {allowed}" in str(info.value) and "s.yaml" in str(info.value)


def test_reference_required_when_no_default(tmp_path):
    rejected(
        tmp_path,
        with_(
            objectives=[{"metric": "utility_auc", "direction": "max"}, {"metric": "total_seconds", "direction": "min"}]
        ),
        "'reference'",
        "total_seconds",
    )


def test_searched_and_fixed_at_once(tmp_path):
    rejected(tmp_path, with_(params={"beta": 1.0}), "space.beta")


def test_not_a_mapping(tmp_path):
    p = tmp_path / "list.yaml"
    p.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=str(p)):
        load_sweep(p)


def test_stored_spec_reads_back_without_registry():
    spec = sweep_from_mapping(with_(method="not-yet-registered"), where="stored", check_names=False)
    assert spec.method == "not-yet-registered" and spec.metrics == ("utility_auc", "privacy_gap")


def test_known_metrics_lists_per_label_variants():
    names = known_metrics()
    assert "utility_auc" in names and "adversary_auc/<label>" in names and "bytes_up_total" not in names
    assert "bytes_up_total" in known_metrics(federated=True) and "adversary_auc_max" in known_metrics(capacity=True)
    assert {"utility_logloss", "adversary_logloss", "logloss/<label>"} <= set(names)  # the audit's log-loss


def test_a_sweep_may_optimise_the_log_loss(tmp_path):
    spec = load_sweep(write(tmp_path, with_(objectives=["utility_logloss: min", "logloss/s: max"], reference=[1, 0])))
    assert spec.metrics == ("utility_logloss", "logloss/s")


def test_cli_rejects_bad_spec_before_starting_anything(tmp_path):
    path = write(tmp_path, with_(space={"beta": {"type": "float", "low": 3, "high": 1}}))
    exe = Path(sys.executable).parent / "veil"
    proc = subprocess.run([str(exe), "sweep", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and str(path) in proc.stderr and "space.beta.high" in proc.stderr
    assert not (tmp_path / ".veil").exists() and not (tmp_path / "mlflow.db").exists()


def test_veil_sweep_prints_the_raw_leakage_warning_first(tmp_path, capsys, monkeypatch):
    from veil.cli import main

    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, with_(objectives=["utility_auc: max", "adversary_auc: min"]))
    # a bad --name stops the sweep right after the warning, before Ray or MLflow start
    assert main(["sweep", str(path), "--name", "not a name"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"[veil] warning: {path}: objectives[1]: 'adversary_auc' rewards an inverted adversary")
    assert "use 'privacy_gap'" in err and "error: invalid value for '--name'" in err
    assert not (tmp_path / ".veil").exists() and not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize(
    "changes,key,allowed",
    [
        (
            {"space": {"beta": {"type": "log", "low": 0.1, "high": 1, "step": 0.1}}},
            "space.beta.step",
            "type, low, high",
        ),
        ({"space": {"beta": {"type": "categorical", "values": [1], "low": 0}}}, "space.beta.low", "type, values"),
        ({"space": {"k": {"type": "int", "low": 0, "high": 4, "step": 0.5}}}, "space.k.step", "an integer > 0"),
        ({"space": {"beta": {"type": "float", "low": "0.5", "high": 2}}}, "space.beta.low", "a number"),
        ({"space": {"beta": {"type": "log", "low": 0.5}}}, "space.beta.high", "a number (required)"),
        ({"objectives": [{"metric": "utility_auc", "direction": "up"}]}, "objectives[0].direction", "max | min"),
        ({"sampler_options": {"population_size": 1}}, "sampler_options.population_size", "an integer >= 2"),
        ({"sampler_options": {"mutation_prob": 2}}, "sampler_options.mutation_prob", "a number >= 0 and <= 1"),
        (
            {"sampler": "tpe", "sampler_options": {"multivariate": "yes"}},
            "sampler_options.multivariate",
            "true | false",
        ),
        ({"resources": {"cpus": "2"}}, "resources.cpus", "a number > 0"),
    ],
)
def test_structured_keys_are_refused_under_their_path_saying_what_is_allowed(changes, key, allowed):
    """Space dimensions, objectives, sampler options and resources are param() dataclasses built strictly: a
    YAML value of the wrong type or range is refused naming the full key and what its field allows."""
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping(with_(**changes), "s.yaml", check_names=False)
    assert f"invalid value for '{key}'" in str(info.value) and allowed in str(info.value), str(info.value)


def test_type_aliases_and_defaults_of_the_space_and_sampler_options():
    spec = sweep_from_mapping(
        with_(
            space={"beta": {"type": "loguniform", "low": 0.1, "high": 1}, "d_z": {"values": [2, 4]}},
            objectives=[{"utility_auc": "maximize"}, "privacy_gap: minimize"],
            sampler_options={"population_size": None, "crossover_prob": 1},
        ),
        "s.yaml",
    )
    assert [(sp.type, sp.low, sp.values) for sp in spec.space] == [("log", 0.1, ()), ("categorical", None, (2, 4))]
    assert spec.directions == ("max", "min") and spec.sampler_options == {"crossover_prob": 1}
