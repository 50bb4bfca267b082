"""What a run is: the `RunSpec` a user writes (CLI flags, a YAML run file, a sweep trial) and the `ValidatedRun`
that `veil.pipeline.validation.validate` builds from it once. Reading a spec loads no torch: the registries and configs that
check its names are imported by the functions that look them up, and they are torch-free (the methods' cards, the
audit's settings, the federation's options)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import yaml

from veil import safe_yaml
from veil.certify.knob_search import CalibrationConfig
from veil.certify.target import Target, parse_target
from veil.errors import ConfigError, UnknownNameError
from veil.names import MLFLOW_NAME_LIMITS, check_mlflow_name

if TYPE_CHECKING:
    from veil.audit.settings import AuditConfig
    from veil.methods.configs.fed_options import FederationOptions

RUN_KEYS = (
    "method",
    "dataset",
    "params",
    "dataset_params",
    "audit",
    "seed",
    "executor",
    "num_workers",
    "use_gpu",
    "experiment",
    "run_name",
    "tracking_uri",
    "address",
    "tags",
    "partition",
    "runtime",
    "federation",
    "target",
    "calibrate",
    "calibration",
)

EXECUTOR_CHOICES = ("auto", "inline", "ray-train")
"""What a user may ask for as `executor` (`veil.platform.executors`); `federated` is chosen by the method, not
asked for."""


def choose_executor(executor: str, num_workers: int, use_gpu: bool, federated: bool = False) -> str:
    """Resolve 'auto': federated for federated methods, ray-train when a GPU or several workers are asked for,
    else inline."""
    if federated:
        return "federated"
    if executor == "auto":
        return "ray-train" if (use_gpu or num_workers > 1) else "inline"
    return executor


TEXT_KEYS = ("executor", "experiment", "run_name", "tracking_uri", "address", "partition", "runtime")
"""Run-spec keys whose value is a string (method and dataset are checked as names)."""


@dataclass(frozen=True)
class RunSpec:
    """Everything one `veil run` needs."""

    method: str
    """Registered method name (see `veil methods`)."""
    dataset: str
    """Registered dataset name (see `veil datasets`) or a path to a CSV/Parquet file."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Method parameters (e.g. beta, d_z, epochs)."""
    dataset_params: Mapping[str, Any] = field(default_factory=dict)
    """Dataset parameters (e.g. n, rho)."""
    audit: Mapping[str, Any] = field(default_factory=dict)
    """Fresh-probe audit parameters (hidden, epochs, lr, ...)."""
    seed: int = 0
    """Seeds the dataset split, the method and the probes unless their own `seed` is set."""
    executor: str = "auto"
    """'inline', 'ray-train', or 'auto' (ray-train when use_gpu or num_workers > 1, else inline)."""
    num_workers: int = 1
    """Ray Train data-parallel workers."""
    use_gpu: bool = False
    """Train on GPUs when the cluster has them (falls back to CPU with a warning)."""
    experiment: str = "veil"
    """MLflow experiment name."""
    run_name: str | None = None
    """MLflow run name (default: '<method>-<dataset>')."""
    tracking_uri: str | None = None
    """MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///<cwd>/mlflow.db)."""
    address: str | None = None
    """Ray address to join ('auto' on a cluster node); default: start a local Ray when needed."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Extra MLflow tags."""
    partition: str | None = None
    """Federated methods: how training rows are split over nodes ('iid', 'dirichlet:0.3', 'silo:node', ...);
    unset = 'iid'. Given for a centralized method, it is refused."""
    runtime: str | None = None
    """Federated methods: 'in-process', 'ray-actors' (an actor per node), 'virtual' (many nodes per actor,
    vectorised) or 'auto' (= virtual); unset = 'auto'. Given for a centralized method, it is refused."""
    federation: Mapping[str, Any] = field(default_factory=dict)
    """Federated methods: placement, live audit and fault options (see `veil.methods.federated.FederationOptions`)."""
    target: Any = None
    """Leakage target, e.g. {excess_gap: 0.05} or {privacy_gap: 0.1} (`veil.certify.target`); 'none' for no certificate; unset = the
    default target for a method with a privacy knob, none for the others."""
    calibrate: bool = True
    """Calibrate the privacy knob to the target when the run does not set it (sweep trials never do)."""
    calibration: Mapping[str, Any] = field(default_factory=dict)
    """How calibration searches (`veil.certify.knob_search.CalibrationConfig`: validation, folds, grid, refine, rounds,
    max_rows, seed, ...)."""

    def method_values(self) -> dict[str, Any]:
        return {"seed": self.seed, **self.params}

    def dataset_values(self) -> dict[str, Any]:
        from veil.datasets.catalog import get_dataset_entry

        values = dict(self.dataset_params)
        try:
            fields = {f.name for f in dataclasses.fields(get_dataset_entry(self.dataset).params_cls)}
        except UnknownNameError:
            fields = set()
        if "seed" in fields:
            values.setdefault("seed", self.seed)
        return values

    def audit_values(self) -> dict[str, Any]:
        return {"seed": self.seed, **self.audit}


@dataclass(frozen=True)
class ValidatedRun:
    """A RunSpec whose every part has been checked and built once: downstream code (executors, Ray workers,
    node hosts, sweep trials) uses these objects as they are and never validates again."""

    spec: RunSpec
    method_config: Any
    dataset_config: Any
    audit_config: AuditConfig
    executor: str
    """The executor that trains it: 'inline', 'ray-train' or 'federated'."""
    federation: FederationOptions | None = None
    """Federated methods: the built federation options."""
    runtime: str | None = None
    """Federated methods: the runtime's registered name ('auto' resolved)."""
    partition: str | None = None
    """Federated methods: the partition scheme, checked ('iid' when the spec left it unset)."""
    target: Target = Target(())
    """The leakage target the release is certified against (empty: no certificate)."""
    calibration: CalibrationConfig | None = None
    """Set when the run calibrates its privacy knob to the target before releasing."""
    knob_set_by: str | None = None
    """Who set the privacy knob: 'run', 'preset paper', 'default' or 'calibration' (None: the method has none)."""

    @property
    def executor_label(self) -> str:
        """What runs record as `executor` ('federated:<runtime>' for a federation)."""
        return f"federated:{self.runtime}" if self.executor == "federated" else self.executor


def centralized_refusal(key: str, value: Any, method: str, where: str | None = None) -> ConfigError:
    """The one error for a federation option (`partition`, `runtime`, `federation`) given to a centralized
    method, from a run file, `veil run` flags or a sweep spec alike."""
    return ConfigError(key, value, f"nothing: method {method!r} is centralized ({key} is for federated methods)", where)


def check_keys(data: Any, keys: Sequence[str], kind: str, where: str) -> Mapping[str, Any]:
    """`data` as a mapping of known `keys` naming a method and a dataset (run files and sweep specs alike);
    anything else is refused by name."""
    if not isinstance(data, Mapping):
        raise ConfigError(kind, type(data).__name__, "a mapping of keys " + ", ".join(keys), where)
    for k in data:
        if k not in keys:
            raise UnknownNameError(kind.split()[0] + " key", k, list(keys), where)
    for k in ("method", "dataset"):
        if not isinstance(data.get(k), str) or not data.get(k):
            raise ConfigError(k, data.get(k), "a name (required)", where)
    return data


def spec_from_mapping(data: Mapping[str, Any], where: str = "run spec") -> RunSpec:
    """Build a RunSpec from a YAML mapping; unknown keys are rejected by name."""
    check_keys(data, RUN_KEYS, "run spec", where)
    for k in ("params", "dataset_params", "audit", "tags", "federation", "calibration"):
        if data.get(k) is not None and not isinstance(data[k], Mapping):
            raise ConfigError(k, data[k], "a mapping", where)
    kw = {k: v for k, v in data.items() if v is not None}
    for k in TEXT_KEYS:
        if k in kw and not isinstance(kw[k], str):
            raise ConfigError(k, kw[k], "a string", where)
    for k in MLFLOW_NAME_LIMITS:
        if k in kw:
            check_mlflow_name(k, kw[k], where)
    for k in ("use_gpu", "calibrate"):
        if k in kw and not isinstance(kw[k], bool):
            raise ConfigError(k, kw[k], "true | false", where)
    if "target" in kw:
        parse_target(kw["target"], where)  # refused here, naming the bound, before anything else
    for name, value in (kw.get("tags") or {}).items():
        if not isinstance(name, str) or not isinstance(value, (str, int, float, bool)):
            raise ConfigError(f"tags.{name}", value, "a tag name mapped to a string or a number", where)
    spec = RunSpec(**kw)
    if not isinstance(spec.seed, int) or isinstance(spec.seed, bool) or spec.seed < 0:
        raise ConfigError("seed", spec.seed, "an integer >= 0", where)
    if not isinstance(spec.num_workers, int) or spec.num_workers < 1:
        raise ConfigError("num_workers", spec.num_workers, "an integer >= 1", where)
    return spec


def read_yaml_file(path: str | Path, field: str, missing: str = "an existing YAML file") -> Any:
    """The safe-loaded content of a user's YAML file ({} when empty); a missing file, non-UTF-8 bytes or broken
    YAML is a ConfigError naming `field` and the file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(field, str(p), missing)
    try:
        data = safe_yaml.load(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(field, str(p), f"UTF-8 text (byte {e.start} is not)") from None
    except yaml.YAMLError as e:
        raise ConfigError(field, str(p), f"valid YAML: {yaml_problem(e)}") from None
    return {} if data is None else data


def load_run_file(path: str | Path) -> RunSpec:
    """Read a YAML run file (safe-loaded)."""
    return spec_from_mapping(read_yaml_file(path, "run file") or {}, where=str(path))


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML parse error in one line: what is wrong and at which line and column of the file (1-based)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else problem


SECTIONS = ("method", "dataset", "audit", "fed")


@dataclass(frozen=True)
class KeyRouter:
    """The one place a bare or prefixed parameter name (`--set KEY=VALUE`, a sweep's `space:`) is resolved to
    the config that owns it: a bare name goes to the method or the dataset, whichever has it; `method.`,
    `dataset.`, `audit.` and `fed.` prefixes name the config outright (and settle a name both have)."""

    names: Mapping[str, frozenset[str]]
    """Field names of each section's config."""
    federated: bool = True
    """Whether the method is federated: a centralized method's errors do not offer the `fed.` keys."""

    @classmethod
    def for_run(cls, method: str, dataset: str) -> KeyRouter:
        """The router for runs of `method` on `dataset` (unknown names raise, listing the valid ones)."""
        from veil.audit.settings import AuditConfig
        from veil.datasets.catalog import get_dataset_entry
        from veil.methods.cards import is_federated, method_card
        from veil.methods.configs.fed_options import FederationOptions

        fields = lambda c: frozenset(f.name for f in dataclasses.fields(c))  # noqa: E731
        return cls(
            {
                "method": fields(method_card(method).Config),
                "dataset": fields(get_dataset_entry(dataset).params_cls),
                "audit": fields(AuditConfig),
                "fed": fields(FederationOptions),
            },
            is_federated(method),
        )

    def valid(self, sections: tuple[str, ...]) -> list[str]:
        """Every name the sections accept, prefixed where a bare name would not reach it."""
        out = {n for s in ("method", "dataset") if s in sections for n in self.names[s]}
        shown = [s for s in sections if s not in ("method", "dataset") and (s != "fed" or self.federated)]
        out |= {f"{s}.{n}" for s in shown for n in self.names[s]}
        return sorted(out)

    def route(
        self, key: str, *, sections: tuple[str, ...] = SECTIONS, where: str = "--set", field: str | None = None
    ) -> tuple[str, str]:
        """'beta' -> ('method', 'beta'); 'dataset.rho' -> ('dataset', 'rho'); unknown or ambiguous names raise.
        `field` is how errors name the key (default: the key itself)."""
        label = field or key
        section, dot, name = key.partition(".")
        if dot:
            if section not in sections:
                raise ConfigError(label, key, " | ".join(["NAME", *(f"{s}.NAME" for s in sections)]), where)
            if name not in self.names[section]:
                raise UnknownNameError(f"{section} parameter", name, sorted(self.names[section]), where=where)
            return section, name
        owners = [s for s in ("method", "dataset") if s in sections and key in self.names[s]]
        if not owners:
            raise UnknownNameError("parameter", key, self.valid(sections), where=where)
        if len(owners) > 1:
            raise ConfigError(
                label, key, f"a prefixed key ({', '.join(o + '.' + key for o in owners)}): the name is ambiguous", where
            )
        return owners[0], key
