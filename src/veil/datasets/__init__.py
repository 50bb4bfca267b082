"""Datasets: the Dataset type, synthetic generators, loaders, partitioners and the Parquet cache.

Layout, bottom to top (a module imports only modules listed before it, and never this package):

- dataset: Dataset, Split, TaskSpec, make_dataset, assemble; card_files: the YAML dataset cards;
  formats: raw-file readers shared by fetch and the loaders; partition: federated partitioners;
- entries: DatasetEntry, DATASETS, register_dataset; cache: cache_dir and the Parquet form;
- fetch: `veil datasets fetch` into the cache; files and transform: the user's own .csv / .parquet files and
  how their columns become features;
- synthetic, tabular, images, hapt (helpers in loading, raw counts in counts): the datasets, registered on import;
- catalog: get_dataset_entry, dataset_params, load_dataset (imports synthetic and the loaders).

The `veil datasets` command is `veil.cli.datasets`.

`partition` here is the submodule (call `partition.partition(split, scheme, nodes, seed)`): re-exporting the
function under the same name would hide the module, so `import veil.datasets.partition` would give a function.

The names below are imported from their submodule when first asked for (PEP 562), so that importing a light
submodule (`entries`, to build the CLI's parser) does not load numpy, pandas and every loader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.lazy import lazy_exports

if TYPE_CHECKING:
    from veil.datasets import partition
    from veil.datasets.catalog import (
        DATASETS,
        DatasetEntry,
        cache_dir,
        dataset_params,
        get_dataset_entry,
        load_dataset,
        register_dataset,
    )
    from veil.datasets.dataset import Dataset, Split, TaskSpec, make_dataset
    from veil.datasets.partition import SCHEMES, parse_scheme

__all__ = [
    "DATASETS",
    "SCHEMES",
    "Dataset",
    "DatasetEntry",
    "Split",
    "TaskSpec",
    "cache_dir",
    "dataset_params",
    "get_dataset_entry",
    "load_dataset",
    "make_dataset",
    "parse_scheme",
    "partition",
    "register_dataset",
]

_DEFINED_IN = {
    "Dataset": "dataset",
    "Split": "dataset",
    "TaskSpec": "dataset",
    "make_dataset": "dataset",
    "SCHEMES": "partition",
    "parse_scheme": "partition",
}
"""Where a name of `__all__` is defined; the others come from `catalog`, which registers every built-in dataset
(the table `DATASETS` holds them all, as it did when this package imported everything)."""

__getattr__ = lazy_exports(__name__, {n: None if n == "partition" else _DEFINED_IN.get(n, "catalog") for n in __all__})
