"""The run journal against real stores: a run whose server is a closed port on 127.0.0.1 (a real refused
connection) journals every call from the failed one on; the journal replays in order into a local sqlite store,
once, even when a replay was interrupted; runs started while the server was away come back under their parent;
a journal or a RUNNING run whose process ended without closing it ends KILLED."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from veil.tracking import TrackedRun, client
from veil.tracking.journal import LATE_TAG, Journal, apply, pending
from veil.tracking.replay import reap_stale, recover, replay, sync


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One local sqlite store for the module (MLflow creates its tables in ~4 s)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('journal-store') / 'mlflow.db'}"
    client(uri)
    return uri


@pytest.fixture
def stores(store, in_tmp, unused_port, monkeypatch):
    """(the sqlite store, the URI of a tracking server that refuses connections); journals go to ./.veil."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # refused at once: no retries to wait for
    return store, f"http://127.0.0.1:{unused_port}"


def dropped_run(store: str, down: str) -> tuple[str, TrackedRun]:
    """A run created in `store`, then logged through a server that refuses connections (as if it dropped)."""
    run_id = TrackedRun.start(store, "j", "dropped").run_id
    return run_id, TrackedRun(down, run_id)


def log_everything(run: TrackedRun) -> None:
    run.log_params({"beta": 2.0, "hidden": [32, 16]})
    for step in range(3):
        run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
    run.set_tags({"veil.device": "cpu"})
    run.log_dict({"utility_auc": 0.9}, "audit/report.json")
    run.finish()


def dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_calls_after_a_drop_are_journaled_then_replayed_in_order(stores, capsys):
    store, down = stores
    run_id, run = dropped_run(store, down)
    log_everything(run)
    err = capsys.readouterr().err
    assert err.count("stopped answering") == 1 and "veil sync" in err  # said once, with the way back
    j = Journal.find(run_id)
    assert j is not None and str(j.path) in err and j.closed()
    assert [op["op"] for op in j.ops()] == ["params", *["metrics"] * 3, "tags", "artifact", "end"]
    artifact = next(op for op in j.ops() if op["op"] == "artifact")
    assert artifact["dir"] == "audit" and json.loads((j.path / artifact["files"][0]).read_text()) == {
        "utility_auc": 0.9
    }
    assert client(store).get_run(run_id).info.status == "RUNNING"  # nothing reached the store
    ended = j.ops()[-1]["time"]

    synced = replay(j, uri=store)
    assert (synced.params, synced.metrics, synced.artifacts, synced.status) == (2, 3, 1, "FINISHED")
    c = client(store)
    got = c.get_run(run_id)
    assert got.info.status == "FINISHED" and got.data.tags[LATE_TAG] == "true"
    assert got.data.params == {"beta": "2.0", "hidden": "[32, 16]"} and got.data.tags["veil.device"] == "cpu"
    history = c.get_metric_history(run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 1.0), (1, 0.5), (2, pytest.approx(1 / 3))]
    report = Path(c.download_artifacts(run_id, "audit/report.json", str(Path.cwd())))
    assert json.loads(report.read_text()) == {"utility_auc": 0.9}
    assert got.info.end_time == ended  # the time the run ended, not the time of the replay
    assert Journal.find(run_id) is None and pending() == []


def test_an_interrupted_replay_runs_again_without_duplicates(stores):
    store, down = stores
    run_id, run = dropped_run(store, down)
    log_everything(run)
    j = Journal.find(run_id)
    assert j is not None
    c = client(store)
    for op in j.ops()[:3]:  # a replay that sent three calls, then died before recording its progress
        apply(c, run_id, op, j.path)
    j.set_progress(done=1)
    replay(j, uri=store)
    assert [m.step for m in c.get_metric_history(run_id, "loss")] == [0, 1, 2]  # each point once
    assert c.get_run(run_id).info.status == "FINISHED"


def test_runs_started_while_away_replay_under_their_parent(stores):
    store, down = stores
    parent = TrackedRun.start(store, "j", "sweep")
    trial = TrackedRun.start(down, "j", "trial 0", parent_run_id=parent.run_id, tags={"veil.sweep": "s"})
    seed = TrackedRun.start(down, "j", "trial 0 seed 1", parent_run_id=trial.run_id)  # parent exists only offline
    assert trial.run_id.startswith("offline-") and seed.run_id.startswith("offline-")
    trial.log_metrics({"utility_auc": 0.8})
    seed.log_metrics({"utility_auc": 0.7})
    seed.finish()
    trial.finish()
    rows = sync(down)
    assert len(rows) == 2 and all(r.result.startswith("pending: server unreachable") and not r.ok for r in rows)
    done = [replay(j, uri=store) for j in pending()]  # the server is "back" as the sqlite store
    c = client(store)
    new_trial, new_seed = (c.get_run(s.run_id) for s in done)
    assert new_trial.data.tags["mlflow.parentRunId"] == parent.run_id and new_trial.data.tags["veil.sweep"] == "s"
    assert new_seed.data.tags["mlflow.parentRunId"] == new_trial.info.run_id  # the offline id was mapped
    assert new_trial.data.metrics == {"utility_auc": 0.8} and new_seed.info.status == "FINISHED"
    assert c.get_experiment(new_trial.info.experiment_id).name == "j"


def test_a_run_started_while_away_finds_its_release_key_under_its_offline_id(stores, monkeypatch):
    """`veil run` keeps its key under the run's id, offline-... while the server is away; once replayed under its
    real id, `veil release RUN` finds the key through the journal's map of ids."""
    from veil.apply_encoder import run_key_file
    from veil.keystore import KEY_ENV, load_key, save_key
    from veil.randomness import ReleaseKey

    monkeypatch.delenv(KEY_ENV, raising=False)
    store, down = stores
    run = TrackedRun.start(down, "j", "offline run")
    key = ReleaseKey.new()
    offline_key = save_key(key, run.run_id, down)
    run.finish()
    (done,) = [replay(j, uri=store) for j in pending()]
    assert done.run_id != run.run_id and run_key_file(done.run_id, down) == offline_key
    assert load_key(run_key_file(done.run_id, down)) == key


def test_a_journal_left_open_by_a_dead_process_ends_killed(stores):
    store, _ = stores
    run_id = TrackedRun.start(store, "j", "orphan").run_id
    pid = dead_pid()
    j = Journal.create(run_id, {"tracking_uri": store, "host": socket.gethostname(), "pid": pid, "created": 0.0})
    j.append({"op": "metrics", "metrics": [["loss", 0.5, 1000, 0]]})
    live = Journal.create("still-writing", {"tracking_uri": store, "host": socket.gethostname(), "pid": 1})
    rows = {r.run_id: r for r in sync(store)}
    assert rows[run_id].status == "KILLED" and rows[run_id].result == "synced"
    assert rows["still-writing"].result.startswith("pending: process 1 is still writing it") and live.exists()
    got = client(store).get_run(run_id)
    assert got.info.status == "KILLED" and got.data.metrics == {"loss": 0.5}
    assert got.data.tags["error"] == (
        f"process {pid} on {socket.gethostname()} ended without closing the run (found by veil sync)"
    )


def test_a_running_run_whose_process_ended_is_marked_killed(stores):
    store, _ = stores
    stale = TrackedRun.start(store, "j", "stale")
    c = client(store)
    c.set_tag(stale.run_id, "veil.pid", str(dead_pid()))
    mine = TrackedRun.start(store, "j", "this process, still going")
    reused = TrackedRun.start(store, "j", "pid taken by another program")
    c.set_tag(reused.run_id, "veil.pid_start", "12.00")  # this pid, but a process started at another time
    assert sorted(reap_stale(store, "test")) == sorted([stale.run_id, reused.run_id])
    assert c.get_run(mine.run_id).info.status == "RUNNING"
    assert c.get_run(stale.run_id).info.status == "KILLED"
    assert "ended without closing the run (found by test)" in c.get_run(stale.run_id).data.tags["error"]
    assert reap_stale(store, "test") == []


def test_half_written_entries_are_never_read(stores):
    store, down = stores
    run_id, run = dropped_run(store, down)
    run.log_metrics({"loss": 1.0})
    j = Journal.find(run_id)
    assert j is not None
    (j.path / ".ops.jsonl.dead.tmp").write_text('{"op": "metr')  # a writer killed mid-write leaves only this
    (j.path.parent / f".new-{run_id}x-dead").mkdir()  # ... or a journal directory never renamed into place
    assert [op["op"] for op in j.ops()] == ["metrics"] and [p.run_id for p in pending()] == [run_id]


def test_the_next_run_replays_and_closes_runs_at_its_first_contact(stores, capsys):
    store, _ = stores
    run_id = TrackedRun.start(store, "j", "journaled").run_id
    j = Journal.create(run_id, {"tracking_uri": store, "host": socket.gethostname(), "pid": os.getpid()})
    j.append({"op": "metrics", "metrics": [["loss", 0.5, 1000, 0]]})
    j.append({"op": "end", "status": "FINISHED", "time": 2000})  # closed: replayed although its writer lives
    stale = TrackedRun.start(store, "j", "stale")
    client(store).set_tag(stale.run_id, "veil.pid", str(dead_pid()))
    capsys.readouterr()
    synced, reaped = recover(store, "veil run")  # what `veil run` and `veil sweep` call once the store answers
    assert [s.run_id for s in synced] == [run_id] and reaped == [stale.run_id]
    err = capsys.readouterr().err
    assert f"replayed 1 journaled run(s) to {store}" in err and "marked 1 run(s) KILLED" in err
    assert client(store).get_run(run_id).info.status == "FINISHED"
    assert "(found by veil run)" in client(store).get_run(stale.run_id).data.tags["error"]
    assert recover(store, "veil run") == ([], [])  # nothing pending: one directory listing and one search


def test_a_resumed_sweeps_parent_is_reopened_through_the_journal(stores):
    """`veil resume` reopens the interrupted parent run (RUNNING again, its stale tags removed): those writes are
    journaled like every other when the server is away, and replay to the same end."""
    store, down = stores
    run_id = TrackedRun.start(
        store, "j", "parent", tags={"veil.incomplete": "true", "error": "KeyboardInterrupt"}
    ).run_id
    TrackedRun(store, run_id).finish("KILLED")
    run = TrackedRun(down, run_id)
    run.delete_tags(["veil.incomplete", "error", "veil.stopped"])  # veil.stopped is absent: skipped at replay
    run.reopen()
    j = Journal.find(run_id)
    assert j is not None and [op["op"] for op in j.ops()] == ["untag", "reopen"]
    assert client(store).get_run(run_id).info.status == "KILLED"  # nothing reached the store yet
    assert replay(j, uri=store).status == "RUNNING"
    got = client(store).get_run(run_id)
    assert got.info.status == "RUNNING" and not {"veil.incomplete", "error"} & set(got.data.tags)


def test_a_runs_table_view_is_journaled_with_its_run(stores):
    """A sweep's saved runs-table view is a tag of the experiment, written through the parent run: with the server
    away it waits in the run's journal and reaches the experiment at replay."""
    from veil.tracking.server import SHARED_VIEW_TAG, save_runs_view

    store, down = stores
    run_id, run = dropped_run(store, down)
    save_runs_view(run, "k1", {"searchFilter": "tags.`veil.sweep` = 's'"})
    j = Journal.find(run_id)
    assert j is not None and [op["op"] for op in j.ops()] == ["experiment_tag"]
    c = client(store)
    experiment_id = c.get_run(run_id).info.experiment_id
    assert SHARED_VIEW_TAG + "k1" not in c.get_experiment(experiment_id).tags  # nothing reached the store yet
    replay(j, uri=store)
    tags = c.get_experiment(experiment_id).tags
    assert json.loads(tags[SHARED_VIEW_TAG + "k1"]) == {"searchFilter": "tags.`veil.sweep` = 's'"}
