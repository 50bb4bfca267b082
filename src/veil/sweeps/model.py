"""SweepSpec: a validated sweep, frozen: what to train, what to search, what to optimise, how to run it, and what
follows from it (the run of one trial's seed, the params its parent MLflow run records, its certificate).

Its `param()` fields are the spec's scalar settings, each default, range and doc line written there once
(`veil.sweeps.spec_keys` reads them, docs/sweeps.md's settings table is generated from them); its structured keys
are read by `veil.sweeps.space` and `veil.sweeps.objectives`. `veil.sweeps.sweepspec` builds one from a YAML file."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from veil.config import param
from veil.names import MLFLOW_NAME_LIMITS
from veil.pipeline.runspec import EXECUTOR_CHOICES
from veil.sweeps.metrics import AUC_ORIGINS, CERTIFICATE_METRICS, SUMMARY_METRICS
from veil.sweeps.objectives import Constraint, Objective
from veil.sweeps.samplers import sampler_names
from veil.sweeps.space import SearchParam
from veil.sweeps.spec_keys import MAX_CONCURRENCY, MAX_RETRIES, MAX_TRIALS, Resources

SWEEP_EXECUTORS = tuple(e for e in EXECUTOR_CHOICES if e != "auto")


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: what to train, what to search, what to optimise, how to run it."""

    method: str
    dataset: str
    objectives: tuple[Objective, ...]
    space: tuple[SearchParam, ...]
    reference: tuple[float, ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    dataset_params: Mapping[str, Any] = field(default_factory=dict)
    audit: Mapping[str, Any] = field(default_factory=dict)
    # A `param` field is a setting: its default, range or choices and doc are written there only. The parser reads
    # the scalar ones through `_setting`; docs/sweeps.md's settings table is generated from them (tools/sweeps_doc.py).
    partition: str | None = param(
        None,
        "Federated methods only: how rows are split over the nodes (iid, dirichlet:0.3, silo:node, ...; default iid)",
    )
    runtime: str | None = param(
        None, "Federated methods only: where nodes run (sweeps default to in-process: no actors competing with trials)"
    )
    federation: Mapping[str, Any] = field(default_factory=dict)
    """Federated methods: FederationOptions (see `veil run --help`, fed.NAME)."""
    federated: bool = False
    sampler: str = param(
        "nsga2", "The Optuna sampler that suggests trials, or a plugin's (docs/extending.md)", choices=sampler_names
    )
    sampler_options: Mapping[str, Any] = field(default_factory=dict)
    sampler_seed: int = param(0, "Seed of the Optuna sampler (the runs' seeds are `seeds`)", ge=0)
    trials: int = param(20, "Configurations to try (grid: the grid's size, may be left out)", ge=1, le=MAX_TRIALS)
    seeds: tuple[int, ...] = (0,)
    """Seeds every trial trains on, its metrics averaged over them ('seeds:' a count n or a list)."""
    concurrency: int = param(2, "Trials running at once", ge=1, le=MAX_CONCURRENCY)
    population: int = param(
        1,
        "Trials trained together as one vectorised model on one worker (Populations, below); not NSGA-II's "
        "population_size",
        ge=1,
    )
    resources: Resources = Resources()
    constraints: tuple[Constraint, ...] = ()
    max_failures: int | None = param(
        None, "Stop the sweep once more than this many trials have failed (none: never stop for failures)", ge=0
    )
    retries: int = param(
        0,
        "Tune re-runs of a crashed trial (FailureConfig.max_failures); 0 records the crash and moves on",
        ge=0,
        le=MAX_RETRIES,
    )
    executor: str = param(
        "inline",
        "Where each trial's runs train: inline (seconds per trial) or ray-train (a TorchTrainer per seed)",
        choices=SWEEP_EXECUTORS,
    )
    num_workers: int = param(1, "Ray Train workers (executor: ray-train only)", ge=1)
    experiment: str = param(
        "veil",
        f"MLflow experiment of the sweep's runs: a non-empty name of at most {MLFLOW_NAME_LIMITS['experiment']} "
        "characters, as MLflow allows",
    )
    chull_origin: str = param(
        "zero", "Convex-hull AUC origin: zero (seed 003's) or half (chance on both axes)", choices=tuple(AUC_ORIGINS)
    )
    target: Any = param(
        None,
        "The leakage target every trial's release is certified against ({privacy_gap: 0.1}, adversary_auc_max, "
        "eps, mi/EST/LABEL, or 'none': no certificate; below); left out: the default target (excess_gap <= 0.05) "
        "for a method with a privacy knob, none otherwise",
    )
    name: str | None = param(None, "Default sweep-name prefix (else the file name): letters, digits, '_', '-', '.'")
    description: str = param("", "Free text describing the sweep")
    warnings: tuple[str, ...] = ()
    """Accepted but doubtful choices (e.g. minimising raw adversary_auc), each naming the key and the fix."""
    source: str = "sweep spec"
    """The file the spec came from (used in error messages)."""
    raw: Mapping[str, Any] = field(default_factory=dict)
    """The mapping it was built from (shipped to trials and stored in MLflow)."""

    # -- derived ---------------------------------------------------------------------------------

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(o.metric for o in self.objectives)

    @property
    def directions(self) -> tuple[str, ...]:
        return tuple(o.direction for o in self.objectives)

    @property
    def stem(self) -> str:
        return self.name or (Path(self.source).stem if self.source.endswith((".yaml", ".yml")) else self.method)

    def tracked_metrics(self) -> list[str]:
        """Objectives, constraint metrics and the summary metrics, in that order, without repeats."""
        out: list[str] = []
        for m in [*self.metrics, *(c.metric for c in self.constraints), *SUMMARY_METRICS, *self.certificate_metrics()]:
            if m not in out:
                out.append(m)
        return out

    def certifies(self) -> bool:
        """Whether its trials are certified against a target (the spec's, or a privacy method's default)."""
        from veil.certify.target import parse_target
        from veil.methods.cards import method_card

        given = parse_target(self.target)
        return bool(given) if given is not None else method_card(self.method).privacy_knob is not None

    def target_text(self) -> str:
        """The target trials are certified against, as text ('excess_gap <= 0.05 (the default target)')."""
        from veil.certify.target import default_target, parse_target

        return (parse_target(self.target) or default_target()).text()

    def target_bound(self, metric: str) -> float | None:
        """The bound the sweep's target (or the default one) puts on `metric`, if any (a certified sweep only)."""
        from veil.certify.target import default_target, parse_target

        if not self.certifies():
            return None
        bound = (parse_target(self.target) or default_target()).get(metric)
        return bound.limit if bound is not None else None

    def certificate_metrics(self) -> tuple[str, ...]:
        """The certificate's figures a certified sweep tracks per trial (CERTIFICATE_METRICS), else none."""
        return CERTIFICATE_METRICS if self.certifies() else ()

    def tune_trials(self) -> int:
        """How many Tune trials run the sweep's trials: a grid's, one per chunk of `population` points; a sampled
        sweep's, at most one per trial (populations only while the sampler draws independently of results:
        `veil.sweeps.search.StudySearch`, which ends the search once every trial is asked)."""
        return math.ceil(self.trials / self.population) if self.sampler == "grid" else self.trials

    def grid_size(self) -> int:
        return math.prod(len(p.grid_values()) for p in self.space)

    def run_spec(
        self,
        values: Mapping[str, Any],
        seed: int,
        *,
        tracking_uri: str | None = None,
        run_name: str | None = None,
        tags: Mapping[str, str] | None = None,
        use_gpu: bool | None = None,
    ):
        """The RunSpec of one seed of one trial: fixed params overlaid with the trial's searched `values`
        (keyed 'method.NAME' / 'dataset.NAME')."""
        from veil.pipeline.runspec import RunSpec

        params, dparams = dict(self.params), dict(self.dataset_params)
        for key, v in values.items():
            section, _, name = key.partition(".")
            (params if section == "method" else dparams)[name] = v
        fed: dict[str, Any] = {}
        if self.federated:
            fed = {
                "partition": self.partition or "iid",
                "runtime": self.runtime or "in-process",
                "federation": dict(self.federation),
            }
        return RunSpec(
            method=self.method,
            dataset=self.dataset,
            params=params,
            dataset_params=dparams,
            audit=dict(self.audit),
            seed=int(seed),
            executor=self.executor,
            num_workers=self.num_workers,
            use_gpu=self.resources.gpu > 0 if use_gpu is None else use_gpu,
            experiment=self.experiment,
            run_name=run_name,
            tracking_uri=tracking_uri,
            tags=dict(tags or {}),
            target=self.target,
            calibrate=False,
            **fed,
        )

    def flat_params(self) -> dict[str, Any]:
        """What the parent MLflow run records as params."""
        out: dict[str, Any] = {
            "sweep.method": self.method,
            "sweep.dataset": self.dataset,
            "sweep.sampler": self.sampler,
            "sweep.trials": self.trials,
            "sweep.seeds": list(self.seeds),
            "sweep.concurrency": self.concurrency,
            "sweep.population": self.population,
            "sweep.objectives": [f"{o.metric}:{o.direction}" for o in self.objectives],
            "sweep.reference": list(self.reference),
            "sweep.executor": self.executor,
            "sweep.resources": dataclasses.asdict(self.resources),
            "sweep.sampler_seed": self.sampler_seed,
        }
        if self.federated:
            out["sweep.partition"] = self.partition or "iid"
            out["sweep.runtime"] = self.runtime or "in-process"
            out.update({f"fixed.federation.{k}": v for k, v in self.federation.items()})
        if self.constraints:
            out["sweep.constraints"] = [str(c) for c in self.constraints]
        for p in self.space:
            desc = list(p.values) if p.type == "categorical" else [p.low, p.high]
            out[f"space.{p.canonical}"] = {"type": p.type, "range": desc}
        out.update({f"fixed.method.{k}": v for k, v in self.params.items()})
        out.update({f"fixed.dataset.{k}": v for k, v in self.dataset_params.items()})
        out.update({f"fixed.audit.{k}": v for k, v in self.audit.items()})
        return out


# ----------------------------------------------------------------------------------------------
# loading


SPEC_KEYS = tuple(
    f.name for f in dataclasses.fields(SweepSpec) if f.name not in ("federated", "warnings", "source", "raw")
)
"""The keys a sweep spec may hold: SweepSpec's fields less those the parser derives."""
