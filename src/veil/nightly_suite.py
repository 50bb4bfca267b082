"""`veil nightly`: run the benchmark suite, compare it with the previous nightly recorded in MLflow, and
fail loudly (exit 1) on a regression: utility down, leakage (privacy_gap = |AUC - 0.5|) up at equal utility,
throughput down, or a sweep's hypervolume down. Scheduling (cron, a systemd timer, a CI schedule) is in docs/nightly.md."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from veil.config import build, param
from veil.errors import ConfigError, UnknownNameError
from veil.names import check_mlflow_name

if TYPE_CHECKING:
    from veil.sweeps.sweepspec import SweepSpec

NIGHTLY_TAG = "veil.nightly"
SUITE_KEYS = ("experiment", "tolerances", "runs", "sweeps")
DEFAULT_SUITE = Path(str(files("veil").joinpath("nightly.yaml")))
"""The suite shipped with Veil (package data), so an installed Veil runs its nightly from any directory."""


@dataclass(frozen=True)
class Tolerances:
    """How much worse than the previous nightly a figure may get before it counts as a regression."""

    utility: float = param(0.02, "largest allowed drop of utility_auc (absolute)", ge=0)
    leakage: float = param(
        0.02, "largest allowed rise of privacy_gap (|AUC - 0.5|) not matched by a utility gain (absolute)", ge=0
    )
    throughput: float = param(0.5, "largest allowed relative drop of training rows/s (timings are noisy)", ge=0, le=1)
    hypervolume: float = param(0.05, "largest allowed relative drop of a sweep's hypervolume", ge=0, le=1)


@dataclass(frozen=True)
class Suite:
    """A nightly benchmark suite: named runs (RunSpec mappings) and named sweeps (validated specs)."""

    experiment: str
    tolerances: Tolerances
    runs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    sweeps: Mapping[str, SweepSpec] = field(default_factory=dict)
    digest: str = ""


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file (safe YAML; unknown keys, methods and params fail here, in runs and sweeps)."""
    from veil.pipeline.execute import spec_from_mapping
    from veil.pipeline.validation import validate
    from veil.sweeps.sweepspec import sweep_from_mapping

    p = Path(path)
    data = read_suite_file(p, SUITE_KEYS)
    for k in data:
        if k not in SUITE_KEYS:
            raise UnknownNameError("suite key", k, list(SUITE_KEYS), where=str(p))
    runs = {}
    for name, mapping in _named(data, "runs", "run spec", p).items():
        validate(spec_from_mapping(mapping, where=f"{p}: runs.{name}"))
        runs[name] = mapping
    sweep_data = {
        name: _sweep_mapping(entry, p, name) for name, entry in _named(data, "sweeps", "sweep spec", p).items()
    }
    if not runs and not sweep_data:
        raise ConfigError("runs", None, "at least one run or sweep", str(p))
    sweeps = {name: sweep_from_mapping(m, where=f"{p}: sweeps.{name}") for name, m in sweep_data.items()}
    # a sweep's spec (not its comments) is part of the suite: other objectives start a new baseline
    digest = hashlib.sha256(json.dumps([runs, sweep_data], sort_keys=True, default=str).encode()).hexdigest()[:12]
    return Suite(
        check_mlflow_name("experiment", data.get("experiment", "veil-nightly"), str(p)),
        build(Tolerances, data.get("tolerances"), where=f"{p}: tolerances"),
        runs,
        sweeps,
        digest,
    )


def read_suite_file(path: Path, keys: Sequence[str]) -> dict[str, Any]:
    """A suite file's top-level mapping; a missing, unreadable or broken file or another top level is a ConfigError."""
    from veil.pipeline.runspec import read_yaml_file

    if path.is_dir():
        raise ConfigError("suite", str(path), "a YAML file, not a directory")
    data = read_yaml_file(path, "suite")
    if not isinstance(data, dict):
        raise ConfigError("suite", brief(data), f"a mapping with keys {', '.join(keys)}", str(path))
    return data


def brief(value: Any) -> Any:
    """`value` itself when its repr is short, else its type's name (an error message shows it)."""
    return value if len(repr(value)) <= 60 else f"a {type(value).__name__}"


def _named(data: Mapping[str, Any], key: str, what: str, suite: Path) -> Mapping[Any, Any]:
    """The suite's `key` section: a mapping of names to entries (empty when absent)."""
    section = data.get(key) or {}
    if not isinstance(section, Mapping):
        raise ConfigError(key, brief(section), f"a mapping of names to {what}s", str(suite))
    return section


def _sweep_mapping(entry: Any, suite: Path, name: str) -> Mapping[str, Any]:
    """A suite's sweep entry as a spec mapping: given inline, or read from a path relative to the suite."""
    if isinstance(entry, Mapping):
        return entry
    if not isinstance(entry, str):
        raise ConfigError(f"sweeps.{name}", entry, "a sweep spec mapping or a sweep spec file's path", str(suite))
    from veil.pipeline.runspec import read_yaml_file

    sp = Path(entry) if Path(entry).is_absolute() else suite.parent / entry
    if not sp.is_file():
        raise ConfigError(f"sweeps.{name}", entry, "a sweep spec file (relative to the suite) or a mapping", str(suite))
    try:
        return read_yaml_file(sp, f"sweeps.{name}")  # sweep_from_mapping refuses a top level that is not a mapping
    except ConfigError as e:
        raise ConfigError(e.field, entry, e.allowed, str(suite)) from None


@dataclass
class Check:
    """One comparison of a figure with the previous nightly."""

    name: str
    current: float
    previous: float | None
    ok: bool
    note: str = ""
    checked: bool = True
    """False for a figure shown for information only (never a regression)."""


def _figure(figures: Mapping[str, float], entry: str, metric: str) -> float | None:
    return figures.get(f"{entry}/{metric}")


def compare(current: Mapping[str, float], previous: Mapping[str, float] | None, tol: Tolerances) -> list[Check]:
    """Regression checks of flat '<entry>/<metric>' figures against the previous nightly's."""
    checks: list[Check] = []
    prev = previous or {}
    entries = sorted({k.split("/", 1)[0] for k in current})
    for e in entries:
        u, u0 = _figure(current, e, "utility_auc"), _figure(prev, e, "utility_auc")
        g, g0 = _figure(current, e, "privacy_gap"), _figure(prev, e, "privacy_gap")
        if u is not None:
            note = "" if u0 is None or u >= u0 - tol.utility else f"dropped {u0 - u:.3f} > {tol.utility}"
            checks.append(Check(f"{e}/utility_auc", u, u0, not note, note))
        if g is not None:  # the gap, not the raw AUC: an adversary turned inverted (AUC 0.8 -> 0.2) leaks as much
            gain = (u - u0) if (u is not None and u0 is not None) else 0.0
            note = (
                ""
                if g0 is None or (g - g0) <= tol.leakage + max(gain, 0.0)
                else f"rose {g - g0:.3f} with utility change {gain:+.3f}"
            )
            checks.append(Check(f"{e}/privacy_gap", g, g0, not note, note))
        a = _figure(current, e, "adversary_auc")
        if a is not None:
            checks.append(Check(f"{e}/adversary_auc", a, _figure(prev, e, "adversary_auc"), True, checked=False))
        for m, t in (("rows_per_second", tol.throughput), ("hypervolume", tol.hypervolume)):
            c, c0 = _figure(current, e, m), _figure(prev, e, m)
            if c is None:
                continue
            note = "" if c0 is None or c0 <= 0 or c >= c0 * (1 - t) else f"fell {1 - c / c0:.0%} > {t:.0%}"
            checks.append(Check(f"{e}/{m}", c, c0, not note, note))
    return checks


def previous_nightly(uri: str, experiment: str, digest: str) -> tuple[str | None, dict[str, float] | None]:
    """Run id and metrics of the latest FINISHED nightly of the same suite, if any."""
    from veil.tracking import client

    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return None, None
    runs = c.search_runs(
        [exp.experiment_id],
        f"tags.`{NIGHTLY_TAG}` = 'true' and tags.`veil.suite` = '{digest}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return (runs[0].info.run_id, dict(runs[0].data.metrics)) if runs else (None, None)


def run_suite(suite: Suite, tracking_uri: str | None, address: str | None = None) -> tuple[str, dict[str, float]]:
    """Run every entry as a child of one parent nightly run; return its id and the flat figures."""
    from veil.pipeline.execute import execute, spec_from_mapping
    from veil.tracking import TrackedRun

    parent = TrackedRun.start(
        tracking_uri,
        suite.experiment,
        f"nightly-{time.strftime('%Y-%m-%d')}",
        tags={NIGHTLY_TAG: "true", "veil.suite": suite.digest},
    )
    figures: dict[str, float] = {}
    try:
        for name, mapping in suite.runs.items():
            print(f"[nightly] run {name}", file=sys.stderr, flush=True)
            spec = spec_from_mapping(
                {
                    **mapping,
                    "experiment": suite.experiment,
                    "tracking_uri": parent.tracking_uri,
                    "run_name": name,
                    **({"address": address} if address else {}),
                }
            )
            res = execute(spec, parent_run_id=parent.run_id)
            figures[f"{name}/utility_auc"] = res.metrics["utility_auc"]
            figures[f"{name}/privacy_gap"] = res.metrics["privacy_gap"]
            if "adversary_auc" in res.metrics:
                figures[f"{name}/adversary_auc"] = res.metrics["adversary_auc"]
            if res.history and res.metrics.get("train_rows") and res.metrics.get("train_seconds"):
                rows = res.metrics["train_rows"] * len(res.history)
                figures[f"{name}/rows_per_second"] = rows / res.metrics["train_seconds"]
        for name, sweep in suite.sweeps.items():
            print(f"[nightly] sweep {name}", file=sys.stderr, flush=True)
            figures[f"{name}/hypervolume"] = run_nightly_sweep(sweep, name, parent.tracking_uri, address)
        parent.log_metrics(figures)
    except BaseException as e:
        parent.fail(e)
        raise
    return parent.run_id, figures


def run_nightly_sweep(spec: SweepSpec, name: str, tracking_uri: str, address: str | None) -> float:
    """Run one sweep spec and return its hypervolume."""
    from veil.sweeps.driver import run_sweep

    outcome = run_sweep(
        spec,
        name=f"nightly-{name}-{int(time.time())}",
        address=address,
        tracking_uri=tracking_uri,
    )
    return float(outcome.results.hypervolume)


def nightly_history(uri: str, experiment: str, digest: str, limit: int = 60) -> list[tuple[str, dict[str, float]]]:
    """(date, figures) of the finished nightlies of this suite, oldest first (at most `limit`)."""
    from veil.tracking.mlflow_run import client

    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = c.search_runs(
        [exp.experiment_id],
        f"tags.`{NIGHTLY_TAG}` = 'true' and tags.`veil.suite` = '{digest}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=limit,
    )
    return [
        (time.strftime("%m-%d %H:%M", time.localtime(r.info.start_time / 1000)), dict(r.data.metrics))
        for r in reversed(runs)
    ]


def trend_png(history: list[tuple[str, dict[str, float]]], checks: list[Check], path: Path) -> Path:
    """One small panel per checked figure across the nightlies (the latest last; a regression in red)."""
    from matplotlib.figure import Figure

    shown = [c for c in checks if c.checked]
    cols = min(3, max(1, len(shown)))
    rows = max(1, -(-len(shown) // cols))
    fig = Figure(figsize=(4.2 * cols, 2.6 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, check in zip(axes.flat, shown):
        points = [(d, f[check.name]) for d, f in history if check.name in f]
        xs = list(range(len(points)))
        ax.plot(xs, [v for _, v in points], marker="o", color="#3366aa")
        if points:
            ax.plot(xs[-1], points[-1][1], marker="o", color="#3366aa" if check.ok else "#cc2222", markersize=9)
        ax.set_xticks(xs, [d for d, _ in points], rotation=45, ha="right", fontsize=7)
        ax.set_title(check.name + ("" if check.ok else "  REGRESSION"), fontsize=9)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    fig.suptitle(f"nightly trend ({len(history)} nightlies of this suite)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def format_checks(checks: list[Check]) -> str:
    lines = ["| figure | now | previous | status |", "|---|---|---|---|"]
    for c in checks:
        prev = "—" if c.previous is None else f"{c.previous:.4g}"
        status = "information (not checked)" if not c.checked else "ok" if c.ok else f"REGRESSION: {c.note}"
        lines.append(f"| {c.name} | {c.current:.4g} | {prev} | {status} |")
    return "\n".join(lines)
