"""Datasets by name: each entry has a typed params class and a builder; results are cached as Parquet."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from veil.config import as_params, build
from veil.datasets.base import Dataset
from veil.datasets.cache import read_parquet, write_parquet
from veil.errors import UnknownNameError


@dataclass(frozen=True)
class DatasetEntry:
    """A registered dataset: its name, parameters class, builder and one-line description."""

    name: str
    params_cls: type
    builder: Callable[[Any], Dataset]
    description: str
    kind: str = "synthetic"
    fingerprint: Callable[[], str] | None = None
    """For data read from files: a digest of those files, made part of the cache key (None: params only)."""


DATASETS: dict[str, DatasetEntry] = {}


def register_dataset(name: str, params_cls: type, description: str, kind: str = "synthetic",
                     fingerprint: Callable[[], str] | None = None):
    """Decorator registering `builder(params) -> Dataset` under `name`."""

    def deco(fn: Callable[[Any], Dataset]) -> Callable[[Any], Dataset]:
        if name in DATASETS:
            raise ValueError(f"dataset {name!r} registered twice")
        DATASETS[name] = DatasetEntry(name, params_cls, fn, description, kind, fingerprint)
        return fn

    return deco


FILE_SUFFIXES = (".csv", ".parquet", ".pq")


def is_file_dataset(name: str) -> bool:
    """True when `name` is not a registered dataset but a path to a .csv / .parquet file of the user's."""
    return name not in DATASETS and str(name).lower().endswith(FILE_SUFFIXES)


def get_dataset_entry(name: str) -> DatasetEntry:
    """The registry entry for `name` (a registered name, or a path to a .csv/.parquet file), or an error
    listing the valid names."""
    _ensure_loaded()
    if name in DATASETS:
        return DATASETS[name]
    if is_file_dataset(name):
        from veil.datasets.files import file_entry

        return file_entry(name)
    raise UnknownNameError("dataset", name, list(DATASETS) + ["PATH.csv", "PATH.parquet"])


def dataset_params(name: str, values: Mapping[str, Any] | None = None) -> Any:
    """Validated parameters for dataset `name` (unknown keys and bad values raise)."""
    entry = get_dataset_entry(name)
    return build(entry.params_cls, values, where=f"dataset '{name}'")


def cache_dir() -> Path:
    """Where built datasets are cached: $VEIL_CACHE_DIR, else ~/.cache/veil."""
    return Path(os.environ.get("VEIL_CACHE_DIR", Path.home() / ".cache" / "veil")) / "datasets"


def load_dataset(name: str, values: Mapping[str, Any] | None = None, *, use_cache: bool = True) -> Dataset:
    """Build (or read from the Parquet cache) dataset `name` with parameters `values`.

    `name` is a registered dataset or a path to a .csv / .parquet file (see veil.datasets.files)."""
    entry = get_dataset_entry(name)
    params = build(entry.params_cls, values, where=f"dataset '{name}'")
    flat = as_params(params)
    digest = entry.fingerprint() if entry.fingerprint is not None else None
    payload: list[Any] = [name, flat] if digest is None else [name, flat, digest]
    key = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]
    stem = name if name in DATASETS else "file-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(name).stem)
    path = cache_dir() / f"{stem}-{key}.parquet"
    if use_cache and path.exists():
        return read_parquet(path)
    ds = entry.builder(params)
    ds = dataclasses.replace(ds, params=flat)
    if use_cache:
        write_parquet(ds, path)
    return ds


def _ensure_loaded() -> None:
    # Importing the modules runs their @register_dataset decorators.
    from veil.datasets import loaders, synthetic  # noqa: F401
