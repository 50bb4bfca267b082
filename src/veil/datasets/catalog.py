"""Datasets by name: look up an entry, validate its parameters, build it (results cached as Parquet).

The top of veil.datasets: it imports the generators (veil.datasets.synthetic) and the real-data loaders
(veil.datasets.tabular, .images, .hapt) so that every dataset is registered once this module is loaded. The table itself
(`DatasetEntry`, `DATASETS`, `register_dataset`) lives in veil.datasets.entries and `cache_dir` in
veil.datasets.cache; both are re-exported here for existing callers."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from veil import config
from veil.datasets import hapt, images, synthetic, tabular  # noqa: F401 (they register the datasets on import)
from veil.datasets.cache import cache_dir, read_parquet, write_parquet
from veil.datasets.dataset import Dataset
from veil.datasets.entries import DATASETS, FILE_SUFFIXES, DatasetEntry, is_file_dataset, register_dataset
from veil.datasets.files import file_entry
from veil.errors import UnknownNameError
from veil.plugins import load_plugins

__all__ = [
    "DATASETS",
    "FILE_SUFFIXES",
    "DatasetEntry",
    "cache_dir",
    "dataset_params",
    "get_dataset_entry",
    "is_file_dataset",
    "load_dataset",
    "Preloaded",
    "register_dataset",
]


def get_dataset_entry(name: str) -> DatasetEntry:
    """The registry entry for `name` (a registered name, or a path to a .csv/.parquet file), or an error
    listing the valid names."""
    load_plugins()
    if name in DATASETS:
        return DATASETS[name]
    if is_file_dataset(name):
        return file_entry(name)
    raise UnknownNameError("dataset", name, list(DATASETS) + ["PATH.csv", "PATH.parquet"])


def _params(entry: DatasetEntry, name: str, values: Any) -> Any:
    """`values` as an instance of the entry's params class: an instance is used as it is (already built and
    validated, e.g. by `dataset_params`); a mapping (or None) is built and validated here."""
    if isinstance(values, entry.params_cls):
        return values
    if values is not None and not isinstance(values, Mapping):
        raise TypeError(
            f"dataset '{name}': parameters must be a mapping or a {entry.params_cls.__name__}, "
            f"got {type(values).__name__}"
        )
    return config.build(entry.params_cls, values, where=f"dataset '{name}'")


def dataset_params(name: str, values: Mapping[str, Any] | None = None) -> Any:
    """Validated parameters for dataset `name` (unknown keys and bad values raise): an instance of the
    entry's params class, which `load_dataset` accepts as it is."""
    return _params(get_dataset_entry(name), name, values)


def load_dataset(name: str, values: Mapping[str, Any] | object | None = None, *, use_cache: bool = True) -> Dataset:
    """Build (or read from the Parquet cache) dataset `name` with parameters `values`: a mapping, validated
    here, or the params object `dataset_params(name, ...)` returned, used as it is (not validated again).

    `name` is a registered dataset or a path to a .csv / .parquet file (see veil.datasets.files)."""
    entry, params, flat = _flat(name, values)
    digest = entry.fingerprint(params) if entry.fingerprint is not None else None
    payload: list[Any] = [name, flat] if digest is None else [name, flat, digest]
    key = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]
    stem = (
        name
        if name in DATASETS
        else "file-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(name).stem)
    )
    path = cache_dir() / f"{stem}-{key}.parquet"
    if use_cache and path.exists():
        return read_parquet(path)
    ds = entry.builder(params)
    ds = dataclasses.replace(ds, params=flat)
    if use_cache:
        write_parquet(ds, path)
    return ds


def _flat(name: str, values: Mapping[str, Any] | object | None) -> tuple[DatasetEntry, Any, dict[str, Any]]:
    """The entry, the validated params and their flat form (what a dataset's cache key and run params use)."""
    entry = get_dataset_entry(name)
    params = _params(entry, name, values)
    return entry, params, config.as_params(params)


def _key(name: str, flat: Mapping[str, Any]) -> str:
    return json.dumps([name, dict(flat)], sort_keys=True, default=str)


@dataclasses.dataclass(frozen=True)
class Preloaded:
    """Datasets a sweep's driver loaded once, shipped to every trial through Ray's object store
    (`tune.with_parameters`), so a trial neither builds its data nor reads the Parquet cache again. Keyed by
    name and parameters (not the file fingerprint: within one sweep the driver's copy is the data); a run whose
    dataset is not here loads its own."""

    datasets: Mapping[str, Dataset]

    @classmethod
    def of(cls, name: str, values: list[Mapping[str, Any] | object]) -> "Preloaded":
        """Load dataset `name` at each of `values` (each seed's parameters, say)."""
        out: dict[str, Dataset] = {}
        for v in values:
            key = _key(name, _flat(name, v)[2])
            if key not in out:
                out[key] = load_dataset(name, v)
        return cls(out)

    def shared(self, name: str, values: Mapping[str, Any] | object | None = None) -> Dataset | None:
        """The loaded dataset itself, not a copy (its arrays may be read-only), or None when it is not here."""
        return self.datasets.get(_key(name, _flat(name, values)[2])) if self.datasets else None

    def load(self, name: str, values: Mapping[str, Any] | object | None = None) -> Dataset:
        """`load_dataset(name, values)`, from here when loaded already: a copy, since arrays that arrive through
        the object store are read-only views of its shared memory (a memory copy, far cheaper than Parquet)."""
        ds = self.shared(name, values)
        return copy.deepcopy(ds) if ds is not None else load_dataset(name, values)


NOTHING = Preloaded({})
"""No dataset loaded already: `NOTHING.load` is `load_dataset`."""
