"""The dataset table: `DatasetEntry`, the `DATASETS` registry and the `register_dataset` decorator.

The bottom of veil.datasets: it imports only veil.datasets.dataset, so generators and loaders can register
themselves without importing the registry's lookup and loading code (veil.datasets.catalog)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from veil.datasets.dataset import Dataset
from veil.registry import Registry


@dataclass(frozen=True)
class DatasetEntry:
    """A registered dataset: its name, parameters class, builder and one-line description."""

    name: str
    params_cls: type
    builder: Callable[[Any], Dataset]
    description: str
    kind: str = "synthetic"
    fingerprint: Callable[[Any], str] | None = None
    """For data read from files: a digest of those files given the built params, made part of the cache key
    (None: params only)."""


DATASETS: Registry[DatasetEntry] = Registry("dataset")
"""Every registered dataset by name (filled as veil.datasets.synthetic and the real-data loaders load)."""

Builder = Callable[[Any], Dataset]


def register_dataset(
    name: str,
    params_cls: type,
    description: str,
    kind: str = "synthetic",
    fingerprint: Callable[[Any], str] | None = None,
) -> Callable[[Builder], Builder]:
    """Decorator registering `builder(params) -> Dataset` under `name`."""

    return DATASETS.decorator(name, lambda fn: DatasetEntry(name, params_cls, fn, description, kind, fingerprint))


FILE_SUFFIXES = (".csv", ".parquet", ".pq")
"""Suffixes of the user's own data files, usable wherever a dataset name is (see veil.datasets.files)."""


def is_file_dataset(name: str) -> bool:
    """True when `name` is not a registered dataset but a path to a .csv / .parquet file of the user's."""
    return name not in DATASETS and str(name).lower().endswith(FILE_SUFFIXES)
