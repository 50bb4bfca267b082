"""The registry validates parameters once (a params object from dataset_params is used as it is), and
veil.datasets has no import cycle (function-local imports included) and imports nothing above it."""

from __future__ import annotations

import numpy as np
import pytest

import veil.config
import veil.datasets
import veil.datasets.catalog as registry
from import_graph import cycles, graph
from veil.datasets import dataset_params, get_dataset_entry, load_dataset
from veil.datasets.synthetic import CorrelatedParams, MixtureParams


def _counting_build(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """Wrap veil.config.build (and any alias of it in veil.datasets.catalog) to record each call."""
    calls: list[type] = []
    real = veil.config.build

    def counting(cls, values=None, where=None):
        calls.append(cls)
        return real(cls, values, where)

    monkeypatch.setattr(veil.config, "build", counting)
    for attr, value in vars(registry).items():
        if value is real:
            monkeypatch.setattr(registry, attr, counting)
    return calls


def _same(a: veil.datasets.Dataset, b: veil.datasets.Dataset) -> None:
    assert a.name == b.name and dict(a.params) == dict(b.params) and dict(a.num_classes) == dict(b.num_classes)
    for sa, sb in ((a.train, b.train), (a.test, b.test)):
        np.testing.assert_array_equal(sa.x, sb.x)
        for k in sa.labels():
            np.testing.assert_array_equal(sa.labels()[k], sb.labels()[k])


@pytest.mark.parametrize("use_cache", [False, True])
def test_params_object_gives_the_same_data_without_building_again(use_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_CACHE_DIR", str(tmp_path))
    values = {"n": 300, "rho": 0.3, "seed": 5}
    by_mapping = load_dataset("gaussian-correlated", values, use_cache=use_cache)
    params = dataset_params("gaussian-correlated", values)
    assert isinstance(params, CorrelatedParams) and params.n == 300
    calls = _counting_build(monkeypatch)
    by_object = load_dataset("gaussian-correlated", params, use_cache=use_cache)
    assert calls == []
    _same(by_mapping, by_object)
    # the mapping form still validates (through the wrapper)
    load_dataset("gaussian-correlated", values, use_cache=use_cache)
    assert calls == [CorrelatedParams]


def test_params_object_for_a_user_file(tmp_path, monkeypatch):
    monkeypatch.setenv("VEIL_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "data.csv"
    rng = np.random.default_rng(0)
    rows = ["a,b,label,group"] + [f"{rng.normal():.4f},{rng.normal():.4f},{i % 2},{(i // 2) % 2}" for i in range(40)]
    path.write_text("\n".join(rows) + "\n")
    values = {"utility": "label", "sensitive": "group"}
    params = dataset_params(str(path), values)
    assert isinstance(params, get_dataset_entry(str(path)).params_cls)
    calls = _counting_build(monkeypatch)
    _same(load_dataset(str(path), params), load_dataset(str(path), values))
    assert len(calls) == 1  # the mapping form only


def test_params_of_another_dataset_are_refused():
    with pytest.raises(TypeError, match="CorrelatedParams"):
        load_dataset("gaussian-correlated", MixtureParams(), use_cache=False)


# ------------------------------------------------------------------------------------------ import graph

PACKAGE = "veil.datasets"
FORBIDDEN = (
    "veil.platform",
    "veil.pipeline.execute",
    "veil.sweeps",
    "veil.tracking",
    "veil.cli",
    "ray",
    "mlflow",
    "optuna",
)


def test_datasets_import_graph_has_no_cycle_and_no_upward_import():
    edges, third = graph()
    inside = {m: {t for t in ts if t.startswith(PACKAGE)} for m, ts in edges.items() if m.startswith(PACKAGE)}
    for m in inside:
        bad = sorted(
            t for t in edges[m] | third[m] if t in FORBIDDEN or t.startswith(tuple(f + "." for f in FORBIDDEN))
        )
        assert not bad, f"{m} imports {bad}"
    # submodules import concrete modules (veil.datasets.dataset), never names from the package itself
    assert not [m for m, deps in inside.items() if m != PACKAGE and PACKAGE in deps], (
        "a submodule imports veil.datasets"
    )
    assert cycles(inside) == []
