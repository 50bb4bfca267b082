"""Datasets: the Dataset type, synthetic generators, loaders, partitioners and the Parquet cache.

Layout, bottom to top (a module imports only modules listed before it, and never this package):

- base: Dataset, Split, TaskSpec, make_dataset, assemble; cards: the YAML dataset cards;
  formats: raw-file readers shared by fetch and the loaders; partition: federated partitioners;
- entries: DatasetEntry, DATASETS, register_dataset; cache: cache_dir and the Parquet form;
- fetch: `veil datasets fetch` into the cache; files: the user's own .csv / .parquet files;
- synthetic, loaders: the datasets, registered on import;
- registry: get_dataset_entry, dataset_params, load_dataset (imports synthetic and loaders);
- commands: the `veil datasets` CLI.

`partition` here is the submodule (call `partition.partition(split, scheme, nodes, seed)`): re-exporting the
function under the same name would hide the module, so `import veil.datasets.partition` would give a function.
"""

from veil.datasets import partition
from veil.datasets.base import Dataset, Split, TaskSpec, make_dataset
from veil.datasets.cache import cache_dir
from veil.datasets.entries import DATASETS, DatasetEntry, register_dataset
from veil.datasets.partition import SCHEMES, parse_scheme
from veil.datasets.registry import dataset_params, get_dataset_entry, load_dataset

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
