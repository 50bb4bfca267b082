"""What `veil sweep` checks before Ray starts or a parent MLflow run exists, shared by `--check` and the real start:
the `--trials` override, the sampler (that it pickles), the sweep's name and its Tune storage directory, and the data
(each seed's dataset loaded once, its labels against the objectives'). Imports neither Ray nor MLflow, so `--check`
answers without them."""

from __future__ import annotations

import dataclasses
import pickle
import time
from pathlib import Path
from typing import TYPE_CHECKING

from veil.console import warn
from veil.errors import ConfigError
from veil.paths import unmakeable_dir
from veil.sweeps.metrics import metric_label
from veil.sweeps.model import SweepSpec
from veil.sweeps.objectives import check_metric_labels
from veil.sweeps.spec_keys import SWEEP_NAME, check_runs, read_setting

if TYPE_CHECKING:
    from veil.datasets.catalog import Preloaded


def default_name(spec: SweepSpec) -> str:
    return f"{spec.stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_start(
    spec: SweepSpec, *, name: str | None, trials: int | None, storage_root: str | Path
) -> tuple[SweepSpec, str, Path]:
    """The spec with `--trials` applied, the sweep's name and its new Tune directory, checked (the spec's warnings
    printed first): what `veil sweep` checks before the tracking store and the data, with `--check` too."""
    spec = with_trials(spec, trials)
    name = name or default_name(spec)
    for warning in spec.warnings:
        warn(warning)
    check_sampler(spec)
    return spec, check_name(name), experiment_dir(storage_root, name)


def check_sampler(spec: SweepSpec) -> None:
    """Refuse a sampler that does not pickle: Tune pickles its searcher, sampler included, when the sweep starts
    and whenever it saves the search for `veil resume` (a plugin's sampler would otherwise fail inside Tune)."""
    from veil.sweeps.samplers import sampler_entry

    sampler = sampler_entry(spec.sampler, where=spec.source).factory(spec)
    try:
        pickle.dumps(sampler)
    except Exception as e:  # pickling raises TypeError, AttributeError or PicklingError, by what it meets
        raise ConfigError(
            "sampler",
            spec.sampler,
            f"a sampler that pickles (Tune saves it with the sweep); this one did not: {e}",
            spec.source,
        ) from None


def check_keys(spec: SweepSpec, tracking_uri: str | None) -> None:
    """Refuse, before any trial trains, a key directory the trials could not keep their release keys in (none is
    kept when the spec sets `release_seed`); `tracking_uri` None: the default store's."""
    if spec.params.get("release_seed") is not None:
        return
    from veil.keystore import check_key_dir
    from veil.tracking.mlflow_run import absolute_uri, resolve_tracking_uri

    check_key_dir(absolute_uri(resolve_tracking_uri(tracking_uri)))


def with_trials(spec: SweepSpec, trials: int | None) -> SweepSpec:
    """`spec` with `--trials` (None: the spec's own) in place of its trials, checked as the spec's are."""
    if trials is None:
        return spec
    if spec.sampler == "grid" and trials != spec.trials:
        raise ConfigError("--trials", trials, f"the grid's size {spec.trials} (a grid runs every point once)")
    try:
        read_setting(SweepSpec, {"trials": trials}, "trials", "--trials")
    except ConfigError as e:
        raise ConfigError("--trials", trials, e.allowed) from None
    check_runs(trials, len(spec.seeds), "--trials", trials, None)
    return dataclasses.replace(spec, trials=trials, raw={**spec.raw, "trials": trials})


def check_name(name: str) -> str:
    """`name` when it can name a sweep's directory and MLflow run."""
    if not SWEEP_NAME.match(name):
        raise ConfigError("--name", name, "letters, digits, '_', '-', '.' (it names a directory and an MLflow run)")
    return name


def experiment_dir(storage_root: str | Path, name: str) -> Path:
    """The new sweep's Tune directory `<storage_root>/<name>`: refused when it exists already, or when the storage
    is no directory and none can be made there (a file in the way, no write access)."""
    root = Path(storage_root).resolve()
    problem = unmakeable_dir(root)
    if problem:
        raise ConfigError("--storage", str(storage_root), f"a directory, or a path one can be made at: {problem}")
    exp_dir = root / name
    if exp_dir.exists():
        raise ConfigError("--name", name, f"a new sweep name: {exp_dir} exists (continue it with `veil resume {name}`)")
    return exp_dir


def preload(spec: SweepSpec) -> Preloaded | None:
    """Each seed's dataset, loaded once by the driver and shipped to every trial through Ray's object store
    (`trainable`); None when the space searches a dataset parameter (each trial then loads its own)."""
    from veil.datasets.catalog import Preloaded
    from veil.pipeline.validation import validate

    if any(sp.canonical.startswith("dataset.") for sp in spec.space):
        return None
    return Preloaded.of(spec.dataset, [validate(spec.run_spec({}, seed)).dataset_config for seed in spec.seeds])


def labels_need_data(spec: SweepSpec) -> bool:
    """Whether `check_dataset_labels` must see the data before Ray starts: per-label metrics, or a user's file."""
    from veil.datasets.catalog import is_file_dataset

    per_label = any(metric_label(m) for m in [*spec.metrics, *(c.metric for c in spec.constraints)])
    return per_label or is_file_dataset(spec.dataset)


def check_dataset_labels(spec: SweepSpec, data: Preloaded | None) -> None:
    """Per-label objectives and constraints checked against the dataset's labels, and a user's data file loaded
    (so checked) with every seed's split: refused before Ray starts or the parent run exists rather than failing
    every trial. For a spec where `labels_need_data`. `data`: what `preload` loaded, every seed's dataset (read
    here, not copied); None when the space searches a dataset parameter, and the seeds' datasets load here."""
    from veil.datasets.catalog import is_file_dataset, load_dataset
    from veil.pipeline.validation import validate

    if data is not None and data.datasets:
        ds = next(iter(data.datasets.values()))  # every seed's dataset has the same labels
    else:
        for seed in spec.seeds if is_file_dataset(spec.dataset) else spec.seeds[:1]:
            ds = load_dataset(spec.dataset, validate(spec.run_spec({}, seed)).dataset_config)
    check_metric_labels(spec, ds.utility_names, ds.sensitive_names)


def check_data(spec: SweepSpec) -> Preloaded | None:
    """The data checks of a sweep's start (`preload`, then `check_dataset_labels` where needed); what it loaded."""
    data = preload(spec)
    if labels_need_data(spec):
        check_dataset_labels(spec, data)
    return data
