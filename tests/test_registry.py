"""The one registry type behind every lookup by name (methods, datasets, executors, aggregation rules, MI
estimators, probe families, samplers, population forms): pure logic, no plugins installed."""

from __future__ import annotations

import pytest

from veil.audit.families import PROBE_FAMILIES
from veil.audit.mi import MI_ESTIMATORS, register_estimator
from veil.datasets.catalog import DATASETS  # the registry module imports every built-in dataset
from veil.errors import UnknownNameError
from veil.methods import METHODS  # loads veil.methods.builtin, which imports every built-in method
from veil.methods.federated.aggregation import AGGREGATION_RULES
from veil.methods.population import POPULATIONS
from veil.platform.executors import EXECUTORS
from veil.registry import Registry
from veil.sweeps.samplers import sampler_names


def test_a_name_is_taken_once_and_the_decorator_returns_what_it_registers():
    reg: Registry[str] = Registry("widget", plugins=False)

    @reg.decorator("spinner", lambda fn: fn.__name__.upper())
    def spin() -> None: ...

    assert spin.__name__ == "spin" and reg["spinner"] == "SPIN" and reg.names() == ("spinner",)
    with pytest.raises(ValueError, match="widget 'spinner' registered twice"):
        reg.add("spinner", "again")
    assert reg["spinner"] == "SPIN"  # the first registration stands


def test_an_unknown_name_is_refused_with_the_valid_ones_and_a_close_match():
    reg: Registry[int] = Registry("widget", plugins=False)
    reg.add("spinner", 1)
    reg.add("lever", 2)
    with pytest.raises(UnknownNameError) as e:
        reg.lookup("spiner", where="spec.yaml")
    assert str(e.value) == (
        "spec.yaml: unknown widget 'spiner' (did you mean 'spinner'?); valid widgets: lever, spinner"
    )


def test_every_registry_of_veil_is_one_and_names_its_kind():
    kinds = {
        "method": METHODS,
        "dataset": DATASETS,
        "executor": EXECUTORS,
        "aggregation": AGGREGATION_RULES,
        "MI estimator": MI_ESTIMATORS,
        "probe family": PROBE_FAMILIES,
        "population form": POPULATIONS,
    }
    for kind, reg in kinds.items():
        assert isinstance(reg, Registry) and reg.kind == kind and len(reg) > 0, kind
    assert {"gpp", "eigan", "d-gpp"} <= set(METHODS) and {"nsga2", "tpe", "random", "grid"} <= set(sampler_names())


def test_the_reserved_mi_name_is_refused():
    with pytest.raises(ValueError, match="'none' is reserved"):
        register_estimator("none", "no estimate")
