"""Transport only: where a validated run trains. Executors by name (`inline`, `ray-train`, `federated`), the
federation's Ray runtimes (`federation`), and the one place Veil starts or joins Ray (`cluster`)."""

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
