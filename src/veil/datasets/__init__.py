"""Datasets: the Dataset type, synthetic generators, loaders, partitioners and the Parquet cache."""
from veil.datasets.base import Dataset, Split, TaskSpec, make_dataset
from veil.datasets.registry import DATASETS, dataset_params, get_dataset_entry, load_dataset, register_dataset
from veil.datasets import synthetic as _synthetic  # noqa: F401  (registers the synthetic datasets)

__all__ = ["Dataset", "Split", "TaskSpec", "make_dataset", "DATASETS", "dataset_params", "get_dataset_entry",
           "load_dataset", "register_dataset"]
