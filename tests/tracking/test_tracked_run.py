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


def test_a_writer_sends_calls_off_the_callers_thread_in_order(in_tmp, tmp_path):
    """With a writer, a call returns before the store has it (the writer's thread is held here until the check),
    artifacts are copied first (the caller may delete its file at once), and `close` waits for every call."""
    import threading

    from veil.tracking.mlflow_run import Writer

    uri = resolve_tracking_uri()
    hold = threading.Event()
    writer = Writer()
    with TrackedRun.start(uri, "t", "async", writer=writer) as run:
        writer.submit(hold.wait)
        run.log_params({"beta": 2.0})
        for step in range(3):
            run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
        f = tmp_path / "note.txt"
        f.write_text("kept")
        run.log_file(f, "notes")
        f.unlink()
        assert client(uri).get_run(run.run_id).data.params == {}  # still queued behind the held call
        hold.set()
    writer.close()
    c = client(uri)
    got = c.get_run(run.run_id)
    assert got.info.status == "FINISHED" and got.data.params == {"beta": "2.0"}
    assert [m.value for m in c.get_metric_history(run.run_id, "loss")] == [1.0, 0.5, 1.0 / 3]
    assert Path(c.download_artifacts(run.run_id, "notes/note.txt", str(tmp_path / "dl"))).read_text() == "kept"


def test_a_failed_background_call_ends_its_run_failed_and_raises(in_tmp):
    """MLflow refuses to change a logged param: in the background the run ends FAILED with that error and the rest
    of its calls are dropped, and the error reaches the caller at `finish` (or the shared writer's `close`), as it
    would have in the foreground; a run sharing the writer is untouched."""
    from mlflow.exceptions import MlflowException

    from veil.tracking.mlflow_run import Writer

    uri = resolve_tracking_uri()
    started = TrackedRun.start(uri, "t", "own")
    bad = TrackedRun(uri, started.run_id, writer=Writer(), owns_writer=True)  # as a server's run gets its own
    with pytest.raises(MlflowException, match="beta"):
        with bad:
            bad.log_params({"beta": 1.0})
            bad.log_params({"beta": 2.0})
            bad.log_metrics({"after": 1.0})
    shared = Writer()
    a = TrackedRun.start(uri, "t", "a", writer=shared)
    b = TrackedRun.start(uri, "t", "b", writer=shared)
    a.log_params({"k": 1})
    a.log_params({"k": 2})
    b.log_params({"k": 3})
    a.finish()
    b.finish()
    with pytest.raises(MlflowException, match="k"):
        shared.close()
    c = client(uri)
    for failed in (c.get_run(bad.run_id), c.get_run(a.run_id)):
        assert failed.info.status == "FAILED" and "MlflowException" in failed.data.tags["error"]
    assert c.get_run(bad.run_id).data.metrics == {}
    ok = c.get_run(b.run_id)
    assert ok.info.status == "FINISHED" and ok.data.params == {"k": "3"}


def test_runs_write_in_the_background_to_a_server_only(in_tmp, mlflow_server):
    """A run's own writer is for a tracking server (waiting on round trips); an embedded store writes on the
    calling thread, where a second thread has nothing to overlap. Either way the run is complete once it ends."""
    for uri, background in ((mlflow_server, True), (resolve_tracking_uri(), False)):
        with TrackedRun.start(uri, "t", "where", writer="own") as run:
            assert (run.writer is not None) == background, uri
            run.log_params({"beta": 0.5})
            run.log_metrics({"utility_auc": 0.8})
        got = client(uri).get_run(run.run_id)
        assert got.info.status == "FINISHED" and got.data.params == {"beta": "0.5"}, uri
        assert got.data.metrics == {"utility_auc": 0.8}, uri


def test_json_artifacts_are_indented_when_short_and_compact_when_long() -> None:
    """A short dict is written indented for a reader; one past `PRETTY_JSON_LIMIT` (a federation's per-round,
    per-node records) compact, through json's C encoder; both read back equal."""
    import json

    from veil.tracking.mlflow_run import PRETTY_JSON_LIMIT, json_text

    short = {"utility_auc": 0.9, "nodes": [1, 2]}
    assert json_text(short) == json.dumps(short, indent=2) and json.loads(json_text(short)) == short
    rounds = [{"round": r, "bytes_up": {str(k): 1500 for k in range(10_000)}} for r in range(10)]
    text = json_text(rounds)
    assert len(text) > PRETTY_JSON_LIMIT and "\n" not in text and ", " not in text
    assert json.loads(text) == rounds
