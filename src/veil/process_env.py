"""The environment variables Veil sets for its own process (and what it starts), all set by `settle` before any
other thread runs. Standard library only: every layer may call it.

Why all at once, first: glibc's setenv moves the environment block when it adds a name, and a thread that reads
the environment in native code at that moment (getenv in sqlite, torch, Ray's C++ core) reads freed memory, so
the process dies with SIGSEGV, rarely and under load. A name that exists already is replaced in place, which
is safe; and Veil starts no thread of its own while Ray starts (`ray.init` adds names of its own)."""

from __future__ import annotations

import os

DEFAULTS = {
    # MLflow's HTTP client: its 7 retries with backoff 2 stall ~249 s per call; these fail a refused connection
    # in ~3 s and a server that hangs in at most ~50 s, before the run goes to the journal.
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
    # No usage reports from a privacy tool; MLflow's telemetry also sets and unsets a variable from a thread
    # of its own at any time.
    "MLFLOW_DISABLE_TELEMETRY": "true",
    # An `mlflow server` started from Veil (`veil ui`, the tests') runs no MLflow jobs (GenAI evaluation,
    # trace rollups); with them on it starts a job runner and seven huey worker pools, about 25 s of CPU per
    # start on top of the server's own.
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    "RAY_USAGE_STATS_ENABLED": "0",
    # Submitted as a Ray job with env_vars of its own (`ray job submit --runtime-env-json ...`), ray.init's
    # runtime_env would conflict with the job's and fail; this makes Ray combine them (Veil's thread caps win).
    "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1",
    # Tune's legacy reporter honours verbose=0, so the sweep monitor's lines are the only ones.
    "RAY_AIR_NEW_OUTPUT": "0",
    # Tune snapshots a sweep every 10 s or more; trials here take seconds, so after a driver kill fewer
    # finished trials run again.
    "TUNE_GLOBAL_CHECKPOINT_S": "2",
    # Trials report to MLflow; Tune's JSON, CSV and TensorBoard files would be unread copies written on every
    # report and read back at the end of `fit` into a DataFrame nothing uses.
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
}
"""What Veil sets in its process unless the user set it (a value the user set wins)."""


def settle() -> None:
    """Every default of `DEFAULTS` the environment lacks, set now; idempotent. The CLI calls it first, on the
    main thread; the library's entry points (a sweep, a tracked run, starting Ray) call it again, in case Veil
    is used as a library."""
    for key, value in DEFAULTS.items():
        if key not in os.environ:
            os.environ[key] = value


def settled() -> dict[str, str]:
    """The values `settle` leaves in this process (the user's where they set one), for processes started elsewhere:
    Ray workers on another node inherit nothing from this one."""
    settle()
    return {key: os.environ[key] for key in DEFAULTS}
