"""Row counts of the fetched raw files, to check a copy against the published numbers in its card
(`veil datasets verify NAME`)."""

from __future__ import annotations

from typing import Callable

from veil.datasets.card_files import load_card
from veil.datasets.fetch import require_fetched, storage_name


def _adult() -> dict[str, int]:
    from veil.datasets.tabular import read_adult

    cols = load_card("adult").column_names
    d = require_fetched("adult")
    tr, te = read_adult(d / "adult.data", cols), read_adult(d / "adult.test", cols)
    return {
        "adult.data": len(tr),
        "adult.test": len(te),
        "complete_rows": int(tr.notna().all(axis=1).sum() + te.notna().all(axis=1).sum()),
    }


def _compas() -> dict[str, int]:
    from veil.datasets.tabular import propublica_filter, read_compas

    raw = read_compas(require_fetched("compas") / "compas-scores-two-years.csv")
    f = propublica_filter(raw)
    return {
        "compas-scores-two-years.csv": len(raw),
        "propublica_filter": len(f),
        "african_american_or_caucasian": int(f["race"].isin(["African-American", "Caucasian"]).sum()),
    }


def _titanic() -> dict[str, int]:
    import pandas as pd

    return {"Titanicp.csv": len(pd.read_csv(require_fetched("titanic") / "Titanicp.csv"))}


def _mnist() -> dict[str, int]:
    from veil.datasets.images import read_mnist_json

    d = require_fetched("mnist")
    x, _ = read_mnist_json([d / f"{k}.json" for k in range(10)])
    return {"images": len(x)}


def _fashion() -> dict[str, int]:
    from veil.datasets.images import FASHION_FILES, read_idx

    d = require_fetched("fashion-mnist")
    return {f: len(read_idx(d / f)) for f in FASHION_FILES}


def _hapt() -> dict[str, int]:
    from veil.datasets.hapt import read_matrix

    d = require_fetched("hapt")
    return {f: len(read_matrix(d / f, None)) for f in ("X_train.txt", "X_test.txt")}


def _celeba() -> dict[str, int]:
    from veil.datasets.formats import read_celeba_attrs

    names, _, _ = read_celeba_attrs(require_fetched("celeba") / "list_attr_celeba.txt")
    return {"list_attr_celeba.txt": len(names)}


COUNTERS: dict[str, Callable[[], dict[str, int]]] = {
    "adult": _adult,
    "compas": _compas,
    "titanic": _titanic,
    "mnist": _mnist,
    "fashion-mnist": _fashion,
    "hapt": _hapt,
    "celeba": _celeba,
}


def raw_counts(name: str) -> dict[str, int]:
    """Rows in the fetched files of dataset `name` (or of the card it `uses`)."""
    fn = COUNTERS.get(storage_name(name))
    return fn() if fn else {}


def check_counts(name: str) -> list[tuple[str, int, int]]:
    """(what, published count from the card, count in the fetched files) for every count both know."""
    card = load_card(storage_name(name))
    got = raw_counts(name)
    return [(k, want, got[k]) for k, want in card.counts.items() if k in got]
