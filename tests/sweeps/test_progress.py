"""The sweep's progress lines (`SweepMonitor`, driven here with trial records shaped as Tune hands them, no Ray):
trials carry their number in every line, and a resumed sweep counts the trials finished before it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from veil.sweeps.monitor import SweepMonitor
from veil.sweeps.sweepspec import load_sweep
from veil.sweeps.trial import number_from_name, trial_namer, trial_number, tune_key

QUICKSTART = Path(__file__).resolve().parents[2] / "sweeps" / "quickstart.yaml"


def trial(n: int, status: str, utility: float | None = None, gap: float | None = None):
    """A Tune trial as the callbacks see it: the search counter starts its experiment tag."""
    result = {tune_key("utility_auc"): utility, tune_key("privacy_gap"): gap, "trial_seconds": 2.0}
    return SimpleNamespace(
        trial_id=f"t{n:07d}",
        status=status,
        experiment_tag=f"{n}_beta=0.{n}",
        config={"method.beta": n / 10},
        last_result=result if utility is not None else {},
    )


def test_resumed_sweep_counts_what_had_finished(capsys):
    spec = load_sweep(QUICKSTART)
    monitor = SweepMonitor(spec, total=5)  # as `veil resume` gets it back: pickled before any trial ran
    before = [trial(1, "TERMINATED", 0.97, 0.30), trial(2, "TERMINATED", 0.98, 0.35)]
    running = [trial(3, "RUNNING"), trial(4, "RUNNING")]
    monitor.on_trial_start(0, before + running, running[0])
    assert capsys.readouterr().out.splitlines()[0].endswith("] start  #3 t0000003  beta=0.3")
    running[0].status, running[0].last_result = "TERMINATED", trial(3, "", 0.96, 0.20).last_result
    monitor.on_trial_complete(1, before + running, running[0])
    lines = capsys.readouterr().out.splitlines()
    # one line a trial; the front it joined holds the trials finished before the resume too (the front itself is
    # printed once, by the report at the end, not after every trial)
    assert lines == [
        lines[0][: lines[0].index("]") + 1]
        + " done   #3 t0000003  beta=0.3  utility_auc 0.9600  privacy_gap 0.2000  (2.0 s)  * front   "
        "[3/5 finished, front 3]"
    ]
    running[1].status, running[1].last_result = "TERMINATED", trial(4, "", 0.90, 0.25).last_result
    monitor.on_trial_complete(2, before + running, running[1])
    assert (
        capsys.readouterr()
        .out.splitlines()[0]
        .endswith(
            "] done   #4 t0000004  beta=0.4  utility_auc 0.9000  privacy_gap 0.2500  (2.0 s)   [4/5 finished, front 3]"
        )
    )


def test_trial_numbers_come_from_tunes_counter():
    assert trial_number(trial(7, "PENDING"), grid=False) == 7
    grid_trial = SimpleNamespace(trial_id="abcde_00000", experiment_tag="0_beta=0.1")
    assert trial_number(grid_trial, grid=True) == 1  # Tune's grid counts from 0, Veil's numbers from 1
    name = trial_namer(grid=False)(trial(12, "PENDING"))
    assert name == "trial-12-t0000012" and number_from_name(name) == 12
    assert number_from_name("sweep_trial_3f2a") is None  # a name Veil did not make: no number
    assert trial_number(SimpleNamespace(trial_id="x", experiment_tag=""), grid=False) is None


def test_an_announced_outage_is_closed_when_the_sweep_ends_between_two_probes(capsys):
    """The server answers 503, then 200 again just after a probe: the trials end before the next one is due, and
    the end of the experiment probes at once, so the console never leaves 'not answering' unanswered."""
    import http.server
    import threading

    state = {"code": 503}

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(state["code"])
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        monitor = SweepMonitor(load_sweep(QUICKSTART), total=2, tracking_uri=uri)
        monitor.on_step_begin(0, [])
        assert f"tracking server {uri} is not answering (GET /health answered 503)" in capsys.readouterr().out
        state["code"] = 200
        monitor.on_step_begin(1, [])  # within PROBE_EVERY_S of the last probe: not probed
        assert capsys.readouterr().out == ""
        monitor.on_experiment_end([])
        assert f"tracking server {uri} answers again" in capsys.readouterr().out
        monitor.on_experiment_end([])  # closed once
        assert capsys.readouterr().out == ""
    finally:
        server.shutdown()


def test_a_terminal_sees_one_live_front_redrawn_and_erased_at_the_end(capsys, monkeypatch):
    """On a terminal the front is drawn below the progress lines and redrawn as trials finish (never one per trial
    in the scrollback); at the end it is erased for the report's front. A pipe gets the lines alone."""
    import io
    import pickle

    from rich.console import Console

    import veil.sweeps.monitor as monitor_module

    screen = io.StringIO()
    monkeypatch.setattr(monitor_module, "terminal", lambda: Console(file=screen, force_terminal=True, width=120))
    spec = load_sweep(QUICKSTART)
    piped = SweepMonitor(spec, total=3)  # pytest's stdout is not a terminal
    assert piped.tty is False
    monitor = SweepMonitor(spec, total=3)
    monitor.tty = True
    trials = [trial(1, "TERMINATED", 0.97, 0.30), trial(2, "TERMINATED", 0.80, 0.05), trial(3, "TERMINATED", 0.6, 0.2)]
    monitor.on_trial_complete(0, trials[:1], trials[0])
    assert "done   #1" in capsys.readouterr().out  # printed before the view starts
    assert monitor.live is not None and monitor.live.is_started
    restored = pickle.loads(pickle.dumps(monitor))  # Tune checkpoints it mid-sweep: the view stays here
    assert restored.live is None
    monitor.on_trial_complete(1, trials[:2], trials[1])
    monitor.on_trial_complete(2, trials, trials[2])  # dominated by trial 2: the front keeps two points
    drawn = screen.getvalue()
    assert "Pareto front: 1 point(s) after 1/3 trials" in drawn
    assert "Pareto front: 2 point(s) after 3/3 trials" in drawn
    assert drawn.count("done   #") == 2  # later lines go above the view, through the same terminal
    front = drawn[drawn.rindex("Pareto front: 2 point(s)") :]
    assert front.index("0.9700") < front.index("0.8000") and "0.6000" not in front  # best utility first
    monitor.on_experiment_end(trials)
    assert monitor.live is None
    print("after")  # stdout is the process's again
    assert capsys.readouterr().out == "after\n"
    monitor.close()  # again: nothing to do
    assert piped.live is None
