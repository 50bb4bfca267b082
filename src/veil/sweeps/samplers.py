"""Sweep samplers by name: each registered name maps to a factory `(spec) -> Optuna sampler`.

`grid` is registered too, but its factory returns None: a grid sweep runs through Tune's own `grid_search`
(every point exactly once, whatever the concurrency), not through an Optuna sampler. Optuna is imported only
when a factory runs, so reading the vocabulary (`SAMPLERS`, `SAMPLER_OPTIONS`) stays cheap. Plugins add
samplers through the `veil.samplers` entry-point group (`register_sampler`; `sampler_names()` lists them all).

At import time this module imports nothing from the rest of `veil.sweeps` (the NSGA-II factory imports
`veil.sweeps.nsga2`, which imports no Veil module): `spec.py` can take its sampler vocabulary from here without an
import cycle. A factory needs only the three spec fields of `SamplerSpec`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Protocol

from veil.config import build, param
from veil.errors import UnknownNameError
from veil.registry import Registry

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler

GRID = "grid"
"""The sampler that Tune's grid_search implements (its factory returns None)."""


class SamplerSpec(Protocol):
    """What a sampler factory reads from a sweep spec (`veil.sweeps.sweepspec.SweepSpec` has all of it)."""

    @property
    def sampler_options(self) -> Mapping[str, Any]: ...

    @property
    def sampler_seed(self) -> int: ...

    @property
    def trials(self) -> int: ...

    @property
    def population(self) -> int: ...

    @property
    def concurrency(self) -> int: ...


SamplerFactory = Callable[[SamplerSpec], Optional["BaseSampler"]]
"""(spec) -> an Optuna sampler seeded with `spec.sampler_seed`; None for the grid (Tune's grid_search)."""
Independent = Callable[[SamplerSpec], int]
"""(spec) -> how many of a sweep's first trials the sampler draws without looking at any result."""


def _none_independent(spec: SamplerSpec) -> int:
    return 0


@dataclass(frozen=True)
class SamplerEntry:
    """One registered sampler: its factory and the Optuna constructor options a spec may set for it."""

    name: str
    factory: SamplerFactory
    options: tuple[str, ...] = ()
    """Keys a spec's `sampler_options` may hold (the seed always comes from `sampler_seed`)."""
    options_cls: type | None = None
    """The `param()` dataclass those options are checked against (type and range), when the sampler has one."""
    independent: Independent = _none_independent
    """How many of the first trials it draws without looking at results: a population sweep asks those in
    populations and the rest one at a time, so populations cost the sampler no adaptive rounds (0: unknown)."""

    def check_options(self, given: Mapping[str, Any], where: str) -> dict[str, Any]:
        """A spec's `sampler_options` for this sampler, as given less those set to null (the default): unknown
        keys are refused naming the valid ones, and with an `options_cls` each value against its field."""
        kind = f"{self.name} sampler option"
        if self.options_cls is not None:
            build(self.options_cls, given, where, strict=True, path="sampler_options", kind=kind)
        for k in given:
            if k not in self.options:
                raise UnknownNameError(kind, k, list(self.options), where=f"{where}: key 'sampler_options'")
        return {k: v for k, v in given.items() if v is not None}


_REGISTRY: Registry[SamplerEntry] = Registry("sampler")


def register_sampler(
    name: str, options: tuple[str, ...] | type = (), independent: Independent = _none_independent
) -> Callable[[SamplerFactory], SamplerFactory]:
    """Register a sampler factory under `name` (a decorator), with the Optuna constructor options a spec may set
    for it: their names, or a `param()` dataclass whose fields (each None by default: the sampler's own default)
    also say their type and range; and `independent`: how many of a sweep's first trials it draws without
    looking at results (the default 0 makes a population sweep ask every trial on its own). Veil's own below,
    a plugin's from its `veil.samplers` entry point (docs/extending.md)."""
    if isinstance(options, type):
        names, cls = tuple(f.name for f in dataclasses.fields(options)), options
    else:
        names, cls = tuple(options), None
    return _REGISTRY.decorator(name, lambda factory: SamplerEntry(name, factory, names, cls, independent))


@dataclass(frozen=True)
class NSGA2Options:
    """`sampler_options` of `sampler: nsga2` (Optuna's NSGAIISampler)."""

    population_size: int | None = param(
        None, "Trials per generation (none: a half of trials, within 4 to 50); a plain GA with one objective", ge=2
    )
    mutation_prob: float | None = param(
        None, "Chance that a child's parameter is drawn afresh (none: Optuna's 1 / number of parameters)", ge=0, le=1
    )
    crossover_prob: float | None = param(
        None, "Chance that a child is bred from two parents (none: Optuna's 0.9)", ge=0, le=1
    )
    swapping_prob: float | None = param(
        None, "Chance that a crossover takes each parameter from the other parent (none: Optuna's 0.5)", ge=0, le=1
    )


@dataclass(frozen=True)
class TPEOptions:
    """`sampler_options` of `sampler: tpe` (Optuna's TPESampler)."""

    n_startup_trials: int | None = param(None, "Random trials before TPE models the results (none: Optuna's 10)", ge=0)
    n_ei_candidates: int | None = param(None, "Candidates TPE scores for each suggestion (none: Optuna's 24)", ge=1)
    multivariate: bool | None = param(None, "Model the parameters jointly (none: Optuna's default)")
    consider_endpoints: bool | None = param(
        None, "Let the ranges' end points widen TPE's kernels (none: Optuna's default)"
    )
    constant_liar: bool | None = param(
        None,
        "Count a trial still running as a bad result (none: true when trials are asked before others report: "
        "concurrency or population above 1; else false)",
    )


def _nsga2_generation(spec: SamplerSpec) -> int:
    """NSGA-II's population_size: a generation's trials are bred from the generations before, so the first
    one is drawn at random, without results."""
    return int(spec.sampler_options.get("population_size") or max(4, min(50, spec.trials // 2)))


@register_sampler("nsga2", options=NSGA2Options, independent=_nsga2_generation)
def _nsga2(spec: SamplerSpec) -> BaseSampler:
    from veil.sweeps.nsga2 import NSGAIISampler

    opts = dict(spec.sampler_options)
    opts["population_size"] = _nsga2_generation(spec)
    return NSGAIISampler(seed=spec.sampler_seed, **opts)


def _tpe_startup(spec: SamplerSpec) -> int:
    """TPE samples at random until n_startup_trials trials have reported (Optuna's default: 10)."""
    given = spec.sampler_options.get("n_startup_trials")
    if given is not None:
        return int(given)
    import inspect

    import optuna

    return int(inspect.signature(optuna.samplers.TPESampler).parameters["n_startup_trials"].default)


@register_sampler("tpe", options=TPEOptions, independent=_tpe_startup)
def _tpe(spec: SamplerSpec) -> BaseSampler:
    import optuna

    opts = dict(spec.sampler_options)
    # Concurrent trials and a population's members are asked for before the others report: TPE then counts the
    # trials still running as if they had done badly (a constant liar), so their points spread out instead of
    # piling up (its effect on the quickstart's hypervolume: benchmarks/README.md).
    opts.setdefault("constant_liar", spec.population > 1 or spec.concurrency > 1)
    return optuna.samplers.TPESampler(seed=spec.sampler_seed, **opts)


def every_trial(spec: SamplerSpec) -> int:
    """`independent` of a sampler that never looks at results (random, grid, a plugin's QMC): every trial."""
    return spec.trials


@register_sampler("random", independent=every_trial)
def _random(spec: SamplerSpec) -> BaseSampler:
    import optuna

    return optuna.samplers.RandomSampler(seed=spec.sampler_seed)


@register_sampler(GRID, independent=every_trial)
def _grid(spec: SamplerSpec) -> None:
    """Tune's grid_search enumerates the grid (Optuna's GridSampler may hand a running point out again under
    parallel ask/tell), so there is no Optuna sampler to build."""
    return None


SAMPLERS: tuple[str, ...] = tuple(_REGISTRY)
"""Veil's own samplers: ("nsga2", "tpe", "random", "grid"); `sampler_names()` adds the plugins'."""
SAMPLER_OPTIONS: dict[str, tuple[str, ...]] = {name: e.options for name, e in _REGISTRY.items()}
"""Optuna constructor options a spec may set, per sampler of Veil's own (the seed comes from `sampler_seed`)."""


def sampler_names() -> tuple[str, ...]:
    """Every valid `sampler` value: Veil's own and the installed plugins'."""
    return _REGISTRY.names()


def sampler_entry(name: str, where: str | None = None) -> SamplerEntry:
    """The registered entry for `name` (plugins included); UnknownNameError (listing the valid names) otherwise."""
    return _REGISTRY.lookup(name, where)


def get_sampler(name: str, where: str | None = None) -> SamplerFactory:
    """The factory registered as `name`; UnknownNameError (listing the valid names) otherwise."""
    return sampler_entry(name, where).factory


__all__ = [
    "GRID",
    "Independent",
    "NSGA2Options",
    "SAMPLERS",
    "SAMPLER_OPTIONS",
    "SamplerEntry",
    "SamplerFactory",
    "SamplerSpec",
    "TPEOptions",
    "every_trial",
    "get_sampler",
    "register_sampler",
    "sampler_entry",
    "sampler_names",
]
