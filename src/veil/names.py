"""MLflow's rules for experiment and run names, checked before anything starts. Standard library only: the CLI's
parser and every spec reader (runs, sweeps, suites) use it without importing MLflow or torch."""

from __future__ import annotations

from typing import Any

from veil.errors import ConfigError

#: MLflow's own limits (mlflow.utils.validation.MAX_EXPERIMENT_NAME_LENGTH; a run name is stored in a 250-character
#: column), copied so that checking a name does not import MLflow; tests/test_refused_up_front.py::test_name_limits_are_mlflows
#: holds them equal
MLFLOW_NAME_LIMITS = {"experiment": 500, "run_name": 250}


def check_mlflow_name(key: str, value: Any, where: str | None = None) -> str:
    """`value` as an MLflow experiment or run name (`key` in MLFLOW_NAME_LIMITS), refused up front when MLflow
    would refuse it mid-run: not a string, empty or blank, longer than MLflow allows, or with control characters."""
    limit = MLFLOW_NAME_LIMITS[key]
    allowed = f"a non-empty name of at most {limit} printable characters (MLflow's limit)"
    if not isinstance(value, str) or not value.strip() or len(value) > limit or not value.isprintable():
        shown = value if not isinstance(value, str) or len(value) <= 60 else f"{value[:40]}... ({len(value)} chars)"
        raise ConfigError(key, shown, allowed, where)
    return value
