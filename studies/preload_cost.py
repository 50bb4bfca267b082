"""What a sweep trial pays to get its data: `load_dataset` from the Parquet cache (what every trial did) against
`Preloaded.load` of the driver's copy fetched from Ray's object store (what trials do now), the copy of the shared
read-only arrays included. Median of 7 on one thread; Adult only where it has been fetched (`veil datasets fetch
adult`). Prints one JSON line.

    python studies/preload_cost.py
"""

from __future__ import annotations

import functools
import json
import statistics
import time
from typing import Any, Callable

import ray

from veil.datasets.catalog import Preloaded, load_dataset
from veil.errors import VeilError

CASES: list[tuple[str, dict[str, Any]]] = [
    ("gaussian-correlated", {"n": 3000, "rho": 0.5, "seed": 0}),
    ("adult", {"seed": 0}),
]


def median_ms(f: Callable[[], Any], n: int = 7) -> float:
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        walls.append(time.perf_counter() - t0)
    return round(statistics.median(walls) * 1000, 1)


def from_store(ref: Any, name: str, params: dict[str, Any]) -> Any:
    return ray.get(ref).load(name, params)


def main() -> None:
    ray.init(num_cpus=1, include_dashboard=False, configure_logging=False, log_to_driver=False)
    out: dict[str, Any] = {}
    for name, params in CASES:
        try:
            load_dataset(name, params)  # built (or fetched) and cached once, as a sweep's first trial would
        except VeilError as e:
            out[name] = f"skipped: {e}"
            continue
        ref = ray.put(Preloaded.of(name, [params]))
        out[name] = {
            "parquet_cache_ms": median_ms(functools.partial(load_dataset, name, params)),
            "object_store_ms": median_ms(functools.partial(from_store, ref, name, params)),
        }
    ray.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
