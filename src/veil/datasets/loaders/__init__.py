"""Loaders of the real datasets described by the cards in the top-level datasets/ folder.

Each reads the raw files that `veil datasets fetch NAME` put in the cache (see veil.datasets.fetch) and
registers itself with kind="real"; a dataset that has not been fetched raises a DataError saying how."""

from veil.datasets.loaders import hapt, images, tabular  # noqa: F401  (registers the datasets)
