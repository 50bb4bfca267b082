"""MLflow glue against a real embedded store: a TrackedRun used as a context manager ends FINISHED on success
and FAILED with the error tag (and everything logged before) on a crash; relative stores become absolute."""

from __future__ import annotations

from pathlib import Path

import pytest

from veil.tracking import TrackedRun, absolute_uri, client, resolve_tracking_uri


def test_context_manager_records_success_and_failure(in_tmp):
    uri = resolve_tracking_uri()
    assert uri == f"sqlite:///{in_tmp.resolve() / 'mlflow.db'}"
    with TrackedRun.start(uri, "t", "ok") as ok:
        ok.log_params({"beta": 2.0})
        ok.log_metrics({"utility_auc": 0.9}, step=0)
    with pytest.raises(RuntimeError):
        with TrackedRun.start(uri, "t", "crash") as bad:
            bad.log_metrics({"loss": 1.5})
            raise RuntimeError("boom")
    c = client(uri)
    good, failed = c.get_run(ok.run_id), c.get_run(bad.run_id)
    assert good.info.status == "FINISHED" and good.data.params == {"beta": "2.0"}
    assert good.data.metrics == {"utility_auc": 0.9}
    assert failed.info.status == "FAILED" and failed.data.metrics == {"loss": 1.5}
    assert "boom" in failed.data.tags["error"]


def test_relative_stores_become_absolute(in_tmp):
    assert absolute_uri("sqlite:///runs/m.db") == f"sqlite:///{Path('runs/m.db').resolve()}"
    assert absolute_uri("mlruns") == str(Path("mlruns").resolve())
    assert absolute_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
