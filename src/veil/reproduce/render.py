"""A reproduction suite's results, from MLflow records alone: each variant's latest sweep (read back, saved
next to the table and merged with earlier builds'), the verdict of every published figure, the RESULTS.md
table, results.json and the fronts. (README.md's short block is rendered from results.json by
tools/reproduce_readme.py.)"""

from __future__ import annotations

import json
import math
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from veil.reproduce.suite import REPRO_TAG, Entry, Figure, ReproSuite, Row, sweep_spec, variants

#: figures of a whole sweep rather than one of its trials
SWEEP_FIGURES = ("chull_auc", "hypervolume")
#: |Veil - paper| within tolerance: reproduced; within CLOSE x tolerance: close
CLOSE = 2.5
#: both sides of a match leak what the unencoded data leaks (the row's `reference` entry)
NEITHER_HIDES = "matches, but neither hides"
#: an adversary accuracy at the majority rate matches, but the same probe's AUC is off chance by > tolerance
AUC_LEAKS = "accuracy matches, but AUC leaks"
#: every verdict, in the order the counts list them
VERDICTS = ("reproduced", NEITHER_HIDES, AUC_LEAKS, "close", "not reproduced", "not run")


@dataclass
class Measured:
    """An entry variant's latest recorded sweep: each trial's searched values and metrics (means and std/)."""

    sweep: str
    run_id: str
    trials: list[dict[str, Any]]
    sweep_metrics: dict[str, float]
    seeds: int
    source: str = ""
    """the tracking store the sweep was read from"""
    started: int = 0
    """the sweep's start time (ms since the epoch): the newest record of a variant wins"""

    def point(self, at: Mapping[str, Any]) -> dict[str, Any] | None:
        """The trial at grid point `at` (the only trial when `at` is empty and there is one)."""
        hits = [t for t in self.trials if all(_same(t.get(k), v) for k, v in at.items())]
        return hits[0] if len(hits) == 1 or (hits and at) else None


def _same(a: Any, b: Any) -> bool:
    if isinstance(b, (list, tuple)):  # list-valued knobs (per-client beta) are stored as JSON text
        try:
            got = json.loads(a) if isinstance(a, str) else a
        except ValueError:
            return False
        return isinstance(got, list) and len(got) == len(b) and all(_same(x, y) for x, y in zip(got, b))
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return str(a) == str(b)


def latest_records(uri: str, suite: ReproSuite, mode: str) -> dict[tuple[str, str, str], Measured]:
    """(row, entry, preset) -> the latest FINISHED sweep of that variant recorded in MLflow in `mode` (only the
    latest of each is read back)."""
    from veil.sweeps.results import (
        TAG_ROLE,
        TAG_SWEEP,
        SweepRef,
        dedupe_attempts,
        load_spec,
        search_child_runs,
        search_runs,
        trials_frame,
    )

    runs = search_runs(
        uri,
        f"tags.`{REPRO_TAG}` = 'true' and tags.`{REPRO_TAG}.mode` = '{mode}' "
        f"and tags.`{REPRO_TAG}.suite` = '{suite.path.name}' and attributes.status = 'FINISHED'",
    )
    wanted = read_metrics(suite)
    latest: dict[tuple[str, str, str], Any] = {}
    for r in sorted(runs, key=lambda r: r.info.start_time):
        t = r.data.tags
        latest[(t[f"{REPRO_TAG}.row"], t[f"{REPRO_TAG}.entry"], t[f"{REPRO_TAG}.preset"])] = r
    out: dict[tuple[str, str, str], Measured] = {}
    for key, r in latest.items():
        ref = SweepRef(
            r.data.tags.get(TAG_SWEEP, r.info.run_id), r.info.run_id, r.info.experiment_id, uri, None, r.info.status
        )
        spec = load_spec(ref)
        children = [
            c
            for c in search_child_runs(uri, ref.parent_run_id, ref.experiment_id)
            if c.data.tags.get(TAG_ROLE) == "trial"
        ]
        kept, _ = dedupe_attempts(children)
        frame = trials_frame(kept, spec)
        by_id = {c.info.run_id: c for c in kept}
        trials = []
        for _, row in frame.iterrows():
            run = by_id[row["run_id"]]
            if run.info.status != "FINISHED":
                continue
            kept_metrics = {k: v for k, v in run.data.metrics.items() if k in wanted or k.startswith(LABEL_METRICS)}
            trials.append({**{sp.key: row[sp.key] for sp in spec.space}, **kept_metrics})
        sweep_metrics = {k: v for k, v in r.data.metrics.items() if k in SWEEP_FIGURES}
        out[key] = Measured(ref.name, r.info.run_id, trials, sweep_metrics, len(spec.seeds), uri, r.info.start_time)
    return out


RECORDS_FILE = "records.json"
"""Each variant's latest recorded sweep, saved next to the table so a build on another store keeps it."""


#: per-label metrics every record keeps (with their std/), whatever the figures name: the verdicts read the
#: majority rate, AUC and privacy gap behind an adversary accuracy
LABEL_METRICS = tuple(
    p + m for p in ("", "std/") for m in ("majority/", "adversary_acc/", "adversary_auc/", "privacy_gap/")
)


def read_metrics(suite: ReproSuite) -> set[str]:
    """The trial metrics the table and fronts read: every figure's and every objective, with their std/."""
    from veil.sweeps.results import STD_PREFIX

    names = {m for row in suite.rows for f in row.figures for m in f.metrics}
    names |= {m for spec in suite.specs.values() for m in spec.metrics}
    return names | {STD_PREFIX + m for m in names}


def save_records(path: Path, records: Mapping[tuple[str, str, str], Measured]) -> None:
    """Write the records (each variant's latest sweep, as read from MLflow) to `path` as JSON."""
    rows = [{"row": r, "entry": e, "preset": p, **asdict(m)} for (r, e, p), m in sorted(records.items())]
    path.write_text(json.dumps(rows, indent=1, default=str))


def load_records(path: Path) -> dict[tuple[str, str, str], Measured]:
    """Records saved by `save_records` ({} when there is no such file)."""
    if not path.is_file():
        return {}
    rows = json.loads(path.read_text())
    return {(r.pop("row"), r.pop("entry"), r.pop("preset")): Measured(**r) for r in rows}


def newest(*stores: Mapping[tuple[str, str, str], Measured]) -> dict[tuple[str, str, str], Measured]:
    """Per variant, the record whose sweep started last across `stores`."""
    out: dict[tuple[str, str, str], Measured] = {}
    for store in stores:
        for key, m in store.items():
            if key not in out or m.started > out[key].started:
                out[key] = m
    return out


@dataclass
class Cell:
    """Veil's value of one metric: mean, std over seeds (None for one seed or a sweep figure)."""

    mean: float | None
    std: float | None = None

    def text(self) -> str:
        if self.mean is None or not math.isfinite(self.mean):
            return "—"
        return f"{self.mean:.3f}" + (f" ± {self.std:.3f}" if self.std is not None else "")


def measure(rec: Measured | None, at: Mapping[str, Any], metric: str) -> Cell:
    """The recorded value of `metric` at grid point `at` of a variant's sweep (a sweep figure when the metric is one)."""
    if rec is None:
        return Cell(None)
    if metric in SWEEP_FIGURES:
        return Cell(rec.sweep_metrics.get(metric))
    trial = rec.point(at)
    if trial is None or metric not in trial:
        return Cell(None)
    std = trial.get("std/" + metric) if rec.seeds > 1 else None
    return Cell(float(trial[metric]), None if std is None else float(std))


@dataclass
class Line:
    """One line of the results table: a published figure, Veil's values at both variants, the verdict."""

    row: Row
    figure: Figure
    paper: dict[str, str]
    at_paper: dict[str, Cell]
    at_default: dict[str, Cell] | None
    verdict: str
    reason: str
    targets: dict[str, Cell | float] = field(default_factory=dict)
    """metric -> the paper's number, or the other entry's recorded figure for a relative claim"""


def _is_leakage(metric: str) -> bool:
    """Whether `metric` measures what the adversary reads (accuracy, AUC, privacy gap, log-loss; worst case or
    per label)."""
    return metric.startswith(("adversary_", "privacy_gap"))


def _num(cell: Cell | float | None) -> float | None:
    value = cell.mean if isinstance(cell, Cell) else cell
    return None if value is None or not math.isfinite(float(value)) else float(value)


def _neither_hides(
    row: Row,
    measured: Mapping[str, Cell],
    targets: Mapping[str, Cell | float],
    reference: Mapping[str, Cell],
    other: str,
) -> str | None:
    """When every leakage figure of both sides (Veil's and the paper's or the other entry's) is within the row's
    tolerance of what the reference entry (the unencoded data) leaks, the reason the match is vacuous."""
    leak = [m for m in targets if _is_leakage(m)]
    if not leak:
        return None
    parts = []
    for m in leak:
        got, want, ref = _num(measured[m]), _num(targets[m]), _num(reference.get(m))
        if got is None or want is None or ref is None:
            return None
        if abs(got - ref) > row.tolerance or abs(want - ref) > row.tolerance:
            return None
        parts.append(f"{m} {got:.3f} here, {want:.3f} {other}, {ref:.3f} on the unencoded data ({row.reference})")
    return "neither side hides: " + "; ".join(parts) + f", all within {row.tolerance:g}"


def _accuracy_at_majority(row: Row, measured: Mapping[str, Cell], trial: Mapping[str, Any]) -> str | None:
    """When an adversary accuracy of the figure sits within the row's tolerance of the majority rate (an accuracy
    that cannot tell hiding from leaking) while the same probe's privacy gap |AUC - 0.5| exceeds the tolerance,
    the reason the accuracy's match does not show hiding."""
    for m, cell in measured.items():
        if not (m == "adversary_acc" or m.startswith("adversary_acc/")):
            continue
        acc = _num(cell)
        if acc is None:
            continue
        if m == "adversary_acc":  # the worst case over sensitive labels: every label's probe at its majority rate
            labels = sorted(k.split("/", 1)[1] for k in trial if k.startswith("privacy_gap/"))
            accs = {x: trial.get(f"adversary_acc/{x}", acc if len(labels) == 1 else None) for x in labels}
            gap_m, auc_m = "privacy_gap", "adversary_auc"
        else:
            labels = [m.split("/", 1)[1]]
            accs = {labels[0]: acc}
            gap_m, auc_m = f"privacy_gap/{labels[0]}", f"adversary_auc/{labels[0]}"
        majority = {x: _num(trial.get(f"majority/{x}")) for x in labels}
        known = {x: (_num(accs[x]), majority[x]) for x in labels}
        pairs = [(a, b) for a, b in known.values() if a is not None and b is not None]
        if not labels or len(pairs) < len(labels):
            continue  # the majority rate was not recorded
        if any(abs(a - b) > row.tolerance for a, b in pairs):
            continue
        gap, auc = trial.get(gap_m), trial.get(auc_m)
        if gap is None or not float(gap) > row.tolerance:
            continue
        rates = ", ".join(f"{b:.3f}" for _, b in pairs)
        return (
            f"{m} {acc:.3f} is the majority rate ({rates}), which cannot tell hiding from leaking; the same probe's "
            + (f"AUC {float(auc):.3f} leaks" if auc is not None else "AUC leaks")
            + f" (privacy gap {float(gap):.3f} > {row.tolerance:g})"
        )
    return None


def verdict(
    row: Row,
    measured: Mapping[str, Cell],
    targets: Mapping[str, Cell | float],
    *,
    trial: Mapping[str, Any] | None = None,
    reference: Mapping[str, Cell] | None = None,
    other: str = "in the paper",
) -> tuple[str, str]:
    """The figure's verdict and the reason behind it.

    By the largest gap between Veil's means and the targets (the paper's numbers or another entry's figures):
    reproduced (within the row's tolerance), close (within CLOSE times it), not reproduced, or not run. A match
    that says nothing about hiding is not reproduced: NEITHER_HIDES when both sides' leakage figures are within
    tolerance of `reference` (the unencoded data's, on the same metrics; `other` names the other side), AUC_LEAKS
    when an adversary accuracy is at the majority rate while the same probe's privacy gap exceeds the tolerance
    (`trial`: the recorded trial's metrics, with majority/, privacy_gap/ and adversary_auc/ per label). For a
    close or not reproduced figure those findings are added to the reason."""
    gaps = {}
    for m, target in targets.items():
        got = measured[m].mean
        want = target.mean if isinstance(target, Cell) else float(target)
        if got is None or want is None or not math.isfinite(got):
            return "not run", f"no recorded value of {m}"
        gaps[m] = abs(got - want)
    worst = max(gaps, key=lambda k: gaps[k])
    gap = gaps[worst]
    said = f"largest gap {worst} {gap:.3f} (tolerance {row.tolerance:g})"
    base = "reproduced" if gap <= row.tolerance else "close" if gap <= CLOSE * row.tolerance else "not reproduced"
    vacuous = _neither_hides(row, measured, targets, reference, other) if reference else None
    leaks = _accuracy_at_majority(row, measured, trial or {})
    if base == "reproduced" and vacuous:
        return NEITHER_HIDES, f"{said}; {vacuous}"
    if base == "reproduced" and leaks:
        return AUC_LEAKS, f"{said}; {leaks}"
    return base, "; ".join([said, *(x for x in (vacuous, leaks) if x)])


def _main_preset(entry: Entry) -> str:
    """The variant a verdict reads: preset paper when the entry runs it, else the spec as written."""
    return "paper" if "paper" in entry.presets else entry.presets[0] or "spec"


def build_lines(suite: ReproSuite, records: Mapping[tuple[str, str, str], Measured]) -> list[Line]:
    """The table's lines, one per published figure, from the recorded sweeps."""
    lines = []
    for row in suite.rows:
        for f in row.figures:
            entry = row.entries[f.entry]
            rec = records.get((row.id, f.entry, _main_preset(entry)))
            rec_default = records.get((row.id, f.entry, "default")) if "default" in entry.presets else None
            at_paper = {m: measure(rec, f.at, m) for m in f.metrics}
            at_default = {m: measure(rec_default, f.at, m) for m in f.metrics} if "default" in entry.presets else None
            paper: dict[str, str] = {}
            targets: dict[str, Cell | float] = {}
            others = set()
            for m, value in f.metrics.items():
                if isinstance(value, Mapping):
                    other = row.entries[value["same_as"]]
                    ref = measure(records.get((row.id, other.label, _main_preset(other))), value.get("at") or {}, m)
                    paper[m] = f"= {other.label}" + (f" (Veil {ref.text()})" if ref.mean is not None else "")
                    targets[m] = ref
                    others.add(other.label)
                else:
                    paper[m] = f"{float(value):g}"
                    targets[m] = float(value)
            reference = None
            if row.reference is not None:
                ref_entry = row.entries[row.reference]
                ref_rec = records.get((row.id, ref_entry.label, _main_preset(ref_entry)))
                reference = {m: measure(ref_rec, {}, m) for m in f.metrics}
            side = f"in {' and '.join(sorted(others))}" if others else "in the paper"
            trial = (rec.point(f.at) if rec is not None else None) or {}
            said, why = verdict(row, at_paper, targets, trial=trial, reference=reference, other=side)
            lines.append(Line(row, f, paper, at_paper, at_default, said, why, targets))
    return lines


def _figure_label(f: Figure) -> str:
    at = ", ".join(f"{k}={v}" for k, v in f.at.items())
    return f.entry + (f" at {at}" if at else "")


def _cells(cells: Mapping[str, Cell] | None) -> str:
    if cells is None:
        return "— (one variant: the spec as written)"
    return "<br>".join(f"{m} {c.text()}" for m, c in cells.items())


def relative(path: Path, base: Path) -> str | None:
    """`path` relative to the folder `base` (POSIX), or None when it lies outside it."""
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return None


def command(suite: ReproSuite, mode: str, row: str | None = None) -> str:
    """The `veil nightly` command that reruns `suite` (its path relative to the working directory where it lies
    below it)."""
    rel = relative(suite.path, Path.cwd()) or suite.path.as_posix()
    return f"veil nightly --suite {rel}" + (" --quick" if mode == "quick" else "") + (f" --only {row}" if row else "")


def counts_line(verdicts: Sequence[str], values: bool = True) -> str:
    """'N figures: n1 verdict1; n2 verdict2; ...' over every verdict that occurs (and, where the table shows
    figures, `values`, what they are)."""
    counts = {v: sum(x == v for x in verdicts) for v in VERDICTS}
    summary = "; ".join(f"{n} {v}" for v, n in counts.items() if n)
    return f"{len(verdicts)} figures: {summary}." + (" Values are means ± std over seeds." if values else "")


def _span(values: Sequence[float | None], fmt: str) -> str:
    """'a' or 'lo–hi' over the known values (as formatted), '—' when none is known."""
    known = sorted({format(v, fmt) for v in values if v is not None and math.isfinite(v)}, key=float)
    return "—" if not known else known[0] if len(known) == 1 else f"{known[0]}–{known[-1]}"


def _row_figures(lines: Sequence[Line]) -> str:
    """A row's figures on one line: per entry (and its number of grid points), each metric's Veil value at
    `preset: paper` (a range over the entry's figures) with the paper's in brackets, or the other entry's for a
    relative claim."""
    by_entry: dict[str, list[Line]] = {}
    for ln in lines:
        by_entry.setdefault(ln.figure.entry, []).append(ln)
    parts = []
    for entry, group in by_entry.items():
        metrics = list(dict.fromkeys(m for ln in group for m in ln.figure.metrics))
        cells = []
        for m in metrics:
            got = _span([ln.at_paper[m].mean for ln in group if m in ln.at_paper], ".3f")
            numbers = [t for ln in group for t in [ln.targets.get(m)] if isinstance(t, (int, float))]
            relative_to = sorted(
                {
                    str(ln.figure.metrics[m]["same_as"])
                    for ln in group
                    if m not in numbers and isinstance(ln.figure.metrics.get(m), Mapping)
                }
            )
            if numbers:
                want = f"paper {_span(numbers, 'g')}"
            else:
                refs = [_num(t) for ln in group for t in [ln.targets.get(m)] if isinstance(t, Cell)]
                want = f"{' / '.join(relative_to)} {_span(refs, '.3f')}"
            cells.append(f"{m} {got} ({want})")
        label = entry if len(group) == 1 else f"{entry} ({len(group)} points)"
        if len(group) == 1 and group[0].figure.at:
            label = _figure_label(group[0].figure)
        parts.append(f"{label}: " + ", ".join(cells))
    return "; ".join(parts)


def row_verdicts(verdicts: Sequence[str]) -> str:
    """A row's verdicts in bold, each with its count when the row has several figures."""
    if len(verdicts) == 1:
        return f"**{verdicts[0]}**"
    counts = {v: sum(x == v for x in verdicts) for v in VERDICTS}
    return ", ".join(f"**{v}** ({n})" for v, n in counts.items() if n)


def format_summary(suite: ReproSuite, lines: Sequence[Line], section: Any, front: Any) -> str:
    """One line per row: its id and paper figure, Veil's figures at `preset: paper` with the paper's, the verdicts,
    and links to the row's section (`section(row_id)`) and front (`front(row_id)`, None when none was drawn);
    then the counts line. No causes: they are in each row's section of RESULTS.md."""
    out = [
        "| row | paper | Veil at `preset: paper` (paper) | verdict | details |",
        "|---|---|---|---|---|",
    ]
    for row, mine, links in _summary_rows(suite, lines, section, front):
        out.append(
            f"| **{row.id}** | {row.paper} | {_row_figures(mine)} | {row_verdicts([ln.verdict for ln in mine])} | {links} |"
        )
    return "\n".join(out) + f"\n\n{counts_line([ln.verdict for ln in lines])}\n"


def _summary_rows(
    suite: ReproSuite, lines: Sequence[Line], section: Any, front: Any
) -> Iterator[tuple[Any, list[Line], str]]:
    """Each row of `suite` with lines: the row, its lines, and its links (its section, its front if drawn)."""
    for row in suite.rows:
        mine = [ln for ln in lines if ln.row.id == row.id]
        if not mine:
            continue
        png = front(row.id)
        yield row, mine, " · ".join([f"[table and cause]({section(row.id)})", *([f"[front]({png})"] if png else [])])


def format_row_table(lines: Sequence[Line]) -> str:
    """One row's figures in full: paper figure | Veil at preset: paper | Veil at its defaults | verdict and reason."""
    out = [
        "| paper figure | Veil at `preset: paper` | Veil at its defaults | verdict |",
        "|---|---|---|---|",
    ]
    for ln in lines:
        paper = f"{_figure_label(ln.figure)}: " + ", ".join(f"{m} {v}" for m, v in ln.paper.items())
        if ln.figure.note:
            paper += f"<br>*{ln.figure.note}*"
        out.append(f"| {paper} | {_cells(ln.at_paper)} | {_cells(ln.at_default)} | **{ln.verdict}**: {ln.reason} |")
    return "\n".join(out) + "\n"


def format_rows(suite: ReproSuite, lines: Sequence[Line], mode: str, fronts: Mapping[str, Path]) -> str:
    """Per row (a `### <id>` section): the paper, the data, the substitute and why, the entries' specs, the
    tolerance, the time, the command, the front, every figure with its verdict, and the cause of the gaps."""
    out = []
    for r in suite.rows:
        out.append(f"### {r.id}\n\n- paper: {r.paper}\n- data: {r.data}")
        if r.substitute:
            out.append(f"- substitute: {r.substitute}")
        specs = ", ".join(
            f"{e.label} `{e.spec.name}`"
            + (f" with `{json.dumps(e.overrides, sort_keys=True)}`" if e.overrides else "")
            + (f" ({' and '.join(e.presets)})" if e.presets != ("",) else "")
            + (" (the unencoded data: the reference of every leakage figure)" if e.label == r.reference else "")
            for e in r.entries.values()
        )
        out.append(f"- entries: {specs}\n- tolerance: {r.tolerance:g}")
        if r.seeds is not None:
            out.append(f"- seeds: {r.seeds} (the suite's: {suite.seeds})")
        if r.estimate:
            out.append(f"- full-mode time: {r.estimate}")
        out.append(f"- command: `{command(suite, mode, r.id)}`")
        if r.id in fronts:
            out.append(f"- front: [fronts/{fronts[r.id].name}](fronts/{fronts[r.id].name})")
        out.append("\n" + format_row_table([ln for ln in lines if ln.row.id == r.id]))
        out.append(f"**Cause of the gaps**: {r.why or 'not investigated yet'}\n")
    return "\n".join(out)


def fronts_png(
    suite: ReproSuite, row: Row, records: Mapping[tuple[str, str, str], Measured], path: Path
) -> Path | None:
    """Each entry variant's trials of one row on its first two objectives' axes, the paper's figures as stars."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 4.4))
    ax = fig.subplots()
    shown = False
    axes_names: tuple[str, str] | None = None
    lines: dict[float, list[str]] = {}  # the paper's utility-only figures: value -> entries
    stars = False
    for entry in row.entries.values():
        spec = sweep_spec(suite, row, entry, entry.presets[0], "full")
        mets = list(spec.metrics)
        if len(mets) < 2:
            continue
        axes_names = axes_names or (mets[1], mets[0])
        x_m, y_m = axes_names
        for preset in entry.presets:
            rec = records.get((row.id, entry.label, preset or "spec"))
            if rec is None:
                continue
            pts = [(t.get(x_m), t.get(y_m)) for t in rec.trials if x_m in t and y_m in t]
            if not pts:
                continue
            xs, ys = zip(*sorted(pts))
            ax.plot(xs, ys, marker="o", linestyle=":", label=f"{entry.label}" + (f" ({preset})" if preset else ""))
            shown = True
        for f in row.figures:
            if f.entry != entry.label or axes_names is None:
                continue
            px, py = (f.metrics.get(m) for m in axes_names)
            auc = f.metrics.get("adversary_auc")
            if px is None and axes_names[0] == "privacy_gap" and isinstance(auc, (int, float)):
                px = abs(float(auc) - 0.5)  # the paper's adversary AUC on the gap axis
            if isinstance(px, (int, float)) and isinstance(py, (int, float)):
                ax.plot(px, py, marker="*", markersize=14, color="black", linestyle="none")
                stars = True
            elif isinstance(py, (int, float)):  # the paper gives only the utility axis: a line at its value
                lines.setdefault(float(py), []).append(entry.label)
    if not shown or axes_names is None:
        return None
    for y, labels in lines.items():
        ax.axhline(y, color="black", linestyle="--", linewidth=0.8)
        ax.annotate(f" paper: {', '.join(labels)}", (0, y), xycoords=("axes fraction", "data"), fontsize=7, va="bottom")
    if stars:  # relative claims ({same_as: ...}) have no point of their own
        ax.plot([], [], marker="*", color="black", linestyle="none", label="paper (both axes)")
    ax.set_xlabel(axes_names[0])
    ax.set_ylabel(axes_names[1])
    ax.set_title("\n".join(textwrap.wrap(f"{row.id}: {row.paper}", 90)), fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def write_results(suite: ReproSuite, uri: str, mode: str, out_dir: Path) -> tuple[str, list[Line], dict[str, Path]]:
    """Build the table and the fronts into `out_dir` (RESULTS.md, results.json, records.json, fronts/) from the
    MLflow records at `uri` and those saved in `out_dir`'s records.json by an earlier build (another store, an
    earlier machine): per variant, the sweep that started last. Returns the one-line-per-row summary (links
    relative to `out_dir`), the lines and the fronts."""
    out_dir.mkdir(parents=True, exist_ok=True)
    known = {(r.id, e.label, p or "spec") for r, e, p in variants(suite)}
    saved = out_dir / RECORDS_FILE
    records = {k: m for k, m in newest(load_records(saved), latest_records(uri, suite, mode)).items() if k in known}
    save_records(saved, records)
    lines = build_lines(suite, records)
    pngs = {}
    for row in suite.rows:
        png = fronts_png(suite, row, records, out_dir / "fronts" / f"{row.id}.png")
        if png is not None:
            pngs[row.id] = png
    summary = format_summary(
        suite, lines, lambda rid: f"#{rid}", lambda rid: f"fronts/{pngs[rid].name}" if rid in pngs else None
    )
    sources = "\n".join(
        f"- {r}/{e}/{p}: sweep `{m.sweep}` (MLflow run {m.run_id} at `{m.source}`, started "
        f"{time.strftime('%Y-%m-%d', time.gmtime(m.started / 1000))}, {m.seeds} seed(s))"
        for (r, e, p), m in sorted(records.items())
    )
    text = (
        f"# Paper reproductions ({mode} mode)\n\nGenerated by `{command(suite, mode)} --table` from MLflow records: "
        f"those at `{uri}` and those an earlier build saved in {RECORDS_FILE} (each variant's latest sweep; where "
        f"each was read from is listed below); never edited by hand.\n\n{summary}\n"
        f"## Rows\n\n{format_rows(suite, lines, mode, pngs)}\n"
        f"## Records behind the table\n\n{sources or '(none)'}\n"
    )
    (out_dir / "RESULTS.md").write_text(text)
    as_json = [line_record(ln) for ln in lines]
    (out_dir / "results.json").write_text(json.dumps(as_json, indent=1, default=str))
    return summary, lines, pngs


def line_record(ln: Line) -> dict[str, Any]:
    """One figure as results.json holds it (what tools/reproduce_readme.py reads)."""
    return {
        "row": ln.row.id,
        "entry": ln.figure.entry,
        "at": dict(ln.figure.at),
        "paper": ln.paper,
        "note": ln.figure.note,
        "veil_paper": {m: [c.mean, c.std] for m, c in ln.at_paper.items()},
        "veil_default": None if ln.at_default is None else {m: [c.mean, c.std] for m, c in ln.at_default.items()},
        "verdict": ln.verdict,
        "reason": ln.reason,
        "cause": ln.row.why,
    }
