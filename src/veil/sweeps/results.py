"""A sweep's results, read back from MLflow: one row per trial (each trial counted once), the Pareto front
over the seed means, its hypervolume and convex-hull AUC, and its plain-text tables. The report files (Parquet,
CSV, PNG, HTML) are written by `veil.sweeps.report`, which sits above this module and `veil.sweeps.plots`.

Layout in MLflow (see docs/sweeps.md):
- parent run: tags veil.role=sweep, veil.sweep=<name>, veil.storage=<Tune experiment dir>; spec as
  `sweep/spec.yaml` + `sweep/spec.json`; at the end the front, the plots, hypervolume and chull_auc.
- one child run per trial: tags veil.role=trial, veil.sweep, veil.trial_id (Tune's trial id),
  veil.config (JSON of the searched values), veil.seed (one seed) or veil.seeds; metrics are the means
  over seeds, `std/<metric>` their standard deviations (seeds > 1).
- seeds > 1: each seed's run is nested under its trial run (veil.role=seed).
- a trial that Tune ran again (in flight when the driver died, or retried) supersedes its earlier
  attempt: the earlier run is tagged veil.superseded=true (and set KILLED if it was still RUNNING); an earlier
  attempt that FINISHED with the same values (its run ended while a stopped sweep shut down) is reported again
  instead (`settle_attempts`)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from veil.errors import VeilError
from veil.sweeps.metrics import is_gap_metric
from veil.sweeps.pareto import convex_hull_auc, hypervolume, pareto_front
from veil.sweeps.space import decode_value, format_value
from veil.sweeps.sweepspec import DEFAULT_ROOT, SweepSpec, sweep_from_mapping
from veil.tracking import PARENT_TAG, TrackedRun, check_tracking, client
from veil.tracking.journal import LATE_TAG
from veil.tracking.mlflow_run import require_existing_store
from veil.tracking.sqlite_runs import child_runs

TAG_ROLE = "veil.role"
TAG_SWEEP = "veil.sweep"
TAG_TRIAL = "veil.trial_id"
TAG_NUMBER = "veil.trial_number"
TAG_NODE = "veil.ray_node"
"""The Ray node id a trial ran on."""
TAG_CONFIG = "veil.config"
TAG_SEED = "veil.seed"
TAG_SEEDS = "veil.seeds"
TAG_PARETO = "veil.pareto"
TAG_SUPERSEDED = "veil.superseded"
TAG_STORAGE = "veil.storage"
TAG_SPEC = "veil.spec_name"
TAG_WARNINGS = "veil.warnings"
TAG_POPULATION = "veil.population.trial"
"""A population member's Tune trial (its own TAG_TRIAL is '<that id>.<member>')."""
STD_PREFIX = "std/"
SPEC_ARTIFACT = "sweep/spec.json"
STATE_FILE = "veil-sweep.json"


class SweepNotFound(VeilError, LookupError):
    """No sweep matches the name or run id."""


class DamagedSweepState(VeilError, ValueError):
    """A sweep's state file (veil-sweep.json) that cannot be read back."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(
            f"{path}: the sweep's state file is damaged: {problem}. `veil sweep` writes it as a JSON object with "
            f"keys {', '.join(STATE_KEYS)}; nothing was read or changed (the sweep's runs in MLflow are as they were)"
        )


# ----------------------------------------------------------------------------------------------
# MLflow helpers


def _q(v: str) -> str:
    return "'" + str(v).replace("'", "\\'") + "'"


def search_runs(
    uri: str,
    filter_string: str,
    experiment_ids: Iterable[str] | None = None,
    keep: Callable[[Any], Any] | None = None,
    page_size: int = 1000,
) -> list[Any]:
    """Every run matching `filter_string` (all pages), in every experiment unless given; `keep(run)` of each
    instead, applied page by page, so only one page of MLflow's run objects is held at a time."""
    c = client(uri)
    if experiment_ids is None:
        experiment_ids = [e.experiment_id for e in c.search_experiments()]
    experiment_ids = list(experiment_ids)
    if not experiment_ids:
        return []
    out: list[Any] = []
    token: str | None = None
    while True:
        page = c.search_runs(experiment_ids, filter_string, max_results=page_size, page_token=token)
        out.extend(map(keep, page) if keep is not None else page)
        token = page.token
        if not token:
            return out


def without_params(run: Any) -> Any:
    """A run's info, tags and metrics, without its params: what a sweep's analysis reads of a trial run (its
    params, every field of its config, are most of what MLflow returns for it)."""
    return SimpleNamespace(
        info=run.info, data=SimpleNamespace(tags=dict(run.data.tags), metrics=dict(run.data.metrics))
    )


def search_child_runs(
    uri: str,
    parent_run_id: str,
    experiment_id: str | None = None,
    keep: Callable[[Any], Any] | None = None,
    page_size: int = 1000,
) -> list[Any]:
    """The direct children of a run (`keep` and `page_size` as in `search_runs`)."""
    flt = f"tags.`{PARENT_TAG}` = {_q(parent_run_id)}"
    return search_runs(uri, flt, [experiment_id] if experiment_id else None, keep, page_size)


def settle_attempts(uri: str, experiment_id: str, sweep: str, trial_id: str, config: str | None = None) -> Any:
    """Before a Tune trial runs, settle its earlier runs: one that FINISHED with the same searched values (`config`,
    the TAG_CONFIG JSON) is returned, to be reported instead of trained again (a trial whose run ended while a
    stopped sweep shut down, that `veil resume` runs again); every other earlier attempt (cut off by a driver
    kill, interrupted, a retried crash) is marked superseded, and KILLED if left RUNNING. None when nothing is
    kept."""
    runs = search_runs(
        uri, f"tags.`{TAG_SWEEP}` = {_q(sweep)} and tags.`{TAG_TRIAL}` = {_q(trial_id)}", [experiment_id]
    )
    return _settle(uri, runs, config)


def settle_members(
    uri: str, experiment_id: str, sweep: str, population: str, configs: Mapping[str, str | None]
) -> list[Any]:
    """`settle_attempts` for every member of a population (member trial id -> its TAG_CONFIG), with one search
    for the whole population instead of one per member; in the order of `configs`. Members' trial ids are
    `<population>.<n>` (`veil.sweeps.trial.member_id`); the search matches that prefix, whatever ran them."""
    like = (
        f"tags.`{TAG_TRIAL}` LIKE {_q(population + '.%')}"  # '_' in an id matches any character: grouped exactly below
    )
    runs = search_runs(uri, f"tags.`{TAG_SWEEP}` = {_q(sweep)} and {like}", [experiment_id])
    by_member: dict[str, list[Any]] = {}
    for r in runs:
        by_member.setdefault(r.data.tags.get(TAG_TRIAL, ""), []).append(r)
    return [_settle(uri, by_member.get(member, []), config) for member, config in configs.items()]


def _settle(uri: str, runs: Sequence[Any], config: str | None) -> Any:
    """Keep the latest FINISHED trial run of `runs` (one trial's earlier runs) whose searched values are `config`,
    with its seeds' runs; supersede the rest. The kept run, or None."""
    live = [r for r in runs if r.data.tags.get(TAG_SUPERSEDED) != "true"]
    done = [
        r
        for r in live
        if r.data.tags.get(TAG_ROLE) == "trial"
        and r.info.status == "FINISHED"
        and r.data.tags.get(TAG_CONFIG) == config
    ]
    kept = max(done, key=lambda r: r.info.end_time or 0) if config is not None and done else None
    for r in live:
        if kept is not None and kept.info.run_id in (r.info.run_id, r.data.tags.get(PARENT_TAG)):
            continue  # the kept run and its seeds' runs
        _supersede(uri, r)
    return kept


def _supersede(uri: str, run: Any, reason: str | None = None) -> None:
    """Tag a run superseded (with why, when given), and end it KILLED if it was left RUNNING."""
    tracked = TrackedRun(uri, run.info.run_id, run.info.experiment_id)
    tracked.set_tags({TAG_SUPERSEDED: "true", **({"veil.superseded_reason": reason} if reason else {})})
    if run.info.status == "RUNNING":
        tracked.finish("KILLED")


def supersede_orphans(uri: str, experiment_id: str, parent_run_id: str, known_trial_ids: Iterable[str]) -> int:
    """Mark child runs of trials Tune does not know as superseded (KILLED if RUNNING): trials created after
    Tune's last experiment snapshot before a driver kill. Tune's restored state never runs them again under
    that id; their configuration is suggested afresh under a new id. Returns how many were marked."""
    known = set(known_trial_ids)
    n = 0
    for r in children_without_params(uri, parent_run_id, experiment_id):
        t = r.data.tags
        tune_trial = t.get(TAG_POPULATION, t.get(TAG_TRIAL))
        if t.get(TAG_ROLE) != "trial" or t.get(TAG_SUPERSEDED) == "true" or tune_trial in known:
            continue
        _supersede(uri, r, "unknown to Tune after resume")
        n += 1
    return n


TAG_INTERRUPTED = "veil.interrupted"
STALE_PARENT_TAGS = ("error", "veil.incomplete", "veil.stopped")


def end_interrupted(uri: str, experiment_id: str, sweep: str) -> int:
    """Once Tune has returned, runs of `sweep` still RUNNING belong to trials it stopped mid-run (Ctrl-C,
    SIGTERM, SIGHUP): mark them KILLED and interrupted (`veil resume` runs those trials again and supersedes
    them). A RUNNING run beside a FINISHED run of the same trial is no interruption but a stale attempt (a
    tracking server that dropped mid-trial can leave one): it is superseded instead. Returns how many runs were
    marked interrupted."""
    flt = f"tags.`{TAG_SWEEP}` = {_q(sweep)} and attributes.status = 'RUNNING'"
    runs = [r for r in search_runs(uri, flt, [experiment_id]) if r.data.tags.get(TAG_ROLE) != "sweep"]
    if not runs:
        return 0
    done = finished_trials(uri, experiment_id, sweep)
    interrupted = 0
    for r in runs:
        if r.data.tags.get(TAG_TRIAL) in done:
            _supersede(uri, r, "left RUNNING beside a finished attempt of its trial")
            continue
        tracked = TrackedRun(uri, r.info.run_id, experiment_id)
        tracked.set_tags({TAG_INTERRUPTED: "true"})
        tracked.finish("KILLED")
        interrupted += 1
    return interrupted


def finished_trials(uri: str, experiment_id: str, sweep: str) -> set[str]:
    """Trial ids of `sweep` with a FINISHED trial run that is not superseded."""
    flt = f"tags.`{TAG_SWEEP}` = {_q(sweep)} and attributes.status = 'FINISHED' and tags.`{TAG_ROLE}` = 'trial'"
    return {
        r.data.tags.get(TAG_TRIAL, "")
        for r in search_runs(uri, flt, [experiment_id])
        if r.data.tags.get(TAG_SUPERSEDED) != "true"
    }


def reopen_parent(uri: str, parent_run_id: str) -> None:
    """A resumed sweep's parent: RUNNING again, without the tags its interruption left (error, incomplete)."""
    parent = TrackedRun(uri, parent_run_id)
    parent.delete_tags(STALE_PARENT_TAGS)
    parent.reopen()


# ----------------------------------------------------------------------------------------------
# finding a sweep


@dataclass
class SweepRef:
    """Where a sweep lives: its parent run and the Tune experiment directory."""

    name: str
    parent_run_id: str
    experiment_id: str
    tracking_uri: str
    storage: str | None
    status: str


_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


def find_sweep(ref: str, tracking_uri: str) -> SweepRef:
    """A sweep by name (tag veil.sweep), parent run id, or spec name (the latest sweep of that spec)."""
    c = client(tracking_uri)
    run = None
    if _RUN_ID.match(ref):
        try:
            run = c.get_run(ref)
        except Exception:
            run = None
        if run is not None and run.data.tags.get(TAG_ROLE) != "sweep":
            raise SweepNotFound(not_a_sweep(run, tracking_uri))
    if run is None:
        for key in (TAG_SWEEP, TAG_SPEC):
            runs = search_runs(tracking_uri, f"tags.`{TAG_ROLE}` = 'sweep' and tags.`{key}` = {_q(ref)}")
            if runs:
                run = max(runs, key=lambda r: r.info.start_time)
                break
    if run is None:
        raise SweepNotFound(
            f"no sweep named {ref!r} (nor a parent run id, nor a spec name) in the MLflow store at "
            f"{tracking_uri} (pass --tracking-uri if it was logged elsewhere)"
        )
    t = run.data.tags
    return SweepRef(
        t.get(TAG_SWEEP, ref),
        run.info.run_id,
        run.info.experiment_id,
        tracking_uri,
        t.get(TAG_STORAGE),
        run.info.status,
    )


def not_a_sweep(run: Any, tracking_uri: str) -> str:
    """Why run `run` is no sweep to report or resume, and which sweeps the store holds."""
    tags = run.data.tags
    role, sweep = tags.get(TAG_ROLE), tags.get(TAG_SWEEP)
    if role in ("trial", "seed") and sweep:
        what = f"a {role} run of sweep {sweep!r}, not a sweep: pass the sweep's name, {sweep}"
    else:
        what = "a single run (as `veil run` logs), not a sweep: pass a sweep's name, its parent run id or its spec name"
    runs = search_runs(tracking_uri, f"tags.`{TAG_ROLE}` = 'sweep'")
    names = [r.data.tags.get(TAG_SWEEP, r.info.run_id) for r in sorted(runs, key=lambda r: -r.info.start_time)]
    listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "") if names else "none"
    return (
        f"run {run.info.run_id} is {what}; sweeps in the MLflow store at {tracking_uri}: {listed} (each the parent "
        f"run tagged {TAG_ROLE}=sweep)"
    )


def load_spec(sweep: SweepRef) -> SweepSpec:
    """The spec stored on the parent run (read back without registry checks)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        try:
            p = client(sweep.tracking_uri).download_artifacts(sweep.parent_run_id, SPEC_ARTIFACT, d)
        except Exception as e:
            raise SweepNotFound(
                f"sweep {sweep.name!r} (run {sweep.parent_run_id}) has no {SPEC_ARTIFACT} artifact: {e}"
            ) from None
        data = json.loads(Path(p).read_text())
    return sweep_from_mapping(data["spec"], where=data.get("source", "stored spec"), check_names=False)


COLLECT_PAGE = 100
"""Trial runs read from MLflow per request when a sweep is collected: the read's peak memory is one page."""


def children_without_params(uri: str, parent_run_id: str, experiment_id: str) -> list[Any]:
    """The direct children of a run with their info, tags and metrics: read from the tables of an embedded store
    (`veil.tracking.sqlite_runs`), else through MLflow, which also returns params (left behind page by page)."""
    children = child_runs(uri, parent_run_id, experiment_id)
    if children is not None:
        return children
    return search_child_runs(uri, parent_run_id, experiment_id, keep=without_params, page_size=COLLECT_PAGE)


# ----------------------------------------------------------------------------------------------
# trials -> table


def dedupe_attempts(runs: list[Any]) -> tuple[list[Any], int]:
    """One run per Tune trial id: superseded attempts never count (a trial whose every attempt is superseded
    was orphaned by a driver kill and re-suggested under another id); among the rest FINISHED comes first,
    then the latest started. Returns the kept runs and how many were dropped."""
    by_trial: dict[str, list[Any]] = {}
    for r in runs:
        by_trial.setdefault(r.data.tags.get(TAG_TRIAL, r.info.run_id), []).append(r)
    keep, dropped = [], 0
    rank = {"FINISHED": 0, "RUNNING": 1, "FAILED": 2, "KILLED": 3, "SCHEDULED": 4}
    for attempts in by_trial.values():
        live = [r for r in attempts if r.data.tags.get(TAG_SUPERSEDED) != "true"]
        if not live:
            dropped += len(attempts)
            continue
        best = min(live, key=lambda r: (rank.get(r.info.status, 9), -(r.info.start_time or 0)))
        keep.append(best)
        dropped += len(attempts) - 1
    return sorted(keep, key=lambda r: (r.info.start_time or 0, r.info.run_id)), dropped


def trials_frame(runs: list[Any], spec: SweepSpec) -> pd.DataFrame:
    """One row per trial run: its number (the order Tune created it in, the same across `veil resume` and in
    the progress lines), ids, status, searched values, metric means (and std/ columns)."""
    metrics = spec.tracked_metrics()
    rows = []
    for i, r in enumerate(runs, 1):
        t, m = r.data.tags, r.data.metrics
        config = json.loads(t.get(TAG_CONFIG, "{}"))
        row: dict[str, Any] = {
            "trial": int(t[TAG_NUMBER]) if TAG_NUMBER in t else i,  # sweeps logged before the tag: start order
            "trial_id": t.get(TAG_TRIAL, ""),
            "run_id": r.info.run_id,
            "status": r.info.status,
        }
        for sp in spec.space:
            v = decode_value(config.get(sp.canonical))
            row[sp.key] = json.dumps(v) if isinstance(v, list) else v
        for name in metrics:
            row[name] = m.get(name, np.nan)
        if len(spec.seeds) > 1:
            for name in metrics:
                row[STD_PREFIX + name] = m.get(STD_PREFIX + name, np.nan)
        row["seeds"] = t.get(TAG_SEEDS, t.get(TAG_SEED, ""))
        end = r.info.end_time or 0
        row["seconds"] = (end - r.info.start_time) / 1000.0 if end and r.info.start_time else np.nan
        row["started"] = pd.Timestamp(r.info.start_time, unit="ms", tz="UTC") if r.info.start_time else pd.NaT
        row["error"] = t.get("error", "")
        row["late"] = t.get(LATE_TAG) == "true"
        rows.append(row)
    cols = ["trial", "trial_id", "run_id", "status", *[sp.key for sp in spec.space], *metrics]
    if len(spec.seeds) > 1:
        cols += [STD_PREFIX + n for n in metrics]
    cols += ["seeds", "seconds", "started", "error", "late"]
    return pd.DataFrame(rows, columns=cols).sort_values("trial", kind="stable", ignore_index=True)


# ----------------------------------------------------------------------------------------------
# analysis


@dataclass
class SweepResults:
    """Every trial once, the front over the seed means, hypervolume and convex-hull AUC."""

    spec: SweepSpec
    trials: pd.DataFrame
    hypervolume: float
    chull_auc: float | None
    name: str = ""
    parent_run_id: str = ""
    tracking_uri: str = ""
    experiment_id: str = ""
    superseded: int = 0
    axes: tuple[str, str] | None = None
    """(leakage, utility) metrics behind chull_auc, when the objectives have that shape."""
    notes: list[str] = field(default_factory=list)
    pareto_tags: dict[str, str] = field(default_factory=dict)
    """run id -> the `veil.pareto` tag each trial run carries in the store (read by `collect`)."""

    @property
    def front(self) -> pd.DataFrame:
        f = self.trials[self.trials["pareto"]]
        return f.sort_values(list(self.spec.metrics)[:1], ascending=self.spec.directions[0] == "min") if len(f) else f

    @property
    def counts(self) -> dict[str, int]:
        s = self.trials["status"]
        return {
            "trials": int(len(self.trials)),
            "finished": int((s == "FINISHED").sum()),
            "failed": int((s == "FAILED").sum()),
            "running": int((s == "RUNNING").sum()),
            "killed": int((s == "KILLED").sum()),
            "front": int(self.trials["pareto"].sum()),
            "infeasible": int(((s == "FINISHED") & ~self.trials["feasible"]).sum()),
        }

    def summary(self) -> dict[str, Any]:
        return {
            "sweep": self.name,
            "parent_run_id": self.parent_run_id,
            "tracking_uri": self.tracking_uri,
            "method": self.spec.method,
            "dataset": self.spec.dataset,
            "objectives": [{"metric": o.metric, "direction": o.direction} for o in self.spec.objectives],
            "reference": list(self.spec.reference),
            "constraints": [str(c) for c in self.spec.constraints],
            "hypervolume": self.hypervolume,
            "chull_auc": self.chull_auc,
            "chull_axes": list(self.axes or ()),
            "chull_leakage": chull_leakage_label(self.axes[0]) if self.axes else None,
            "chull_origin": self.spec.chull_origin,
            "late_runs": [str(r) for r in self.trials.loc[self.trials["late"], "run_id"]]
            if "late" in self.trials
            else [],
            **self.counts,
            "superseded_attempts": self.superseded,
            "notes": self.notes,
        }


def chull_axes(spec: SweepSpec) -> tuple[str, str] | None:
    """(leakage, utility): the first 'min' and the first 'max' objective."""
    mx = next((o.metric for o in spec.objectives if o.direction == "max"), None)
    mn = next((o.metric for o in spec.objectives if o.direction == "min"), None)
    return (mn, mx) if mx and mn else None


def chull_leakage(metric: str, values: np.ndarray) -> np.ndarray:
    """The convex-hull AUC's leakage coordinate of `metric`'s values. A gap metric (|AUC - 0.5| in [0, 0.5])
    goes back on the AUC scale as 0.5 + gap, the adversary's AUC read the right way round: chance at 0.5
    and full leakage at 1 as on seed 003's axis, so `chull_origin` keeps its meaning ('half' = chance on
    both axes) and a front whose adversaries all score above chance gets the same area as over adversary_auc.
    Any other metric is used as it is."""
    return 0.5 + values if is_gap_metric(metric) else values


def chull_leakage_label(metric: str) -> str:
    """How `chull_leakage` reads `metric`, for reports."""
    return f"0.5 + {metric}" if is_gap_metric(metric) else metric


def analyze(trials: pd.DataFrame, spec: SweepSpec, **info: Any) -> SweepResults:
    """Mark feasible and Pareto trials; compute hypervolume and convex-hull AUC over the front."""
    t = trials.copy()
    metrics = list(spec.metrics)
    ok = (t["status"] == "FINISHED") if len(t) else pd.Series([], dtype=bool)
    for m in metrics:
        ok &= np.isfinite(pd.to_numeric(t[m], errors="coerce"))
    feasible = ok.copy()
    for c in spec.constraints:
        feasible &= t[c.metric].map(lambda x, c=c: c.holds(float(x)) if x is not None else False).astype(bool)
    t["feasible"] = feasible.astype(bool)
    t["pareto"] = False
    notes: list[str] = list(spec.warnings)
    hv, auc, axes = 0.0, None, chull_axes(spec)
    if feasible.any():
        pts = t.loc[feasible, metrics].to_numpy(dtype=float)
        mask = pareto_front(pts, list(spec.directions))
        t.loc[t.index[feasible.to_numpy()][mask], "pareto"] = True
        hv = hypervolume(pts, list(spec.directions), list(spec.reference))
        if axes:
            leak = chull_leakage(axes[0], t.loc[t["pareto"], axes[0]].to_numpy(dtype=float))
            util = t.loc[t["pareto"], axes[1]].to_numpy(dtype=float)
            if np.all((leak >= 0) & (leak <= 1)) and np.all((util >= 0) & (util <= 1)):
                auc = convex_hull_auc(util, leak, spec.chull_origin)
            else:
                notes.append(f"no convex-hull AUC: {axes[0]} / {axes[1]} are not both in [0, 1]")
    else:
        notes.append("no finished feasible trial: empty front")
    if not axes:
        notes.append("no convex-hull AUC: it needs one 'max' (utility) and one 'min' (leakage) objective")
    t["pareto"] = t["pareto"].astype(bool)
    return SweepResults(spec, t, float(hv), auc, axes=axes, notes=notes, **info)


def collect(sweep: SweepRef, spec: SweepSpec | None = None) -> SweepResults:
    """Read a sweep's trial runs from MLflow and analyse them."""
    spec = spec or load_spec(sweep)
    children = children_without_params(sweep.tracking_uri, sweep.parent_run_id, sweep.experiment_id)
    runs = [r for r in children if r.data.tags.get(TAG_ROLE) == "trial"]
    kept, dropped = dedupe_attempts(runs)
    return analyze(
        trials_frame(kept, spec),
        spec,
        name=sweep.name,
        parent_run_id=sweep.parent_run_id,
        tracking_uri=sweep.tracking_uri,
        experiment_id=sweep.experiment_id,
        superseded=dropped,
        pareto_tags={r.info.run_id: r.data.tags.get(TAG_PARETO, "") for r in kept},
    )


def tag_front(results: SweepResults) -> None:
    """Tag every trial run veil.pareto=true|false: only the runs whose tag changes are written (trial runs start
    as false), so a sweep's end costs one call per front trial, not one per trial."""
    for _, row in results.trials.iterrows():
        value = "true" if row["pareto"] else "false"
        if results.pareto_tags.get(row["run_id"]) != value:
            TrackedRun(results.tracking_uri, row["run_id"]).set_tags({TAG_PARETO: value})
            results.pareto_tags[row["run_id"]] = value


# ----------------------------------------------------------------------------------------------
# text


def fmt_metric(v: float) -> str:
    """0.9862 for scores, 35,060 for counts such as bytes."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4f}"


def fmt_number(v: float) -> str:
    """0.1704 in the range scores live in; 5.075e+06 or 2.5e-05 outside it (a hypervolume over bytes)."""
    return f"{v:.4f}" if v == 0 or 1e-3 <= abs(v) < 1e4 else f"{v:.4g}"


def hypervolume_text(results: SweepResults, label: bool = True) -> str:
    """'hypervolume 5.075e+06 [utility_auc × privacy_gap × bytes_up_total], ref = (0.5, 0.5, 1e+08)': the value,
    its units (the product of the objectives') and the reference point it is measured from."""
    spec = results.spec
    ref = ", ".join(f"{r:g}" for r in spec.reference)
    text = f"{fmt_number(results.hypervolume)} [{' × '.join(spec.metrics)}], ref = ({ref})"
    return f"hypervolume {text}" if label else text


def param_label(row: pd.Series, spec: SweepSpec) -> str:
    return " ".join(f"{sp.key}={format_value(row[sp.key])}" for sp in spec.space)


def _cell(row: pd.Series, metric: str, seeds: int) -> str:
    v = row.get(metric)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    s = fmt_metric(v)
    sd = row.get(STD_PREFIX + metric)
    if seeds > 1 and sd is not None and not (isinstance(sd, float) and math.isnan(sd)):
        s += f"±{sd:.3f}"
    return s


def format_table(df: pd.DataFrame, spec: SweepSpec, metrics: list[str] | None = None, *, status: bool = False) -> str:
    """A plain-text table: trial, searched values, metrics (mean ± std over seeds)."""
    metrics = metrics or list(spec.metrics)
    heads = ["trial", *[sp.key for sp in spec.space], *metrics] + (["status"] if status else [])
    rows = []
    for _, r in df.iterrows():
        rows.append(
            [
                str(r["trial"]),
                *[format_value(r[sp.key]) for sp in spec.space],
                *[_cell(r, m, len(spec.seeds)) for m in metrics],
            ]
            + ([str(r["status"])] if status else [])
        )
    widths = [max(len(h), *(len(x[i]) for x in rows)) if rows else len(h) for i, h in enumerate(heads)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(heads), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def format_report(results: SweepResults) -> str:
    spec, c = results.spec, results.counts
    objs = ", ".join(f"{o.metric} ({o.direction})" for o in spec.objectives)
    lines = [
        f"sweep {results.name}: {spec.method} on {spec.dataset}, sampler {spec.sampler}, objectives {objs}",
        f"trials {c['trials']}: {c['finished']} finished, {c['failed']} failed"
        + (f", {c['running']} still running" if c["running"] else "")
        + (f", {c['killed']} killed" if c["killed"] else "")
        + (f", {c['infeasible']} infeasible ({'; '.join(map(str, spec.constraints))})" if spec.constraints else "")
        + (f"; {results.superseded} superseded attempt(s) not counted" if results.superseded else ""),
        f"Pareto front ({c['front']} trials, mean over {len(spec.seeds)} seed(s)):",
        format_table(results.front, spec, spec.tracked_metrics()[: max(len(spec.metrics), 4)]),
        f"hypervolume {results.hypervolume:.6f} (reference {dict(zip(spec.metrics, spec.reference))})",
    ]
    if results.chull_auc is not None and results.axes:
        lines.append(
            f"convex-hull AUC {results.chull_auc:.4f} ({results.axes[1]} over {chull_leakage_label(results.axes[0])}, "
            f"origin {spec.chull_origin})"
        )
    if spec.certifies():
        met = results.trials.get("certificate/met")
        done = results.trials[results.trials["status"] == "FINISHED"] if "status" in results.trials else results.trials
        n_met = int((met[done.index] >= 1.0 - 1e-9).sum()) if met is not None and len(done) else 0
        lines.append(
            f"leakage target {spec.target_text()}: {n_met} of {len(done)} finished trials meet it (their "
            "certificates; ringed in front.png / front.html)"
        )
    late = results.trials[results.trials["late"]] if "late" in results.trials else results.trials.iloc[:0]
    if len(late):
        lines.append(
            f"late: {len(late)} trial run(s) reached the tracking server from the local journal after it dropped "
            f"(tag {LATE_TAG}=true): "
            + ", ".join(f"trial {n} ({rid})" for n, rid in zip(late["trial"], late["run_id"]))
        )
    lines += [f"note: {n}" for n in results.notes]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# finding a sweep from the command line


def _state_path(exp_dir: Path) -> Path:
    return Path(exp_dir) / STATE_FILE


STATE_KEYS: dict[str, type] = {"tracking_uri": str, "parent_run_id": str, "storage": str, "spec": dict, "source": str}
"""What `veil report` and `veil resume` read of a sweep's state file, and the JSON type of each."""
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "true/false", type(None): "null"}


def _json_type(v: Any) -> str:
    return _JSON_TYPES.get(type(v), "a number")


def read_state(path: Path) -> dict[str, Any]:
    """A sweep's state file (`veil sweep` writes it beside the Tune trials), refused by name when it is damaged."""
    try:
        state = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise DamagedSweepState(path, f"it is not JSON ({e})") from None
    if not isinstance(state, dict):
        raise DamagedSweepState(path, f"it holds {_json_type(state)}, not a JSON object")
    for key, kind in STATE_KEYS.items():
        if key not in state:
            raise DamagedSweepState(path, f"key {key!r} is missing")
        if not isinstance(state[key], kind):
            raise DamagedSweepState(path, f"key {key!r} holds {_json_type(state[key])}, not {_JSON_TYPES[kind]}")
    return state


def locate(
    ref: str,
    *,
    tracking_uri: str | None = None,
    storage_root: str | Path = DEFAULT_ROOT,
    command: str = "veil report",
) -> tuple[SweepRef, dict | None]:
    """A sweep by local storage (directory, or name under storage_root) or by MLflow (name, run id, spec
    name); returns its SweepRef and its state file's contents when the Tune storage is reachable. A local store
    that does not exist is refused (`command` names who asks), not created."""
    for cand in (Path(ref), Path(storage_root) / ref):
        if _state_path(cand).is_file():
            state = read_state(_state_path(cand))
            source = None if tracking_uri else f"the tracking URI recorded in {_state_path(cand)}"
            uri = check_tracking(tracking_uri or state["tracking_uri"], source)
            require_existing_store(uri, command)
            return find_sweep(state["parent_run_id"], uri), state
    uri = check_tracking(tracking_uri)
    require_existing_store(uri, command)
    sref = find_sweep(ref, uri)
    found = _state_path(Path(sref.storage)) if sref.storage else None
    return sref, read_state(found) if found is not None and found.is_file() else None
