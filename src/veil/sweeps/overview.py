"""A sweep at a glance in the MLflow UI: the parent run's description (Markdown, tag `mlflow.note.content`) holds
the summary, the Pareto front as a table linking every front trial's run, the front plot and a link to a saved
runs-table view of the sweep's trials (the searched parameters and the objectives as columns, sorted by the
first objective). Written when a sweep finishes, and again when `veil resume` finishes it."""

from __future__ import annotations

from veil.sweeps.results import (
    TAG_PARETO,
    TAG_ROLE,
    TAG_SWEEP,
    SweepResults,
    _cell,
    chull_leakage_label,
    hypervolume_text,
)
from veil.sweeps.space import format_value
from veil.tracking import TrackedRun, client
from veil.tracking.server import Link, column, run_path, runs_path, runs_view_state, save_runs_view

NOTE_TAG = "mlflow.note.content"
FRONT_PLOT = "plots/front.png"
MAX_NOTE_CHARS = 7500  # MLflow caps a tag value at 8000 characters
MAX_FRONT_ROWS = 40


def view_key(sweep: str) -> str:
    """The saved runs-table view of a sweep's trials (sweep names are letters, digits, '_', '-', '.')."""
    return f"veil-{sweep}"


def trials_view(results: SweepResults) -> dict:
    """The sweep's trial runs only; searched parameters, objectives, constraint metrics and the front tag as
    columns; the best first objective first."""
    spec = results.spec
    metrics = [*spec.metrics, *(c.metric for c in spec.constraints if c.metric not in spec.metrics)]
    columns = [
        *(column("params", sp.canonical) for sp in spec.space),
        *(column("metrics", m) for m in metrics),
        column("tags", TAG_PARETO),
    ]
    search = f"tags.`{TAG_SWEEP}` = '{results.name}' and tags.`{TAG_ROLE}` = 'trial'"
    return runs_view_state(search, column("metrics", spec.metrics[0]), spec.directions[0] == "min", columns)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|")


def front_table(results: SweepResults, rows: int = MAX_FRONT_ROWS) -> list[str]:
    """The front as Markdown table lines: trial (linked to its run), searched values, objectives (mean ± std)."""
    spec = results.spec
    heads = ["trial", *[sp.key for sp in spec.space], *spec.metrics]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for _, r in results.front.head(rows).iterrows():
        trial = f"[{r['trial']}]({run_path(results.experiment_id, r['run_id'])})"
        values = [format_value(r[sp.key]) for sp in spec.space]
        objectives = [_cell(r, m, len(spec.seeds)) for m in spec.metrics]
        lines.append("| " + " | ".join(_md(c) for c in [trial, *values, *objectives]) + " |")
    return lines


def description(results: SweepResults) -> str:
    """The parent run's description (Markdown): what the UI's collapsed preview shows first is the sweep and the
    link to its trials' table, then the front table, the plot and the figures. At most MAX_NOTE_CHARS long:
    front rows are dropped from the end (the full front is in results/front.csv) until it fits."""
    spec, c = results.spec, results.counts
    objectives = ", ".join(f"{o.metric} ({o.direction})" for o in spec.objectives)
    view = runs_path(results.experiment_id, view_key(results.name))
    head = [
        f"**Sweep `{results.name}`**: {spec.method} on {spec.dataset}, {c['trials']} trials ({c['finished']} "
        f"finished, {c['failed']} failed). [All its trials as a table]({view}): searched values and objectives as "
        f"columns, front trials tagged `{TAG_PARETO}=true`.",
        "",
    ]
    chull = (
        f" Convex-hull AUC {results.chull_auc:.4f} ({results.axes[1]} over "
        f"{chull_leakage_label(results.axes[0])}, origin {spec.chull_origin})."
        if results.chull_auc is not None and results.axes
        else ""
    )
    tail = [
        "",
        f"![Pareto front](get-artifact?path={FRONT_PLOT}&run_uuid={results.parent_run_id})",
        "",
        f"Objectives: {objectives}. Hypervolume {hypervolume_text(results, label=False)}.{chull} "
        f"Sampler {spec.sampler}, {len(spec.seeds)} seed(s) per trial.",
        "",
        "Artifacts: `results/front.csv`, `results/trials.csv`, `plots/front.html` (interactive plot).",
        *([""] + [f"- note: {n}" for n in results.notes] if results.notes else []),
    ]
    n = len(results.front)
    for rows in range(min(n, MAX_FRONT_ROWS), -1, -1):
        more = ["", f"... and {n - rows} more front trials in `results/front.csv`."] if rows < n else []
        text = "\n".join([*head, f"### Pareto front ({n} trials)", "", *front_table(results, rows), *more, *tail])
        if len(text) <= MAX_NOTE_CHARS:
            return text
    return text[:MAX_NOTE_CHARS]


def publish(results: SweepResults) -> None:
    """Write the parent run's description and save the trials' runs-table view on the experiment."""
    parent = TrackedRun(results.tracking_uri, results.parent_run_id)
    save_runs_view(parent, view_key(results.name), trials_view(results))
    parent.set_tags({NOTE_TAG: description(results)})


def latest_sweep_links(uri: str) -> list[Link]:
    """Links to the most recently started sweep in the store: its parent run (description with the front) and
    its trials' table; the experiments list when the store holds no sweep."""
    c = client(uri)
    experiments = [e.experiment_id for e in c.search_experiments()]
    runs = (
        c.search_runs(
            experiments, f"tags.`{TAG_ROLE}` = 'sweep'", max_results=1, order_by=["attributes.start_time DESC"]
        )
        if experiments
        else []
    )
    if not runs:
        return [("no sweep in this store yet; experiments:", "#/experiments")]
    run = runs[0]
    name, eid = run.data.tags.get(TAG_SWEEP, run.info.run_name), run.info.experiment_id
    return [
        (f"latest sweep {name}, front and summary:", run_path(eid, run.info.run_id)),
        ("its trials as a table:", runs_path(eid, view_key(name))),
    ]


__all__ = ["description", "latest_sweep_links", "publish", "trials_view", "view_key"]
