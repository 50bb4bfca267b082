"""Transport only: where a validated run trains. Executors by name (`inline`, `ray-train`, `federated`), the
federation's Ray runtimes (`federation`), and the one place Veil starts or joins Ray (`cluster`). Every name below is
imported from its submodule when first asked for (PEP 562): the executors load torch, and the sweep's driver, which
only starts Ray (`cluster`), must not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.lazy import lazy_exports

if TYPE_CHECKING:
    from veil.platform.cluster import THREAD_ENV, ensure_ray
    from veil.platform.executors import EXECUTORS, Job, Training, TrainOutcome, get_executor, register_executor

__all__ = [
    "EXECUTORS",
    "Job",
    "THREAD_ENV",
    "TrainOutcome",
    "Training",
    "ensure_ray",
    "get_executor",
    "register_executor",
]

_SUBMODULE = {
    "THREAD_ENV": "cluster",
    "ensure_ray": "cluster",
    "EXECUTORS": "executors",
    "Job": "executors",
    "Training": "executors",
    "TrainOutcome": "executors",
    "get_executor": "executors",
    "register_executor": "executors",
}
"""Each name of `__all__` -> the submodule that defines it."""

__getattr__ = lazy_exports(__name__, _SUBMODULE)
