"""Fuzz tests (hypothesis): one deterministic profile (derandomize: the same examples on every run, no example
database), no per-example deadline (the first example pays for imports), and a fresh dataset cache per test
that must hold no partial file afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "veil-fuzz",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
settings.load_profile("veil-fuzz")


@pytest.fixture(autouse=True)
def fuzz_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh VEIL_CACHE_DIR; afterwards every file in it must be a complete dataset Parquet."""
    root = tmp_path / "veil-cache"
    monkeypatch.setenv("VEIL_CACHE_DIR", str(root))
    yield root
    from veil.datasets.cache import read_parquet

    for p in sorted(root.rglob("*")):
        if p.is_file():
            assert p.suffix == ".parquet", f"partial or stray file in the dataset cache: {p}"
            read_parquet(p)  # a half-written file would not read back
