"""MLflow tracking: where runs go, the one `MlflowClient` factory, parent/child runs, batched logging, artifacts."""

from veil.tracking.mlflow_run import (
    DEFAULT_EXPERIMENT,
    PARENT_TAG,
    TrackedRun,
    absolute_uri,
    check_tracking,
    client,
    experiment_id,
    resolve_tracking_uri,
)

__all__ = [
    "DEFAULT_EXPERIMENT",
    "PARENT_TAG",
    "TrackedRun",
    "absolute_uri",
    "check_tracking",
    "client",
    "experiment_id",
    "resolve_tracking_uri",
]
