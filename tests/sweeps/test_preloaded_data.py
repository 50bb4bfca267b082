"""A sweep's driver loads each seed's dataset once and ships it to the trials through Ray's object store
(`veil.sweeps.preflight.preload`, `tune.with_parameters`). Proven here on a real local Ray with a user's CSV: a trial
that gets the driver's data needs neither the file nor the dataset cache, and reports what a trial that read the
file reports; a space that searches a dataset parameter preloads nothing (each trial builds its own data)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from veil.sweeps.preflight import preload
from veil.sweeps.sweepspec import sweep_from_mapping
from veil.sweeps.trial import run_trial
from veil.tracking.mlflow_run import resolve_tracking_uri

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def csv_spec(csv: Path) -> dict:
    return {
        "method": "gpp",
        "dataset": str(csv),
        "dataset_params": {"utility": "approved", "sensitive": "group"},
        "params": {
            "epochs": 2,
            "encoder_hidden": [16],
            "head_hidden": [8],
            "release_seed": 0,
        },  # same release noise both times
        "audit": {"epochs": 2},
        "space": {"beta": {"type": "float", "low": 0.5, "high": 2}},
        "objectives": [{"utility_auc": "max"}, {"privacy_gap": "min"}],
        "target": "none",
        "trials": 1,
        "seeds": [0, 1],
    }


def test_a_trial_given_the_drivers_data_needs_neither_the_file_nor_the_cache(ray_local, in_tmp, tmp_path):
    ray = ray_local
    csv = tmp_path / "applicants.csv"
    shutil.copy(EXAMPLES / "applicants.csv", csv)
    spec = sweep_from_mapping(csv_spec(csv))
    uri = resolve_tracking_uri()
    where = dict(sweep="s", parent_run_id=None, tracking_uri=uri)
    from_file = run_trial(spec, {"method.beta": 1.0}, "t-file", **where)

    data = preload(spec)
    assert data is not None and len(data.datasets) == 2  # one per seed: each seed draws its own split
    ref = ray.put(data)
    csv.unlink()
    empty_cache = tmp_path / "no-cache"
    empty_cache.mkdir()

    @ray.remote(num_cpus=1)
    def trial(data, cache: str) -> tuple[dict, list[bool]]:
        os.environ["VEIL_CACHE_DIR"] = cache
        shipped = next(iter(data.datasets.values()))
        own = data.load(spec.dataset, spec.run_spec({}, 0).dataset_values())
        writable = [shipped.train.x.flags.writeable, own.train.x.flags.writeable]
        return run_trial(spec, {"method.beta": 1.0}, "t-shipped", **where, data=data), writable

    shipped, writable = ray.get(trial.remote(ref, str(empty_cache)))
    # what arrives is a read-only view of the object store's memory; a run gets its own writable copy
    assert writable == [False, True]
    assert list(empty_cache.iterdir()) == []  # nothing built, nothing cached
    for metric in ("utility_auc", "privacy_gap"):
        assert shipped[metric] == pytest.approx(from_file[metric], abs=1e-6), (metric, shipped, from_file)


def test_a_searched_dataset_parameter_preloads_nothing():
    spec = sweep_from_mapping(
        {
            "method": "gpp",
            "dataset": "gaussian-correlated",
            "dataset_params": {"n": 300},
            "space": {
                "beta": {"type": "float", "low": 0.5, "high": 2},
                "dataset.rho": {"type": "float", "low": 0, "high": 0.9},
            },
            "objectives": [{"utility_auc": "max"}, {"privacy_gap": "min"}],
            "trials": 1,
        }
    )
    assert preload(spec) is None
