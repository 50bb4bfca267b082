"""Fuzzing run files and sweep specs: every mutated document ends in a validated run / sweep or in a Veil error
naming the field (never another exception), whether given as a mapping or as YAML text."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from fuzzing import KeysAt, clean, mutated
from hypothesis import given, settings
from hypothesis import strategies as st

from veil.audit.settings import AuditConfig
from veil.datasets.catalog import DATASETS
from veil.methods import METHODS
from veil.methods.cards import is_federated
from veil.methods.configs.fed_options import FederationOptions
from veil.pipeline.runspec import RUN_KEYS, ValidatedRun, load_run_file, spec_from_mapping
from veil.pipeline.validation import validate
from veil.sweeps.model import SPEC_KEYS
from veil.sweeps.samplers import SAMPLER_OPTIONS
from veil.sweeps.spec_keys import MAX_TRIALS
from veil.sweeps.sweepspec import SweepSpec, load_sweep, sweep_from_mapping

REPO = Path(__file__).resolve().parents[2]
names = lambda cls: [f.name for f in dataclasses.fields(cls)]  # noqa: E731
METHOD_FIELDS = sorted({n for m in METHODS.values() for n in names(m.Config)})
DATASET_FIELDS = sorted({n for d in DATASETS.values() for n in names(d.params_cls)})
SECTION_KEYS = {
    "params": METHOD_FIELDS,
    "dataset_params": DATASET_FIELDS,
    "audit": names(AuditConfig),
    "federation": names(FederationOptions),
    "space": METHOD_FIELDS + [f"dataset.{n}" for n in DATASET_FIELDS],
    "objectives": ["metric", "direction"],
    "resources": ["cpus", "gpu"],
    "sampler_options": sorted({o for opts in SAMPLER_OPTIONS.values() for o in opts}),
}


def keys_at(top: tuple[str, ...]) -> KeysAt:
    """What a run file (top = RUN_KEYS) or a sweep spec (SPEC_KEYS) knows at each place."""

    def keys(path: tuple) -> list[str]:
        if not path:
            return list(top)
        if path[0] == "space" and len(path) == 2:
            return ["type", "low", "high", "step", "values"]
        return SECTION_KEYS.get(path[0], [])

    return keys


def run_base(method: str, dataset: str) -> dict:
    base = {
        "method": method,
        "dataset": dataset,
        "params": {"epochs": 1, "d_z": 2},
        "dataset_params": {"n": 200} if dataset.startswith("gaussian") else {},
        "audit": {"epochs": 1},
        "seed": 0,
    }
    if method in METHODS and is_federated(method):
        base.update(partition="iid", runtime="in-process", federation={"audit_every": 0})
    return base


DATASET_NAMES = ["gaussian-correlated", "gaussian-nodes", "adult", "examples/applicants.csv", "nosuch", "t.parquet"]
run_docs = st.builds(
    run_base, st.sampled_from([*sorted(METHODS), "", "GPP", "nosuch"]), st.sampled_from(DATASET_NAMES)
).flatmap(lambda base: mutated(base, keys_at(RUN_KEYS), keep=("method", "dataset")))


def plain(value: object) -> bool:
    """A value a config keeps as it is given (numbers and booleans; text and lists may be converted)."""
    return isinstance(value, (int, float, bool)) and value == value


def assert_faithful_run(data: dict, result: ValidatedRun | Exception) -> None:
    """A run that validates is the run the document describes: its method, dataset, seed and every plain method
    parameter the document sets (a value the run changed silently would fail here)."""
    if isinstance(result, Exception):
        return
    assert (result.spec.method, result.spec.dataset) == (data["method"], data["dataset"])
    assert result.spec.seed == (0 if data.get("seed") is None else data["seed"])
    fields = {f.name for f in dataclasses.fields(result.method_config)}
    for key, value in (data.get("params") or {}).items():
        if key in fields and plain(value) and key != "seed":
            assert getattr(result.method_config, key) == value, key


def check_run(data: object, where: str = "run spec") -> None:
    spec = clean(spec_from_mapping, data, where) if isinstance(data, dict) else None
    if spec is not None and not isinstance(spec, Exception):
        assert isinstance(data, dict)
        assert_faithful_run(data, clean(validate, spec))


@settings(max_examples=300)
@given(run_docs)
def test_run_mappings_validate_or_name_the_field(data):
    check_run(data)


@settings(max_examples=100)
@given(
    data=run_docs,
    cut=st.integers(0, 400),
    junk=st.sampled_from(["", "{", "]", ":", "\t", "- ", "!!python/object:os.system", "\x00", "&a *a", "\xff"]),
)
def test_run_file_text_validates_or_names_the_file(data, cut, junk, tmp_path_factory):
    text = yaml.safe_dump(data, allow_unicode=True).encode()
    path = tmp_path_factory.getbasetemp() / "fuzz-run.yaml"
    path.write_bytes(text[:cut] + junk.encode("latin-1") + text[cut:])
    spec = clean(load_run_file, path)
    if not isinstance(spec, Exception):
        parsed = yaml.safe_load(path.read_text(encoding="utf-8"))  # what the file says after the edit
        assert_faithful_run(parsed, clean(validate, spec))


@settings(max_examples=40)
@given(raw=st.binary(max_size=64) | st.text(max_size=40).map(lambda t: t.encode("utf-16")))
def test_run_file_bytes_are_refused_cleanly(raw, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "fuzz-run.yaml"
    path.write_bytes(raw)
    clean(load_run_file, path)


SWEEPS = {p.stem: yaml.safe_load(p.read_text()) for p in sorted((REPO / "sweeps").glob("*.yaml"))}
sweep_docs = st.sampled_from(sorted(SWEEPS)).flatmap(
    lambda k: mutated(SWEEPS[k], keys_at(SPEC_KEYS), keep=("method", "dataset"))
)


@settings(max_examples=250)
@given(sweep_docs)
def test_sweep_specs_validate_or_name_the_field(data):
    assert_faithful_sweep(data, clean(sweep_from_mapping, data, "fuzz.yaml"))


def assert_faithful_sweep(data: dict, result: SweepSpec | Exception) -> None:
    """A sweep that validates is the sweep the document describes: method, dataset, searched keys, objectives, and
    a trial count within the documented limit."""
    if isinstance(result, Exception):
        return
    assert (result.method, result.dataset) == (data["method"], data["dataset"])
    assert [sp.key for sp in result.space] == [str(k) for k in data["space"]]
    assert [o.metric for o in result.objectives] == [o["metric"] for o in data["objectives"]]
    assert 1 <= result.trials <= MAX_TRIALS and result.trials == data.get("trials", result.trials)


@settings(max_examples=40)
@given(data=sweep_docs, junk=st.binary(max_size=8))
def test_sweep_files_validate_or_name_the_file(data, junk, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "fuzz-sweep.yaml"
    path.write_bytes(yaml.safe_dump(data, allow_unicode=True).encode() + junk)
    clean(load_sweep, path)


def test_found_by_fuzzing_named_in_the_error(tmp_path):
    """A fixed sample of what fuzzing found: a value of the wrong type anywhere is refused by name."""
    for key in ("params", "audit", "dataset_params", "federation", "tags"):
        err = clean(spec_from_mapping, {"method": "gpp", "dataset": "gaussian-correlated", key: [1]})
        assert isinstance(err, Exception) and f"'{key}'" in str(err)
    for key, value in (("runtime", [None]), ("executor", 3), ("use_gpu", "yes"), ("tags", {"a": [1]})):
        err = clean(spec_from_mapping, {"method": "d-eigan", "dataset": "gaussian-nodes", key: value})
        assert isinstance(err, Exception) and f"'{key}" in str(err)
    for key, value in (
        ("chull_origin", []),
        ("sampler", {}),
        ("objectives", [{"metric": "utility_auc", "direction": []}]),
    ):
        err = clean(sweep_from_mapping, {**SWEEPS["quickstart"], key: value}, "s.yaml")
        assert isinstance(err, Exception) and f"'{key}" in str(err)
    (tmp_path / "s.yaml").write_bytes((REPO / "sweeps" / "quickstart.yaml").read_bytes() + b"\x80")
    assert "UTF-8 text (byte" in str(clean(load_sweep, tmp_path / "s.yaml"))
