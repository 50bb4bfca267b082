"""Partitioners: every row assigned exactly once, same seed same partition, Dirichlet skew grows as alpha
falls, natural silos, EIGAN's per-node variance, quantity skew, and errors that name the node."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from veil.datasets import load_dataset
from veil.datasets.dataset import Split
from veil.datasets.partition import SCHEMES, describe, parse_scheme, partition, skew
from veil.errors import ConfigError, DataError, UnknownNameError


def split(n: int = 600, classes: int = 10, seed: int = 0, silos: int = 12) -> Split:
    rng = np.random.default_rng(seed)
    return Split(
        rng.normal(size=(n, 3)).astype(np.float32),
        {"y": rng.integers(0, classes, n)},
        {"s": rng.integers(0, 2, n)},
        {"site": rng.integers(0, silos, n), "node": np.arange(n) % 4},
    )


def assert_exact_cover(parts, n):
    allrows = np.concatenate(parts)
    assert len(allrows) == n and np.array_equal(np.sort(allrows), np.arange(n))
    for p in parts:
        assert np.all(np.diff(p) > 0)  # sorted, no duplicates inside a node


CASES = [
    ("iid", {}),
    ("dirichlet", {"alpha": 1.0}),
    ("dirichlet", {"alpha": 5.0, "label": "s"}),
    ("silo", {"column": "site"}),
    ("quantity", {"alpha": 2.0}),
]


@pytest.mark.parametrize("scheme, kw", CASES)
def test_every_row_exactly_once_and_seeded(scheme, kw):
    for n, nodes, seed in itertools.product((97, 600), (2, 5), (0, 1, 2)):
        sp = split(n, seed=seed)
        parts = partition(sp, scheme, nodes, seed, **kw)
        assert len(parts) == nodes
        assert_exact_cover(parts, n)
        again = partition(sp, scheme, nodes, seed, **kw)
        assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    if scheme != "silo":  # silos are fixed by the data; the others move with the seed
        sp = split(600)
        a, b = partition(sp, scheme, 5, 0, **kw), partition(sp, scheme, 5, 1, **kw)
        assert any(not np.array_equal(x, y) for x, y in zip(a, b))


def test_iid_sizes_are_balanced():
    parts = partition(split(103), "iid", 10, 0)
    assert {len(p) for p in parts} <= {10, 11}


def test_dirichlet_skew_grows_as_alpha_falls():
    sp = split(5000, classes=10)
    mean_skew = {}
    for alpha in (100.0, 1.0, 0.1):
        vals = [skew(sp, partition(sp, "dirichlet", 5, seed, alpha=alpha), "y") for seed in range(5)]
        mean_skew[alpha] = float(np.mean(vals))
    assert mean_skew[100.0] < 0.08  # near IID
    assert mean_skew[100.0] < mean_skew[1.0] < mean_skew[0.1]
    assert mean_skew[0.1] > 0.4


def test_quantity_skew_varies_sizes_not_labels():
    sp = split(5000)
    sizes = [len(p) for p in partition(sp, "quantity", 5, 0, alpha=0.3)]
    assert max(sizes) > 3 * min(sizes)
    even = [len(p) for p in partition(sp, "quantity", 5, 0, alpha=1000.0)]
    assert max(even) < 1.2 * min(even)


def test_silo_groups_whole_silos():
    sp = split(600, silos=12)
    parts = partition(sp, "silo", 5, 0, column="site")
    owner = {}
    for k, p in enumerate(parts):
        for site in np.unique(sp.extra["site"][p]):
            assert owner.setdefault(int(site), k) == k  # a silo never straddles nodes
    exact = partition(sp, "silo", 12, 0, column="site")
    assert [len(np.unique(sp.extra["site"][p])) for p in exact] == [1] * 12
    with pytest.raises(DataError, match=r"12 silos for 13 nodes; node 12 would receive no rows"):
        partition(sp, "silo", 13, 0, column="site")
    by_label = partition(sp, "silo:s", 2, 0)  # a label column works too
    assert [len(np.unique(sp.sensitive["s"][p])) for p in by_label] == [1, 1]


def test_variance_scheme_maps_gaussian_nodes(cache):
    ds = load_dataset("gaussian-nodes", {"n": 800, "nodes": 4}, use_cache=False)
    parts = partition(ds.train, "variance", 4, seed=0)
    assert_exact_cover(parts, len(ds.train))
    spread = [float(ds.train.x[p].std()) for p in parts]
    assert spread == sorted(spread)  # node k has variance 0.1 (k + 1)
    assert all(np.all(ds.train.extra["node"][p] == k) for k, p in enumerate(parts))
    with pytest.raises(DataError, match="generated for 4 nodes"):
        partition(ds.train, "variance", 5, seed=0)
    with pytest.raises(DataError, match="needs the per-row column 'node'"):
        partition(Split(np.zeros((4, 1), np.float32), {"y": np.arange(4)}, {"s": np.arange(4)}), "variance", 2, 0)


def test_empty_node_is_named():
    sp = split(40, classes=2)
    with pytest.raises(DataError, match=r"node \d+ received no rows"):
        for seed in range(50):  # a tiny alpha over 20 nodes leaves some node empty
            partition(sp, "dirichlet", 20, seed, alpha=0.01)
    with pytest.raises(DataError, match="cannot give 50 nodes"):
        partition(sp, "iid", 50, 0)


def test_parse_scheme():
    assert parse_scheme("iid") == ("iid", {})
    assert parse_scheme("dirichlet:0.3") == ("dirichlet", {"alpha": 0.3})
    assert parse_scheme("dirichlet:alpha=0.3,label=digit") == ("dirichlet", {"alpha": 0.3, "label": "digit"})
    assert parse_scheme("Silo:node") == ("silo", {"column": "node"})
    assert parse_scheme("quantity:2") == ("quantity", {"alpha": 2.0})
    assert parse_scheme("variance") == ("variance", {})
    with pytest.raises(UnknownNameError, match="valid partition schemes: dirichlet, iid"):
        parse_scheme("random")
    with pytest.raises(UnknownNameError, match="unknown partition option 'beta'"):
        parse_scheme("dirichlet:beta=2")
    with pytest.raises(ConfigError, match="alpha"):
        parse_scheme("dirichlet:lots")
    with pytest.raises(ConfigError, match="alpha"):
        partition(split(), "dirichlet", 3, 0, alpha=-1)
    sp = split()
    a = partition(sp, "dirichlet:0.3", 4, 7)
    b = partition(sp, "dirichlet", 4, 7, alpha=0.3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert set(SCHEMES) == {"iid", "dirichlet", "silo", "variance", "quantity"}


def test_describe_counts():
    sp = split(100, classes=3)
    parts = partition(sp, "iid", 4, 0)
    rows = describe(sp, parts)
    assert sum(r["rows"] for r in rows) == 100
    assert sum(sum(r["y"].values()) for r in rows) == 100
    with pytest.raises(UnknownNameError, match="unknown column 'z'"):
        partition(sp, "dirichlet", 2, 0, label="z")


def test_sensitive_labels_constant_on_every_node_are_found():
    """A partition by a sensitive label (silo:s) leaves each node one class of it; whole silos of another column
    dealt to fewer nodes, or an iid deal, do not."""
    from veil.datasets.partition import constant_on_every_node

    sp = split(600, silos=12)
    assert constant_on_every_node(sp, partition(sp, "silo", 2, 0, column="s")) == ["s"]
    assert constant_on_every_node(sp, partition(sp, "silo", 5, 0, column="site")) == []
    assert constant_on_every_node(sp, partition(sp, "iid", 5, 0)) == []
    one = Split(sp.x, sp.utility, {"s": np.zeros(600, dtype=np.int64)}, sp.extra)  # no second class anywhere
    assert constant_on_every_node(one, partition(one, "silo", 5, 0, column="site")) == []
