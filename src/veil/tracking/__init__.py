"""MLflow tracking: parent/child runs, batched logging, artifacts."""
from veil.tracking.mlflow_run import TrackedRun, resolve_tracking_uri

__all__ = ["TrackedRun", "resolve_tracking_uri"]
