"""A reproduction suite's model and loading: its rows, entries and figures, read from YAML and validated
up front (every entry's sweep spec in both modes and every variant, every figure's entry, grid point and
metric), the spec mapping each variant runs, and the variants a run selects."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from veil.config import build, param
from veil.errors import ConfigError, UnknownNameError
from veil.names import check_mlflow_name
from veil.nightly_suite import brief, read_suite_file

REPRO_TAG = "veil.reproduce"
SUITE_KEYS = ("kind", "description", "experiment", "seeds", "quick", "rows")
ROW_KEYS = (
    "id",
    "paper",
    "data",
    "substitute",
    "tolerance",
    "seeds",
    "reference",
    "quick",
    "entries",
    "figures",
    "why",
    "estimate",
)
ENTRY_KEYS = ("spec", "presets", "with", "quick")
FIGURE_KEYS = ("entry", "at", "metrics", "note")
MODES = ("full", "quick")


@dataclass(frozen=True)
class Entry:
    """One sweep of a row: a spec file run once per variant (`preset` values; '' = the spec as written)."""

    label: str
    """the entry's name in the row (and in the table)"""
    spec: Path
    """the sweep spec file it runs"""
    presets: tuple[str, ...] = ("",)
    """the `preset` values it runs at ('' = the spec as written, for baselines)"""
    quick: Mapping[str, Any] = field(default_factory=dict)
    """spec overrides of `--quick`, merged last"""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """spec overrides in every mode (the suite's `with:`): a variant of another entry's spec without a copy"""


@dataclass(frozen=True)
class Figure:
    """A published figure: metric -> a number, or {'same_as': entry} for a claim relative to another entry."""

    entry: str
    """the row's entry whose sweep holds the figure"""
    at: Mapping[str, Any]
    """the grid point (searched key -> value); empty when the sweep has one point or for a sweep figure"""
    metrics: Mapping[str, Any]
    """metric -> the paper's number, or {same_as: entry, at: {...}} for a claim relative to another entry"""
    note: str = ""
    """a remark shown with the figure"""


@dataclass(frozen=True)
class Row:
    """One published result and the sweeps that reproduce it."""

    id: str
    """short unique id (lowercase, digits, '-'), used by --only"""
    paper: str
    """the paper and its table or figure"""
    data: str
    """the data Veil uses"""
    entries: Mapping[str, Entry]
    """label -> the sweeps that reproduce the row"""
    figures: Sequence[Figure]
    """the published figures the row checks"""
    tolerance: float = param(0.02, "|Veil - paper| within it: reproduced; within CLOSE times it: close", gt=0)
    substitute: str | None = param(None, "why the data stands in for the paper's, when it does")
    quick: Mapping[str, Any] = field(default_factory=dict)
    """spec overrides of `--quick` for every entry of the row"""
    why: str = param("", "the cause of the gaps found by investigation")
    estimate: str = param("", "full-mode time on 2 CPU cores")
    seeds: Any = param(
        None, "the row's full-mode seeds when they differ from the suite's (a count or a list, as a sweep spec's)"
    )
    reference: str | None = param(
        None, "the entry whose release is the unencoded data: what leaking everything looks like on the row's data"
    )


@dataclass(frozen=True, kw_only=True)
class ReproSuite:
    """A reproduction suite: rows, the seeds of the full mode and the overrides of `--quick`."""

    path: Path
    """the suite file"""
    rows: Sequence[Row]
    """the published results, in table order"""
    experiment: str = param("veil-reproduce", "MLflow experiment of every sweep and report")
    seeds: Any = param(3, "the full mode's seeds (a count or a list, as a sweep spec's `seeds`)")
    quick: Mapping[str, Any] = field(default_factory=dict)
    """spec overrides of `--quick` for every entry"""
    digest: str = ""
    """hash of the suite and its specs"""
    specs: Mapping[tuple[str, str, str, str], Any] = field(default_factory=dict)
    """(row, entry, preset, mode) -> its validated SweepSpec, built once at load"""


def is_reproduce_suite(path: str | Path) -> bool:
    """Whether the YAML file at `path` declares `kind: reproduce`."""
    from veil.pipeline.runspec import read_yaml_file

    p = Path(path)
    if not p.is_file():
        return False  # the suite's loader says what is wrong with it
    data = read_yaml_file(p, "suite")
    return isinstance(data, dict) and data.get("kind") == "reproduce"


def _keys(data: Any, allowed: Sequence[str], what: str, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(what, brief(data), f"a mapping with keys {', '.join(allowed)}", where)
    for k in data:
        if k not in allowed:
            raise UnknownNameError(f"{what} key", k, list(allowed), where=where)
    return data


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` merged into a copy of `base`, mappings recursively, anything else replaced."""
    out = copy.deepcopy(dict(base))
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_repro_suite(path: str | Path) -> ReproSuite:
    """Read and validate a reproduction suite: every entry's spec in both modes and variants, every figure's
    entry, grid point and metric; errors name the row and the field."""
    p = Path(path)
    data = _keys(read_suite_file(p, SUITE_KEYS), SUITE_KEYS, "suite", str(p))
    raw_rows = data.get("rows") or []
    if not isinstance(raw_rows, list) or not raw_rows:
        raise ConfigError("rows", raw_rows, "a non-empty list of rows", str(p))
    rows, seen = [], set()
    for i, raw in enumerate(raw_rows):
        row = _row(raw, p, f"{p}: rows[{i}]")
        if row.id in seen:
            raise ConfigError(f"rows[{i}].id", row.id, "an id no other row has", str(p))
        seen.add(row.id)
        rows.append(row)
    quick = _keys(
        data.get("quick") or {},
        ("seeds", "params", "audit", "dataset_params", "space", "trials", "population"),
        "quick",
        str(p),
    )
    settings = {k: data[k] for k in ("experiment", "seeds") if data.get(k) is not None}
    suite = build(ReproSuite, {"path": p, "rows": rows, "quick": quick, **settings}, where=str(p))
    check_mlflow_name("experiment", suite.experiment, str(p))
    built = {
        (row.id, entry.label, preset, mode): build_spec(suite, row, entry, preset, mode)
        for row in rows
        for entry in row.entries.values()
        for mode in MODES
        for preset in entry.presets
    }
    suite = replace(suite, specs=built)
    for row in rows:
        _check_figures(suite, row)
    specs = {
        r.id: {e: read_spec(x.spec, f"entries.{e}.spec", f"{p}: row {r.id}") for e, x in r.entries.items()}
        for r in rows
    }
    digest = hashlib.sha256(json.dumps([data, specs], sort_keys=True, default=str).encode()).hexdigest()[:12]
    return replace(suite, digest=digest)


def _row(raw: Any, suite_path: Path, where: str) -> Row:
    d = _keys(raw, ROW_KEYS, "row", where)
    for k in ("id", "paper", "data", "entries", "figures"):
        if k not in d:
            raise ConfigError(k, None, "a value (every row needs id, paper, data, entries, figures)", where)
    rid = str(d["id"])
    if not re.match(r"^[a-z0-9][a-z0-9-]*$", rid):
        raise ConfigError("id", rid, "lowercase letters, digits and '-'", where)
    if not isinstance(d["entries"], dict):
        raise ConfigError("entries", brief(d["entries"]), "a mapping of entry labels to entries", where)
    entries = {}
    for label, e in d["entries"].items():
        ed = _keys(e, ENTRY_KEYS, "entry", f"{where}.entries.{label}")
        spec = suite_path.parent / str(ed.get("spec", ""))
        if "spec" not in ed or not spec.is_file():
            raise ConfigError(f"entries.{label}.spec", ed.get("spec"), "a sweep spec file next to the suite", where)
        read_spec(spec, f"entries.{label}.spec", where)  # broken or non-mapping YAML is refused naming the entry
        raw_presets = ed.get("presets") or [""]
        if not isinstance(raw_presets, list):
            raise ConfigError(f"entries.{label}.presets", brief(raw_presets), "a list of 'paper' | 'default'", where)
        presets = tuple(str(x) for x in raw_presets)
        for pr in presets:
            if pr not in ("", "paper", "default"):
                raise ConfigError(f"entries.{label}.presets", pr, "'paper' or 'default'", where)
        for k in ("with", "quick"):
            if not isinstance(ed.get(k) or {}, Mapping):
                raise ConfigError(f"entries.{label}.{k}", brief(ed[k]), "a mapping of spec overrides", where)
        entries[str(label)] = Entry(str(label), spec, presets, ed.get("quick") or {}, ed.get("with") or {})
    if not isinstance(d["figures"] or [], list):
        raise ConfigError("figures", brief(d["figures"]), "a list of figures", where)
    figures = []
    for j, f in enumerate(d["figures"] or []):
        fd = _keys(f, FIGURE_KEYS, "figure", f"{where}.figures[{j}]")
        if fd.get("entry") not in entries:
            raise ConfigError(
                f"figures[{j}].entry", fd.get("entry"), f"one of the row's entries {list(entries)}", where
            )
        if not fd.get("metrics") or not isinstance(fd["metrics"], Mapping):
            raise ConfigError(f"figures[{j}].metrics", fd.get("metrics"), "metric: paper value pairs", where)
        if not isinstance(fd.get("at") or {}, Mapping):
            raise ConfigError(f"figures[{j}].at", brief(fd["at"]), "a mapping of searched key -> value", where)
        figures.append(Figure(str(fd["entry"]), fd.get("at") or {}, fd["metrics"], str(fd.get("note", ""))))
    reference = d.get("reference")
    if reference is not None and (reference not in entries or any(f.entry == reference for f in figures)):
        raise ConfigError(
            "reference",
            reference,
            f"one of the row's entries {list(entries)} releasing the unencoded data (no figure of its own)",
            where,
        )
    seeds = d.get("seeds")
    if seeds is not None and not (
        (isinstance(seeds, int) and not isinstance(seeds, bool) and seeds > 0)
        or (isinstance(seeds, list) and seeds and all(isinstance(x, int) for x in seeds))
    ):
        raise ConfigError("seeds", seeds, "a count > 0 or a non-empty list of integer seeds", where)
    if not isinstance(d.get("quick") or {}, Mapping):
        raise ConfigError("quick", brief(d["quick"]), "a mapping of spec overrides", where)
    settings = {k: d[k] for k in ("tolerance", "substitute", "why", "estimate", "seeds") if d.get(k) is not None}
    required = {"id": rid, "paper": str(d["paper"]), "data": str(d["data"]), "entries": entries, "figures": figures}
    return build(
        Row,
        {
            **required,
            **settings,
            "quick": d.get("quick") or {},
            "reference": None if reference is None else str(reference),
        },
        where=where,
    )


def read_spec(path: Path, field: str, where: str) -> dict[str, Any]:
    """An entry's sweep spec file as a mapping; missing, non-UTF-8, broken or non-mapping YAML is a ConfigError."""
    from veil.pipeline.runspec import read_yaml_file

    try:
        data = read_yaml_file(path, field, "a sweep spec file next to the suite")
    except ConfigError as e:
        raise ConfigError(field, e.value, e.allowed, where) from None
    if not isinstance(data, dict):
        raise ConfigError(field, brief(data), f"a sweep spec mapping (method, dataset, space, ...) in {path}", where)
    return data


def spec_mapping(suite: ReproSuite, row: Row, entry: Entry, preset: str, mode: str) -> dict[str, Any]:
    """The sweep spec mapping one variant of an entry runs in `mode`: the file, the suite's seeds (the row's when
    it sets its own) and experiment, the entry's `with:` overrides, the preset, and in quick mode the suite's, the
    row's and the entry's quick overrides."""
    data = read_spec(entry.spec, f"entries.{entry.label}.spec", f"{suite.path}: row {row.id}")
    seeds = suite.seeds if row.seeds is None else row.seeds
    data = merge(merge(data, entry.overrides), {"seeds": seeds, "experiment": suite.experiment})
    if preset:
        data = merge(data, {"params": {"preset": preset}})
    if mode == "quick":
        overs = (suite.quick, row.quick, entry.quick)
        for over in overs:
            data = merge(data, over)
        if data.get("sampler") == "grid" and any("space" in o for o in overs):
            data.pop("trials", None)  # a grid runs every point of its (smaller) quick space
    return data


def sweep_spec(suite: ReproSuite, row: Row, entry: Entry, preset: str, mode: str) -> Any:
    """The validated SweepSpec of one variant of an entry in `mode` (built at load)."""
    return suite.specs[(row.id, entry.label, preset, mode)]


def build_spec(suite: ReproSuite, row: Row, entry: Entry, preset: str, mode: str) -> Any:
    """Validate one variant's spec mapping into a SweepSpec; errors name the row, entry, preset and mode."""
    from veil.sweeps.sweepspec import sweep_from_mapping

    where = f"{suite.path}: row {row.id}, entry {entry.label}" + (f", preset {preset}" if preset else "") + f" ({mode})"
    return sweep_from_mapping(spec_mapping(suite, row, entry, preset, mode), where=where)


def _check_figures(suite: ReproSuite, row: Row) -> None:
    if row.reference is not None:
        entry = row.entries[row.reference]
        spec = sweep_spec(suite, row, entry, entry.presets[0], "full")
        if any(sp.type != "categorical" or len(sp.values) != 1 for sp in spec.space):
            raise ConfigError(
                "reference",
                row.reference,
                "an entry whose sweep has one grid point (every searched key one categorical value)",
                f"{suite.path}: row {row.id}",
            )
    for j, f in enumerate(row.figures):
        entry = row.entries[f.entry]
        spec = sweep_spec(suite, row, entry, entry.presets[0], "full")
        keys = [sp.key for sp in spec.space]
        where = f"{suite.path}: row {row.id}, figures[{j}]"
        for k in f.at:
            if k not in keys:
                raise ConfigError(f"figures[{j}].at", k, f"a searched key of entry {f.entry!r}: {keys}", where)
        for m, v in f.metrics.items():
            if isinstance(v, Mapping):
                other = v.get("same_as")
                if not set(v) <= {"same_as", "at"} or other not in row.entries or other == f.entry:
                    raise ConfigError(
                        f"figures[{j}].metrics.{m}", v, "a number or {same_as: <another entry>, at: {...}}", where
                    )
            elif not isinstance(v, (int, float)):
                raise ConfigError(f"figures[{j}].metrics.{m}", v, "a number or {same_as: <another entry>}", where)


def variants(suite: ReproSuite, only: Sequence[str] = ()) -> list[tuple[Row, Entry, str]]:
    """Every (row, entry, preset) the suite runs, in order; `only` keeps those rows ('ROW'), entries
    ('ROW/ENTRY', the entry's label as in the suite) and presets of an entry ('ROW/ENTRY/PRESET')."""
    rows = {r.id: r for r in suite.rows}
    keep: set[tuple[str, str, str]] = set()
    for o in only:
        rid, _, rest = o.partition("/")
        label, _, preset = rest.partition("/")
        if rid not in rows:
            raise UnknownNameError("row", rid, list(rows), where="--only")
        if (label or preset) and label not in rows[rid].entries:
            raise UnknownNameError("entry label", label, list(rows[rid].entries), where=f"--only {rid}/")
        if preset and preset not in rows[rid].entries[label].presets:
            raise UnknownNameError(
                "preset", preset, list(rows[rid].entries[label].presets), where=f"--only {rid}/{label}/"
            )
        keep |= {
            (rid, e.label, p)
            for e in rows[rid].entries.values()
            if not label or e.label == label
            for p in e.presets
            if not preset or p == preset
        }
    return [
        (row, entry, preset)
        for row in suite.rows
        for entry in row.entries.values()
        for preset in entry.presets
        if not only or (row.id, entry.label, preset) in keep
    ]
