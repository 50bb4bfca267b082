"""A sweep's report files: trials as Parquet and CSV, the front as CSV, the summary as JSON, the trade-off plots
(PNG and HTML, from `veil.sweeps.plots`). Sits above `results` (the analysis) and `plots` (the drawing)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from veil.sweeps.plots import front_figure, front_html, front_png
from veil.sweeps.results import DEFAULT_ROOT, SweepResults, collect, locate

REPORT_FILES = ("trials.parquet", "trials.csv", "front.csv", "summary.json", "front.png", "front.html")


def _parquet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding more than one Python type (a categorical over [2, 'a']) become strings."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object:
            kinds = {type(v) for v in out[col] if v is not None and not (isinstance(v, float) and math.isnan(v))}
            if len(kinds) > 1:
                out[col] = out[col].map(lambda v: None if v is None else str(v))
    return out


def write_report(results: SweepResults, out_dir: str | Path) -> dict[str, Path]:
    """trials.parquet, trials.csv, front.csv, summary.json, front.png and front.html under `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {name: out / name for name in REPORT_FILES}
    t = _parquet_safe(results.trials)
    t.to_parquet(files["trials.parquet"], index=False)
    t.to_csv(files["trials.csv"], index=False)
    results.front.to_csv(files["front.csv"], index=False)
    files["summary.json"].write_text(json.dumps(results.summary(), indent=2, default=str) + "\n")
    figure = front_figure(results)  # drawn once, saved as the PNG and as the page's SVG
    front_png(results, files["front.png"], figure)
    front_html(results, files["front.html"], figure)
    return files


def report(
    ref: str,
    *,
    tracking_uri: str | None = None,
    out_dir: str | Path | None = None,
    storage_root: str | Path = DEFAULT_ROOT,
) -> tuple[SweepResults, dict[str, Path]]:
    """Read a sweep back from MLflow (any process) and write its report files."""
    sref, state = locate(ref, tracking_uri=tracking_uri, storage_root=storage_root)
    results = collect(sref)
    if out_dir is None:
        out_dir = (Path(state["storage"]) / "report") if state else (Path(storage_root) / sref.name / "report")
    return results, write_report(results, out_dir)


__all__ = ["REPORT_FILES", "report", "write_report"]
