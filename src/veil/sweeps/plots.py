"""Plots of a sweep's trade-off: a PNG (matplotlib, Agg) and a self-contained HTML page (inline SVG, a few
lines of inline JS, no network). Front members are drawn solid and labelled by their parameters; dominated
trials faintly; infeasible trials (constraints) as crosses; error bars show the std over seeds."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from veil.sweeps.results import SweepResults, chull_leakage_label
from veil.sweeps.spec import format_value, is_gap_metric

FRONT_COLOR = "#1f6fb4"
DOMINATED_COLOR = "#9a9a9a"
INFEASIBLE_COLOR = "#c0504d"


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
    t = f"{results.name}: {s.method} on {s.dataset} — hypervolume {results.hypervolume:.4f}"
    if results.chull_auc is not None:
        t += f", convex-hull AUC {results.chull_auc:.3f}"
    return t


def _std(row: pd.Series, metric: str | None) -> float:
    if metric is None:
        return 0.0
    v = row.get("std/" + metric)
    return float(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else 0.0


def front_png(results: SweepResults, path: str | Path) -> Path:
    """The trade-off as a PNG."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    xm, ym = plot_axes(results)
    t = _finished(results)
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    x = (t[xm] if xm else t["trial"]).to_numpy(dtype=float)
    y = t[ym].to_numpy(dtype=float)
    front = t["pareto"].to_numpy(dtype=bool)
    feas = t["feasible"].to_numpy(dtype=bool)
    dom = feas & ~front
    if dom.any():
        ax.scatter(x[dom], y[dom], s=28, color=DOMINATED_COLOR, alpha=0.35, label="dominated", zorder=2)
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
        )
    if front.any():
        ft = t[front]
        fx, fy = x[front], y[front]
        xe = np.array([_std(r, xm) for _, r in ft.iterrows()])
        ye = np.array([_std(r, ym) for _, r in ft.iterrows()])
        if (xe > 0).any() or (ye > 0).any():
            ax.errorbar(fx, fy, xerr=xe if xm else None, yerr=ye, fmt="none", ecolor=FRONT_COLOR, alpha=0.5, zorder=3)
        order = np.argsort(fx)
        if xm:
            ax.plot(fx[order], fy[order], "-", color=FRONT_COLOR, alpha=0.6, lw=1.2, zorder=3)
        ax.scatter(fx, fy, s=46, color=FRONT_COLOR, edgecolor="white", linewidth=0.8, label="Pareto front", zorder=4)
        for k, i in enumerate(order):  # alternate above/below along the front so neighbours do not collide
            ax.annotate(
                _label(ft.iloc[i], results),
                (fx[i], fy[i]),
                textcoords="offset points",
                xytext=(6, 5) if k % 2 == 0 else (6, -11),
                fontsize=7,
                color="#203040",
                zorder=5,
            )
    ax.set_xlabel(axis_label(xm, results))
    ax.set_ylabel(axis_label(ym, results))
    ax.set_title(_title(results), fontsize=9)
    ax.grid(alpha=0.25)
    if len(t):
        ax.legend(fontsize=8, loc="best")
    else:
        ax.text(0.5, 0.5, "no finished trials", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------------
# HTML


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    out, v = [], start
    while v <= hi + 1e-12:
        out.append(round(v, 12))
        v += step
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return "" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def _tooltip(row: pd.Series, results: SweepResults) -> str:
    parts = [f"trial {row['trial']} ({row['trial_id']})", _label(row, results)]
    for m in results.spec.tracked_metrics():
        v = row.get(m)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        sd = _std(row, m)
        parts.append(f"{m} {v:.4f}" + (f" ± {sd:.4f}" if sd else ""))
    parts.append(f"MLflow run {row['run_id']}")
    return "\n".join(parts)


def _svg(results: SweepResults, width: int = 760, height: int = 500) -> str:
    xm, ym = plot_axes(results)
    t = _finished(results)
    ml, mr, mt, mb = 70, 30, 20, 55
    pw, ph = width - ml - mr, height - mt - mb
    if len(t):
        xs = (t[xm] if xm else t["trial"]).to_numpy(dtype=float)
        ys = t[ym].to_numpy(dtype=float)
        x0, x1, y0, y1 = float(xs.min()), float(xs.max()), float(ys.min()), float(ys.max())
    else:
        x0, x1, y0, y1 = 0.0, 1.0, 0.0, 1.0
    padx, pady = max((x1 - x0) * 0.08, 1e-3), max((y1 - y0) * 0.08, 1e-3)
    x0, x1, y0, y1 = x0 - padx, x1 + padx, y0 - pady, y1 + pady
    sx = lambda v: ml + (v - x0) / (x1 - x0) * pw  # noqa: E731
    sy = lambda v: mt + (1 - (v - y0) / (y1 - y0)) * ph  # noqa: E731
    out = [
        f'<svg id="plot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fbfbfb" stroke="#999"/>',
    ]
    for v in _ticks(x0, x1):
        X = sx(v)
        out.append(
            f'<line x1="{X:.1f}" y1="{mt}" x2="{X:.1f}" y2="{mt + ph}" stroke="#e4e4e4"/>'
            f'<text x="{X:.1f}" y="{mt + ph + 16}" text-anchor="middle">{_fmt(v)}</text>'
        )
    for v in _ticks(y0, y1):
        Y = sy(v)
        out.append(
            f'<line x1="{ml}" y1="{Y:.1f}" x2="{ml + pw}" y2="{Y:.1f}" stroke="#e4e4e4"/>'
            f'<text x="{ml - 6}" y="{Y + 4:.1f}" text-anchor="end">{_fmt(v)}</text>'
        )
    xlab, ylab = html.escape(axis_label(xm, results)), html.escape(axis_label(ym, results))
    out.append(f'<text x="{ml + pw / 2:.1f}" y="{height - 14}" text-anchor="middle" font-size="13">{xlab}</text>')
    out.append(
        f'<text transform="translate(18,{mt + ph / 2:.1f}) rotate(-90)" text-anchor="middle" font-size="13">'
        f"{ylab}</text>"
    )
    front = t[t["pareto"]]
    if len(front) > 1 and xm:
        pts = sorted(zip(front[xm].astype(float), front[ym].astype(float)))
        out.append(
            '<polyline class="frontline" fill="none" stroke="%s" stroke-opacity="0.6" points="%s"/>'
            % (FRONT_COLOR, " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in pts))
        )
    rank = {}
    if len(front):
        fxs = (front[xm] if xm else front["trial"]).astype(float)
        rank = {idx: k for k, idx in enumerate(fxs.sort_values(kind="stable").index)}
    for idx, r in t.iterrows():
        X, Y = sx(float(r[xm] if xm else r["trial"])), sy(float(r[ym]))
        tip = html.escape(_tooltip(r, results))
        if r["pareto"]:
            ye = _std(r, ym) / (y1 - y0) * ph
            if ye:
                out.append(
                    f'<line x1="{X:.1f}" y1="{Y - ye:.1f}" x2="{X:.1f}" y2="{Y + ye:.1f}" stroke="{FRONT_COLOR}" '
                    'stroke-opacity="0.5"/>'
                )
            out.append(
                f'<g class="pt front"><circle cx="{X:.1f}" cy="{Y:.1f}" r="5.5" fill="{FRONT_COLOR}" '
                f'stroke="white"><title>{tip}</title></circle>'
                f'<text x="{X + 8:.1f}" y="{Y - 6 if rank.get(idx, 0) % 2 == 0 else Y + 14:.1f}" font-size="10" fill="#203040">'
                f"{html.escape(_label(r, results))}</text></g>"
            )
        elif r["feasible"]:
            out.append(
                f'<g class="pt dom"><circle cx="{X:.1f}" cy="{Y:.1f}" r="4.5" fill="{DOMINATED_COLOR}" '
                f'fill-opacity="0.35"><title>{tip}</title></circle></g>'
            )
        else:
            out.append(
                f'<g class="pt dom infeasible"><path d="M{X - 4:.1f},{Y - 4:.1f}L{X + 4:.1f},{Y + 4:.1f}'
                f'M{X - 4:.1f},{Y + 4:.1f}L{X + 4:.1f},{Y - 4:.1f}" stroke="{INFEASIBLE_COLOR}" '
                f'stroke-opacity="0.6" stroke-width="2"><title>{tip}</title></path></g>'
            )
    out.append("</svg>")
    return "\n".join(out)


def _table(df: pd.DataFrame, results: SweepResults, tid: str) -> str:
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
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
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
.hide-dom .dom { display: none; }
.pt:hover circle { stroke: #000; stroke-width: 1.5; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; }
th { background: #f0f0f0; cursor: pointer; }
tr.front td { font-weight: bold; background: #eef4fb; }
tr.failed td { color: #999; }
.summary td { text-align: left; }
"""


def front_html(results: SweepResults, path: str | Path) -> Path:
    """The trade-off as one self-contained HTML file (hover a point for its parameters and metrics)."""
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
        ("seeds per trial", ", ".join(map(str, results.spec.seeds))),
        (
            "hypervolume",
            f"{results.hypervolume:.6f} (reference {dict(zip(results.spec.metrics, results.spec.reference))})",
        ),
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
<table class="summary">{summary}</table>
<p><label><input type="checkbox" checked onchange="toggleDominated(this)"> show dominated and infeasible trials</label>
 — hover a point for its parameters and metrics; click a column header to sort.</p>
{_svg(results)}
<h2>Pareto front ({len(results.front)} trials)</h2>
{_table(results.front, results, "front")}
<h2>All trials</h2>
{_table(results.trials, results, "trials")}
</body></html>
"""
    path = Path(path)
    path.write_text(page, encoding="utf-8")
    return path
