"""Plots of a sweep's trade-off: a PNG and a self-contained HTML page (the same matplotlib figure as inline SVG,
sortable tables, a few lines of inline JS, no network). Front members are drawn solid and labelled by their parameters; dominated
trials faintly; infeasible trials (constraints) as crosses; error bars show the std over seeds."""

from __future__ import annotations

import html
import itertools
import math
import textwrap
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from veil.sweeps.metrics import is_gap_metric
from veil.sweeps.results import SweepResults, chull_leakage_label, hypervolume_text
from veil.sweeps.space import format_value

FRONT_COLOR = "#1f6fb4"
DOMINATED_COLOR = "#9a9a9a"
INFEASIBLE_COLOR = "#c0504d"
BETTER_COLOR = "#2a7a2a"
MET_COLOR = "#2a9d4a"
MET = "certificate/met"


def plot_axes(results: SweepResults) -> tuple[str | None, str]:
    """(x metric, y metric): leakage across, utility up when the objectives have that shape; otherwise the
    first two objectives; one objective is plotted against the trial number (x None)."""
    spec = results.spec
    if results.axes:
        return results.axes[0], results.axes[1]
    if len(spec.metrics) >= 2:
        return spec.metrics[0], spec.metrics[1]
    return None, spec.metrics[0]


def axis_label(metric: str | None, results: SweepResults) -> str:
    """'privacy_gap = |AUC - 0.5| (min)', 'utility_auc (max)'; 'trial' for no metric."""
    if metric is None:
        return "trial"
    name = f"{metric} = |AUC − 0.5|" if is_gap_metric(metric) else metric
    direction = dict(zip(results.spec.metrics, results.spec.directions)).get(metric)
    return f"{name} ({direction})" if direction else name


def _label(row: pd.Series, results: SweepResults) -> str:
    return ", ".join(f"{sp.key}={format_value(row[sp.key])}" for sp in results.spec.space)


def _finished(results: SweepResults) -> pd.DataFrame:
    t = results.trials
    ok = t["status"] == "FINISHED"
    for m in results.spec.metrics:
        ok &= np.isfinite(pd.to_numeric(t[m], errors="coerce"))
    return t[ok]


def _title(results: SweepResults) -> str:
    s = results.spec
    return f"{results.name}: {s.method} on {s.dataset}" if results.name else f"{s.method} on {s.dataset}"


def _subtitle(results: SweepResults) -> str:
    """The hypervolume with its units and reference point, and the convex-hull AUC when there is one."""
    t = hypervolume_text(results)
    if results.chull_auc is not None:
        t += f"; convex-hull AUC {results.chull_auc:.3f}"
    return t


def _std(row: pd.Series, metric: str | None) -> float:
    if metric is None:
        return 0.0
    v = row.get("std/" + metric)
    return float(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else 0.0


def panel_axes(results: SweepResults) -> list[tuple[str | None, str]]:
    """(x, y) metrics of each panel: `plot_axes` first, then, with 3 or more objectives, every other pair of
    objectives (a pairwise scatter matrix, one panel per pair), a 'max' objective going up when the pair has one."""
    first = plot_axes(results)
    metrics = list(results.spec.metrics)
    if len(metrics) < 3:
        return [first]
    direction = dict(zip(results.spec.metrics, results.spec.directions))
    panels = [first]
    for a, b in itertools.combinations(metrics, 2):
        if {a, b} == set(first):
            continue
        panels.append((b, a) if direction[a] == "max" and direction[b] == "min" else (a, b))
    return panels


BETTER = "better"


def mark_better(ax: Any, x_direction: str | None, y_direction: str) -> None:
    """An arrow labelled 'better' pointing at the panel's ideal corner (up/down only for a trial-number x)."""
    up = y_direction == "max"
    tip_y = 0.96 if up else 0.04
    tail_y = tip_y - 0.14 if up else tip_y + 0.14
    if x_direction is None:
        tip_x = tail_x = 0.96
    else:
        right = x_direction == "max"
        tip_x = 0.96 if right else 0.04
        tail_x = tip_x - 0.14 if right else tip_x + 0.14
    ax.annotate(
        BETTER,
        xy=(tip_x, tip_y),
        xytext=(tail_x, tail_y),
        xycoords="axes fraction",
        textcoords="axes fraction",
        ha="center",
        va="center",
        fontsize=8,
        color=BETTER_COLOR,
        arrowprops={"arrowstyle": "-|>", "color": BETTER_COLOR, "lw": 1.2},
        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
        zorder=6,
    )


def _draw_panel(
    ax: Any, t: pd.DataFrame, xm: str | None, ym: str, results: SweepResults, labels: bool, panel: int = 0
) -> None:
    """One projection of the trials: dominated faint, infeasible crosses, the front solid (joined and labelled
    by its parameters when `labels`, i.e. when the panel shows the whole front: two objectives). Each point links
    to its row of the HTML page's trials table and each group of points has an id (`point_group`), which the SVG
    the page embeds keeps; a PNG ignores both."""
    links = np.array([trial_anchor(tid, "#") for tid in t["trial_id"]], dtype=object)
    x = (t[xm] if xm else t["trial"]).to_numpy(dtype=float)
    y = t[ym].to_numpy(dtype=float)
    front = t["pareto"].to_numpy(dtype=bool)
    feas = t["feasible"].to_numpy(dtype=bool)
    dom = feas & ~front
    if dom.any():
        ax.scatter(
            x[dom],
            y[dom],
            s=28,
            color=DOMINATED_COLOR,
            alpha=0.35,
            label="dominated",
            zorder=2,
            urls=list(links[dom]),
            gid=point_group("dom", panel),
        )
    if (~feas).any():
        ax.scatter(
            x[~feas],
            y[~feas],
            s=36,
            marker="x",
            color=INFEASIBLE_COLOR,
            alpha=0.6,
            label="infeasible (constraints)",
            zorder=2,
            urls=list(links[~feas]),
            gid=point_group("infeasible", panel),
        )
    if front.any():
        ft = t[front]
        fx, fy = x[front], y[front]
        xe = np.array([_std(r, xm) for _, r in ft.iterrows()])
        ye = np.array([_std(r, ym) for _, r in ft.iterrows()])
        if (xe > 0).any() or (ye > 0).any():
            ax.errorbar(fx, fy, xerr=xe if xm else None, yerr=ye, fmt="none", ecolor=FRONT_COLOR, alpha=0.5, zorder=3)
        order = np.argsort(fx)
        if xm and labels:
            ax.plot(fx[order], fy[order], "-", color=FRONT_COLOR, alpha=0.6, lw=1.2, zorder=3)
        ax.scatter(
            fx,
            fy,
            s=46,
            color=FRONT_COLOR,
            edgecolor="white",
            linewidth=0.8,
            label="Pareto front",
            zorder=4,
            urls=list(links[front]),
            gid=point_group("front", panel),
        )
        for i in order if labels else []:
            ax.annotate(
                _label(ft.iloc[i], results),
                (fx[i], fy[i]),
                textcoords="offset points",
                xytext=LABEL_OFFSETS[0],
                fontsize=7,
                color="#203040",
                zorder=5,
                gid=POINT_LABEL,
                in_layout=False,
            )
    bound = results.spec.target_bound(xm) if xm else None
    if bound is not None:  # the point bound; a trial meets it only when its certificate's upper end does
        ax.axvline(bound, color=MET_COLOR, ls="--", lw=1, alpha=0.7, label=f"target {xm} <= {bound:g}", zorder=1)
    met = meets_target(t)
    if met.any():
        ax.scatter(
            x[met],
            y[met],
            s=150,
            facecolors="none",
            edgecolors=MET_COLOR,
            linewidths=1.5,
            label=f"meets the target ({results.spec.target_text()})",
            zorder=5,
            urls=list(links[met]),
            gid=point_group("met", panel),
        )
    direction = dict(zip(results.spec.metrics, results.spec.directions))
    mark_better(ax, direction.get(xm) if xm else None, direction[ym])
    ax.set_xlabel(axis_label(xm, results), fontsize=9)
    ax.set_ylabel(axis_label(ym, results), fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.25)
    if not len(t):
        ax.text(0.5, 0.5, "no finished trials", ha="center", va="center", transform=ax.transAxes)


def meets_target(t: pd.DataFrame) -> np.ndarray:
    """Which trials' certificates meet the sweep's target on every seed (`certificate/met` is their mean)."""
    if MET not in t.columns:
        return np.zeros(len(t), dtype=bool)
    return pd.to_numeric(t[MET], errors="coerce").fillna(0).to_numpy(dtype=float) >= 1.0 - 1e-9


POINT_LABEL = "veil-point-label"
# where a point's label may sit, in points from the point: right-above first, then around it
LABEL_OFFSETS = ((6, 4), (6, -11), (-6, 4), (-6, -11), (6, 13), (6, -20), (-6, 13), (-6, -20), (0, 22), (0, -29))


def place_labels(fig: Any) -> None:
    """Move each point label (after layout) to the first offset where it overlaps no label placed before it and
    stays inside its panel; a label with no free place keeps its first offset."""
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        placed: list[Any] = []
        inside = ax.get_window_extent(renderer)
        for ann in [c for c in ax.texts if c.get_gid() == POINT_LABEL]:
            for dx, dy in LABEL_OFFSETS:
                ann.xyann = (dx, dy)
                ann.set_horizontalalignment("left" if dx >= 0 else "right")
                box = ann.get_window_extent(renderer)
                fits = inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
                if fits and not any(box.overlaps(b) for b in placed):
                    break
            else:
                ann.xyann = LABEL_OFFSETS[0]
                ann.set_horizontalalignment("left")
            placed.append(ann.get_window_extent(renderer))


def fit_width(fig: Any, text: Any, lines: list[str], margin: float = 0.02) -> None:
    """Set `text` to `lines`, each wrapped at word boundaries until the text's rendered width fits the figure
    (less `margin` on each side)."""
    renderer = fig.canvas.get_renderer()
    limit = fig.bbox.width * (1 - 2 * margin)
    width = max(len(line) for line in lines)
    while True:
        text.set_text("\n".join(textwrap.fill(line, width, break_on_hyphens=False) for line in lines))
        if text.get_window_extent(renderer).width <= limit or width <= 20:
            return
        width -= 4


def front_figure(results: SweepResults) -> Any:
    """The trade-off as a matplotlib Figure (Agg): one panel for one or two objectives, one panel per pair of
    objectives (front over all of them) for three or more; a 'better' arrow in every panel; the sweep as the
    title, the hypervolume with its reference point under it, the legend below the panels."""
    # a Figure of its own with an Agg canvas, not pyplot: a library must not switch a notebook user's backend
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    t = _finished(results)
    panels = panel_axes(results)
    cols = min(len(panels), 3)
    rows = math.ceil(len(panels) / cols)
    size = (8.0, 5.8) if len(panels) == 1 else (4.4 * cols, 4.0 * rows + 1.3)
    fig = Figure(figsize=size, dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    axs = fig.subplots(rows, cols, squeeze=False)
    for i, (ax, (xm, ym)) in enumerate(zip(axs.flat, panels)):
        _draw_panel(ax, t, xm, ym, results, labels=len(results.spec.metrics) <= 2, panel=i)
    for ax in list(axs.flat)[len(panels) :]:
        ax.set_axis_off()
    title = fig.suptitle("", fontsize=11)
    title.set_gid("veil-title")
    fit_width(fig, title, [_title(results), _subtitle(results)])
    handles, labels = axs.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.draw_without_rendering()  # constrained layout settles the panels; the labels are placed in them
    fig.set_layout_engine("none")
    place_labels(fig)
    return fig


def front_png(results: SweepResults, path: str | Path, figure: Any = None) -> Path:
    """The trade-off as a PNG (`figure`, or `front_figure(results)`)."""
    path = Path(path)
    (figure or front_figure(results)).savefig(path)
    return path


# ----------------------------------------------------------------------------------------------
# HTML


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return "" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def trial_anchor(trial_id: Any, prefix: str = "") -> str:
    """The id of a trial's row in the HTML page's trials table (with `prefix` '#': a link to it)."""
    return f"{prefix}trial-{trial_id}"


def point_group(kind: str, panel: int) -> str:
    """The SVG id of one kind of point ('front', 'dom', 'infeasible', 'met') in one panel."""
    return f"{kind}-{panel}"


def front_svg(results: SweepResults, figure: Any = None) -> str:
    """`front_figure` as inline SVG for the HTML page: text kept as text, ids fixed from run to run, each point a
    link to its trial's row (in this page, not a new tab)."""
    import io

    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "veil"}):
        (figure or front_figure(results)).savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :].replace(' target="_blank"', "")
    return svg.replace("<svg ", '<svg id="plot" ', 1)


def _table(df: pd.DataFrame, results: SweepResults, tid: str, anchors: bool = False) -> str:
    spec = results.spec
    cols = ["trial", *[sp.key for sp in spec.space], *spec.tracked_metrics(), "status", "trial_id", "run_id"]
    head = "".join(f"<th onclick=\"sortTable('{tid}',{i})\">{html.escape(c)}</th>" for i, c in enumerate(cols))
    body = []
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r.get(c)
            text = format_value(v) if c in {sp.key for sp in spec.space} else _fmt(v)
            sd = _std(r, c) if c in spec.tracked_metrics() else 0.0
            if sd:
                text += f" ± {sd:.3g}"
            cells.append(f"<td>{html.escape(text)}</td>")
        cls = ' class="front"' if r.get("pareto") else (' class="failed"' if r.get("status") != "FINISHED" else "")
        anchor = f' id="{html.escape(trial_anchor(r["trial_id"]))}"' if anchors else ""
        body.append(f"<tr{anchor}{cls}>{''.join(cells)}</tr>")
    return f'<table id="{tid}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


_JS = """
function sortTable(id, col) {
  const t = document.getElementById(id), rows = Array.from(t.tBodies[0].rows);
  const dir = t.dataset.col == col && t.dataset.dir == 'asc' ? 'desc' : 'asc';
  rows.sort((a, b) => {
    const x = a.cells[col].textContent, y = b.cells[col].textContent;
    const nx = parseFloat(x), ny = parseFloat(y);
    const c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
    return dir == 'asc' ? c : -c;
  });
  rows.forEach(r => t.tBodies[0].appendChild(r));
  t.dataset.col = col; t.dataset.dir = dir;
}
function toggleDominated(cb) { document.getElementById('plot').classList.toggle('hide-dom', !cb.checked); }
"""

_CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.2em; } h2 { font-size: 1.05em; margin-top: 1.5em; }
.hide-dom [id^="dom-"], .hide-dom [id^="infeasible-"] { display: none; }
tr:target td { background: #fff3c4; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; }
th { background: #f0f0f0; cursor: pointer; }
tr.front td { font-weight: bold; background: #eef4fb; }
tr.failed td { color: #999; }
.summary td { text-align: left; }
"""


def seeds_text(seeds: Sequence[int]) -> str:
    """'1 (seed 0)', '3 (seeds 0, 1, 2)': how many runs average into each trial, and which seeds."""
    return f"{len(seeds)} (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})"


def target_summary(results: SweepResults) -> str:
    """'privacy_gap <= 0.05: 3 of 14 trials meet it (ringed in the plot)', or that trials are not certified."""
    spec = results.spec
    if not spec.certifies():
        return "none (trials are not certified)"
    t = _finished(results)
    return (
        f"{spec.target_text()}: {int(meets_target(t).sum())} of {len(t)} finished trials meet it (ringed in the plot)"
    )


def front_html(results: SweepResults, path: str | Path, figure: Any = None) -> Path:
    """The trade-off as one self-contained HTML file: the PNG's figure as SVG (click a point for its trial's row),
    the summary, and the front's and all trials' sortable tables."""
    s = results.summary()
    rows = [
        ("method / dataset", f"{results.spec.method} / {results.spec.dataset}"),
        ("objectives", ", ".join(f"{o.metric} ({o.direction})" for o in results.spec.objectives)),
        (
            "trials",
            f"{s['trials']} ({s['finished']} finished, {s['failed']} failed"
            + (f", {s['infeasible']} infeasible" if results.spec.constraints else "")
            + ")",
        ),
        ("seeds per trial", seeds_text(results.spec.seeds)),
        ("leakage target", target_summary(results)),
        ("hypervolume", hypervolume_text(results, label=False)),
        (
            "convex-hull AUC",
            "n/a"
            if results.chull_auc is None or not results.axes
            else f"{results.chull_auc:.4f} ({results.axes[1]} over {chull_leakage_label(results.axes[0])}, "
            f"origin {results.spec.chull_origin})",
        ),
        ("MLflow parent run", f"{results.parent_run_id} at {results.tracking_uri}"),
    ]
    summary = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(results.name)} — Pareto front</title>
<style>{_CSS}</style><script>{_JS}</script></head>
<body>
<h1>{html.escape(_title(results))}</h1>
<p>{html.escape(_subtitle(results))}</p>
<table class="summary">{summary}</table>
<p><label><input type="checkbox" checked onchange="toggleDominated(this)"> show dominated and infeasible trials</label>
 — click a point for its trial's row; click a column header to sort.</p>
{front_svg(results, figure)}
<h2>Pareto front ({len(results.front)} trials)</h2>
{_table(results.front, results, "front")}
<h2>All trials</h2>
{_table(results.trials, results, "trials", anchors=True)}
</body></html>
"""
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path
