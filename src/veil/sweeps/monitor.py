"""Live progress of a sweep, in the driver process: `SweepMonitor`, the Tune Callback that prints one line per
trial's start, result (marked when it joins the Pareto front, with the front's size) or failure as Tune's driver
loop reports them (and says when the tracking server stops answering), and is also the Stopper that ends the
sweep once more than `max_failures` trials have failed. On a terminal the current front is also shown live below
those lines, redrawn in place as trials finish and erased at the end, where the sweep's report prints it once.
Tune pickles it with the experiment, so `veil resume` gets it back."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from ray.tune import Callback
from ray.tune.stopper import Stopper

from veil.sweeps.model import SweepSpec
from veil.sweeps.population_trials import MEMBER_RESULTS, MEMBERS, member_numbers, member_values
from veil.sweeps.results import fmt_metric
from veil.sweeps.space import format_value
from veil.sweeps.trial import member_id, trial_number, tune_key

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

# ----------------------------------------------------------------------------------------------
# live progress (driver side) + stopping after too many failures

LIVE_ROWS = 12
"""The most front points the live view shows (the report has them all)."""


def terminal() -> Console:
    """The console the live front is drawn on: the terminal."""
    from rich.console import Console

    return Console()


def live_front(
    metrics: list[str], directions: list[str], points: list[tuple[list[float], str]], finished: int, total: int
) -> Table:
    """The live view of the front: its points (objectives and setting), best first by the first objective."""
    from rich.table import Table

    best_first = sorted(points, key=lambda p: p[0][0], reverse=directions[0] == "max")
    table = Table(
        title=f"Pareto front: {len(points)} point(s) after {finished}/{total} trials", title_justify="left", box=None
    )
    for m, d in zip(metrics, directions):
        table.add_column(f"{m} ({d})", justify="right")
    table.add_column("setting")
    for vals, label in best_first[:LIVE_ROWS]:
        table.add_row(*(fmt_metric(v) for v in vals), label)
    if len(best_first) > LIVE_ROWS:
        table.add_row(*([""] * len(metrics)), f"... {len(best_first) - LIVE_ROWS} more in the report")
    return table


def _front_mask(points: list[list[float]], directions: list[str]) -> list[bool]:
    from veil.sweeps.pareto import pareto_front

    return list(pareto_front(points, directions)) if points else []


PROBE_EVERY_S = 2.0
"""How often a sweep's driver asks the tracking server's /health while trials run (to report an outage)."""


class SweepMonitor(Callback, Stopper):
    """A Tune Callback (progress lines, the front's size) that is also a Stopper (max_failures).
    Picklable: Tune stores it with the experiment, and `veil resume` gets it back: Tune unpickles several copies
    (the callback, each trial's stopper) and offers no public accessor to them, so every copy unpickled here takes
    this process's `resumed_as` settings and is listed in `unpickled`."""

    resumed_as: ClassVar[dict[str, Any]] = {}
    """Attributes a monitor unpickled in this process takes instead of its pickled ones (`veil resume`'s console)."""
    unpickled: ClassVar[list["SweepMonitor"]] = []
    """The monitors unpickled in this process since `veil resume` cleared the list."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.update(SweepMonitor.resumed_as)
        self.absorbed = False  # this process has not seen the restored experiment's trials yet
        SweepMonitor.unpickled.append(self)

    def __init__(self, spec: SweepSpec, total: int, quiet: bool = False, tracking_uri: str | None = None) -> None:
        self.tracking_uri = tracking_uri
        self.outage_since: float | None = None
        self.last_probe = 0.0
        self.metrics = list(spec.metrics)
        self.directions = list(spec.directions)
        self.keys = [(sp.canonical, sp.key) for sp in spec.space]
        self.grid = spec.sampler == "grid"
        self.population = spec.population
        self.member_failures = 0
        self.total = total
        self.max_failures = spec.max_failures
        self.quiet = quiet
        self.failed = 0
        self.done: dict[str, tuple[list[float], str]] = {}
        self.front_ids: set[str] = set()
        self.errored: dict[str, int] = {}
        """Tune trials that ended in ERROR: id -> the trials it ran (a population's members all failed)."""
        self.absorbed = False
        """Whether the trials that finished before this process started are counted (`_absorb_finished`)."""
        self.t0 = time.time()
        self.stopped_for_failures = False
        self.tty = not quiet and sys.stdout.isatty()
        """Whether the front is shown live (a terminal); a pipe or a log gets the lines alone."""
        self.live: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "live": None}  # the terminal's live view stays with the process that drew it

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)  # above the live front, when there is one (rich redirects stdout)

    def _show_front(self) -> None:
        """Redraw the live front below the progress lines (a terminal only)."""
        if not getattr(self, "tty", False):
            return
        view = live_front(
            self.metrics, self.directions, [self.done[i] for i in self.front_ids], len(self.done), self.total
        )
        if self.live is None:
            from rich.live import Live

            # no refresh thread: a thread alive while Ray sets environment variables is what crashed sweeps once
            self.live = Live(
                view,
                console=terminal(),
                auto_refresh=False,
                transient=True,
                redirect_stdout=True,
                redirect_stderr=False,
            )
            self.live.start()
        self.live.update(view, refresh=True)

    def close(self) -> None:
        """Erase the live front (the report prints the front next); safe to call more than once."""
        live, self.live = getattr(self, "live", None), None
        if live is not None:
            live.stop()

    def _label(self, cfg: Mapping[str, Any]) -> str:
        return " ".join(f"{key}={format_value(cfg.get(canon))}" for canon, key in self.keys)

    def _name(self, trial: Any) -> str:
        number = trial_number(trial, self.grid)
        return f"#{number} {trial.trial_id}" if number is not None else trial.trial_id

    def _entries(self, trial: Any) -> list[tuple[str, str, str, list[float] | None]]:
        """(id, name, label, objectives or None) of each trial a Tune trial ran: itself, or its population's members."""
        cfg, r = trial.config or {}, trial.last_result or {}
        keys = [tune_key(m) for m in self.metrics]
        if MEMBERS not in cfg:
            return [(trial.trial_id, self._name(trial), self._label(cfg), member_values(r, keys))]
        numbers = member_numbers(cfg, trial_number(trial, self.grid), self.population)
        reported = r.get(MEMBER_RESULTS) or []
        out = []
        for i, m in enumerate(cfg[MEMBERS]):
            mid = member_id(trial.trial_id, i)
            n = numbers[i]
            out.append(
                (
                    mid,
                    f"#{n} {mid}" if n is not None else mid,
                    self._label(m),
                    member_values(reported[i] if i < len(reported) else None, keys),
                )
            )
        return out

    def _absorb_finished(self, trials: list) -> None:
        """Count trials that finished before this process started (a resumed sweep), without printing them: once,
        at the first event; afterwards every trial reaches `done` through the events (a sweep's callbacks stay
        linear in its trials)."""
        if self.absorbed:
            return
        self.absorbed = True
        for t in trials:
            if t.status == "TERMINATED":
                for mid, _, label, vals in self._entries(t):
                    if vals is not None and mid not in self.done:
                        self.done[mid] = (vals, label)
            elif t.status == "ERROR":
                self.errored[t.trial_id] = len((t.config or {}).get(MEMBERS) or [0])
        self.front_ids = self._front()
        self._count_failures()

    def _add(self, mid: str, vals: list[float], label: str) -> None:
        """A finished trial's objectives join `done` and the front (updated, not recomputed)."""
        again = mid in self.done
        self.done[mid] = (vals, label)
        if again:  # a trial reported twice: its earlier values may be on the front
            self.front_ids = self._front()
        else:
            from veil.sweeps.pareto import extend_front

            front = {i: self.done[i][0] for i in self.front_ids}
            self.front_ids = extend_front(front, mid, vals, self.directions)

    def _front(self) -> set[str]:
        ids = list(self.done)
        mask = _front_mask([self.done[i][0] for i in ids], self.directions)
        return {i for i, keep in zip(ids, mask) if keep}

    def _elapsed(self) -> str:
        s = int(time.time() - self.t0)
        return f"{s // 60:02d}:{s % 60:02d}"

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._absorb_finished(trials)
        members = (trial.config or {}).get(MEMBERS)
        if members is None:
            self._say(f"[{self._elapsed()}] start  {self._name(trial)}  {self._label(trial.config or {})}")
            return
        numbers = member_numbers(trial.config, trial_number(trial, self.grid), self.population)
        if len(members) == 1:  # a population sweep's trial asked on its own (the sampler has begun to adapt)
            name = f"#{numbers[0]} {member_id(trial.trial_id, 0)}" if numbers[0] is not None else trial.trial_id
            self._say(f"[{self._elapsed()}] start  {name}  {self._label(members[0])}")
            return
        first, last = numbers[0], numbers[-1]  # members are asked together: consecutive numbers
        span = f"trials #{first}-#{last}" if first is not None and last is not None else f"{len(members)} trials"
        self._say(f"[{self._elapsed()}] start  population {self._name(trial)}  {span}, trained as one model")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        entries = self._entries(trial)
        if all(vals is None for *_, vals in entries) and MEMBERS not in (trial.config or {}):
            return
        self._absorb_finished([t for t in trials if t is not trial])
        population = MEMBERS in (trial.config or {})
        for mid, name, label, vals in entries:
            if vals is None:
                self.member_failures += 1
                self._say(f"[{self._elapsed()}] FAILED {name}  {label}  (see its MLflow run)")
                continue
            self._add(mid, vals, label)
        front = self.front_ids
        r = trial.last_result or {}
        reported = r.get(MEMBER_RESULTS) if population else [r]
        for (mid, name, label, vals), rep in zip(entries, reported or [None] * len(entries)):
            if vals is None:
                continue
            cells = "  ".join(f"{m} {fmt_metric(v)}" for m, v in zip(self.metrics, vals))
            star = "  * front" if mid in front else ""
            seconds = float((rep or {}).get("trial_seconds", 0))
            self._say(
                f"[{self._elapsed()}] done   {name}  {label}  {cells}  "
                f"({seconds:.1f} s){star}   [{len(self.done)}/{self.total} finished, front {len(front)}]"
            )
        self._count_failures()
        self._show_front()

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._absorb_finished([t for t in trials if t is not trial])
        self.errored[trial.trial_id] = len((trial.config or {}).get(MEMBERS) or [0])
        self._count_failures()
        msg = ""
        try:
            if trial.error_file and os.path.exists(trial.error_file):
                lines = [ln for ln in Path(trial.error_file).read_text().strip().splitlines() if ln.strip()]
                msg = lines[-1][:200] if lines else ""
        except Exception:
            pass
        label = self._label(trial.config or {}) if MEMBERS not in (trial.config or {}) else "population"
        self._say(f"[{self._elapsed()}] FAILED {self._name(trial)}  {label}  {msg}")
        if self.max_failures is not None and self.failed > self.max_failures:
            self.stopped_for_failures = True
            self._say(
                f"[{self._elapsed()}] {self.failed} trials failed (max_failures {self.max_failures}): "
                "stopping the sweep"
            )

    def _count_failures(self) -> None:
        """Failed trials so far: every member of an errored Tune trial, and members that failed on their own."""
        self.failed = sum(self.errored.values()) + self.member_failures

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        self._watch_tracking()

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        # the last trials can end between two probes: an outage the console announced is closed before the report
        if self.outage_since is not None:
            self._watch_tracking(now=True)
        self.close()

    def _watch_tracking(self, now: bool = False) -> None:
        """Say when the tracking server stops answering and when it answers again (probed every PROBE_EVERY_S
        from the driver's loop, or `now`): trials go on into local journals meanwhile, and the console says so as
        it happens, not only in the final report."""
        uri = self.tracking_uri
        due = now or time.time() - self.last_probe >= PROBE_EVERY_S
        if not uri or not uri.startswith(("http://", "https://")) or not due:
            return
        from veil.tracking.mlflow_run import health_problem

        self.last_probe = time.time()
        problem = health_problem(uri, timeout=2.0)
        if problem and self.outage_since is None:
            self.outage_since = time.time()
            self._say(
                f"[{self._elapsed()}] tracking server {uri} is not answering ({problem}): trials go on and keep "
                "their records in local journals, replayed once it is back"
            )
        elif not problem and self.outage_since is not None:
            self._say(
                f"[{self._elapsed()}] tracking server {uri} answers again (down about "
                f"{time.time() - self.outage_since:.0f} s): journaled records are replayed before the report"
            )
            self.outage_since = None

    # Stopper
    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.max_failures is not None and self.failed > self.max_failures


__all__ = ["SweepMonitor", "PROBE_EVERY_S", "live_front"]
